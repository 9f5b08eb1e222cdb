package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// planFlags are shared by plan and explain.
type planFlags struct {
	files             []string
	policies          []string
	now               string
	kubernetesVersion string
	featureGates      string
	workload          string
	namespace         string
	recreate          time.Duration
	inPlace           time.Duration
	terminate         time.Duration
	timeout           time.Duration
	engine            string
	// allowHalted (plan only): a halted or stalled rollout exits 0.
	allowHalted bool
	// stdin: what -f - reads (the command's input).
	stdin io.Reader
}

func (f *planFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "snapshot files or directories (YAML or JSON, kubectl get -o yaml output; directories are read recursively; - reads the standard input)")
	fl.StringSliceVar(&f.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&f.engine, "engine", "", "policy engine: rego, cel or native (the default strategy in Go); default: cel when --policy names YAML files, else rego")
	fl.StringVar(&f.now, "now", "", "snapshot time (RFC 3339); default: the latest time recorded in the snapshot")
	f.registerCluster(fl)
	fl.StringVar(&f.workload, "workload", "", "plan only this workload: KIND/NAME or KIND/NAMESPACE/NAME")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "plan only workloads in this namespace")
	durationVar(fl, &f.recreate, "recreate-duration", time.Duration(plan.DefaultOptions.RecreateSeconds)*time.Second, positiveSeconds, "estimated time from replacing a pod to the new pod being Ready (at least 1s)")
	durationVar(fl, &f.inPlace, "inplace-duration", time.Duration(plan.DefaultOptions.InPlaceSeconds)*time.Second, positiveSeconds, "estimated time from an in-place update to the container being Ready (at least 1s)")
	// 0 is meaningful here (and what test/fidelity plans with): a pod
	// deleted without a replacement frees its place at once. A recreate or
	// in-place estimate of 0 would make pods available before they could
	// be, collapsing waves past the budgets.
	durationVarOff(fl, &f.terminate, "terminate-duration", time.Duration(plan.DefaultOptions.TerminateSeconds)*time.Second, zeroOrSeconds, "pods that go at once", "estimated time for a deleted pod that is not replaced to go (at least 1s; 0: at once)")
	durationVar(fl, &f.timeout, "policy-timeout", time.Minute, positive, "deadline for evaluating the policy for one workload")
}

func newPlanCommand() *cobra.Command {
	var f planFlags
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f SNAPSHOT... [--policy DIR]",
		Short: "Preview, wave by wave, what a rollout will do",
		Long: `Preview, wave by wave, what a rollout will do: which pod changes, how
(in place or recreated), in which wave, and why, for every Deployment,
StatefulSet and DaemonSet of the snapshot (or the one --workload names).

A workload whose own objects are invalid (an annotation, a strategy field)
is reported with its error (the table's ERROR line, the "error" field of
-o json|yaml) and the others are planned; the exit code is then 1. A
halted rollout exits 3 and a stalled one (it cannot start or finish within
its budgets: "stalled" in -o json|yaml) exits 4, unless --allow-halted
(the table below).`,
		Example: `  rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml
  kubectl get deploy,rs,sts,ds,controllerrevisions,pods,nodes,pdb -A -o yaml > snap.yaml && rollplan plan -f snap.yaml -o json
  rollplan plan -f snap/ --policy policies/examples/leader-last --workload StatefulSet/web`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := render.Get(output)
			if err != nil {
				return usageError{err}
			}
			f.stdin = cmd.InOrStdin()
			res, err := f.run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			p := *res.Plan
			p.Workloads = slices.Clone(p.Workloads)
			plan.WithFailed(&p, res.failedPlans())
			if err := r.Render(cmd.OutOrStdout(), &p); err != nil {
				return err
			}
			return planOutcome(&p, f.allowHalted)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", render.Formats[0], "output format: "+render.List())
	cmd.Flags().BoolVar(&f.allowHalted, "allow-halted", false, "exit 0 when a planned rollout is halted (else 3) or stalled (else 4); a workload that could not be planned still exits 1")
	return cmd
}

