package render

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/plan"
)

// GateLine says on one line what the next wave waits for after a wave,
// and the gate's status: "soak 2m, measure error-rate, latency-p99 (3x
// every 30s): pending", or the verdict with its message.
func GateLine(g *plan.Gate) string {
	parts := []string{"soak " + g.Soak}
	if len(g.Measurements) > 0 {
		names := make([]string, len(g.Measurements))
		for i, m := range g.Measurements {
			names[i] = m.Name
		}
		m := g.Measurements[0]
		parts = append(parts, fmt.Sprintf("measure %s (%dx every %s)", strings.Join(names, ", "), m.Count, m.Interval))
	}
	line := strings.Join(parts, ", ") + ": " + g.Status
	switch g.Status {
	case plan.GatePending:
	case plan.GateFailed:
		line += fmt.Sprintf(" (onFail %s): %s", g.OnFail, g.Message)
	default:
		line += ": " + g.Message
	}
	return line
}
