package plan

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/internal/scenario"
)

// spec.replicas is a valid int32 up to 2,147,483,647: replicas that no pod
// holds are counted, never simulated one by one, so planning two billion
// of them takes the memory and time of planning a handful (issue 33: it
// ran out of memory, and a million took the gate to 758 MB).
func TestHugeReplicasPlanInBoundedMemory(t *testing.T) {
	const replicas = 2_000_000_000
	cases := []struct {
		name, scenario, workload string
		// What the plan must say: wave starts, the first wave's first
		// action's target, the budget in use at snapshot time, the
		// estimate, and a note.
		starts   []string
		scaledTo int
		inUse    int
		estimate string
		note     string
	}{
		{name: "StatefulSet Parallel: created at once", scenario: "sts-missing-replicas", workload: "db",
			starts: []string{"1m", "2m", "3m", "4m"}, inUse: replicas - 4, estimate: "5m",
			note: "replica(s) db-2, db-5 … db-1999999999 (1999999996 replicas) have no pod"},
		// 1999999996 missing replicas, one a minute: the last is available
		// 1999999996 minutes in (33333333h16m), then web-5 and web-4 go.
		{name: "StatefulSet OrderedReady: one at a time", scenario: "sts-missing-replicas", workload: "web",
			starts: []string{"33333333h16m", "33333333h17m"}, inUse: replicas - 4, estimate: "33333333h18m",
			note: "replica(s) web-1, web-3, web-6 … web-1999999999 (1999999996 replicas) have no pod"},
		{name: "Deployment 25%/25%", scenario: "deploy-rolling-10-25pct", workload: "api",
			starts: []string{"0s", "1m"}, scaledTo: replicas, inUse: replicas - 10, estimate: "1m"},
		{name: "Deployment maxSurge 1 maxUnavailable 0", scenario: "deploy-surge1-unavail0", workload: "api",
			starts: []string{"0s", "1m", "2m", "3m"}, scaledTo: replicas - 2, inUse: replicas - 3, estimate: "3m"},
	}
	eng := regoPolicy(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := scenario.Rollouts("../../testdata/scenarios", c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Workload.Name != c.workload {
					continue
				}
				r.Workload.Replicas = replicas
				d, err := eng.Decide(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				wp, _ := Workload(r, d, testOptions)
				runtime.ReadMemStats(&after)
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
					t.Errorf("planning allocated %d MiB, want the work independent of spec.replicas (< 16 MiB)", alloc>>20)
				}
				if wp.Error != "" {
					t.Fatalf("plan failed: %s", wp.Error)
				}
				var starts []string
				for _, w := range wp.Waves {
					starts = append(starts, w.Start)
				}
				if strings.Join(starts, " ") != strings.Join(c.starts, " ") {
					t.Errorf("waves start at %q, want %q", starts, c.starts)
				}
				if c.scaledTo > 0 {
					if a := wp.Waves[0].Actions[0]; a.To == nil || *a.To != c.scaledTo {
						t.Errorf("wave 1 scales %s to %v, want %d", a.ReplicaSet, a.To, c.scaledTo)
					}
				}
				if wp.Budgets[0].InUse != c.inUse {
					t.Errorf("%s in use %d, want %d (the missing replicas count as unavailable)", wp.Budgets[0].Name, wp.Budgets[0].InUse, c.inUse)
				}
				if wp.EstimatedDuration != c.estimate {
					t.Errorf("estimated %s, want %s", wp.EstimatedDuration, c.estimate)
				}
				notes := strings.Join(wp.Notes, "\n")
				if !strings.Contains(notes, c.note) {
					t.Errorf("notes %q, want %q", notes, c.note)
				}
				if len(notes) > 4096 {
					t.Errorf("notes are %d bytes: a list grows with spec.replicas", len(notes))
				}
				return
			}
			t.Fatalf("no workload %s in %s", c.workload, c.scenario)
		})
	}
}

