package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/facts"
)

func rsWith(name string, spec, avail int) *simRS {
	rs := &simRS{name: name, spec: spec}
	for i := 0; i < spec; i++ {
		at := 0.0
		if i >= avail {
			at = math.Inf(1)
		}
		rs.pods = append(rs.pods, rsPod{name: name + "-p", fact: -1, availableAt: at, readyAt: at, n: 1})
	}
	return rs
}

func newDeploySim(d, surge, unavail int, old, newRS *simRS) *deploySim {
	s := &deploySim{r: &facts.Rollout{Workload: facts.Workload{UpdateRevision: "new"}}, o: DefaultOptions, D: d, surge: surge, unavail: unavail, newRS: newRS, advisoryWaves: map[string][]string{}}
	if old != nil {
		s.old = []*simRS{old}
	}
	return s
}

// One rolloutRolling sync against the upstream cases of reference §6.1
// (the budgets are the resolved MaxSurge/MaxUnavailable, as the policy gives them).
func TestSyncRollingUpstreamCases(t *testing.T) {
	cases := []struct {
		id                string
		d, surge, unavail int
		oldSpec, oldAvail int
		newSpec, newAvail int
		wantOld, wantNew  int
	}{
		// TestDeploymentController_reconcileNewReplicaSet (maxUnavailable 0 → 1 by the fencepost when surge is 0).
		{"D36", 10, 0, 1, 10, 10, 0, 0, 9, 0},  // no scale-up; the same sync then scales old down by the budget
		{"D37", 10, 2, 0, 10, 10, 0, 0, 10, 2}, // new → 2
		{"D38", 10, 2, 0, 5, 5, 0, 0, 5, 7},    // new → 7
		{"D39", 10, 2, 0, 10, 10, 2, 2, 8, 2},  // no scale-up; old scaled down by availability (12 available − 10)
		{"D40", 10, 2, 0, 2, 2, 11, 11, 2, 10}, // new scaled down to D
		// TestDeploymentController_reconcileOldReplicaSets (maxSurge 0).
		{"D41", 10, 0, 1, 10, 10, 0, 0, 9, 0},
		{"D42", 10, 0, 2, 10, 10, 0, 0, 8, 0},
		{"D43", 10, 0, 2, 10, 8, 0, 0, 8, 0}, // cleanup of 2 unhealthy
		{"D44", 10, 0, 2, 10, 9, 0, 0, 8, 0}, // 1 unhealthy + 1 healthy
		{"D45", 10, 0, 2, 8, 8, 2, 0, 8, 2},  // maxScaledDown 0: not scaled
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			old := rsWith("old", c.oldSpec, c.oldAvail)
			s := newDeploySim(c.d, c.surge, c.unavail, old, rsWith("new", c.newSpec, c.newAvail))
			s.syncRolling()
			if old.spec != c.wantOld || s.newRS.spec != c.wantNew {
				t.Errorf("after one sync old/new = %d/%d, want %d/%d", old.spec, s.newRS.spec, c.wantOld, c.wantNew)
			}
		})
	}
}

// The computed NewRSNewReplicas table of reference §6.1.
func TestNewRSNewReplicas(t *testing.T) {
	cases := []struct{ d, surge, newSpec, oldSpec, want int }{
		{10, 3, 0, 10, 3}, {10, 3, 3, 10, 3}, {10, 3, 3, 7, 6}, {10, 3, 0, 10, 3},
		{10, 0, 0, 10, 0}, {10, 0, 0, 9, 1}, {3, 1, 0, 3, 1}, {3, 2, 1, 3, 2},
		{1, 1, 0, 1, 1}, {1, 0, 0, 1, 0}, {5, 5, 0, 5, 5}, {10, 3, 8, 4, 9},
	}
	for _, c := range cases {
		s := newDeploySim(c.d, c.surge, 0, rsWith("old", c.oldSpec, c.oldSpec), nil)
		if got := s.newRSNewReplicas(c.newSpec); got != c.want {
			t.Errorf("D=%d surge=%d new=%d old=%d: got %d, want %d", c.d, c.surge, c.newSpec, c.oldSpec, got, c.want)
		}
	}
}

