package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// newEngine builds the policy engine of a kind (rego, cel, native) over
// policy paths (none: the default strategy) for the commands with
// --policy-timeout: an evaluation that timeout stops says to raise it.
func newEngine(ctx context.Context, kind string, paths []string, timeout time.Duration) (engine.Engine, error) {
	eng, err := engines.Open(ctx, kind, paths, engines.Options{Timeout: timeout})
	if err != nil || kind == engine.Native {
		return eng, err
	}
	return timeoutHint{eng}, nil
}

// planOptions are the plan's default estimates, with the model of the
// workloads' own controllers every command plans with.
func planOptions() plan.Options {
	o := plan.DefaultOptions
	o.Upstream = engines.Upstream()
	return o
}

// timeoutHint names --policy-timeout in the error of an evaluation the
// policy timeout stopped (engine.TimeoutError). It answers budgets alone
// and reports clock use exactly as the engine it wraps.
type timeoutHint struct{ engine.Engine }

var (
	_ engine.BudgetDecider = timeoutHint{}
	_ engine.ClockFree     = timeoutHint{}
	_ engine.Warner        = timeoutHint{}
	_ engine.Noter         = timeoutHint{}
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

// Warnings are the wrapped engine's.
func (h timeoutHint) Warnings() []string { return engine.Warnings(h.Engine) }

// Notes are the wrapped engine's.
func (h timeoutHint) Notes() []string { return engine.Notes(h.Engine) }

func hintTimeout(err error) error {
	var te *engine.TimeoutError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: raise --policy-timeout", err)
	}
	return err
}
