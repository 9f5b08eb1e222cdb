package native

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// Builders after policies/defaults_test.rego: base_pod, base_input and the
// per-kind inputs.

func basePod(name string) facts.Pod {
	return facts.Pod{
		Name: name, UID: "u-" + name, Revision: "web-1", Ordinal: -1, Index: -1,
		Node: "n1", Zone: "z1", Phase: "Running", Scheduled: true, Ready: true,
		ReadySeconds: 100, Available: true, Owner: "web-1", Labels: map[string]string{},
		Colocated: 1, ReadyBucket: 36, CreatedBucket: 40, Changes: []facts.Change{}, PDBs: []string{},
	}
}

func baseRollout() *facts.Rollout {
	return &facts.Rollout{
		SchemaVersion: facts.SchemaVersion,
		Now:           "2026-11-01T00:00:00Z",
		FeatureGates:  map[string]bool{"MaxUnavailableStatefulSet": false},
		Workload: facts.Workload{
			Kind: "Deployment", Namespace: "default", Name: "web", Replicas: 10,
			ProgressDeadlineSeconds: 600, PodUpdatePolicy: "Recreate",
			CurrentRevision: "web-1", UpdateRevision: "web-2",
			Strategy: facts.Strategy{
				Type: "RollingUpdate", MaxSurge: "25%", MaxUnavailable: "25%",
				MaxSurgeSource:       "spec.strategy.rollingUpdate.maxSurge",
				MaxUnavailableSource: "spec.strategy.rollingUpdate.maxUnavailable",
			},
		},
		Pods:      []facts.Pod{},
		PDBs:      []facts.PDB{},
		Revisions: []facts.Revision{},
	}
}

func deployment(surge, unavailable any, d int) *facts.Rollout {
	r := baseRollout()
	r.Workload.Replicas = d
	r.Workload.Strategy = facts.Strategy{Type: "RollingUpdate", MaxSurge: surge, MaxUnavailable: unavailable}
	return r
}

func daemonSet(surge, unavailable any, desired int) *facts.Rollout {
	r := deployment(surge, unavailable, desired)
	r.Workload.Kind = "DaemonSet"
	return r
}

func statefulSet(unavailable any, n int, gate bool) *facts.Rollout {
	r := deployment(nil, unavailable, n)
	r.Workload.Kind = "StatefulSet"
	r.Workload.PodManagementPolicy = "Parallel"
	r.FeatureGates["MaxUnavailableStatefulSet"] = gate
	return r
}

func with(r *facts.Rollout, f func(r *facts.Rollout)) *facts.Rollout { f(r); return r }

func withPods(r *facts.Rollout, pods ...facts.Pod) *facts.Rollout {
	r.Pods = append(r.Pods, pods...)
	return r
}

func podWith(name string, f func(p *facts.Pod)) facts.Pod {
	p := basePod(name)
	f(&p)
	return p
}

func mu(n int, source string) engine.Budget {
	return engine.Budget{Name: "maxUnavailable", MaxUnavailable: &n, Source: source}
}

func ms(n int, source string) engine.Budget {
	return engine.Budget{Name: "maxSurge", MaxSurge: &n, Source: source}
}

func pdb(name string, n int, advisory bool, source string) engine.Budget {
	return engine.Budget{Name: "pdb/" + name, MaxUnavailable: &n, PDB: name, Advisory: advisory, Source: source}
}

const (
	depMU = "spec.strategy.rollingUpdate.maxUnavailable"
	depMS = "spec.strategy.rollingUpdate.maxSurge"
	dsMU  = "spec.updateStrategy.rollingUpdate.maxUnavailable"
	dsMS  = "spec.updateStrategy.rollingUpdate.maxSurge"
	stsMU = dsMU
)

// decide runs the native engine, requires parity with Rego, and returns the
// native decisions (nil when both fail).
func decide(t *testing.T, r *facts.Rollout) *engine.Decisions {
	t.Helper()
	return requireParity(t, r)
}

func wantBudgets(t *testing.T, d *engine.Decisions, want ...engine.Budget) {
	t.Helper()
	if want == nil {
		want = []engine.Budget{}
	}
	if !reflect.DeepEqual(d.Budgets, want) {
		t.Errorf("budgets:\n  got  %s\n  want %s", fmtBudgets(d.Budgets), fmtBudgets(want))
	}
}

