package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/cel"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/policytest"
)

// newEngine builds the policy engine of a kind (rego, cel, native) over
// policy paths (none: the default strategy) for the commands with
// --policy-timeout: an evaluation that timeout stops says to raise it.
func newEngine(ctx context.Context, kind string, paths []string, timeout time.Duration) (engine.Engine, error) {
	eng, err := buildEngine(ctx, kind, paths, timeout)
	if err != nil || kind == policytest.EngineNative {
		return eng, err
	}
	return timeoutHint{eng}, nil
}

// timeoutHint names --policy-timeout in the error of an evaluation the
// policy timeout stopped (engine.TimeoutError). It answers budgets alone
// and reports clock use exactly as the engine it wraps.
type timeoutHint struct{ engine.Engine }

var (
	_ engine.BudgetDecider = timeoutHint{}
	_ engine.ClockFree     = timeoutHint{}
)

func (h timeoutHint) Decide(ctx context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	d, err := h.Engine.Decide(ctx, r)
	return d, hintTimeout(err)
}

func (h timeoutHint) DecideBudgets(ctx context.Context, r *facts.Rollout) ([]engine.Budget, error) {
	b, err := engine.Budgets(ctx, h.Engine, r)
	return b, hintTimeout(err)
}

func (h timeoutHint) BudgetsIgnoreClock() bool { return engine.BudgetsIgnoreClock(h.Engine) }

// Warnings are the wrapped engine's (engineWarnings).
func (h timeoutHint) Warnings() []string { return engineWarnings(h.Engine) }

// engineWarnings are what loading the policy found worth saying but not
// fatal (a Rego package nothing imports, say): rego.Engine reports them.
func engineWarnings(e engine.Engine) []string {
	if w, ok := e.(interface{ Warnings() []string }); ok {
		return w.Warnings()
	}
	return nil
}

func hintTimeout(err error) error {
	var te *engine.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: raise --policy-timeout", err)
	}
	return err
}

// buildEngine builds the policy engine of a kind (rego, cel, native) over
// policy paths (none: the default strategy). rollplan test builds every
// suite's engine through it.
func buildEngine(ctx context.Context, kind string, paths []string, timeout time.Duration) (engine.Engine, error) {
	switch kind {
	case policytest.EngineRego:
		return rego.Load(ctx, paths, timeout)
	case policytest.EngineCEL:
		ps, err := cel.Load(paths)
		if err != nil {
			return nil, err
		}
		return cel.New(ps, cel.Options{Timeout: timeout})
	case policytest.EngineNative:
		if len(paths) > 0 {
			return nil, fmt.Errorf("engine native is the built-in default strategy and takes no policy (got %s)", strings.Join(paths, ", "))
		}
		return native.New(), nil
	}
	return nil, fmt.Errorf("unknown engine %q: want rego, cel or native", kind)
}

// testEngines is the engine factory of rollplan test; warn gets the
// warnings of each engine it builds.
func testEngines(timeout time.Duration, warn func(string)) policytest.EngineFactory {
	return func(ctx context.Context, kind string, paths []string) (engine.Engine, error) {
		e, err := buildEngine(ctx, kind, paths, timeout)
		if err == nil {
			for _, w := range engineWarnings(e) {
				warn(w)
			}
		}
		return e, err
	}
}

// testPlan plans one test's snapshot exactly as rollplan plan does, with the
// default duration estimates.
func testPlan(ctx context.Context, req policytest.PlanRequest) (*plan.Result, error) {
	kv := make([]string, 0, len(req.FeatureGates))
	for _, k := range slices.Sorted(maps.Keys(req.FeatureGates)) {
		kv = append(kv, fmt.Sprintf("%s=%t", k, req.FeatureGates[k]))
	}
	f := planFlags{workload: req.Workload, kubernetesVersion: req.KubernetesVersion, featureGates: strings.Join(kv, ",")}
	// A suite's snapshot without a recorded version plans for the newest,
	// quietly: the suite says which version it means when it matters.
	cluster, err := f.clusterOptions(req.Snapshot.KubernetesVersion, "the snapshot", nil)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.NewReplacer("--kubernetes-version", "kubernetesVersion", "--feature-gates", "featureGates").Replace(err.Error()))
	}
	now := req.Now
	if now.IsZero() {
		now = req.Snapshot.Latest()
	}
	if now.IsZero() {
		return nil, fmt.Errorf("the snapshot records no time (no creation or condition timestamps): set now")
	}
	in := planInput{snap: req.Snapshot, warnings: req.Warnings, now: now, cluster: cluster, opts: plan.DefaultOptions}
	rollouts, err := in.rollouts()
	if err != nil {
		return nil, err
	}
	if rollouts, _, err = f.filter(rollouts, nil); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return in.build(ctx, rollouts, req.Engine)
}
