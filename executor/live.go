package executor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
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
// disrupted on top of the live state: the unavailable pods (per group when
// the budget groups, plus the PDB's unavailable pods elsewhere), or the
// groups in flight. Pods the workload should have but that do not exist
// (evicted, not yet recreated) count as unavailable: a deleted pod frees
// no budget until its replacement is available. Mirrors plan.inUse.
func budgetUse(r *facts.Rollout, b plan.Budget, extra map[string]bool) int {
	active := 0
	for _, p := range r.Pods {
		if !p.Terminating && !p.Terminal {
			active++
		}
	}
	missing := max(0, r.Workload.Replicas-active)
	down := func(p *facts.Pod) bool { return !p.Available || extra[p.Name] }
	if b.Type == "groups" {
		groups := map[string]bool{}
		for i := range r.Pods {
			if down(&r.Pods[i]) {
				groups[engine.GroupKey(&r.Pods[i], b.GroupBy)] = true
			}
		}
		n := len(groups)
		if missing > 0 {
			n++ // unknown group
		}
		return n
	}
	n := missing
	if b.PDB != "" {
		for _, pdb := range r.PDBs {
			if pdb.Name == b.PDB {
				n += pdb.UnavailableElsewhere
			}
		}
	}
	perGroup := map[string]int{}
	for i := range r.Pods {
		p := &r.Pods[i]
		if !down(p) || (b.PDB != "" && !slices.Contains(p.PDBs, b.PDB)) {
			continue
		}
		perGroup[engine.GroupKey(p, b.GroupBy)]++
	}
	best := 0
	for _, c := range perGroup {
		best = max(best, c)
	}
	return n + best
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