func wantHalt(t *testing.T, d *engine.Decisions, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(d.Halt, want) {
		t.Errorf("halt:\n  got  %#v\n  want %#v", d.Halt, want)
	}
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name string
		r    *facts.Rollout
		want []engine.Budget
	}{
		// Rounding per kind: Deployment surge up, unavailable down.
		{"deployment 25% of 10", deployment("25%", "25%", 10), []engine.Budget{
			mu(2, depMU+"=25% of 10 = 2.5, floor: 2"), ms(3, depMS+"=25% of 10 = 2.5, ceil: 3")}},
		{"deployment 39% of 10 (D2)", deployment("39%", "39%", 10), []engine.Budget{
			mu(3, depMU+"=39% of 10 = 3.9, floor: 3"), ms(4, depMS+"=39% of 10 = 3.9, ceil: 4")}},
		// DaemonSet: both up.
		{"daemonset 25% of 5", daemonSet(nil, "25%", 5), []engine.Budget{
			mu(2, dsMU+"=25% of 5 = 1.25, ceil: 2"), ms(0, dsMS+" unset: default 0")}},
		{"daemonset surge 50% of 2 (S6)", daemonSet("50%", 0, 2), []engine.Budget{
			mu(0, dsMU+"=0"), ms(1, dsMS+"=50% of 2 = 1, ceil: 1")}},
		// StatefulSet, gate on: down, at least 1.
		{"statefulset 40% of 6", statefulSet("40%", 6, true), []engine.Budget{mu(2, stsMU+"=40% of 6 = 2.4, floor: 2")}},
		// The source shows what was rounded, hundredths included.
		{"deployment 33% and 1% of 6", deployment("33%", "1%", 6), []engine.Budget{
			mu(0, depMU+"=1% of 6 = 0.06, floor: 0"), ms(2, depMS+"=33% of 6 = 1.98, ceil: 2")}},
		{"statefulset 10% of 5 at least 1", statefulSet("10%", 5, true), []engine.Budget{mu(1, stsMU+"=10% of 5 = 0.5, floor: 0; at least 1")}},
		{"statefulset unset is 1", statefulSet(nil, 5, true), []engine.Budget{mu(1, stsMU+" unset: default 1")}},
		{"statefulset int uncapped (T3)", statefulSet(3, 0, true), []engine.Budget{mu(3, stsMU+"=3")}},

		// 0/0 fenceposts.
		{"deployment 0/0 → unavailable 1", deployment(0, 0, 5), []engine.Budget{
			mu(1, depMU+"=0; maxSurge and maxUnavailable both 0: 1"), ms(0, depMS+"=0")}},
		{"deployment 0/10% of 5 → 1", deployment(0, "10%", 5), []engine.Budget{
			mu(1, depMU+"=10% of 5 = 0.5, floor: 0; maxSurge and maxUnavailable both 0: 1"), ms(0, depMS+"=0")}},
		{"deployment nil/nil (D7)", deployment(nil, nil, 10), []engine.Budget{
			mu(1, depMU+" unset: default 0; maxSurge and maxUnavailable both 0: 1"), ms(0, depMS+" unset: default 0")}},
		{"daemonset 0/0 → 1", daemonSet(0, 0, 2), []engine.Budget{
			mu(1, dsMU+"=0; maxSurge and maxUnavailable both 0: 1"), ms(0, dsMS+"=0")}},
		{"daemonset 0/0 with no nodes (S1)", daemonSet(nil, 0, 0), []engine.Budget{
			mu(0, dsMU+"=0"), ms(0, dsMS+" unset: default 0")}},

		// Capped at replicas, and 0 replicas.
		{"deployment capped", deployment(3, 12, 10), []engine.Budget{
			mu(10, depMU+"=12; capped at 10 replicas"), ms(3, depMS+"=3")}},
		{"deployment 100% of 5 not capped (D18)", deployment(1, "100%", 5), []engine.Budget{
			mu(5, depMU+"=100% of 5 = 5, floor: 5"), ms(1, depMS+"=1")}},
		{"deployment 0 replicas", deployment("25%", "25%", 0), []engine.Budget{
			mu(0, depMU+"=25% of 0 = 0, floor: 0; 0 replicas: 0"), ms(0, depMS+"=25% of 0 = 0, ceil: 0")}},
		{"deployment 0 replicas wins over 0/0 (D1)", deployment("0%", "0%", 0), []engine.Budget{
			mu(0, depMU+"=0% of 0 = 0, floor: 0; 0 replicas: 0"), ms(0, depMS+"=0% of 0 = 0, ceil: 0")}},
		{"deployment int on 0 replicas (D14)", deployment(1, 10, 0), []engine.Budget{
			mu(0, depMU+"=10; 0 replicas: 0"), ms(1, depMS+"=1")}},
		{"statefulset 0% of 0 (T10)", statefulSet("0%", 0, true), []engine.Budget{mu(1, stsMU+"=0% of 0 = 0, floor: 0; at least 1")}},
		{"large totals are exact", deployment("33%", "39%", 150001), []engine.Budget{
			mu(58500, depMU+"=39% of 150001 = 58500.39, floor: 58500"), ms(49501, depMS+"=33% of 150001 = 49500.33, ceil: 49501")}},

		// Recreate.
		{"deployment recreate", with(deployment(nil, nil, 10), func(r *facts.Rollout) { r.Workload.Strategy.Type = "Recreate" }), []engine.Budget{
			mu(10, "spec.strategy.type=Recreate: all pods at once"), ms(0, "spec.strategy.type=Recreate: no surge")}},

		// StatefulSet gate off / missing; managed ignores the gate.
		{"statefulset gate off", statefulSet("50%", 6, false), []engine.Budget{mu(1, "MaxUnavailableStatefulSet off: one pod at a time")}},
		{"statefulset gate missing", with(statefulSet("50%", 6, true), func(r *facts.Rollout) { r.FeatureGates = nil }), []engine.Budget{
			mu(1, "MaxUnavailableStatefulSet off: one pod at a time")}},
		{"statefulset managed OnDelete, gate off (T29)", with(statefulSet("50%", 6, false), func(r *facts.Rollout) {
			r.Workload.Managed = true
			r.Workload.Strategy.Type = "OnDelete"
			r.Workload.Strategy.MaxUnavailableSource = "metadata.annotations[rollplan.dev/max-unavailable]"
		}), []engine.Budget{mu(3, "metadata.annotations[rollplan.dev/max-unavailable]=50% of 6 = 3, floor: 3")}},
		// updateStrategy Recreate (v1.37): every old pod at once, whatever
		// maxUnavailable and the gate.
		{"statefulset unmanaged Recreate type: all replicas", with(statefulSet("50%", 6, false), func(r *facts.Rollout) {
			r.Workload.Strategy.Type = "Recreate"
		}), []engine.Budget{mu(6, "spec.updateStrategy.type=Recreate: every old pod at once")}},
		{"statefulset unmanaged Recreate type, gate on: all replicas", with(statefulSet("50%", 6, true), func(r *facts.Rollout) {
			r.Workload.Strategy.Type = "Recreate"
		}), []engine.Budget{mu(6, "spec.updateStrategy.type=Recreate: every old pod at once")}},

		// Managed OnDelete DaemonSet: maxUnavailable from the annotation.
		{"daemonset managed OnDelete", with(daemonSet(nil, "25%", 8), func(r *facts.Rollout) {
			r.Workload.Managed = true
			r.Workload.Strategy.Type = "OnDelete"
			r.Workload.Strategy.MaxUnavailableSource = "metadata.annotations[rollplan.dev/max-unavailable]"
		}), []engine.Budget{mu(2, "metadata.annotations[rollplan.dev/max-unavailable]=25% of 8 = 2, ceil: 2"), ms(0, dsMS+" unset: default 0")}},

		// Unmanaged OnDelete: no strategy budget (an empty, non-nil list), PDBs still.
		{"deployment unmanaged OnDelete", with(deployment(1, 1, 3), func(r *facts.Rollout) { r.Workload.Strategy.Type = "OnDelete" }), nil},
		{"daemonset unmanaged OnDelete", with(daemonSet(1, 1, 3), func(r *facts.Rollout) { r.Workload.Strategy.Type = "OnDelete" }), nil},
		{"statefulset unmanaged OnDelete", with(statefulSet(1, 3, true), func(r *facts.Rollout) { r.Workload.Strategy.Type = "OnDelete" }), nil},
		{"unmanaged OnDelete keeps PDBs", with(statefulSet(1, 3, true), func(r *facts.Rollout) {
			r.Workload.Strategy.Type = "OnDelete"
			r.PDBs = []facts.PDB{{Name: "db", MaxUnavailable: 1, Source: "spec.maxUnavailable=1"}}
		}), []engine.Budget{pdb("db", 1, true, "spec.maxUnavailable=1")}},

		// PDBs: advisory unless managed.
		{"pdbs advisory", with(deployment("25%", "25%", 10), func(r *facts.Rollout) {
			r.PDBs = []facts.PDB{
				{Name: "web", MaxUnavailable: 1, ExpectedPods: 10, Source: "spec.minAvailable=90% of 10, up"},
				{Name: "all", MaxUnavailable: 0, ExpectedPods: 30, UnavailableElsewhere: 2, Source: "spec.maxUnavailable=2"},
			}
		}), []engine.Budget{
			mu(2, depMU+"=25% of 10 = 2.5, floor: 2"), ms(3, depMS+"=25% of 10 = 2.5, ceil: 3"),
			pdb("web", 1, true, "spec.minAvailable=90% of 10, up"), pdb("all", 0, true, "spec.maxUnavailable=2")}},
		{"pdbs enforced when managed", with(deployment("25%", "25%", 10), func(r *facts.Rollout) {
			r.Workload.Managed = true
			r.PDBs = []facts.PDB{{Name: "web", MaxUnavailable: 1, Source: "s"}}
		}), []engine.Budget{mu(2, depMU+"=25% of 10 = 2.5, floor: 2"), ms(3, depMS+"=25% of 10 = 2.5, ceil: 3"), pdb("web", 1, false, "s")}},
		{"pdbs nil", with(deployment(1, 1, 10), func(r *facts.Rollout) { r.PDBs = nil }), []engine.Budget{
			mu(1, depMU+"=1"), ms(1, depMS+"=1")}},

		// Sources from Go.
		{"sources from annotations", with(deployment(1, "40%", 10), func(r *facts.Rollout) {
			r.Workload.Strategy.MaxSurgeSource = "metadata.annotations[rollplan.dev/max-surge]"
			r.Workload.Strategy.MaxUnavailableSource = "metadata.annotations[rollplan.dev/max-unavailable]"
		}), []engine.Budget{
			mu(4, "metadata.annotations[rollplan.dev/max-unavailable]=40% of 10 = 4, floor: 4"),
			ms(1, "metadata.annotations[rollplan.dev/max-surge]=1")}},

		// Unknown kinds: no strategy budget.
		{"unknown kind", with(deployment(1, 1, 10), func(r *facts.Rollout) { r.Workload.Kind = "CronJob" }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, tt.r)
			if d == nil {
				t.Fatal("both engines failed")
			}
			wantBudgets(t, d, tt.want...)
		})
	}
}

