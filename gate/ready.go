package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Readiness says whether a process can do its job, from named checks run
// in order: the first that fails is the reason it is not ready. Run
// evaluates them in the background every interval, so that /readyz reads
// the last verdict without calling the API server however often it is
// probed, and a change of verdict is logged once, not once per probe.
type Readiness struct {
	log    *slog.Logger
	checks []readinessCheck

	evaluating sync.Mutex // one evaluation at a time: verdicts logged in order
	mu         sync.Mutex
	verdict    error
	reason     string // verdict's text, "" when ready
	evaluated  bool   // a verdict exists
}

type readinessCheck struct {
	name  string
	check func(context.Context) error
}

// errNotChecked is the verdict before the first evaluation.
var errNotChecked = errors.New("readiness not checked yet")

// NewReadiness returns a Readiness without checks (ready once evaluated)
// that logs its changes of verdict to log.
func NewReadiness(log *slog.Logger) *Readiness {
	if log == nil {
		log = slog.Default()
	}
	return &Readiness{log: log}
}

// Add appends a check. check returns nil when its condition holds, else an
// error that says what is missing and what to do about it; it must return
// once its context ends. Add before Run.
func (r *Readiness) Add(name string, check func(context.Context) error) *Readiness {
	r.checks = append(r.checks, readinessCheck{name, check})
	return r
}

// Err is the last verdict: nil when ready, else "NAME: REASON" of the
// first failing check; before the first evaluation, not checked yet.
func (r *Readiness) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.evaluated {
		return errNotChecked
	}
	return r.verdict
}

// Run evaluates the checks now and then every interval until ctx ends;
// each evaluation has an interval to finish.
func (r *Readiness) Run(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, every)
		defer cancel()
		r.Evaluate(ctx)
	}, every)
}

// Evaluate runs the checks once, up to the first that fails, records the
// verdict and returns it. It logs the verdict when it differs from the
// last one: "ready", or "not ready" with the reason, at Warn level but
// for the first verdict (at start a failure such as caches not synced yet
// is expected). Call it out of turn when a condition is known to have
// changed (the caches synced) rather than wait for Run's next tick.
func (r *Readiness) Evaluate(ctx context.Context) error {
	r.evaluating.Lock()
	defer r.evaluating.Unlock()
	var verdict error
	for _, c := range r.checks {
		if err := c.check(ctx); err != nil {
			verdict = fmt.Errorf("%s: %w", c.name, err)
			break
		}
	}
	reason := ""
	if verdict != nil {
		reason = verdict.Error()
	}
	r.mu.Lock()
	first, changed := !r.evaluated, !r.evaluated || reason != r.reason
	r.verdict, r.reason, r.evaluated = verdict, reason, true
	r.mu.Unlock()
	switch {
	case !changed:
	case verdict == nil:
		r.log.Info("ready")
	case first:
		r.log.Info("not ready", "reason", reason)
	default:
		r.log.Warn("not ready", "reason", reason)
	}
	return verdict
}
