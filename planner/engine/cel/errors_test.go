package cel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
)

// Budgets the contract does not allow, and answers of the wrong type, are
// errors naming the policy file, the field, the budget and the workload in
// policy terms, as the Rego engine's are (engine.ValidateBudget).
func TestDecideBudgetErrors(t *testing.T) {
	const where = "policy p.yaml (RolloutPolicy p): spec.budgets[0]"
	const wl = " for StatefulSet prod/db"
	tests := []struct {
		name, spec, want string
	}{
		{"groupBy not in the contract", "  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: \"'rack'\"\n",
			where + `: budget "x": groupBy "rack": want "zone", "node" or "label:<key>"` + wl},
		{"groupBy label without key", "  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: \"'label:'\"\n",
			where + `: budget "x": groupBy "label:": the label key after "label:" is empty` + wl},
		{"maxGroups without groupBy", "  budgets:\n  - name: x\n    maxGroups: \"1\"\n",
			where + `: budget "x": maxGroups needs groupBy ("zone", "node" or "label:<key>")` + wl},
		{"empty name", "  budgets:\n  - nameExpression: \"''\"\n    maxUnavailable: \"1\"\n",
			where + ": a budget has no name: give every budget a non-empty name" + wl},
		{"fractional limit", "  params: {limit: 1.5}\n  budgets:\n  - name: x\n    maxUnavailable: params.limit\n",
			where + ".maxUnavailable: want a non-negative integer, got 1.5" + wl},
		{"percentage limit", "  params: {limit: \"50%\"}\n  budgets:\n  - name: x\n    maxSurge: params.limit\n",
			where + `.maxSurge: want a non-negative integer, got "50%"` + wl},
		{"negative limit", "  budgets:\n  - name: x\n    maxUnavailable: \"-1\"\n",
			where + ".maxUnavailable: want a non-negative integer up to 2147483647, got -1" + wl},
		{"forEach not a list", "  params: {items: {a: 1}}\n  budgets:\n  - forEach: params.items\n    nameExpression: \"'x'\"\n    maxUnavailable: \"1\"\n",
			where + ".forEach: want a list, got a map" + wl},
		{"groupBy not a string", "  params: {by: 1}\n  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: params.by\n",
			where + ".groupBy: want a string, got 1" + wl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(context.Background(), rollout())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// An evaluation the policy timeout stops says so, naming the workload.
func TestDecideTimeout(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		timeout time.Duration
		want    string
		isTO    bool
	}{
		{"the policy timeout", context.Background(), time.Nanosecond, "policy evaluation for StatefulSet prod/db stopped after 1ns (policy timeout)", true},
		{"cancelled by the caller", cancelled, time.Minute, "policy evaluation for StatefulSet prod/db stopped: context canceled", false},
		{"cancelled, no timeout", cancelled, 0, "policy evaluation for StatefulSet prod/db stopped: context canceled", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(nil, Options{Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(tt.ctx, rollout())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			var te *engine.TimeoutError
			if errors.As(err, &te) != tt.isTO {
				t.Errorf("errors.As(TimeoutError) = %t, want %t", !tt.isTO, tt.isTO)
			}
		})
	}
}

// Rego files handed to the CEL engine are named as such, not parsed as
// YAML; a directory without CEL policies is not the default strategy.
func TestLoadNotCEL(t *testing.T) {
	dir := t.TempDir()
	rego := filepath.Join(dir, "policy.rego")
	if err := os.WriteFile(rego, []byte("package rollplan.strategy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"a Rego file", []string{rego}, "policy " + rego + " is a Rego file, not a CEL policy (RolloutPolicy YAML): Rego policies run on the rego engine"},
		{"a directory of Rego files", []string{dir}, "policy " + dir + ": no CEL policy files (.yaml, .yml, .json) found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.paths)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "json:") {
				t.Errorf("error %q shows Go internals", err)
			}
		})
	}
}