func TestHalt(t *testing.T) {
	updated := func(name string, f func(p *facts.Pod)) facts.Pod {
		return podWith(name, func(p *facts.Pod) {
			p.Updated, p.Revision = true, "web-2"
			f(p)
		})
	}
	unavailable := func(s int64) func(p *facts.Pod) {
		return func(p *facts.Pod) { p.Available, p.Ready, p.UnavailableSeconds = false, false, s }
	}
	image := facts.Change{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}
	env := facts.Change{Path: "spec.containers[app].env", Class: facts.ClassEnv, Detail: "env cannot change on a running container"}
	resources := facts.Change{Path: "spec.containers[app].resources", Class: facts.ClassResources, Detail: "QoS class changes"}
	inPlace := func(policy string, managed bool, pods ...facts.Pod) *facts.Rollout {
		r := withPods(baseRollout(), pods...)
		r.Workload.Managed, r.Workload.PodUpdatePolicy = managed, policy
		return r
	}
	// Pods of one revision share one change list (as facts.Build makes them).
	blockedPods := func() []facts.Pod {
		return []facts.Pod{
			podWith("blocked", func(p *facts.Pod) { p.Revision, p.Changes = "web-0", []facts.Change{image, env} }),
			podWith("ok", func(p *facts.Pod) { p.Changes = []facts.Change{image} }),
			updated("done", func(*facts.Pod) {}),
		}
	}
	tests := []struct {
		name string
		r    *facts.Rollout
		want []string
	}{
		{"progress deadline", withPods(baseRollout(),
			updated("late", unavailable(601)),
			updated("at-deadline", unavailable(600)),
			podWith("old", unavailable(5000)),
			updated("going", func(p *facts.Pod) { unavailable(5000)(p); p.Terminating = true }),
			updated("fine", func(*facts.Pod) {}),
		), []string{"pod late at the update revision has not been available for 601s (progress deadline 600s)"}},
		{"progress deadline from the workload", with(withPods(baseRollout(), updated("w", unavailable(61))), func(r *facts.Rollout) {
			r.Workload.ProgressDeadlineSeconds = 60
		}), []string{"pod w at the update revision has not been available for 61s (progress deadline 60s)"}},
		{"crash loop", withPods(baseRollout(),
			updated("crashy", func(p *facts.Pod) { p.Restarts = 3 }),
			updated("bumpy", func(p *facts.Pod) { p.Restarts = 2 }),
			podWith("old-crashy", func(p *facts.Pod) { p.Restarts = 10 }),
		), []string{"pod crashy is crash-looping since the update (3 restarts)"}},
		{"both reasons, sorted", withPods(baseRollout(),
			updated("b", func(p *facts.Pod) { p.Restarts = 7 }),
			updated("a", func(p *facts.Pod) { unavailable(900)(p); p.Restarts = 4 }),
		), []string{
			"pod a at the update revision has not been available for 900s (progress deadline 600s)",
			"pod a is crash-looping since the update (4 restarts)",
			"pod b is crash-looping since the update (7 restarts)",
		}},
		{"duplicates collapse (a set)", withPods(baseRollout(),
			updated("x", func(p *facts.Pod) { p.Restarts = 5 }),
			updated("x", func(p *facts.Pod) { p.Restarts = 5 }),
		), []string{"pod x is crash-looping since the update (5 restarts)"}},
		{"none", withPods(baseRollout(), basePod("p"), updated("q", func(*facts.Pod) {})), nil},
		{"InPlaceOnly", inPlace("InPlaceOnly", true, blockedPods()...),
			[]string{"InPlaceOnly: pod blocked cannot be updated in place: spec.containers[app].env"}},
		{"InPlaceOnly lists every blocking path", inPlace("InPlaceOnly", true,
			podWith("x", func(p *facts.Pod) { p.Changes = []facts.Change{env, image, resources} })),
			[]string{"InPlaceOnly: pod x cannot be updated in place: spec.containers[app].env, spec.containers[app].resources"}},
		{"InPlaceOnly with an empty path", inPlace("InPlaceOnly", true,
			podWith("x", func(p *facts.Pod) { p.Changes = []facts.Change{{Path: ""}, env} })),
			[]string{"InPlaceOnly: pod x cannot be updated in place: , spec.containers[app].env"}},
		{"InPlaceIfPossible does not halt", inPlace("InPlaceIfPossible", true, blockedPods()...), nil},
		{"unmanaged InPlaceOnly does not halt", inPlace("InPlaceOnly", false, blockedPods()...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, tt.r)
			if d == nil {
				t.Fatal("both engines failed")
			}
			wantHalt(t, d, tt.want...)
		})
	}
}