// planOutcome is the exit status of a plan once it is printed (README "Exit
// codes"; the smallest code that applies wins): 1 when a workload could
// not be planned, 3 when a rollout is halted, 4 when one is stalled
// (neither with allowHalted), else nil (0).
func planOutcome(p *plan.Plan, allowHalted bool) error {
	var failed, halted, stalled []string
	for _, wp := range p.Workloads {
		id := fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name)
		switch {
		case wp.Error != "":
			failed = append(failed, wp.Error)
		case len(wp.Halted) > 0:
			halted = append(halted, fmt.Sprintf("%s: %s", id, wp.Halted[0]))
		case wp.Stalled != nil:
			stalled = append(stalled, fmt.Sprintf("%s after %s: %s", id, wp.Stalled.After, wp.Stalled.Reason))
		}
	}
	switch {
	case len(failed) > 0:
		err := errors.New(strings.Join(failed, "; "))
		if len(failed) < len(p.Workloads) {
			err = fmt.Errorf("%w (%d of %d workloads could not be planned; the others are)", err, len(failed), len(p.Workloads))
		}
		return codedError{exitError, err}
	case allowHalted:
		return nil
	case len(halted) > 0:
		return codedError{exitHalted, fmt.Errorf("halted: %s (--allow-halted exits 0)", strings.Join(halted, "; "))}
	case len(stalled) > 0:
		return codedError{exitStalled, fmt.Errorf("stalled: %s (--allow-halted exits 0)", strings.Join(stalled, "; "))}
	}
	return nil
}

// planned is a plan with the workloads --workload and -n select that
// could not be planned (their facts failed).
type planned struct {
	*plan.Result
	failed []*facts.WorkloadError
}

// failedPlans are the plan entries of the failed workloads.
func (p *planned) failedPlans() []plan.WorkloadPlan {
	out := make([]plan.WorkloadPlan, 0, len(p.failed))
	for _, e := range p.failed {
		out = append(out, plan.Failed(e.Kind, e.Namespace, e.Name, e))
	}
	return out
}

