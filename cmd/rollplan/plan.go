package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
	"github.com/rollplan/rollplan/planner/request"
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
	// analysisResults: --analysis-results FILE, recorded measurement
	// results the gates' verdicts are judged over.
	analysisResults string
	// allowHalted (plan only): a halted or stalled rollout exits 0.
	allowHalted bool
	// allowEmpty (plan only): a snapshot without a workload, or a change
	// that replaces none, plans nothing and exits 0.
	allowEmpty bool
	// everyNamespace (explain): -n does not narrow what is planned, so
	// that explain can say where a pod of that name is instead; it still
	// names the namespace of change manifests without one, and the live
	// cluster's.
	everyNamespace bool
	// stdin: what -f - reads (the command's input).
	stdin io.Reader
	// changes: --change FILE|DIR (change.go); config, kubeFlagNames and
	// flags: the live cluster a change without -f is previewed against.
	changes       []string
	config        kubeFlags
	kubeFlagNames []string
	flags         *pflag.FlagSet
}

func (f *planFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVarP(&f.files, "filename", "f", nil, "snapshot files or directories (YAML or JSON, kubectl get -o yaml output; directories are read recursively; - reads the standard input)")
	fl.StringSliceVar(&f.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&f.engine, "engine", "", "policy engine: "+engine.KindList()+" (the default strategy in Go); "+engineDefault)
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
	fl.StringVar(&f.analysisResults, "analysis-results", "", "recorded measurement results (YAML or JSON, kind AnalysisResults: per workload KIND/NAMESPACE/NAME, per wave, per measurement): the gates between waves show the policy's verdict over them instead of pending")
	f.registerChange(fl)
}

func newPlanCommand() *cobra.Command {
	var f planFlags
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f SNAPSHOT... [--change FILE|DIR] [--policy DIR]",
		Short: "Preview, wave by wave, what a rollout will do",
		Long: `Preview, wave by wave, what a rollout will do: which pod changes, how
(in place or recreated), in which wave, and why, for every Deployment,
StatefulSet and DaemonSet of the snapshot (or the one --workload names).

A workload whose own objects are invalid (an annotation, a strategy field)
is reported with its error (the table's ERROR line, the "error" field of
-o json|yaml) and the others are planned; the exit code is then 1. A
halted rollout exits 3 (so does one whose analysis fails: it halts or
rolls back) and a stalled one (it cannot start or finish within
its budgets: "stalled" in -o json|yaml) exits 4, unless --allow-halted
(the table below). A snapshot that holds no Deployment, StatefulSet or
DaemonSet, or a --change that replaces none of its workloads, plans
nothing and exits 1, unless --allow-empty.

--change FILE|DIR previews the rollout a change would cause: the
Deployments, StatefulSets and DaemonSets of the files (a directory: every
*.yaml, *.yml and *.json in it; multi-document YAML and v1 Lists; other
kinds are left out with a warning) replace the workloads of the same kind,
namespace and name (a manifest without a namespace takes -n, else
"default"), and only those are planned. With -f, the manifests get the API
server's defaults locally; without -f, they are sent to the cluster
(--kubeconfig, --context) as a server-side dry-run apply and the workloads
they replace are read from it, so defaults and admission are the cluster's
(a refusal exits 1, naming the object). A change the policy's guard rails
deny exits 3, --allow-halted or not. -o markdown prints a pull-request
comment.`,
		Example: `  rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml
  kubectl get deploy,rs,sts,ds,controllerrevisions,pods,nodes,pdb -A -o yaml > snap.yaml && rollplan plan -f snap.yaml -o json
  rollplan plan -f snap/ --policy policies/examples/leader-last --workload StatefulSet/web
  rollplan plan -f snap.yaml --change deploy/ -o markdown > comment.md
  rollplan plan --change deploy/web.yaml -n prod --context staging`,
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
			if err := renderPlan(cmd.OutOrStdout(), r, &p, res.Result); err != nil {
				return err
			}
			return changeOutcome(&p, planOutcome(&p, f.allowHalted), len(f.changes) > 0)
		},
	}
	f.register(cmd)
	_ = cmd.RegisterFlagCompletionFunc("workload", completePlanWorkload(&f))
	cmd.Flags().StringVarP(&output, "output", "o", render.Formats[0], "output format: "+render.PlanList()+" (html: one self-contained page; redirect it to a file)")
	cmd.Flags().BoolVar(&f.allowHalted, "allow-halted", false, "exit 0 when a planned rollout is halted (else 3) or stalled (else 4); a workload that could not be planned still exits 1")
	cmd.Flags().BoolVar(&f.allowEmpty, "allow-empty", false, "exit 0 when nothing is planned: the snapshot holds no Deployment, StatefulSet or DaemonSet, or --change replaces none of its workloads (else 1)")
	return cmd
}

// renderPlan prints p with r, with res's details where r draws them (the
// HTML page: zones, nodes and every pod's explain).
func renderPlan(w io.Writer, r render.Renderer, p *plan.Plan, res *plan.Result) error {
	if rr, ok := r.(render.ResultRenderer); ok {
		return rr.RenderResult(w, p, res)
	}
	return r.Render(w, p)
}

