package live

import (
	"fmt"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Observe builds the facts of the target as every consumer sees them: pods
// being updated in place are not Ready (normalise), whatever their status
// says. It returns the pods in flight, with why. The executor and the gate
// both observe through it, so both count the same pods against a budget. The snapshot's
// pod slice is changed (in-flight pods replaced by copies), not its pods.
// The cluster's version and gates come from opts, whose Now is replaced by now.
func Observe(snap *snapshot.Snapshot, t Target, now time.Time, opts facts.Options) (*facts.Rollout, map[string]string, error) {
	inFlight := normalise(snap, MinReadySeconds(snap, t), now)
	opts.Now = now
	// Only the target's own error fails it: another workload the snapshot
	// holds (a bulk read) has no say in the target's facts.
	rollouts, failed, err := facts.BuildEach(snap, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range failed {
		if f.Kind == t.Kind && f.Namespace == t.Namespace && f.Name == t.Name {
			return nil, nil, f
		}
	}
	for _, r := range rollouts {
		w := r.Workload
		if w.Kind == t.Kind && w.Namespace == t.Namespace && w.Name == t.Name {
			return r, inFlight, nil
		}
	}
	return nil, nil, fmt.Errorf("%s %w", t, capture.ErrNotFound)
}
