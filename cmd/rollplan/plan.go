package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/planner/engine"
	celpolicy "github.com/rollplan/rollplan/planner/engine/cel"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// planFlags are shared by plan and explain.
type planFlags struct {
	files        []string
	policies     []string
	now          string
	featureGates string
	workload     string
	namespace    string
	recreate     time.Duration
	inPlace      time.Duration
	terminate    time.Duration
	timeout      time.Duration
	engine       string
}

func (f *planFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "snapshot files or directories (YAML or JSON, kubectl get -o yaml output; directories are read recursively)")
	fl.StringSliceVar(&f.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&f.engine, "engine", "", "policy engine: rego, cel or native (the default strategy in Go); default: cel when --policy names YAML files, else rego")
	fl.StringVar(&f.now, "now", "", "snapshot time (RFC 3339); default: the latest time recorded in the snapshot")
	fl.StringVar(&f.featureGates, "feature-gates", "", "cluster feature gates that change upstream behaviour, e.g. MaxUnavailableStatefulSet=true")
	fl.StringVar(&f.workload, "workload", "", "plan only this workload: KIND/NAME or KIND/NAMESPACE/NAME")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "plan only workloads in this namespace")
	fl.DurationVar(&f.recreate, "recreate-duration", time.Duration(plan.DefaultOptions.RecreateSeconds)*time.Second, "estimated time from replacing a pod to the new pod being Ready")
	fl.DurationVar(&f.inPlace, "inplace-duration", time.Duration(plan.DefaultOptions.InPlaceSeconds)*time.Second, "estimated time from an in-place update to the container being Ready")
	fl.DurationVar(&f.terminate, "terminate-duration", time.Duration(plan.DefaultOptions.TerminateSeconds)*time.Second, "estimated time for a deleted pod that is not replaced to go")
	fl.DurationVar(&f.timeout, "policy-timeout", time.Minute, "deadline for evaluating the policy for one workload")
}

