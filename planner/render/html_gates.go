package render

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/plan"
)

// stopMarkers are the timeline's marks of where a rollout waits or stops:
// one per wave gate (at the wave's end, classed by its status), and a
// halt or a rollback (at the start when no wave runs, else after the last
// wave the plan keeps).
func stopMarkers(wp *plan.WorkloadPlan, spans []span, ts timeScale) []marker {
	var out []marker
	for i, w := range wp.Waves {
		if g := w.Gate; g != nil && i < len(spans) {
			out = append(out, marker{Class: "gate gate-" + g.Status, Label: g.Status,
				Title: fmt.Sprintf("after wave %d, then %s", w.Index, GateLine(g)), X: ts.x(spans[i].end)})
		}
	}
	end := 0.0
	if n := len(wp.Waves); n > 0 && n <= len(spans) {
		end = ts.x(spans[n-1].end)
	}
	if len(wp.Halted) > 0 {
		x := 0.0 // a halt rule: no wave starts
		if gated(wp) {
			x = end
		}
		out = append(out, marker{Class: "halt", Label: "halted", Title: "halted: " + strings.Join(wp.Halted, "; "), X: x})
	}
	if rb := wp.Rollback; rb != nil {
		out = append(out, marker{Class: "rollback", Label: "rolls back", Title: fmt.Sprintf("rolls back to %s after wave %d: %s", rb.ToRevision, rb.AfterWave, rb.Reason), X: end})
	}
	return out
}

// gated: some wave of the plan has a gate.
func gated(wp *plan.WorkloadPlan) bool {
	for _, w := range wp.Waves {
		if w.Gate != nil {
			return true
		}
	}
	return false
}
