package analysis

import (
	"context"
	"fmt"
	"time"
)

// Providers picks a measurement's provider by its Provider name; it is a
// Provider itself.
type Providers map[string]Provider

// Measure hands m to the provider it names; one not configured is an error
// result.
func (ps Providers) Measure(ctx context.Context, m Measurement, t Target, now time.Time) Result {
	p, ok := ps[m.Provider]
	if !ok || p == nil {
		return failed(m, "", now, fmt.Errorf("measurement %q: provider %q is not configured", m.Name, m.Provider))
	}
	return p.Measure(ctx, m, t, now)
}