// deletedBefore is a strict weak order (sort.SliceStable needs one) and
// ranks by readiness as upstream's ReplicaSet does (§2.10 rules 1–4), not by
// availability: a Ready pod short of minReadySeconds stays after a pod the
// ReplicaSet has just created.
func TestDeletedBeforeStrictWeakOrder(t *testing.T) {
	r := &facts.Rollout{Workload: facts.Workload{MinReadySeconds: 30}, Pods: []facts.Pod{
		{Name: "ready-old", Scheduled: true, Phase: "Running", Ready: true, Available: true},
		{Name: "ready-warming", Scheduled: true, Phase: "Running", Ready: true, ReadySeconds: 10},
		{Name: "not-ready", Scheduled: true, Phase: "Running"},
		{Name: "pending", Scheduled: true, Phase: "Pending"},
		{Name: "unscheduled", Phase: "Pending"},
		{Name: "cheap", Scheduled: true, Phase: "Running", Ready: true, Available: true, DeletionCost: -5},
		{Name: "unknown-ready", Scheduled: true, Phase: "Unknown", Ready: true, Available: true},
	}}
	s := &deploySim{r: r, o: DefaultOptions, t: 100}
	var pods []rsPod
	for i := range r.Pods {
		// Policy ranks on purpose not matching readiness: the prefix decides first.
		pods = append(pods, rsPod{name: r.Pods[i].Name, fact: i, rank: len(r.Pods) - i, n: 1})
	}
	pods = append(pods,
		rsPod{name: "created-new", fact: -1, readyAt: 150, availableAt: 180, seq: 3, n: 1},
		rsPod{name: "created-older", fact: -1, readyAt: 120, availableAt: 150, seq: 2, n: 1},
		rsPod{name: "created-ready", fact: -1, readyAt: 60, availableAt: 90, seq: 1, n: 1},
		rsPod{name: "status-a", fact: -1, n: 1},
		rsPod{name: "status-b", fact: -1, n: 1},
	)
	less := s.deletedBefore
	for _, a := range pods {
		if less(a, a) {
			t.Errorf("irreflexivity: %s < %s", a.name, a.name)
		}
		for _, b := range pods {
			if less(a, b) && less(b, a) {
				t.Errorf("asymmetry: %s and %s", a.name, b.name)
			}
			for _, c := range pods {
				if less(a, b) && less(b, c) && !less(a, c) {
					t.Errorf("transitivity: %s < %s < %s but not %s < %s", a.name, b.name, c.name, a.name, c.name)
				}
				eq := func(x, y rsPod) bool { return !less(x, y) && !less(y, x) }
				if eq(a, b) && eq(b, c) && !eq(a, c) {
					t.Errorf("transitivity of equivalence: %s ~ %s ~ %s but not %s ~ %s", a.name, b.name, c.name, a.name, c.name)
				}
			}
		}
	}
	sort.SliceStable(pods, func(i, j int) bool { return less(pods[i], pods[j]) })
	var got []string
	for _, p := range pods {
		got = append(got, p.name)
	}
	want := []string{
		"created-new", "created-older", // unassigned and Pending until Ready, newest first
		"unscheduled", "pending", "unknown-ready", "not-ready",
		"cheap",                                 // lower deletion cost
		"created-ready", "status-a", "status-b", // then Ready pods: made-up ones first (newer)
		"ready-warming", "ready-old", // snapshot pods in policy order (ranks), whatever their availability
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("deletion order:\n  got  %v\n  want %v", got, want)
	}
}

// A sync that leaves a ReplicaSet's replicas as they are writes no action:
// the new ReplicaSet created with 0 replicas (maxSurge 0, or 0 desired)
// once showed as "ScaleReplicaSet new 0->0". Its creation is the first
// reason of its first scale-up instead.
func TestNoNoOpScale(t *testing.T) {
	cases := []struct {
		name              string
		recreate          bool
		d, surge, unavail int
		oldSpec, oldAvail int
		want              []string // the actions, "rs from->to"
		wantFirstReason   string   // of the new ReplicaSet's first action, if any
	}{
		{name: "surge 0 creates the new ReplicaSet empty", d: 3, surge: 0, unavail: 1, oldSpec: 3, oldAvail: 3,
			want: []string{"old 3->2", "new 0->1", "old 2->1", "new 1->2", "old 1->0", "new 2->3"}, wantFirstReason: "create ReplicaSet new at the update revision with 0 replicas"},
		{name: "surge 1 creates it with one", d: 3, surge: 1, unavail: 0, oldSpec: 3, oldAvail: 3,
			want: []string{"new 0->1", "old 3->2", "new 1->2", "old 2->1", "new 2->3", "old 1->0"}, wantFirstReason: "create ReplicaSet new at the update revision with 1 replica (maxSurge 1 over 3 desired)"},
		{name: "scaled to 0 desired", d: 0, surge: 1, unavail: 0, oldSpec: 2, oldAvail: 2,
			want: []string{"old 2->0"}},
		{name: "recreate, scaled to 0 desired", recreate: true, d: 0, oldSpec: 2, oldAvail: 2,
			want: []string{"old 2->0"}},
		{name: "recreate", recreate: true, d: 2, oldSpec: 2, oldAvail: 2,
			want: []string{"old 2->0", "new 0->2"}, wantFirstReason: "Recreate: create ReplicaSet new with all 2 replicas"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newDeploySim(c.d, c.surge, c.unavail, rsWith("old", c.oldSpec, c.oldAvail), nil)
			if c.recreate {
				s.r.Workload.Strategy.Type = "Recreate"
			}
			sim := &simulation{}
			s.run(sim)
			var got []string
			first := ""
			for _, w := range sim.waves {
				for _, a := range w.Actions {
					got = append(got, fmt.Sprintf("%s %d->%d", a.ReplicaSet, *a.From, *a.To))
					if *a.From == *a.To {
						t.Errorf("wave %d: no-op action %s %d->%d", w.Index, a.ReplicaSet, *a.From, *a.To)
					}
					if a.ReplicaSet == "new" && first == "" {
						first = a.Reasons[0]
					}
				}
			}
			if strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("actions:\n  got  %s\n  want %s", strings.Join(got, ", "), strings.Join(c.want, ", "))
			}
			if !strings.HasPrefix(first, c.wantFirstReason) {
				t.Errorf("the new ReplicaSet's first reason %q, want it to start %q", first, c.wantFirstReason)
			}
		})
	}
}