// A wave waits for what became available at its start, exactly as when
// every missing replica had an event of its own: replicas that became
// available at earlier times, where nothing could start, are not named
// (they were, when a run of missing replicas was settled at once:
// "web-5, web-6, web-7" for a wave that started when web-7 did).
func TestMissingReplicasWaitsFor(t *testing.T) {
	cases := []struct {
		name     string
		replicas int
		starts   []string
		waitsFor [][]string
	}{
		// Managed, OrderedReady, max-unavailable 2, web-0..web-4 (web-0
		// held): web-5..web-8 are created a minute apart; web-4 fits once
		// one of them is still unavailable (web-7 at 3m), web-3 and
		// web-2 once web-4 and web-8 are available (4m).
		{name: "9 replicas", replicas: 9, starts: []string{"3m", "4m", "5m"},
			waitsFor: [][]string{{"web-7"}, {"web-4", "web-8"}, {"web-2", "web-3"}}},
		// The same with 1999999995 missing replicas: web-1999999998 is
		// available at 1999999994 minutes.
		{name: "2e9 replicas", replicas: 2_000_000_000, starts: []string{"33333333h14m", "33333333h15m", "33333333h16m"},
			waitsFor: [][]string{{"web-1999999998"}, {"web-4", "web-1999999999"}, {"web-2", "web-3"}}},
	}
	eng := regoPolicy(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := scenario.Rollouts("../../testdata/scenarios", "sts-ondelete-managed")
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			r.Workload.Replicas = c.replicas
			d, err := eng.Decide(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			wp, _ := Workload(r, d, testOptions)
			var starts []string
			var waits [][]string
			for _, w := range wp.Waves {
				starts = append(starts, w.Start)
				var names []string
				if w.Binding != nil {
					names = w.Binding.WaitsFor
				}
				waits = append(waits, names)
			}
			if fmt.Sprint(starts) != fmt.Sprint(c.starts) || fmt.Sprint(waits) != fmt.Sprint(c.waitsFor) {
				t.Errorf("waves start at %q waiting for %q, want %q waiting for %q", starts, waits, c.starts, c.waitsFor)
			}
		})
	}
}

// Plan durations past time.Duration's range (292 years) read back.
func TestDurationsPastDurationRange(t *testing.T) {
	for _, sec := range []float64{0, 59, 60, 3600, 5400, 1e6, maxDurationSeconds - 1, 1.2e11} {
		s := formatDuration(sec)
		got, err := ParseDuration(s)
		if err != nil || got != sec {
			t.Errorf("formatDuration(%v) = %q, read back as %v, %v", sec, s, got, err)
		}
	}
	if s := formatDuration(1.2e11); s != "33333333h20m" {
		t.Errorf("formatDuration(1.2e11) = %q, want 33333333h20m", s)
	}
}

// BenchmarkPlanMissingReplicas: the plan of a StatefulSet with 4 pods and
// spec.replicas from a thousand to two billion costs the same.
//
//	go test ./planner/plan -run '^$' -bench BenchmarkPlanMissingReplicas -benchmem
func BenchmarkPlanMissingReplicas(b *testing.B) {
	eng := regoPolicy(b, "")
	rs, err := scenario.Rollouts("../../testdata/scenarios", "sts-missing-replicas")
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range rs {
		for _, n := range []int{1_000, 1_000_000, 2_000_000_000} {
			b.Run(fmt.Sprintf("%s/replicas=%d", r.Workload.Name, n), func(b *testing.B) {
				r.Workload.Replicas = n
				d, err := eng.Decide(context.Background(), r)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					Workload(r, d, testOptions)
				}
			})
		}
	}
}

// A Deployment whose simulation passes the sync bound (two billion
// replicas known only from the ReplicaSet's status, one pod at a time) is
// a workload error naming the fields, never a plan cut short in silence;
// the policy's deny rules still stand on it, for the gate.
func TestSyncBoundIsAnError(t *testing.T) {
	rs, err := scenario.Rollouts("../../testdata/scenarios", "deploy-surge1-unavail0")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	const replicas = 2_000_000_000
	r.Workload.Replicas = replicas
	r.Pods = nil
	for i := range r.ReplicaSets {
		if !r.ReplicaSets[i].New {
			r.ReplicaSets[i].Replicas, r.ReplicaSets[i].AvailableReplicas = replicas, replicas
		}
	}
	d, err := regoPolicy(t, "").Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	d.Deny = []string{"change freeze"}
	wp, _ := Workload(r, d, testOptions)
	if !strings.Contains(wp.Error, "controller syncs") || !strings.Contains(wp.Error, "spec.replicas 2000000000") {
		t.Errorf("error %q, want the sync bound and spec.replicas named", wp.Error)
	}
	if strings.Join(wp.Denied, ";") != "change freeze" {
		t.Errorf("denied %q, want the policy's deny rule kept", wp.Denied)
	}
}