func TestPods(t *testing.T) {
	image := facts.Change{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}
	label := facts.Change{Path: "metadata.labels", Class: facts.ClassLabels, InPlace: true}
	env := facts.Change{Path: "spec.containers[app].env", Class: facts.ClassEnv, Detail: "env cannot change on a running container"}
	partitioned := func(pods ...facts.Pod) *facts.Rollout {
		r := withPods(statefulSet(nil, 6, false), pods...)
		r.Workload.Strategy.Partition = 3
		return r
	}
	sts := func(name string, ordinal, index int, f func(p *facts.Pod)) facts.Pod {
		return podWith(name, func(p *facts.Pod) {
			p.Ordinal, p.Index = ordinal, index
			if f != nil {
				f(p)
			}
		})
	}
	inPlace := func(policy string, pods ...facts.Pod) *facts.Rollout {
		r := withPods(baseRollout(), pods...)
		r.Workload.Managed, r.Workload.PodUpdatePolicy = true, policy
		return r
	}
	type pd = engine.PodDecision
	recreate := func(order []any, reasons ...string) pd {
		return pd{InScope: true, Action: engine.Recreate, Reasons: reasons, Order: order}
	}
	depKey := func(uid string) []any {
		return []any{int64(1), int64(2), int64(1), int64(0), int64(-1), int64(36), int64(0), int64(0), int64(40), uid}
	}
	tests := []struct {
		name string
		r    *facts.Rollout
		want []engine.PodDecision
	}{
		{"partition holds lower indexes", partitioned(
			sts("db-0", 0, 0, nil), sts("db-2", 2, 2, nil), sts("db-3", 3, 3, nil),
		), []pd{
			{InScope: false, HeldReason: "ordinal 0 below partition 3", Action: engine.Recreate, Reasons: []string{"revision web-1 differs from web-2"}, Order: []any{int64(0)}},
			{InScope: false, HeldReason: "ordinal 2 below partition 3", Action: engine.Recreate, Reasons: []string{"revision web-1 differs from web-2"}, Order: []any{int64(-2)}},
			{InScope: true, Action: engine.Recreate, Reasons: []string{"revision web-1 differs from web-2"}, Order: []any{int64(-3)}},
		}},
		{"partition counts from ordinals.start", with(partitioned(sts("db-12", 12, 2, nil), sts("db-13", 13, 3, nil)), func(r *facts.Rollout) {
			r.Workload.OrdinalsStart = 10
		}), []pd{
			{HeldReason: "ordinal 12 below partition 3", Action: engine.Recreate, Reasons: []string{"revision web-1 differs from web-2"}, Order: []any{int64(-12)}},
			{InScope: true, Action: engine.Recreate, Reasons: []string{"revision web-1 differs from web-2"}, Order: []any{int64(-13)}},
		}},
		{"managed statefulset: unavailable first", with(partitioned(
			sts("db-10", 10, 10, nil), sts("db-4", 4, 4, func(p *facts.Pod) { p.Available, p.Ready = false, false }),
		), func(r *facts.Rollout) { r.Workload.Managed = true }), []pd{
			recreate([]any{int64(1), int64(-10)}, "revision web-1 differs from web-2"),
			recreate([]any{int64(0), int64(-4)}, "revision web-1 differs from web-2"),
		}},
		{"deployment key", withPods(baseRollout(),
			podWith("a", func(p *facts.Pod) {
				p.UID, p.DeletionCost, p.Colocated, p.ReadyBucket = "uid-1", -5, 2, 35
				p.Restarts, p.SidecarRestarts, p.CreatedBucket = 4, 1, 47
			}),
			podWith("b", func(p *facts.Pod) {
				p.UID, p.Phase, p.Ready, p.Available, p.Scheduled = "uid-2", "Failed", false, false, false
			}),
			podWith("c", func(p *facts.Pod) { p.Phase, p.Colocated, p.DeletionCost, p.Restarts = "Unknown", 5000, 1<<40, -7 }),
		), []pd{
			recreate([]any{int64(1), int64(2), int64(1), int64(-5), int64(-2), int64(35), int64(-4), int64(-1), int64(47), "uid-1"}, "revision web-1 differs from web-2"),
			recreate([]any{int64(0), int64(0), int64(0), int64(0), int64(-1), int64(0), int64(0), int64(0), int64(40), "uid-2"}, "revision web-1 differs from web-2"),
			recreate([]any{int64(1), int64(1), int64(1), int64(1 << 40), int64(-5000), int64(36), int64(7), int64(0), int64(40), "u-c"}, "revision web-1 differs from web-2"),
		}},
		// 0 - MinInt64 leaves int64: Rego's decodeOrder then gives a float64.
		{"extreme ordinals", partitioned(sts("db-x", math.MinInt64, 5, nil), sts("db-y", math.MaxInt64, 5, nil)), []pd{
			recreate([]any{float64(1 << 63)}, "revision web-1 differs from web-2"),
			recreate([]any{int64(-math.MaxInt64)}, "revision web-1 differs from web-2"),
		}},
		{"daemonset key", withPods(daemonSet(nil, 1, 2),
			podWith("ds-c", func(p *facts.Pod) { p.Node = "b" }),
			podWith("ds-d", func(p *facts.Pod) { p.Node, p.Available = "z", false }),
		), []pd{
			recreate([]any{int64(1), "b", "ds-c"}, "revision web-1 differs from web-2"),
			recreate([]any{int64(0), "z", "ds-d"}, "revision web-1 differs from web-2"),
		}},
		{"unknown kind: by name", with(withPods(baseRollout(), podWith("x", func(p *facts.Pod) { p.Available = false })), func(r *facts.Rollout) {
			r.Workload.Kind = "CronJob"
		}), []pd{recreate([]any{int64(0), "x"}, "revision web-1 differs from web-2")}},
		{"updated pods stay zero", withPods(baseRollout(),
			podWith("new", func(p *facts.Pod) { p.Updated, p.Revision = true, "web-2" }),
			basePod("old"),
		), []pd{{}, recreate(depKey("u-old"), "revision web-1 differs from web-2")}},
		{"in place: image only", inPlace("InPlaceOnly", podWith("p", func(p *facts.Pod) { p.Changes = []facts.Change{image, label} })), []pd{
			{InScope: true, Action: engine.InPlace, Reasons: []string{"only spec.containers[app].image, metadata.labels changed"}, Order: depKey("u-p")},
		}},
		{"in place: env blocks", inPlace("InPlaceIfPossible", podWith("p", func(p *facts.Pod) { p.Changes = []facts.Change{image, env} })), []pd{
			recreate(depKey("u-p"), "spec.containers[app].env changed: env cannot change on a running container"),
		}},
		{"unmanaged: every change named", with(withPods(baseRollout(), podWith("p", func(p *facts.Pod) { p.Changes = []facts.Change{image, env} })), func(r *facts.Rollout) {
			r.Workload.PodUpdatePolicy = "InPlaceIfPossible"
		}), []pd{recreate(depKey("u-p"), "spec.containers[app].image changed", "spec.containers[app].env changed")}},
		{"Recreate policy", inPlace("Recreate", podWith("p", func(p *facts.Pod) { p.Changes = []facts.Change{image} })), []pd{
			recreate(depKey("u-p"), "spec.containers[app].image changed"),
		}},
		{"no changes", inPlace("InPlaceIfPossible", podWith("p", func(p *facts.Pod) { p.Changes = nil })), []pd{
			recreate(depKey("u-p"), "revision web-1 differs from web-2"),
		}},
		{"a listed revision answers its pods", with(inPlace("InPlaceIfPossible",
			podWith("a", func(p *facts.Pod) { p.Changes = []facts.Change{env} }),
			podWith("b", func(p *facts.Pod) { p.Revision, p.Changes = "web-9", []facts.Change{env} }),
		), func(r *facts.Rollout) {
			r.Revisions = []facts.Revision{{Name: "web-1", Changes: []facts.Change{image}}}
		}), []pd{
			{InScope: true, Action: engine.InPlace, Reasons: []string{"only spec.containers[app].image changed"}, Order: depKey("u-a")},
			recreate(depKey("u-b"), "spec.containers[app].env changed: env cannot change on a running container"),
		}},
		// Pods of an unlisted revision (not in the snapshot: facts diff each
		// pod's own spec) may have different changes: each pod is answered
		// from its own, in every engine.
		{"unlisted revision: each pod's own changes", inPlace("InPlaceIfPossible",
			podWith("a", func(p *facts.Pod) { p.Revision, p.Changes = "web-x", []facts.Change{image} }),
			podWith("b", func(p *facts.Pod) { p.Revision, p.Changes = "web-x", []facts.Change{env} }),
			podWith("c", func(p *facts.Pod) { p.Revision, p.Changes = "", []facts.Change{image} }),
			podWith("d", func(p *facts.Pod) { p.Revision, p.Changes = "", []facts.Change{env} }),
		), []pd{
			{InScope: true, Action: engine.InPlace, Reasons: []string{"only spec.containers[app].image changed"}, Order: depKey("u-a")},
			recreate(depKey("u-b"), "spec.containers[app].env changed: env cannot change on a running container"),
			{InScope: true, Action: engine.InPlace, Reasons: []string{"only spec.containers[app].image changed"}, Order: depKey("u-c")},
			recreate(depKey("u-d"), "spec.containers[app].env changed: env cannot change on a running container"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, tt.r)
			if d == nil {
				t.Fatal("both engines failed")
			}
			if !reflect.DeepEqual(d.Pods, tt.want) {
				t.Errorf("pods differ from the expected answers:\n%s", diffDecisions(tt.r, &engine.Decisions{Pods: tt.want}, &engine.Decisions{Pods: d.Pods}))
			}
		})
	}
}

