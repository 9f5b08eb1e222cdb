package rego

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// TestDecideBudgetsEqualsDecide: the gate's budgets-only evaluation answers
// what the full evaluation answers, for every workload of every scenario,
// under the default strategy and under example policies that add budgets.
func TestDecideBudgetsEqualsDecide(t *testing.T) {
	dirs, err := filepath.Glob("../../../testdata/scenarios/*/snapshot.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, policy := range [][]string{nil, {"../../../policies/examples/one-zone-at-a-time"}, {"../../../policies/examples/leader-last"}} {
		b, err := LoadBundle(policy)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := New(context.Background(), b, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		compared := 0
		for _, path := range dirs {
			snap, _, err := snapshot.LoadFiles([]string{path})
			if err != nil {
				t.Fatal(err)
			}
			rollouts, err := facts.Build(snap, facts.Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), FeatureGates: map[string]bool{"MaxUnavailableStatefulSet": true}})
			if err != nil {
				continue // scenarios of bad input
			}
			for _, r := range rollouts {
				full, err := eng.Decide(context.Background(), r)
				if err != nil {
					continue // halting or broken policies are covered elsewhere
				}
				got, err := engine.Budgets(context.Background(), eng, r)
				if err != nil {
					t.Fatalf("%s %s: budgets only: %v", path, r.Workload.Name, err)
				}
				if !reflect.DeepEqual(got, full.Budgets) {
					t.Errorf("%s %s (policy %v): budgets only %+v, full %+v", path, r.Workload.Name, policy, got, full.Budgets)
				}
				compared++
			}
		}
		if compared < 20 {
			t.Errorf("policy %v: compared only %d workloads", policy, compared)
		}
	}
}
