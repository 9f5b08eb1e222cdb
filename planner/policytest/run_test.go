package policytest

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
)

// fakeEngine answers the same for every workload: every pod in scope,
// Recreate, ordered by name index.
type fakeEngine struct{}

func (fakeEngine) Name() string   { return "fake" }
func (fakeEngine) Digest() string { return "sha256:fake" }
func (fakeEngine) Decide(_ context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	one := 1
	d := &engine.Decisions{
		Budgets: []engine.Budget{{Name: "b", MaxUnavailable: &one, Source: "fake"}},
		Pacing:  engine.PacingRolling,
		Halt:    []string{},
		Deny:    []string{"no"},
	}
	for i := range r.Pods {
		d.Pods = append(d.Pods, engine.PodDecision{InScope: true, Action: engine.Recreate, Reasons: []string{"fake"}, Order: []any{int64(i)}})
	}
	return d, nil
}

// fakeEngines answers every suite with fakeEngine.
func fakeEngines(context.Context, string, []string, engines.Options) (engine.Engine, error) {
	return fakeEngine{}, nil
}

// inlineSuite is the passing fixture with an inline two-pod StatefulSet.
func inlineSuite(t *testing.T) *Suite {
	t.Helper()
	suites, err := LoadFile(filepath.Join("..", "..", "testdata", "policytest", "yaml-pass", "default_strategy_test.yaml"))
	if err != nil || len(suites) != 1 {
		t.Fatalf("load fixture: %v", err)
	}
	return suites[0]
}

func TestRunnerEngineFactory(t *testing.T) {
	s := inlineSuite(t)
	s.File = filepath.Join("dir", "x_test.yaml")
	type call struct {
		kind  string
		paths []string
	}
	var calls []call
	r := &Runner{
		open: func(_ context.Context, kind string, paths []string, _ engines.Options) (engine.Engine, error) {
			calls = append(calls, call{kind, paths})
			return nil, errors.New("boom")
		},
	}
	for _, c := range []struct {
		policy Paths
		engine string
		want   call
	}{
		{nil, "", call{engine.Rego, []string{}}},
		{Paths{"p.yaml"}, "", call{engine.CEL, []string{filepath.Join("dir", "p.yaml")}}},
		{Paths{"../p"}, "native", call{engine.Native, []string{"p"}}},
	} {
		calls = nil
		s.Spec.Policy, s.Spec.Engine = c.policy, c.engine
		res := r.Run(context.Background(), s)
		if len(calls) != 1 || calls[0].kind != c.want.kind || !reflect.DeepEqual(calls[0].paths, c.want.paths) {
			t.Errorf("policy %q engine %q: factory calls %+v, want %+v", c.policy, c.engine, calls, c.want)
		}
		if len(res) != 1 || res[0].Status != Error || !strings.Contains(res[0].Detail, "engine "+c.want.kind+", policy ") || !strings.HasSuffix(res[0].Detail, ": boom") {
			t.Errorf("an engine that does not build: %+v", res)
		}
	}
}

func TestRunnerDecisions(t *testing.T) {
	s := inlineSuite(t)
	r := &Runner{open: fakeEngines}
	five, reason := []any{5}, "nope"
	one, two := 1, 2
	s.Spec.Tests[0].Expect = Expect{Decisions: map[string]WorkloadDecisions{
		"StatefulSet/default/db": {
			Pods: map[string]PodDecision{
				"db-0": {Scope: ScopeIn, Action: "Recreate", Reasons: &[]string{"fake"}, Order: &[]any{0}}, // equal: 0 == int64(0)
				"db-1": {Scope: ScopeHeld, HeldReason: &reason, Order: &five},
				"db-9": {Scope: ScopeIn},
			},
			Budgets: &[]engine.Budget{{Name: "b", MaxUnavailable: &one, Source: "fake"}, {Name: "c", MaxSurge: &two, Source: "a budget the engine does not give"}},
			Pacing:  "rolling",
			Halt:    &[]string{},
			Deny:    &[]string{},
		},
		"Deployment/default/api": {Pacing: "wave"},
	}}
	res := r.Run(context.Background(), s)
	if len(res) != 1 || res[0].Status != Fail {
		t.Fatalf("want one failure, got %+v", res)
	}
	want := `decisions[Deployment/default/api]: no such workload in the plan (it has: StatefulSet/default/db)
decisions[StatefulSet/default/db].pods[db-1].scope:
  want: "held"
  got:  "in"
decisions[StatefulSet/default/db].pods[db-1].heldReason:
  want: "nope"
  got:  ""
decisions[StatefulSet/default/db].pods[db-1].order:
  want: [5]
  got:  [1]
decisions[StatefulSet/default/db].pods[db-9]: no such pod in the workload (it has: db-0, db-1)
decisions[StatefulSet/default/db].budgets (- want, + got):
  {"maxUnavailable":1,"name":"b","source":"fake"}
- {"maxSurge":2,"name":"c","source":"a budget the engine does not give"}
decisions[StatefulSet/default/db].deny:
  want: []
  got:  ["no"]`
	if res[0].Detail != want {
		t.Errorf("detail:\n%s\nwant:\n%s", res[0].Detail, want)
	}
	if res[0].Location != `../../testdata/policytest/yaml-pass/default_strategy_test.yaml: test "statefulset highest ordinal first" (spec.tests[0])` {
		t.Errorf("location %q", res[0].Location)
	}

	// The fixture's own expectations hold under the default strategy only:
	// with the fake engine the plan differs, and the diff says where.
	s = inlineSuite(t)
	s.Spec.Tests[0].Expect.Decisions = nil
	res = r.Run(context.Background(), s)
	// The fixture's StatefulSet is not managed, so its controller's order,
	// pacing and budgets are planned whatever the engine says; the fake
	// engine's reasons and denial still show.
	if res[0].Status != Fail || !strings.Contains(res[0].Detail, "-             - spec.containers[app].image changed\n+             - fake") || !strings.Contains(res[0].Detail, "+   denied:\n+     - no") {
		t.Errorf("plan diff:\n%s", res[0].Detail)
	}
}

func TestRunnerSnapshotErrors(t *testing.T) {
	s := inlineSuite(t)
	r := &Runner{open: fakeEngines}
	s.Spec.Tests[0].Objects = nil
	s.Spec.Tests[0].Snapshot = Paths{"missing.yaml"}
	res := r.Run(context.Background(), s)
	if res[0].Status != Error || !strings.Contains(res[0].Detail, "snapshot: ../../testdata/policytest/yaml-pass/missing.yaml: no such file or directory") {
		t.Errorf("missing snapshot: %+v", res[0])
	}
	s = inlineSuite(t)
	s.Spec.Tests[0].Objects[0] = []byte(`{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"replicas": "two"}}`)
	res = r.Run(context.Background(), s)
	if res[0].Status != Error || !strings.Contains(res[0].Detail, "objects: document 1, items[0]: StatefulSet db: field spec.replicas") {
		t.Errorf("bad inline object: %+v", res[0])
	}
}
