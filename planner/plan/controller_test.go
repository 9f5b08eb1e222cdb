package plan

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
)

// regoPolicy compiles an entry policy (package rollplan.strategy) given as
// source; "" is the default strategy.
func regoPolicy(t testing.TB, src string) engine.Engine {
	t.Helper()
	var paths []string
	if src != "" {
		f := filepath.Join(t.TempDir(), "policy.rego")
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = []string{f}
	}
	e, err := rego.Load(context.Background(), paths, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A workload rollplan does not drive is planned as its controller rolls it
// out, whatever the policy says, and the plan warns about what the policy
// asked that the controller does not do. A managed one follows the policy.
func TestControllerDrivenWorkloads(t *testing.T) {
	const (
		ascending = `package rollplan.strategy
order(p) := [p.ordinal]
`
		leaderLast = `package rollplan.strategy
import data.rollplan.defaults
order(p) := array.concat([to_number(object.get(p.labels, "role", "") == "leader")], defaults.order(p))
`
		zoneOnly = `package rollplan.strategy
budgets := [{"name": "x", "maxUnavailable": 1, "groupBy": "zone"}]
`
		recreateWaves = `package rollplan.strategy
pacing := "wave"
`
		oneAtATime = `package rollplan.strategy
import data.rollplan.defaults
budgets := array.concat(defaults.budgets, [{"name": "one", "maxUnavailable": 1}])
`
	)
	cases := []struct {
		name     string
		scenario string
		policy   string
		// asDefault: the waves are the default strategy's (the controller's).
		asDefault bool
		// warn: the plan's warnings hold these; none when empty.
		warn []string
		// advisory: budgets the plan lists as advisory.
		advisory []string
	}{
		{
			// Native Parallel, MaxUnavailableStatefulSet off: the controller goes
			// from the highest ordinal; the policy's ascending order once made a
			// wave of two pods under a budget of one.
			name: "native StatefulSet, policy order", scenario: "sts-parallel-gate-off-unready-old-pod", policy: ascending,
			asDefault: true, warn: []string{"StatefulSet controller rolls this workload out by its own order", `rollplan.dev/managed="true" with updateStrategy OnDelete`},
		},
		{
			name: "native StatefulSet, policy pacing", scenario: "sts-partition-parallel-gate-on", policy: recreateWaves,
			asDefault: true, warn: []string{"by its own pacing"},
		},
		{
			// A Deployment's policy without the maxSurge and maxUnavailable
			// budgets once planned "ScaleReplicaSet 0->0".
			name: "native Deployment, policy drops its budgets", scenario: "deploy-rolling-10-25pct", policy: zoneOnly,
			asDefault: true, warn: []string{"by its own budgets", `budget(s) "x" are advisory`}, advisory: []string{"x"},
		},
		{
			// The controller's maxUnavailable 2 recreates two pods a wave:
			// each wave breaks the policy's budget of one, and the plan says so.
			name: "native DaemonSet, tighter policy budget", scenario: "ds-maxunavailable-percent", policy: oneAtATime,
			asDefault: true, advisory: []string{"one"},
			warn: []string{`budget(s) "one" are advisory`, `wave(s) 1, 2, 3 leave more pods unavailable than budget "one" allows (1): the DaemonSet controller does not pace by it`},
		},
		{
			// The same for a Deployment: its simulation once checked PDBs only.
			name: "native Deployment, tighter policy budget", scenario: "deploy-rolling-10-25pct", policy: oneAtATime,
			asDefault: true, advisory: []string{"one"},
			warn: []string{`budget(s) "one" are advisory`, `wave(s) 1 (2 unavailable), 2 (2 unavailable), 3 (2 unavailable) leave more pods unavailable than budget "one" allows (1): the Deployment controller does not pace by it`},
		},
		{
			name: "native Deployment, default strategy", scenario: "deploy-rolling-10-25pct",
			asDefault: true,
		},
		{
			// Managed (OnDelete, rollplan.dev/managed): rollplan apply follows
			// the policy, and so does the plan.
			name: "managed StatefulSet, leader last", scenario: "example-leader-last", policy: leaderLast,
		},
	}
	ctx := context.Background()
	defaults := regoPolicy(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := scenario.Rollouts("../../testdata/scenarios", c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			e := regoPolicy(t, c.policy)
			d, err := e.Decide(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			got, det := Workload(r, d, testOptions)
			dd, err := defaults.Decide(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Workload(r, dd, testOptions)
			// The schedule: a policy's own budgets add their use to each
			// wave (Wave.Budgets), not a step.
			if same := reflect.DeepEqual(schedule(got.Waves), schedule(want.Waves)); same != c.asDefault {
				t.Errorf("waves the same as the default strategy's: %v, want %v\n got: %+v\nwant: %+v", same, c.asDefault, got.Waves, want.Waves)
			}
			warnings := strings.Join(got.Warnings, "\n")
			for _, w := range c.warn {
				if !strings.Contains(warnings, w) {
					t.Errorf("warnings lack %q:\n%s", w, warnings)
				}
			}
			if len(c.warn) == 0 && strings.Contains(warnings, "not managed by rollplan") {
				t.Errorf("unexpected warning:\n%s", warnings)
			}
			var advisory []string
			for _, b := range got.Budgets {
				if b.Advisory {
					advisory = append(advisory, b.Name)
				}
			}
			if !reflect.DeepEqual(advisory, c.advisory) {
				t.Errorf("advisory budgets %v, want %v", advisory, c.advisory)
			}
			// Explain and policy tests still see the policy's own answers.
			if det.Decisions != d {
				t.Error("the detail does not hold the policy's decisions")
			}
			if c.name == "native StatefulSet, policy order" && len(det.Overrides) == 0 {
				t.Error("no pod names the order it was given instead of the policy's")
			}
		})
	}
}

// No wave of a controller-driven workload breaks a budget the controller
// paces by, whatever order the policy asks for.
func TestControllerDrivenWavesKeepBudget(t *testing.T) {
	rs, err := scenario.Rollouts("../../testdata/scenarios", "sts-parallel-gate-off-unready-old-pod")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	// The highest ordinal last: the controller's first pod.
	e := regoPolicy(t, "package rollplan.strategy\norder(p) := [to_number(p.ordinal == 4), 0 - p.ordinal]\n")
	d, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	wp, _ := Workload(r, d, testOptions)
	for _, w := range wp.Waves {
		if len(w.Actions) > 1 {
			t.Errorf("wave %d has %d actions under maxUnavailable 1: %+v", w.Index, len(w.Actions), w.Actions)
		}
	}
}

// A managed workload that its controller rolls all the same — a
// StatefulSet left at updateStrategy RollingUpdate (rollplan apply refuses
// it), a Deployment whose rollout falls back to the upstream rolling
// update — is planned as the controller rolls it: a pod the policy holds is
// not shown held while the controller replaces it.
func TestManagedButControllerDriven(t *testing.T) {
	const pinOrdinal4 = `package rollplan.strategy
import data.rollplan.defaults
scope(p) := {"in": false, "reason": "pinned"} if p.ordinal == 4 else := defaults.scope(p)
`
	cases := []struct {
		name, scenario, kind, policy string
		// managed: mark the workload managed (the rollplan.dev/managed annotation).
		managed bool
		warn    string
	}{
		{name: "StatefulSet RollingUpdate", scenario: "sts-partition-parallel-gate-on", kind: "StatefulSet", policy: pinOrdinal4, managed: true,
			warn: "managed, but updateStrategy RollingUpdate: rollplan apply leaves it to its controller: the StatefulSet controller rolls this workload out by its own scope"},
		{name: "Deployment falling back", scenario: "stall-event-due-now", kind: "Deployment", policy: `package rollplan.strategy
import data.rollplan.defaults
scope(p) := {"in": false, "reason": "pinned"} if p.name == input.pods[0].name else := defaults.scope(p)
`,
			warn: "managed, but the rollout falls back to the upstream rolling update (not every pod goes in place): the Deployment controller rolls this workload out by its own scope"},
	}
	ctx := context.Background()
	defaults := regoPolicy(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := scenario.Rollouts("../../testdata/scenarios", c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			var r *facts.Rollout
			for _, x := range rs {
				if x.Workload.Kind == c.kind {
					r = x
				}
			}
			if r == nil {
				t.Fatalf("no %s in %s", c.kind, c.scenario)
			}
			if c.managed {
				r.Workload.Managed = true
			}
			if !r.Workload.Managed {
				t.Fatalf("%s is not managed", c.scenario)
			}
			// What the controller does: the default strategy's plan of the
			// workload as if unmanaged (a Deployment's fallback: the default
			// strategy's own plan, which falls back too).
			native := *r
			if c.kind != "Deployment" {
				native.Workload.Managed = false
			}
			dd, err := defaults.Decide(ctx, &native)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Workload(&native, dd, testOptions)
			if len(want.Waves) == 0 {
				t.Fatal("the controller's plan has no wave: pick another scenario")
			}

			d, err := regoPolicy(t, c.policy).Decide(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for i := range d.Pods {
				if !r.Pods[i].Updated && !d.Pods[i].InScope {
					held++
				}
			}
			if held == 0 {
				t.Fatal("the policy holds no pod: the test would prove nothing")
			}
			got, det := Workload(r, d, testOptions)
			if !reflect.DeepEqual(got.Waves, want.Waves) {
				t.Errorf("waves differ from the controller's\n got: %+v\nwant: %+v", got.Waves, want.Waves)
			}
			if !reflect.DeepEqual(got.Held, want.Held) {
				t.Errorf("held %+v, want the controller's %+v", got.Held, want.Held)
			}
			if w := strings.Join(got.Warnings, "\n"); !strings.Contains(w, c.warn) {
				t.Errorf("warnings lack %q:\n%s", c.warn, w)
			}
			if len(det.Overrides) == 0 {
				t.Error("no pod names the scope it was given instead of the policy's")
			}
		})
	}
}

// Two budgets of one name are told apart by nothing in the plan: warn.
func TestDuplicateBudgetNamesWarn(t *testing.T) {
	rs, err := scenario.Rollouts("../../testdata/scenarios", "example-leader-last")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy string
		warn   bool
	}{
		{"package rollplan.strategy\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": 1}, {\"name\": \"x\", \"maxUnavailable\": 2, \"groupBy\": \"zone\"}]\n", true},
		{"package rollplan.strategy\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": 1}, {\"name\": \"y\", \"maxUnavailable\": 2, \"groupBy\": \"zone\"}]\n", false},
	} {
		d, err := regoPolicy(t, c.policy).Decide(context.Background(), rs[0])
		if err != nil {
			t.Fatal(err)
		}
		wp, _ := Workload(rs[0], d, testOptions)
		got := strings.Contains(strings.Join(wp.Warnings, "\n"), `2 budgets are named "x": the plan lists budgets by name, so rename all but one in the policy`)
		if got != c.warn {
			t.Errorf("policy %q: warned %v, want %v: %q", c.policy, got, c.warn, wp.Warnings)
		}
	}
}

// schedule: the waves without the use of each budget in them.
func schedule(waves []Wave) []Wave {
	out := slices.Clone(waves)
	for i := range out {
		out[i].Budgets = nil
	}
	return out
}
