package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// EngineFactory builds the engine of a kind (rego, cel or native) over the
// policy paths (already resolved; empty for the default strategy).
type EngineFactory func(ctx context.Context, kind string, policyPaths []string) (engine.Engine, error)

// PlanRequest is one test's planning input.
type PlanRequest struct {
	Snapshot *snapshot.Snapshot
	// Warnings from loading the snapshot.
	Warnings []string
	// Now: zero for the latest time in the snapshot.
	Now time.Time
	// KubernetesVersion: "" for the snapshot's recorded version, else
	// the newest.
	KubernetesVersion string
	FeatureGates      map[string]bool
	// Workload: KIND/NAME or KIND/NAMESPACE/NAME, "" for every workload.
	Workload string
	Engine   engine.Engine
}

// PlanFunc plans a snapshot the way `rollplan plan` does.
type PlanFunc func(ctx context.Context, req PlanRequest) (*plan.Result, error)

// Runner runs RolloutPolicyTest suites.
type Runner struct {
	Engines EngineFactory
	Plan    PlanFunc
	// Timeout per test (0: no limit beyond the engine's own).
	Timeout time.Duration
}

// Run runs every test of a suite. It builds the suite's engine once; when
// that fails, every test is an Error.
func (r *Runner) Run(ctx context.Context, s *Suite) []Result {
	dir := filepath.Dir(s.File)
	policy := resolve(dir, s.Spec.Policy)
	kind := s.Spec.Engine
	if kind == "" {
		kind = InferEngine(policy)
	}
	eng, engErr := r.Engines(ctx, kind, policy)
	if engErr != nil {
		engErr = fmt.Errorf("engine %s, policy %s: %w", kind, describePaths(policy), engErr)
	}
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
	req := PlanRequest{Snapshot: snap, Warnings: warnings, KubernetesVersion: t.KubernetesVersion, FeatureGates: t.FeatureGates, Workload: t.Workload, Engine: eng}
	if t.Now != "" {
		req.Now, _ = time.Parse(time.RFC3339, t.Now) // validated when decoded
	}
	res, err := r.Plan(ctx, req)
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
