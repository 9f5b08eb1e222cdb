package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateBudget(t *testing.T) {
	n := func(v int) *int { return &v }
	tests := []struct {
		name string
		b    Budget
		want []string // nil: valid
	}{
		{"unavailability", Budget{Name: "x", MaxUnavailable: n(1)}, nil},
		{"zone", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "zone"}, nil},
		{"node with maxGroups", Budget{Name: "x", MaxGroups: n(1), GroupBy: "node"}, nil},
		{"label", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "label:topology.kubernetes.io/rack"}, nil},
		{"unknown groupBy", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "rack"}, []string{`budget "x"`, `groupBy "rack"`, `"zone", "node" or "label:<key>"`}},
		{"groupBy in capitals", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "Zone"}, []string{`budget "x"`, `groupBy "Zone"`}},
		{"label without key", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "label:"}, []string{`budget "x"`, `groupBy "label:"`, "empty"}},
		{"label key invalid", Budget{Name: "x", MaxUnavailable: n(1), GroupBy: "label:a b"}, []string{`budget "x"`, `"a b" is not a valid label key`}},
		{"no name", Budget{MaxUnavailable: n(1)}, []string{"no name"}},
		{"negative", Budget{Name: "x", MaxSurge: n(-1)}, []string{`budget "x"`, "maxSurge -1", "greater than or equal to 0"}},
		{"no limit", Budget{Name: "x", GroupBy: "zone"}, []string{`budget "x"`, "sets none of"}},
		{"maxGroups without groupBy", Budget{Name: "x", MaxGroups: n(1)}, []string{`budget "x"`, "maxGroups needs groupBy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateBudget(tt.b)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ValidateBudget: %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateBudget accepted %+v, want an error containing %q", tt.b, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	expired := func(parent context.Context) context.Context {
		ctx, cancel := context.WithTimeout(parent, time.Nanosecond)
		t.Cleanup(cancel)
		<-ctx.Done()
		return ctx
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name        string
		parent, ctx context.Context
		want        bool
	}{
		{"the engine's timeout", context.Background(), expired(context.Background()), true},
		{"running", context.Background(), context.Background(), false},
		{"the caller cancelled", cancelled, expired(cancelled), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Timeout(tt.parent, tt.ctx, "StatefulSet default/web", time.Nanosecond)
			if (err != nil) != tt.want {
				t.Fatalf("Timeout = %v, want an error: %t", err, tt.want)
			}
			if err == nil {
				return
			}
			var te *TimeoutError
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v: want a TimeoutError that is context.DeadlineExceeded", err)
			}
			if want := "policy evaluation for StatefulSet default/web stopped after 1ns (policy timeout)"; err.Error() != want {
				t.Errorf("got %q, want %q", err, want)
			}
		})
	}
}
