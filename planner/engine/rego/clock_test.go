package rego

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The gate keeps a workload's budgets without rebuilding them as time
// passes only when the budgets rule reaches no clock fact. The analysis
// must see through helpers and imports, and err towards "reads the clock".
func TestBudgetsIgnoreClock(t *testing.T) {
	entry := func(body string) string {
		return "package rollplan.strategy\n\nimport data.rollplan.defaults\n\n" + body
	}
	tests := []struct {
		name   string
		policy []string // files; nil: the default strategy
		want   bool
	}{
		{"the default strategy", nil, true},
		{"an example policy", []string{"../../../policies/examples/one-zone-at-a-time"}, true},
		{"budgets read readySeconds directly", []string{entry(`budgets := [{"name": "young", "maxUnavailable": count([p | some p in input.pods; p.readySeconds < 60])}]`)}, false},
		{"through a helper rule", []string{entry("budgets := [{\"name\": \"b\", \"maxUnavailable\": fresh}]\n\nfresh := count([p | some p in input.pods; old(p)])\n\nold(p) if p.unavailableSeconds > 30\n")}, false},
		{"the clock itself", []string{entry(`budgets := [{"name": "night", "maxUnavailable": time.now_ns() % 2}]`)}, false},
		{"the snapshot time", []string{entry(`budgets := [{"name": "t", "maxUnavailable": count(input.now)}]`)}, false},
		{"a clock fact elsewhere does not count", []string{entry("budgets := defaults.budgets\n\norder(p) := [p.readyBucket, p.name]\n")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := tt.policy
			if len(paths) > 0 && strings.HasPrefix(paths[0], "package ") {
				f := filepath.Join(t.TempDir(), "policy.rego")
				if err := os.WriteFile(f, []byte(paths[0]), 0o644); err != nil {
					t.Fatal(err)
				}
				paths = []string{f}
			}
			b, err := LoadBundle(paths)
			if err != nil {
				t.Fatal(err)
			}
			e, err := New(context.Background(), b, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.BudgetsIgnoreClock(); got != tt.want {
				t.Errorf("BudgetsIgnoreClock = %t, want %t", got, tt.want)
			}
		})
	}
}