func newPlanCommand() *cobra.Command {
	var f planFlags
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f SNAPSHOT... [--policy DIR]",
		Short: "Preview, wave by wave, what a rollout will do",
		Example: `  rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml
  kubectl get deploy,rs,pods,nodes,pdb -o yaml > snap.yaml && rollplan plan -f snap.yaml -o json
  rollplan plan -f snap/ --policy policies/examples/leader-last --workload StatefulSet/web`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := render.Get(output)
			if err != nil {
				return usageError{err}
			}
			res, err := f.run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return r.Render(cmd.OutOrStdout(), res.Plan)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// run loads the snapshot, evaluates the policy and packs the plan.
func (f *planFlags) run(ctx context.Context, stderr io.Writer) (*plan.Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(f.files) == 0 {
		return nil, usageError{fmt.Errorf("no snapshot: pass -f with a file or directory of Kubernetes objects")}
	}
	gates, err := parseFeatureGates(f.featureGates)
	if err != nil {
		return nil, usageError{err}
	}
	snap, warnings, err := snapshot.LoadFiles(f.files)
	if err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	now := snap.Latest()
	if f.now != "" {
		if now, err = time.Parse(time.RFC3339, f.now); err != nil {
			return nil, usageError{fmt.Errorf("--now %q: want an RFC 3339 time such as 2026-03-01T12:00:00Z", f.now)}
		}
	}
	if now.IsZero() {
		return nil, fmt.Errorf("the snapshot records no time (no creation or condition timestamps): pass --now")
	}
	in := planInput{snap: snap, warnings: warnings, now: now, gates: gates,
		opts: plan.Options{RecreateSeconds: int(f.recreate / time.Second), InPlaceSeconds: int(f.inPlace / time.Second), TerminateSeconds: int(f.terminate / time.Second)}}
	rollouts, err := in.rollouts()
	if err != nil {
		return nil, err
	}
	if rollouts, err = f.filter(rollouts); err != nil {
		return nil, err
	}
	kind, err := f.engineKind()
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(ctx, kind, f.policies, f.timeout)
	if err != nil {
		return nil, err
	}
	return in.build(ctx, rollouts, eng)
}

// engineKind is --engine, or the engine the policy files call for.
func (f *planFlags) engineKind() (string, error) {
	switch f.engine {
	case "rego", "cel", "native":
		if f.engine == "native" && len(f.policies) > 0 {
			return "", usageError{fmt.Errorf("--engine native runs the built-in default strategy only: drop --policy, or pick --engine rego or cel")}
		}
		return f.engine, nil
	case "":
		for _, p := range f.policies {
			if celpolicy.IsPolicyFile(p) {
				return "cel", nil
			}
		}
		return "rego", nil
	}
	return "", usageError{fmt.Errorf("--engine %q: want rego, cel or native", f.engine)}
}

// planInput is what a plan is computed from once the snapshot is loaded.
// rollplan plan and rollplan test both plan through it, so that a policy
// test sees the facts and the plan that rollplan plan computes.
type planInput struct {
	snap     *snapshot.Snapshot
	warnings []string
	now      time.Time
	gates    map[string]bool
	opts     plan.Options
}

// rollouts builds the facts of every workload in the snapshot.
func (in *planInput) rollouts() ([]*facts.Rollout, error) {
	return facts.Build(in.snap, facts.Options{Now: in.now, FeatureGates: in.gates})
}

// build evaluates the engine and packs the plan of the rollouts.
func (in *planInput) build(ctx context.Context, rollouts []*facts.Rollout, eng engine.Engine) (*plan.Result, error) {
	digest, err := in.snap.Digest()
	if err != nil {
		return nil, err
	}
	meta := plan.Metadata{SnapshotDigest: digest, Now: in.now.UTC().Format(time.RFC3339), Warnings: in.warnings}
	return plan.Build(ctx, rollouts, eng, meta, in.opts)
}

func (f *planFlags) filter(rs []*facts.Rollout) ([]*facts.Rollout, error) {
	kind, ns, name := "", f.namespace, ""
	if f.workload != "" {
		parts := strings.Split(f.workload, "/")
		switch len(parts) {
		case 2:
			kind, name = parts[0], parts[1]
		case 3:
			kind, ns, name = parts[0], parts[1], parts[2]
		default:
			return nil, usageError{fmt.Errorf("--workload %q: want KIND/NAME or KIND/NAMESPACE/NAME", f.workload)}
		}
		kind = canonicalKind(kind)
		if kind == "" {
			return nil, usageError{fmt.Errorf("--workload %q: kind must be Deployment, StatefulSet or DaemonSet (deploy, sts, ds)", f.workload)}
		}
	}
	var out []*facts.Rollout
	for _, r := range rs {
		w := r.Workload
		if (kind == "" || w.Kind == kind) && (ns == "" || w.Namespace == ns) && (name == "" || w.Name == name) {
			out = append(out, r)
		}
	}
	if f.workload != "" && len(out) == 0 {
		return nil, fmt.Errorf("workload %s not found in the snapshot", f.workload)
	}
	return out, nil
}

func canonicalKind(k string) string {
	switch strings.ToLower(k) {
	case "deployment", "deployments", "deploy":
		return "Deployment"
	case "statefulset", "statefulsets", "sts":
		return "StatefulSet"
	case "daemonset", "daemonsets", "ds":
		return "DaemonSet"
	}
	return ""
}

// parseFeatureGates reads "A=true,B=false" for the gates rollplan models.
func parseFeatureGates(s string) (map[string]bool, error) {
	out := map[string]bool{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("--feature-gates %q: want NAME=true|false", kv)
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("--feature-gates %s: %q is not true or false", k, v)
		}
		if k != "MaxUnavailableStatefulSet" {
			return nil, fmt.Errorf("--feature-gates: unknown gate %s: rollplan models MaxUnavailableStatefulSet", k)
		}
		out[k] = b
	}
	return out, nil
}
