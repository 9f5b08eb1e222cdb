package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// liveState is one fresh read, normalised, with the workload's facts.
type liveState struct {
	snap     *snapshot.Snapshot
	rollout  *facts.Rollout
	inFlight map[string]string
	now      time.Time
}

func (e *Executor) read(ctx context.Context) (*liveState, error) {
	return e.readFrom(ctx, e.reader)
}

func (e *Executor) readFrom(ctx context.Context, r live.Reader) (*liveState, error) {
	snap, err := r.Read(ctx, e.opts.Target)
	if err != nil {
		return nil, err
	}
	now := e.now()
	rollout, inFlight, err := live.Observe(snap, e.opts.Target, now, e.opts.Cluster())
	if err != nil {
		return nil, err
	}
	return &liveState{snap: snap, rollout: rollout, inFlight: inFlight, now: now}, nil
}

// budgetUse counts what a budget would hold if the pods in extra were
// disrupted on top of the live state, through the planner's ledger: the
// pods the workload lacks count as unavailable (a deleted pod frees no
// budget until its replacement is available), and so do terminating pods.
func budgetUse(r *facts.Rollout, b plan.Budget, extra map[string]bool) int {
	return plan.Count{Down: func(p *facts.Pod) bool { return extra[p.Name] }, Missing: true}.Use(r, b)
}

// overBudget names the first enforced budget the extra pods would break
// on top of the live state, or "" when every budget holds.
func overBudget(r *facts.Rollout, budgets []plan.Budget, extra map[string]bool) string {
	for _, b := range budgets {
		if b.Advisory || (b.Type != "unavailable" && b.Type != "groups") {
			continue
		}
		if use := budgetUse(r, b, extra); use > b.Limit {
			return fmt.Sprintf("budget %s would be %d/%d", b.Name, use, b.Limit)
		}
	}
	return ""
}