// run loads the snapshot, evaluates the policy and packs the plan. A
// workload whose facts fail is left out of the plan and returned with its
// error; what belongs to no single workload fails the run.
func (f *planFlags) run(ctx context.Context, stderr io.Writer) (*planned, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(f.files) == 0 {
		return nil, usageError{fmt.Errorf("no snapshot: pass -f with a file or directory of Kubernetes objects")}
	}
	if err := f.checkCluster(); err != nil {
		return nil, err
	}
	if _, err := f.target(); err != nil {
		return nil, err
	}
	stdin := f.stdin
	if stdin == nil {
		stdin = os.Stdin
	}
	snap, warnings, err := snapshot.LoadFilesFrom(f.files, stdin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("-f %w: pass an existing snapshot file or directory", err)
	}
	if err != nil {
		// Every load error starts with the path it is about.
		return nil, err
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
		return nil, fmt.Errorf("the snapshot records no time (no creation or condition timestamps): pass --now, e.g. --now 2026-03-01T12:00:00Z")
	}
	cluster, err := f.clusterOptions(snap.KubernetesVersion, "the snapshot", stderr)
	if err != nil {
		return nil, err
	}
	in := planInput{snap: snap, warnings: warnings, now: now, cluster: cluster,
		opts: plan.Options{RecreateSeconds: int(f.recreate / time.Second), InPlaceSeconds: int(f.inPlace / time.Second), TerminateSeconds: int(f.terminate / time.Second)}}
	rollouts, failed, err := in.rolloutsEach()
	if err != nil {
		return nil, err
	}
	if rollouts, failed, err = f.filter(rollouts, failed); err != nil {
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
	for _, w := range engineWarnings(eng) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	res, err := in.build(ctx, rollouts, eng)
	if err != nil {
		return nil, err
	}
	return &planned{Result: res, failed: failed}, nil
}

// engineKind is --engine, or the engine the policy files call for: CEL when
// --policy names a CEL file (.yaml, .yml, .json) or a directory of CEL
// policies without .rego files, else Rego. Policy paths that do not fit the
// engine are a usage error naming the path.
func (f *planFlags) engineKind() (string, error) {
	switch f.engine {
	case "rego", "cel", "native", "":
	default:
		return "", usageError{fmt.Errorf("--engine %q: want rego, cel or native", f.engine)}
	}
	if err := checkPolicyPaths(f.policies); err != nil {
		return "", err
	}
	if f.engine == "native" {
		if len(f.policies) > 0 {
			return "", usageError{fmt.Errorf("--engine native runs the built-in default strategy only: drop --policy, or pick --engine rego or cel")}
		}
		return f.engine, nil
	}
	var regoOnly, celOnly []policyPath
	for _, p := range f.policies {
		pp := classifyPolicyPath(p)
		switch {
		case pp.rego && !pp.cel:
			regoOnly = append(regoOnly, pp)
		case pp.cel && !pp.rego:
			celOnly = append(celOnly, pp)
		}
	}
	switch f.engine {
	case "rego":
		if len(celOnly) > 0 {
			return "", usageError{fmt.Errorf("--engine rego: %s (CEL policies are YAML: use --engine cel or drop --engine)", celOnly[0].not("Rego"))}
		}
		return "rego", nil
	case "cel":
		if len(regoOnly) > 0 {
			return "", usageError{fmt.Errorf("--engine cel: %s (Rego policies are .rego files: use --engine rego or drop --engine)", regoOnly[0].not("CEL"))}
		}
		return "cel", nil
	}
	if len(regoOnly) > 0 && len(celOnly) > 0 {
		return "", usageError{fmt.Errorf("--policy mixes Rego (%s) and CEL (%s) policies: keep one engine's files per --policy", regoOnly[0].path, celOnly[0].path)}
	}
	if len(celOnly) > 0 {
		return "cel", nil
	}
	return "rego", nil
}

// planInput is what a plan is computed from once the snapshot is loaded.
// rollplan plan and rollplan test both plan through it, so that a policy
// test sees the facts and the plan that rollplan plan computes.
type planInput struct {
	snap     *snapshot.Snapshot
	warnings []string
	now      time.Time
	// cluster: the version and gate overrides planned for.
	cluster facts.Options
	opts    plan.Options
}

// rollouts builds the facts of every workload in the snapshot; one
// workload's error fails them all (policy tests).
func (in *planInput) rollouts() ([]*facts.Rollout, error) {
	o := in.cluster
	o.Now = in.now
	return facts.Build(in.snap, o)
}

// rolloutsEach builds the facts of every workload in the snapshot, with
// the errors of the workloads that have none (facts.BuildEach).
func (in *planInput) rolloutsEach() ([]*facts.Rollout, []*facts.WorkloadError, error) {
	o := in.cluster
	o.Now = in.now
	return facts.BuildEach(in.snap, o)
}

// build evaluates the engine and packs the plan of the rollouts.
func (in *planInput) build(ctx context.Context, rollouts []*facts.Rollout, eng engine.Engine) (*plan.Result, error) {
	digest, err := in.snap.Digest()
	if err != nil {
		return nil, err
	}
	v := in.cluster.KubernetesVersion.Or(kubeversion.Newest)
	gates, err := kubeversion.WithOverrides(v, in.cluster.FeatureGates)
	if err != nil {
		return nil, err
	}
	meta := plan.Metadata{SnapshotDigest: digest, Now: in.now.UTC().Format(time.RFC3339), Warnings: in.warnings,
		KubernetesVersion: v.String(), FeatureGates: gates}
	return plan.Build(ctx, rollouts, eng, meta, in.opts)
}

// workloadRef is what --workload and -n select; empty fields match all.
type workloadRef struct{ kind, namespace, name string }

// target parses --workload and -n. A namespace in --workload that -n
// contradicts is a usage error: which one was meant cannot be guessed.
func (f *planFlags) target() (workloadRef, error) {
	ref := workloadRef{namespace: f.namespace}
	if f.workload == "" {
		return ref, nil
	}
	parts := strings.Split(f.workload, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return ref, usageError{fmt.Errorf("--workload %q: want KIND/NAME or KIND/NAMESPACE/NAME, e.g. sts/web or deploy/default/api", f.workload)}
	}
	ref.kind, ref.name = parts[0], parts[len(parts)-1]
	if len(parts) == 3 {
		if f.namespace != "" && parts[1] != f.namespace {
			return ref, usageError{fmt.Errorf("--workload %s names namespace %q but -n names %q: drop -n, or pass --workload %s/%s", f.workload, parts[1], f.namespace, parts[0], parts[2])}
		}
		ref.namespace = parts[1]
	}
	if ref.kind = canonicalKind(ref.kind); ref.kind == "" {
		return ref, usageError{fmt.Errorf("--workload %q: kind must be Deployment, StatefulSet or DaemonSet (deploy, sts, ds)", f.workload)}
	}
	return ref, nil
}

// filter keeps the rollouts and the failed workloads that --workload and
// -n select. Selecting nothing is an error naming where the snapshot has
// what was asked for; a snapshot without workloads is an empty plan.
func (f *planFlags) filter(rs []*facts.Rollout, failed []*facts.WorkloadError) ([]*facts.Rollout, []*facts.WorkloadError, error) {
	ref, err := f.target()
	if err != nil {
		return nil, nil, err
	}
	type id struct{ kind, namespace, name string }
	all := make([]id, 0, len(rs)+len(failed))
	for _, r := range rs {
		all = append(all, id{r.Workload.Kind, r.Workload.Namespace, r.Workload.Name})
	}
	for _, e := range failed {
		all = append(all, id{e.Kind, e.Namespace, e.Name})
	}
	selects := func(w id) bool {
		return (ref.kind == "" || w.kind == ref.kind) && (ref.namespace == "" || w.namespace == ref.namespace) && (ref.name == "" || w.name == ref.name)
	}
	var out []*facts.Rollout
	for _, r := range rs {
		if selects(id{r.Workload.Kind, r.Workload.Namespace, r.Workload.Name}) {
			out = append(out, r)
		}
	}
	var outFailed []*facts.WorkloadError
	for _, e := range failed {
		if selects(id{e.Kind, e.Namespace, e.Name}) {
			outFailed = append(outFailed, e)
		}
	}
	if len(out)+len(outFailed) > 0 {
		return out, outFailed, nil
	}
	// Nothing selected: say where the snapshot has what was asked for.
	elsewhere := map[string]bool{}
	for _, w := range all {
		if (ref.kind == "" || w.kind == ref.kind) && (ref.name == "" || w.name == ref.name) {
			elsewhere[w.namespace] = true
		}
	}
	nss := slices.Sorted(maps.Keys(elsewhere))
	switch {
	case f.workload != "" && ref.namespace != "" && len(nss) > 0:
		return nil, nil, fmt.Errorf("--workload %s: no %s %s in namespace %q of the snapshot; it has one in %s: name that namespace (--workload %s/%s/%s, without -n)", f.workload, ref.kind, ref.name, ref.namespace, namespaces(nss), parts(f.workload)[0], nss[0], ref.name)
	case f.workload != "" && ref.namespace != "":
		return nil, nil, fmt.Errorf("--workload %s: no %s %s in namespace %q of the snapshot: check the name, or capture the workload (rollplan snapshot %s/%s -n %s)", f.workload, ref.kind, ref.name, ref.namespace, strings.ToLower(ref.kind), ref.name, ref.namespace)
	case f.workload != "":
		return nil, nil, fmt.Errorf("--workload %s: no %s %s in the snapshot: check the name, or capture the workload (rollplan snapshot %s/%s)", f.workload, ref.kind, ref.name, strings.ToLower(ref.kind), ref.name)
	case ref.namespace != "" && len(nss) > 0:
		return nil, nil, fmt.Errorf("-n %s: no Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot; it has workloads in %s: pass one of them to -n, or drop -n to plan them all", ref.namespace, ref.namespace, namespaces(nss))
	}
	// No workload in the snapshot at all: an empty plan (-n is not why).
	return out, outFailed, nil
}

func parts(workload string) []string { return strings.Split(workload, "/") }

// namespaces lists namespace names for a message: namespace "a", or
// namespaces "a", "b".
func namespaces(nss []string) string {
	q := make([]string, len(nss))
	for i, ns := range nss {
		q[i] = strconv.Quote(ns)
	}
	if len(q) == 1 {
		return "namespace " + q[0]
	}
	return "namespaces " + strings.Join(q, ", ")
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
