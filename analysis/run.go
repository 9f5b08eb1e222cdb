package analysis

import (
	"context"
	"fmt"
	"time"
)

// Clock is the time Run reads and waits on; k8s.io/utils/clock's real and
// fake clocks have this shape.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Run takes m Count times, the i-th (from 0) Interval*i after the first, and
// returns every result, each with its time or its error. A measurement that
// takes longer than Interval delays the next one, which then follows at
// once; none is skipped. Cancelling ctx stops Run between measurements (and
// the one in flight, through the provider): it returns the results taken
// so far and ctx's error. An invalid m is an error before anything is
// measured.
func Run(ctx context.Context, p Provider, m Measurement, t Target, clock Clock) ([]Result, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	results := make([]Result, 0, m.Count)
	start := clock.Now()
	for i := range m.Count {
		if i > 0 {
			if wait := start.Add(time.Duration(i) * m.Interval).Sub(clock.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return results, ctx.Err()
				case <-clock.After(wait):
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return results, err
		}
		results = append(results, p.Measure(ctx, m, t, clock.Now()))
	}
	return results, nil
}

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