// planOutcome is the exit status of a plan once it is printed (README "Exit
// codes"; the smallest code that applies wins): 1 when a workload could
// not be planned, 3 when a rollout is halted, 4 when one is stalled
// (neither with allowHalted), else nil (0).
func planOutcome(p *plan.Plan, allowHalted bool) error {
	var failed, halted, stalled, rolledBack []string
	for _, wp := range p.Workloads {
		id := fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name)
		switch {
		case wp.Error != "":
			failed = append(failed, wp.Error)
		case len(wp.Halted) > 0:
			halted = append(halted, fmt.Sprintf("%s: %s", id, wp.Halted[0]))
		case wp.Rollback != nil:
			rolledBack = append(rolledBack, fmt.Sprintf("%s after wave %d to %s: %s", id, wp.Rollback.AfterWave, wp.Rollback.ToRevision, wp.Rollback.Reason))
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
	case len(rolledBack) > 0:
		return codedError{exitHalted, fmt.Errorf("analysis failed, the rollout rolls back: %s (--allow-halted exits 0)", strings.Join(rolledBack, "; "))}
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
	if len(f.files) == 0 && len(f.changes) == 0 {
		return nil, usageError{fmt.Errorf("no snapshot: pass -f with a file or directory of Kubernetes objects (or --change FILE to preview a change against the live cluster)")}
	}
	if err := f.checkSource(); err != nil {
		return nil, err
	}
	if err := f.checkCluster(); err != nil {
		return nil, err
	}
	ref, err := f.target()
	if err != nil {
		return nil, err
	}
	stdin := f.stdin
	if stdin == nil {
		stdin = os.Stdin
	}
	stage, stopStage := planStageLine(stderr)
	defer stopStage()
	heap := newHeapBound()
	report := func(st snapshot.Status) {
		heap.observe(st)
		if stage != nil {
			stage.set("%s", loadStatus(st))
		}
	}
	if stage != nil {
		stderr = stage.line // warnings scroll above the line
	}
	var (
		snap     *snapshot.Snapshot
		warnings []string
		cluster  facts.Options
		changed  *changeSource
	)
	if f.live() {
		stage.set("previewing the change on the cluster (server-side dry-run)")
		if snap, cluster, changed, warnings, err = f.liveChange(ctx, stderr); err != nil {
			return nil, err
		}
	} else {
		snap, warnings, err = snapshot.LoadFilesReporting(f.files, stdin, report)
		var empty *snapshot.EmptyError
		if f.allowEmpty && errors.As(err, &empty) {
			snap, err = empty.Snapshot, nil
		}
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
		if err := f.noWorkload(snap); err != nil {
			return nil, err
		}
		if cluster, err = f.clusterOptions(snap.KubernetesVersion, "the snapshot", stderr); err != nil {
			return nil, err
		}
		if len(f.changes) > 0 {
			var ws []string
			if changed, ws, err = f.fileChange(snap, cluster, stderr); err != nil {
				return nil, err
			}
			warnings = append(warnings, ws...)
		}
	}
	if err := f.changedNothing(changed, snap); err != nil {
		return nil, err
	}
	if changed != nil && f.workload == "" {
		// -n was the manifests' namespace; the change selects the workloads.
		ref.Namespace = ""
	}
	req := &request.Request{Snapshot: snap, Warnings: warnings, Workload: ref, Cluster: cluster}
	if f.now != "" {
		if req.Now, err = time.Parse(time.RFC3339, f.now); err != nil {
			return nil, usageError{fmt.Errorf("--now %q: want an RFC 3339 time such as 2026-03-01T12:00:00Z", f.now)}
		}
	}
	if _, err := req.Time(); err != nil {
		return nil, fmt.Errorf("%w: pass --now, e.g. --now 2026-03-01T12:00:00Z", err)
	}
	stage.set("reading the workloads' pods and revisions")
	in, err := req.Facts()
	if err != nil {
		return nil, err
	}
	changed.scope(in)
	kind, err := f.engineKind()
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(ctx, kind, f.policies, f.timeout)
	if err != nil {
		return nil, err
	}
	for _, w := range engine.Warnings(eng) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	for _, n := range engine.Notes(eng) {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	opts := planOptions()
	if opts.Analysis, err = f.loadAnalysisResults(in.Rollouts); err != nil {
		return nil, err
	}
	opts.RecreateSeconds, opts.InPlaceSeconds, opts.TerminateSeconds = int(f.recreate/time.Second), int(f.inPlace/time.Second), int(f.terminate/time.Second)
	if stage != nil {
		stage.set("hashing the snapshot")
		progress := plan.ProgressFunc(func(done, total int) { stage.set("planning workloads: %d of %d", done, total) })
		opts.Progress = &progress
	}
	res, err := plan.Run(ctx, in, eng, opts)
	if err != nil {
		return nil, err
	}
	changed.annotate(res.Plan)
	return &planned{Result: res, failed: in.Failed}, nil
}

// noWorkload is the error of a snapshot without a Deployment, StatefulSet
// or DaemonSet (unless --allow-empty): it plans nothing, which a CI job
// must not take for a success (a truncated file, the wrong namespace
// captured).
func (f *planFlags) noWorkload(snap *snapshot.Snapshot) error {
	if f.allowEmpty || len(snap.Deployments)+len(snap.StatefulSets)+len(snap.DaemonSets) > 0 {
		return nil
	}
	var holds []string
	for _, k := range []struct {
		n    int
		kind string
	}{{len(snap.ReplicaSets), "ReplicaSet"}, {len(snap.ControllerRevisions), "ControllerRevision"}, {len(snap.Pods), "Pod"}, {len(snap.Nodes), "Node"}, {len(snap.PDBs), "PodDisruptionBudget"}} {
		if k.n > 0 {
			holds = append(holds, fmt.Sprintf("%d %s(s)", k.n, k.kind))
		}
	}
	only := ""
	if len(holds) > 0 {
		only = " (only " + strings.Join(holds, ", ") + ")"
	}
	files := strings.ReplaceAll(strings.Join(f.files, ", "), snapshot.Stdin, "<stdin>")
	msg := fmt.Sprintf("%s: the snapshot holds no Deployment, StatefulSet or DaemonSet%s: nothing to plan: capture the workloads with their pods (rollplan snapshot -n NAMESPACE, or kubectl get deploy,rs,sts,ds,controllerrevisions,pods,nodes,pdb -o yaml)", files, only)
	return errors.New(msg + f.allowEmptyHint())
}

// allowEmptyHint offers --allow-empty where the command has it (plan,
// not explain).
func (f *planFlags) allowEmptyHint() string {
	if f.flags == nil || f.flags.Lookup("allow-empty") == nil {
		return ""
	}
	return ", or pass --allow-empty to exit 0"
}

// engineDefault is the --engine help's default, as engineKind infers it.
const engineDefault = "default: cel when --policy names YAML files, else rego"

// engineKind is --engine, or the engine the policy files call for
// (engines.Infer): CEL when --policy names a CEL file (.yaml, .yml, .json)
// or a directory of CEL policies without .rego files, else Rego. Policy
// paths that do not fit the engine are a usage error naming the path.
func (f *planFlags) engineKind() (string, error) {
	if f.engine != "" && !engines.Known(f.engine) {
		return "", usageError{fmt.Errorf("--engine %q: want %s", f.engine, engine.KindList())}
	}
	if err := checkPolicyPaths(f.policies); err != nil {
		return "", err
	}
	switch f.engine {
	case "":
		kind, err := engines.Infer(f.policies)
		var mixed *engines.MixedError
		if errors.As(err, &mixed) {
			return "", usageError{fmt.Errorf("--policy mixes Rego (%s) and CEL (%s) policies: keep one engine's files per --policy", mixed.Rego, mixed.CEL)}
		}
		return kind, err
	case engine.Native:
		if len(f.policies) > 0 {
			return "", usageError{fmt.Errorf("--engine native runs the built-in default strategy only: drop --policy, or pick --engine rego or cel")}
		}
		return f.engine, nil
	}
	for _, p := range f.policies {
		pp := engines.Classify(p)
		switch {
		case f.engine == engine.Rego && pp.Only(engine.CEL):
			return "", usageError{fmt.Errorf("--engine rego: %s (CEL policies are YAML: use --engine cel or drop --engine)", notPolicy(pp, "Rego"))}
		case f.engine == engine.CEL && pp.Only(engine.Rego):
			return "", usageError{fmt.Errorf("--engine cel: %s (Rego policies are .rego files: use --engine rego or drop --engine)", notPolicy(pp, "CEL"))}
		}
	}
	return f.engine, nil
}

// target parses --workload and -n (unless everyNamespace) into what they
// select. A namespace in --workload that -n contradicts is a usage error:
// which one was meant cannot be guessed.
func (f *planFlags) target() (request.Workload, error) {
	ref := request.Workload{Namespace: f.namespace, Arg: f.workload}
	if f.everyNamespace {
		ref.Namespace = ""
	}
	if f.workload == "" {
		return ref, nil
	}
	parts := strings.Split(f.workload, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return ref, usageError{fmt.Errorf("--workload %q: want KIND/NAME or KIND/NAMESPACE/NAME, e.g. sts/web or deploy/default/api", f.workload)}
	}
	ref.Kind, ref.Name = parts[0], parts[len(parts)-1]
	if len(parts) == 3 {
		if f.namespace != "" && parts[1] != f.namespace {
			return ref, usageError{fmt.Errorf("--workload %s names namespace %q but -n names %q: drop -n, or pass --workload %s/%s", f.workload, parts[1], f.namespace, parts[0], parts[2])}
		}
		ref.Namespace = parts[1]
	}
	if ref.Kind = request.Kind(ref.Kind); ref.Kind == "" {
		return ref, usageError{fmt.Errorf("--workload %q: kind must be Deployment, StatefulSet or DaemonSet (deploy, sts, ds)", f.workload)}
	}
	return ref, nil
}
