package live

import (
	"errors"
	"fmt"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/request"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Observe builds the facts of the target as every consumer sees them: pods
// being updated in place are not Ready (normalise), whatever their status
// says. It returns the pods in flight, with why. The executor and the gate
// both observe through it, so both count the same pods against a budget. The snapshot's
// pod slice is changed (in-flight pods replaced by copies), not its pods.
// It builds its facts from a planning request, as plan and test do; the
// cluster's version and gates come from opts (its Now is not read: now is).
func Observe(snap *snapshot.Snapshot, t Target, now time.Time, opts facts.Options) (*facts.Rollout, map[string]string, error) {
	inFlight := normalise(snap, MinReadySeconds(snap, t), now)
	// Only the target's own error fails it: another workload the snapshot
	// holds (a bulk read) has no say in the target's facts.
	req := &request.Request{Snapshot: snap, Now: now, Cluster: opts,
		Workload: request.Workload{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}}
	f, err := req.Facts()
	var noMatch *request.NoMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, nil, fmt.Errorf("%s %w", t, capture.ErrNotFound)
	case err != nil:
		return nil, nil, err
	case len(f.Failed) > 0:
		return nil, nil, f.Failed[0]
	case len(f.Rollouts) == 0:
		return nil, nil, fmt.Errorf("%s %w", t, capture.ErrNotFound)
	}
	return f.Rollouts[0], inFlight, nil
}
