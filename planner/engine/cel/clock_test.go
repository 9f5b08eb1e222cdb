package cel

import (
	"testing"
)

// A CEL policy's budgets are clock-free unless a budget expression or a
// variable names a clock fact (the gate then keeps refreshing them).
func TestBudgetsIgnoreClock(t *testing.T) {
	tests := []struct {
		name string
		spec string // "" : the defaults alone
		want bool
	}{
		{"the default strategy", "", true},
		{"a zone budget", "  budgets:\n  - name: zones\n    groupBy: \"'zone'\"\n    maxGroups: \"1\"\n", true},
		{"a variable reading readySeconds", "  variables:\n  - name: young\n    expression: pod.readySeconds < 60\n", false},
		{"a variable naming the snapshot time", "  variables:\n  - name: t\n    expression: now\n  budgets:\n  - name: b\n    maxUnavailable: \"1\"\n", false},
		{"a clock fact in the order does not count", "  order:\n  - keys: [pod.readyBucket]\n", true},
		{"a word that contains one does not count", "  variables:\n  - name: known\n    expression: \"'unknown'\"\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*RolloutPolicy
			if tt.spec != "" {
				ps = policy(t, tt.spec)
			}
			e, err := New(ps, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.BudgetsIgnoreClock(); got != tt.want {
				t.Errorf("BudgetsIgnoreClock = %t, want %t", got, tt.want)
			}
		})
	}
}
