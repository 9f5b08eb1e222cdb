package analysis

import (
	"context"
	"testing"
	"time"
)

// fixed answers every measurement with its value.
type fixed float64

func (f fixed) Measure(_ context.Context, m Measurement, _ Target, now time.Time) Result {
	return Result{Name: m.Name, Value: float64(f), Taken: now}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestProviders(t *testing.T) {
	ps := Providers{ProviderPrometheus: fixed(4)}
	if r := ps.Measure(context.Background(), Measurement{Name: "p", Provider: ProviderPrometheus}, Target{}, t0); r.Failed() || r.Value != 4 {
		t.Errorf("prometheus: %+v, want 4", r)
	}
	r := ps.Measure(context.Background(), Measurement{Name: "w", Provider: ProviderWeb}, Target{}, t0)
	if !r.Failed() || r.Error != `measurement "w": provider "web" is not configured` || !r.Taken.Equal(t0) {
		t.Errorf("web: %+v, want an error saying it is not configured", r)
	}
}
