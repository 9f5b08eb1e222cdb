package cel

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// scenarioRollouts builds the facts of every golden scenario that runs the
// default strategy (the ones with --policy run a Rego example).
func scenarioRollouts(t *testing.T) map[string][]*facts.Rollout {
	t.Helper()
	scenarios, err := scenario.All("../../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*facts.Rollout{}
	for _, sc := range scenarios {
		if len(sc.Policies) == 0 {
			out[sc.Name] = sc.Rollouts
		}
	}
	return out
}

func regoEngine(t testing.TB) engine.Engine {
	e, err := rego.Load(context.Background(), nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func celEngine(t testing.TB) *Engine {
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func diffDecisions(r *facts.Rollout, want, got *engine.Decisions) string {
	var sb strings.Builder
	for i := range want.Pods {
		if !reflect.DeepEqual(want.Pods[i], got.Pods[i]) {
			fmt.Fprintf(&sb, "pod %s:\n  rego %#v\n  cel  %#v\n", r.Pods[i].Name, want.Pods[i], got.Pods[i])
		}
	}
	if !reflect.DeepEqual(want.Budgets, got.Budgets) {
		fmt.Fprintf(&sb, "budgets:\n  rego %s\n  cel  %s\n", budgetsString(want.Budgets), budgetsString(got.Budgets))
	}
	if want.Pacing != got.Pacing {
		fmt.Fprintf(&sb, "pacing: rego %q cel %q\n", want.Pacing, got.Pacing)
	}
	if want.NodePreparation != got.NodePreparation {
		fmt.Fprintf(&sb, "nodePreparation: rego %q cel %q\n", want.NodePreparation, got.NodePreparation)
	}
	if !reflect.DeepEqual(want.Halt, got.Halt) {
		fmt.Fprintf(&sb, "halt:\n  rego %#v\n  cel  %#v\n", want.Halt, got.Halt)
	}
	if !reflect.DeepEqual(want.Deny, got.Deny) {
		fmt.Fprintf(&sb, "deny:\n  rego %#v\n  cel  %#v\n", want.Deny, got.Deny)
	}
	return sb.String()
}

func budgetsString(bs []engine.Budget) string {
	var parts []string
	for _, b := range bs {
		s := b.Name
		for _, f := range []struct {
			n string
			v *int
		}{{"maxUnavailable", b.MaxUnavailable}, {"maxSurge", b.MaxSurge}, {"maxGroups", b.MaxGroups}} {
			if f.v != nil {
				s += fmt.Sprintf(" %s=%d", f.n, *f.v)
			}
		}
		parts = append(parts, fmt.Sprintf("{%s groupBy=%q pdb=%q advisory=%v source=%q}", s, b.GroupBy, b.PDB, b.Advisory, b.Source))
	}
	return strings.Join(parts, ", ")
}

// TestDefaultsMatchRego: the CEL default strategy answers exactly as
// defaults.rego on every golden scenario and on synthetic snapshots.
func TestDefaultsMatchRego(t *testing.T) {
	re, ce := regoEngine(t), celEngine(t)
	cases := scenarioRollouts(t)
	for _, n := range []int{1000, 5000} {
		rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
		if err != nil {
			t.Fatal(err)
		}
		cases[fmt.Sprintf("synth-%d", n)] = rs
	}
	for name, rs := range cases {
		for _, r := range rs {
			want, err := re.Decide(context.Background(), r)
			if err != nil {
				t.Fatalf("%s: rego: %v", name, err)
			}
			got, err := ce.Decide(context.Background(), r)
			if err != nil {
				t.Fatalf("%s: cel: %v", name, err)
			}
			if d := diffDecisions(r, want, got); d != "" {
				t.Errorf("%s: %s %s/%s: cel and rego disagree:\n%s", name, r.Workload.Kind, r.Workload.Namespace, r.Workload.Name, d)
			}
		}
	}
}

// TestExamplesMatchRego: each example policy's CEL version answers as its
// Rego version on the example's golden scenario.
func TestExamplesMatchRego(t *testing.T) {
	for _, name := range []string{"leader-last", "one-zone-at-a-time"} {
		t.Run(name, func(t *testing.T) {
			dir := "../../../policies/examples/" + name
			b, err := rego.LoadBundle([]string{dir})
			if err != nil {
				t.Fatal(err)
			}
			re, err := rego.New(context.Background(), b, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := Load([]string{dir + "/policy.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			ce, err := New(ps, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := facts.Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), FeatureGates: map[string]bool{"MaxUnavailableStatefulSet": true}}
			snap, _, err := snapshot.LoadFiles([]string{"../../../testdata/scenarios/example-" + name + "/snapshot.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := facts.Build(snap, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				want, err := re.Decide(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ce.Decide(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				if d := diffDecisions(r, want, got); d != "" {
					t.Errorf("%s/%s: cel and rego disagree:\n%s", r.Workload.Kind, r.Workload.Name, d)
				}
			}
		})
	}
}
