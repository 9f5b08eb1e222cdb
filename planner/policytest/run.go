package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/request"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Runner runs RolloutPolicyTest suites. It builds each suite's engine
// through the engine registry and plans each test through a planning
// request, as rollplan plan does, so that a test sees exactly the facts
// and the plan that rollplan plan computes.
type Runner struct {
	// Timeout per test (0: no limit beyond the engine's own,
	// engine.DefaultTimeout per workload).
	Timeout time.Duration
	// KubernetesVersion: the version of the tests that name none; "": the
	// version their snapshot records, else the newest.
	KubernetesVersion string
	// Warn gets the warnings of each engine built (engine.Warner); nil
	// drops them.
	Warn func(string)

	// open builds the engines: engines.Open, unless a test of this
	// package answers with an engine of its own.
	open func(ctx context.Context, kind string, paths []string, o engines.Options) (engine.Engine, error)
}

// Run runs every test of a suite. It builds the suite's engine once; when
// that fails, every test is an Error.
func (r *Runner) Run(ctx context.Context, s *Suite) []Result {
	dir := filepath.Dir(s.File)
	policy := resolve(dir, s.Spec.Policy)
	eng, engErr := r.engine(ctx, s.Spec.Engine, policy)
	out := make([]Result, 0, len(s.Spec.Tests))
	for i := range s.Spec.Tests {
		t := &s.Spec.Tests[i]
		res := Result{
			File: s.File, Line: s.Doc*100000 + i, Class: s.Metadata.Name, Name: t.Name,
			ID: s.Metadata.Name + "/" + t.Name,
		}
		start := time.Now()
		var diffs []string
		err := engErr
		if err == nil {
			diffs, err = r.runTest(ctx, dir, t, eng)
		}
		res.Duration = time.Since(start)
		res.Location = fmt.Sprintf("%s: test %q (spec.tests[%d])", s.File, t.Name, i)
		switch {
		case err != nil:
			res.Status = Error
			res.Detail = err.Error()
		case len(diffs) > 0:
			res.Status = Fail
			res.Detail = strings.Join(diffs, "\n")
		default:
			res.Status = Pass
		}
		out = append(out, res)
	}
	return out
}

// engine builds the engine of kind (inferred from the policy paths when
// "") and passes on its warnings.
func (r *Runner) engine(ctx context.Context, kind string, policy []string) (engine.Engine, error) {
	if kind == "" {
		var err error
		if kind, err = engines.Infer(policy); err != nil {
			return nil, fmt.Errorf("policy %s: %w", describePaths(policy), err)
		}
	}
	open := r.open
	if open == nil {
		open = engines.Open
	}
	eng, err := open(ctx, kind, policy, engines.Options{})
	if err != nil {
		return nil, fmt.Errorf("engine %s, policy %s: %w", kind, describePaths(policy), err)
	}
	if r.Warn != nil {
		for _, w := range engine.Warnings(eng) {
			r.Warn(w)
		}
	}
	return eng, nil
}

func resolve(dir string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if filepath.IsAbs(p) {
			out[i] = p
		} else {
			out[i] = filepath.Join(dir, p)
		}
	}
	return out
}

func describePaths(ps []string) string {
	if len(ps) == 0 {
		return "(default strategy)"
	}
	return strings.Join(ps, ", ")
}

func (r *Runner) runTest(ctx context.Context, dir string, t *Test, eng engine.Engine) ([]string, error) {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	var (
		snap     *snapshot.Snapshot
		warnings []string
		err      error
	)
	if len(t.Snapshot) > 0 {
		snap, warnings, err = snapshot.LoadFiles(resolve(dir, t.Snapshot))
	} else {
		// A List of the inline objects: the loader names objects items[N].
		list, merr := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": t.Objects})
		if merr != nil {
			return nil, fmt.Errorf("objects: %w", merr)
		}
		snap, warnings, err = snapshot.Decode("objects", list)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	res, err := r.plan(ctx, t, snap, warnings, eng)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("stopped after %s, the test's timeout (rollplan test --timeout): raise it, or make the policy cheaper: %w", r.Timeout, err)
		}
		return nil, err
	}
	var diffs []string
	if len(t.Expect.Decisions) > 0 {
		diffs = append(diffs, compareDecisions(t.Expect.Decisions, res)...)
	}
	if t.Expect.Plan != nil {
		d, err := comparePlan(t.Expect.Plan.Workloads, res.Plan.Workloads)
		if err != nil {
			return nil, err
		}
		if d != "" {
			diffs = append(diffs, "plan workloads differ (- want, + got):\n"+d)
		}
	}
	return diffs, nil
}

// plan plans one test's snapshot as rollplan plan does, with the default
// duration estimates; the test's fields stand for the flags of the same
// name (kubernetesVersion, featureGates, now, workload).
func (r *Runner) plan(ctx context.Context, t *Test, snap *snapshot.Snapshot, warnings []string, eng engine.Engine) (*plan.Result, error) {
	version := t.KubernetesVersion
	if version == "" {
		version = r.KubernetesVersion
	}
	cluster, err := clusterOptions(version, t.FeatureGates, snap.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	// One workload that cannot be planned fails the test, selected or
	// not: a suite's snapshot is the suite's to keep valid.
	req := &request.Request{Snapshot: snap, Warnings: warnings, Cluster: cluster, Strict: true}
	if t.Now != "" {
		req.Now, _ = time.Parse(time.RFC3339, t.Now) // validated when decoded
	}
	if t.Workload != "" {
		kind, ns, name, _ := ParseWorkload(t.Workload) // validated when decoded
		req.Workload = request.Workload{Kind: kind, Namespace: ns, Name: name, Arg: t.Workload}
	}
	in, err := req.Facts()
	var noMatch *request.NoMatchError
	switch {
	case errors.Is(err, request.ErrNoTime):
		return nil, fmt.Errorf("%w: set now", err)
	case errors.As(err, &noMatch):
		return nil, fmt.Errorf("workload: %w", err)
	case err != nil:
		return nil, err
	}
	o := plan.DefaultOptions
	o.Upstream = engines.Upstream()
	if len(t.AnalysisResults) > 0 {
		o.Analysis = &facts.AnalysisResults{APIVersion: facts.ResultsAPIVersion, Kind: facts.ResultsKind, Workloads: t.AnalysisResults}
	}
	return plan.Run(ctx, in, eng, o)
}

// clusterOptions resolves the version (asked, else recorded by the
// snapshot, else the newest) and the gates, as --kubernetes-version and
// --feature-gates would, with errors naming the test's fields.
func clusterOptions(asked string, gates map[string]bool, recorded string) (facts.Options, error) {
	field := strings.NewReplacer("--kubernetes-version", "kubernetesVersion", "--feature-gates", "featureGates")
	v, _, err := kubeversion.Resolve(asked, recorded, "the snapshot")
	if err != nil {
		return facts.Options{}, errors.New(field.Replace("--kubernetes-version " + err.Error()))
	}
	kv := make([]string, 0, len(gates))
	for _, k := range slices.Sorted(maps.Keys(gates)) {
		kv = append(kv, fmt.Sprintf("%s=%t", k, gates[k]))
	}
	parsed, err := kubeversion.ParseGates(v, strings.Join(kv, ","))
	if err != nil {
		return facts.Options{}, errors.New(field.Replace("--feature-gates " + err.Error()))
	}
	return facts.Options{KubernetesVersion: v, FeatureGates: parsed}, nil
}
