package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/facts"
)

// A rollout that cannot start or finish within its budgets carries a
// Stalled (scripts read it, `rollplan plan` exits 4 on it); one that
// completes, or is halted, carries none.
func TestStalled(t *testing.T) {
	unready := func(names ...string) func(*facts.Rollout) {
		return func(r *facts.Rollout) {
			for i := range r.Pods {
				for _, n := range names {
					if r.Pods[i].Name == n {
						r.Pods[i].Ready, r.Pods[i].Available, r.Pods[i].ReadySeconds = false, false, -1
					}
				}
			}
		}
	}
	cases := []struct {
		name, scenario string
		change         func(*facts.Rollout)
		// after and reason of the stall; reason "" for none.
		after, reason string
	}{
		{name: "budget held by a pod out of scope", scenario: "stalled-plan",
			after: "0s", reason: "pod web-4 cannot start without exceeding budget maxUnavailable, and nothing in flight frees it"},
		{name: "OrderedReady waits on an unavailable replica", scenario: "sts-partition-gate-off", change: unready("web-0"),
			after: "0s", reason: "replica(s) web-0 are not available, and an OrderedReady StatefulSet updates nothing"},
		{name: "managed StatefulSet completes", scenario: "sts-ondelete-managed"},
		{name: "Deployment completes", scenario: "deploy-rolling-10-25pct"},
		{name: "halted, not stalled", scenario: "sts-inplaceonly-halt"},
	}
	eng := regoPolicy(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := scenario.Rollouts("../../testdata/scenarios", c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			if c.change != nil {
				c.change(r)
			}
			d, err := eng.Decide(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			wp, _ := Workload(r, d, testOptions)
			switch {
			case c.reason == "" && wp.Stalled != nil:
				t.Errorf("stalled %+v, want none (notes %q)", *wp.Stalled, wp.Notes)
			case c.reason != "" && wp.Stalled == nil:
				t.Errorf("not stalled, want a stall after %s: %s (notes %q)", c.after, c.reason, wp.Notes)
			case c.reason != "" && (wp.Stalled.After != c.after || !strings.HasPrefix(wp.Stalled.Reason, c.reason)):
				t.Errorf("stalled %+v, want after %s: %s...", *wp.Stalled, c.after, c.reason)
			}
		})
	}
}