func TestPacingAndDeny(t *testing.T) {
	tests := []struct {
		name string
		r    *facts.Rollout
		want string
	}{
		{"deployment", baseRollout(), engine.PacingRolling},
		{"ordered statefulset", with(statefulSet(1, 3, false), func(r *facts.Rollout) { r.Workload.PodManagementPolicy = "OrderedReady" }), engine.PacingWave},
		{"parallel statefulset", statefulSet(1, 3, false), engine.PacingRolling},
		{"daemonset", daemonSet(nil, 1, 3), engine.PacingRolling},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, tt.r)
			if d.Pacing != tt.want {
				t.Errorf("pacing %q, want %q", d.Pacing, tt.want)
			}
			if d.Deny == nil || len(d.Deny) != 0 {
				t.Errorf("deny %#v, want an empty, non-nil list", d.Deny)
			}
		})
	}
}

// TestErrors: facts the Rego default has no answer for fail in both engines.
func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		r    *facts.Rollout
		want string
	}{
		{"deployment OnDelete managed", with(deployment(1, 1, 3), func(r *facts.Rollout) {
			r.Workload.Managed, r.Workload.Strategy.Type = true, "OnDelete"
		}), "undefined"},
		{"daemonset Recreate", with(daemonSet(1, 1, 3), func(r *facts.Rollout) { r.Workload.Strategy.Type = "Recreate" }), "undefined"},
		{"invalid percentage (D3)", deployment("oops", "39%", 10), "maxSurge"},
		{"negative PDB limit", with(deployment(1, 1, 3), func(r *facts.Rollout) {
			r.PDBs = []facts.PDB{{Name: "x", MaxUnavailable: -1}}
		}), "must be greater than or equal to 0"},
		{"negative int", deployment(1, -2, 3), "must be greater than or equal to 0"},
		{"revision listed twice", with(withPods(baseRollout(), basePod("p")), func(r *facts.Rollout) {
			r.Revisions = []facts.Revision{
				{Name: "web-1", Changes: []facts.Change{{Path: "a"}}},
				{Name: "web-1", Changes: []facts.Change{{Path: "b"}}},
			}
		}), "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := decide(t, tt.r); d != nil {
				t.Fatalf("both engines succeed, want both to fail: %s", fmtBudgets(d.Budgets))
			}
			_, err := New().Decide(context.Background(), tt.r)
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), wid(tt.r)) {
				t.Errorf("error %q does not name %q and the workload", err, tt.want)
			}
		})
	}
}

// TestRevisionListedTwiceUnused: the conflict surfaces only when some pod
// asks for its eligibility, as Rego evaluates the rule lazily.
func TestRevisionListedTwiceUnused(t *testing.T) {
	r := with(withPods(baseRollout(), podWith("new", func(p *facts.Pod) { p.Updated, p.Revision = true, "web-2" })), func(r *facts.Rollout) {
		r.Revisions = []facts.Revision{{Name: "web-1", Changes: []facts.Change{{Path: "a"}}}, {Name: "web-1"}}
	})
	if decide(t, r) == nil {
		t.Fatal("both engines fail, want both to succeed")
	}
}

func TestScaled(t *testing.T) {
	// policies/defaults_test.rego rounding_table: [percent] → want per total.
	ns := []int{0, 1, 2, 3, 4, 5, 10, 20}
	table := map[int]struct{ up, down []int }{
		1:   {[]int{0, 1, 1, 1, 1, 1, 1, 1}, []int{0, 0, 0, 0, 0, 0, 0, 0}},
		10:  {[]int{0, 1, 1, 1, 1, 1, 1, 2}, []int{0, 0, 0, 0, 0, 0, 1, 2}},
		25:  {[]int{0, 1, 1, 1, 1, 2, 3, 5}, []int{0, 0, 0, 0, 1, 1, 2, 5}},
		30:  {[]int{0, 1, 1, 1, 2, 2, 3, 6}, []int{0, 0, 0, 0, 1, 1, 3, 6}},
		50:  {[]int{0, 1, 1, 2, 2, 3, 5, 10}, []int{0, 0, 1, 1, 2, 2, 5, 10}},
		75:  {[]int{0, 1, 2, 3, 3, 4, 8, 15}, []int{0, 0, 1, 2, 3, 3, 7, 15}},
		100: {[]int{0, 1, 2, 3, 4, 5, 10, 20}, []int{0, 1, 2, 3, 4, 5, 10, 20}},
	}
	for p, row := range table {
		for i, n := range ns {
			v := fmt.Sprintf("%d%%", p)
			if got, err := scaled(v, n, true); err != nil || got != row.up[i] {
				t.Errorf("scaled_up(%s, %d) = %d, %v; want %d", v, n, got, err, row.up[i])
			}
			if got, err := scaled(v, n, false); err != nil || got != row.down[i] {
				t.Errorf("scaled_down(%s, %d) = %d, %v; want %d", v, n, got, err, row.down[i])
			}
		}
	}
	for _, v := range []int{0, 1, 2, 3, 100} {
		for _, n := range ns {
			for _, up := range []bool{true, false} {
				if got, err := scaled(v, n, up); err != nil || got != v {
					t.Errorf("scaled(%d, %d, %v) = %d, %v; ints are unchanged", v, n, up, got, err)
				}
			}
		}
	}
	for _, c := range []struct {
		v        any
		n        int
		up, down int
	}{
		{"39%", 150000, 58500, 58500},
		{"33%", 150001, 49501, 49500},
		{"0%", 10, 0, 0},
		{int64(3), 10, 3, 3},
		{float64(4), 10, 4, 4},
	} {
		up, err1 := scaled(c.v, c.n, true)
		down, err2 := scaled(c.v, c.n, false)
		if err1 != nil || err2 != nil || up != c.up || down != c.down {
			t.Errorf("scaled(%v, %d) = up %d (%v), down %d (%v); want %d, %d", c.v, c.n, up, err1, down, err2, c.up, c.down)
		}
	}
	for _, v := range []any{"oops", "urg", "abc%", "2.5%", 2.5, true, "92233720368547758%"} {
		if got, err := scaled(v, 1000, true); err == nil {
			t.Errorf("scaled(%v) = %d, want an error", v, got)
		}
	}
}

func TestNameDigestConcurrency(t *testing.T) {
	e := New()
	if e.Name() != "native" {
		t.Errorf("Name() = %q", e.Name())
	}
	// sha256("rollplan.dev/native-defaults/v2")
	if d := e.Digest(); !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 || d != New().Digest() {
		t.Errorf("Digest() = %q, want a stable sha256:<64 hex>", d)
	}
	// One engine, several workloads at once (run with -race).
	r := withPods(baseRollout(), basePod("a"), basePod("b"))
	want, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				got, err := e.Decide(context.Background(), r)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("concurrent Decide: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Decide(ctx, r); err == nil {
		t.Error("Decide with a cancelled context succeeded")
	}
}
