package plan

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine/rego"
)

// scenarioPlans plans every workload of scenario sc with its own policy.
func scenarioPlans(t *testing.T, sc *scenario.Scenario) ([]WorkloadPlan, []*Detail) {
	t.Helper()
	var paths []string
	for _, p := range sc.Policies {
		paths = append(paths, filepath.Join("../..", p))
	}
	eng, err := rego.Load(context.Background(), paths, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", sc.Name, err)
	}
	var wps []WorkloadPlan
	var dets []*Detail
	for _, r := range sc.Rollouts {
		d, err := eng.Decide(context.Background(), r)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		wp, det := Workload(r, d, testOptions)
		wps, dets = append(wps, wp), append(dets, det)
	}
	return wps, dets
}

// waveRow is what a test expects of one wave: the binding budget ("" for
// none) with its use in the wave, and what the wave waits for.
type waveRow struct {
	bound    string
	inUse    int
	reason   string // a part of the binding's reason ("" : not checked)
	waitsFor []string
}

// Each wave carries every budget's use and what bound it, from the
// simulation that packed it: known numbers on scenarios worked by hand.
func TestWaveBudgetsAndBinding(t *testing.T) {
	cases := []struct {
		scenario string
		waves    []waveRow
		// waited: pod → the wave it was kept out of, the budget, and the
		// pod it waited behind.
		waited map[string]Wait
	}{
		{
			// Planned for the newest Kubernetes (scenario.Load), where
			// MaxUnavailableStatefulSet is on: maxUnavailable 2 above the
			// partition, wave pacing (OrderedReady): web-3 waits for
			// both pods of wave 1.
			scenario: "sts-partition-gate-off",
			waves: []waveRow{
				{bound: "maxUnavailable", inUse: 2, reason: "maxUnavailable 2/2: 2 pod(s) unavailable, and web-3 would make 3"},
				{waitsFor: []string{"web-4", "web-5"}},
			},
			waited: map[string]Wait{"web-3": {Wave: 1, Budget: "maxUnavailable"}},
		},
		{
			// DaemonSet maxUnavailable 2 over 5 nodes, rolling: 2, 2, 1;
			// agent-dmp4p waits behind agent-9fw8k, the pod that did not
			// fit in wave 1.
			scenario: "ds-maxunavailable-int",
			waves: []waveRow{
				{bound: "maxUnavailable", inUse: 2, reason: "maxUnavailable 2/2: 2 pod(s) unavailable, and agent-9fw8k would make 3"},
				{bound: "maxUnavailable", inUse: 2, reason: "agent-5f729 would make 3", waitsFor: []string{"agent-f5z7t", "agent-tm57g"}},
				{waitsFor: []string{"agent-9fw8k", "agent-dmp4p"}},
			},
			waited: map[string]Wait{
				"agent-9fw8k": {Wave: 1, Budget: "maxUnavailable"},
				"agent-dmp4p": {Wave: 1, Budget: "maxUnavailable", Behind: "agent-9fw8k"},
				"agent-5f729": {Wave: 2, Budget: "maxUnavailable"},
			},
		},
		{
			// Deployment 10 replicas, maxSurge 3, maxUnavailable 2: both
			// full in wave 1; wave 2 starts when the 3 new pods its first
			// scale-up created are available (the 2 of its second, a sync
			// later, a moment after). %s: the new ReplicaSet.
			scenario: "deploy-rolling-10-25pct",
			waves: []waveRow{
				{bound: "maxUnavailable", inUse: 2, reason: "maxUnavailable 2/2: 8 of 10 desired pods available and at least 8 must stay, so no old pod can go until a new one is available; maxSurge 3/3: 13 pods, at most 13"},
				{bound: "maxUnavailable", inUse: 2, waitsFor: []string{"3 new pod(s) of ReplicaSet %s (wave 1)"}},
				{waitsFor: []string{"3 new pod(s) of ReplicaSet %s (wave 2)"}},
			},
			waited: map[string]Wait{"api-647569c96f-9cskf": {Wave: 1, Budget: "maxUnavailable"}, "api-647569c96f-hsh4q": {Wave: 2, Budget: "maxUnavailable"}},
		},
		{
			// One zone at a time (a groups budget): zone-b waits for
			// zone-a's two pods.
			scenario: "example-one-zone-at-a-time",
			waves: []waveRow{
				{bound: "one-zone-at-a-time", inUse: 1, reason: `one-zone-at-a-time 1/1: 1 group(s) by zone in flight, and agent-m5vgg (zone "zone-b") would make 2`},
				{bound: "one-zone-at-a-time", inUse: 1, waitsFor: []string{"agent-mj5kw", "agent-ncvbn"}},
				{waitsFor: []string{"agent-m5vgg", "agent-sm787"}},
			},
			waited: map[string]Wait{"agent-sm787": {Wave: 1, Budget: "one-zone-at-a-time", Behind: "agent-m5vgg"}},
		},
		{
			// A managed StatefulSet paced by its PDB (maxUnavailable 1).
			scenario: "pdb-managed-sts",
			waves: []waveRow{
				{bound: "pdb/web-pdb", inUse: 1, reason: "pdb/web-pdb 1/1: 1 pod(s) selected by PodDisruptionBudget web-pdb unavailable, and web-4 would make 2"},
				{bound: "pdb/web-pdb", inUse: 1, reason: "web-3 would make 2", waitsFor: []string{"web-5"}},
			},
			waited: map[string]Wait{"web-0": {Wave: 5, Budget: "pdb/web-pdb"}},
		},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			sc, err := scenario.Load(filepath.Join("../../testdata/scenarios", c.scenario))
			if err != nil {
				t.Fatal(err)
			}
			wps, dets := scenarioPlans(t, sc)
			wp, det := wps[0], dets[0]
			if len(wp.Waves) < len(c.waves) {
				t.Fatalf("%d waves, want at least %d", len(wp.Waves), len(c.waves))
			}
			for i, want := range c.waves {
				w := wp.Waves[i]
				b := w.Binding
				if b == nil {
					b = &Binding{}
				}
				var waits []string
				for _, w := range want.waitsFor {
					waits = append(waits, strings.ReplaceAll(w, "%s", wp.ToRevision))
				}
				if b.Budget != want.bound || !strings.Contains(b.Reason, want.reason) || !slices.Equal(b.WaitsFor, waits) {
					t.Errorf("wave %d: binding %+v, want budget %q, reason with %q, waiting for %q", w.Index, *b, want.bound, want.reason, want.waitsFor)
				}
				if want.bound != "" {
					u := w.Budgets[slices.IndexFunc(w.Budgets, func(u WaveBudget) bool { return u.Name == want.bound })]
					if u.InUse != want.inUse {
						t.Errorf("wave %d: %s in use %d, want %d", w.Index, u.Name, u.InUse, want.inUse)
					}
				}
			}
			for pod, want := range c.waited {
				got := det.Waited[pod]
				if got == nil || got.Wave != want.Wave || got.Budget != want.Budget || got.Behind != want.Behind || got.Reason == "" {
					t.Errorf("%s waited %+v, want %+v with a reason", pod, got, want)
				}
			}
		})
	}
}

// Over every scenario: each wave lists the workload's budgets in order
// with their limits; a budget that binds is one the plan paces by, and a
// wave is bound by one only when a later wave or a stall follows; no
// budget the plan paces by is over its limit in a wave, except where the
// controller goes past it whatever the budget (the wave says so) or was
// over it at snapshot time; every pod placed in wave N > 1 says why it
// was not in wave N-1. At least one rolling wave is bound by
// maxUnavailable at its limit (the check cannot pass on empty bindings).
func TestWaveBudgetsInvariants(t *testing.T) {
	all, err := scenario.All("../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	rollingAtLimit := 0
	for _, sc := range all {
		wps, dets := scenarioPlans(t, sc)
		for k, wp := range wps {
			det := dets[k]
			name := sc.Name + " " + wp.Kind + "/" + wp.Name
			fromTop := UpdatesFromTheTop(det.Facts)
			for _, w := range wp.Waves {
				if len(w.Budgets) != len(wp.Budgets) {
					t.Errorf("%s wave %d: %d budgets, want the workload's %d", name, w.Index, len(w.Budgets), len(wp.Budgets))
					continue
				}
				forced := slices.ContainsFunc(w.Actions, func(a Action) bool {
					return slices.ContainsFunc(a.Reasons, func(r string) bool {
						return strings.Contains(r, "whatever") || strings.HasPrefix(r, "surge: deleted while")
					})
				})
				for i, u := range w.Budgets {
					b := wp.Budgets[i]
					if u.Name != b.Name || u.Limit != b.Limit {
						t.Errorf("%s wave %d: budget %d is %s/%d, want %s/%d", name, w.Index, i, u.Name, u.Limit, b.Name, b.Limit)
					}
					if !b.Advisory && !forced && !fromTop && b.InUse <= b.Limit && u.InUse > b.Limit {
						t.Errorf("%s wave %d: %s in use %d over its limit %d", name, w.Index, u.Name, u.InUse, u.Limit)
					}
				}
				if bd := w.Binding; bd != nil && bd.Budget != "" {
					i := slices.IndexFunc(wp.Budgets, func(b Budget) bool { return b.Name == bd.Budget && !b.Advisory })
					if i < 0 {
						t.Errorf("%s wave %d: bound by %q, not a budget the plan paces by", name, w.Index, bd.Budget)
					}
					if w.Index == len(wp.Waves) && wp.Stalled == nil && wp.Summary.Blocked == 0 {
						t.Errorf("%s wave %d: bound by %s, but no wave follows and nothing stalls", name, w.Index, bd.Budget)
					}
					if i >= 0 && wp.Pacing == "rolling" && bd.Budget == "maxUnavailable" && w.Budgets[i].InUse == w.Budgets[i].Limit {
						rollingAtLimit++
					}
				}
				// A wave that does not start at once waits for something;
				// the first wave at 0s waits for nothing.
				waits := w.Binding != nil && len(w.Binding.WaitsFor) > 0
				if starts := w.Index > 1 || w.Start != "0s"; waits != starts {
					t.Errorf("%s wave %d at %s: waits for %v", name, w.Index, w.Start, w.Binding)
				}
				for _, a := range w.Actions {
					pods := []string{a.Pod}
					if a.Type == ActionScaleRS {
						pods = a.Pods
					}
					for _, pod := range pods {
						if pod == "" || w.Index == 1 {
							continue
						}
						if wt := det.Waited[pod]; wt == nil || wt.Wave != w.Index-1 || wt.Reason == "" {
							t.Errorf("%s: pod %s of wave %d: waited %+v, want why it was not in wave %d", name, pod, w.Index, wt, w.Index-1)
						}
					}
				}
			}
		}
	}
	if rollingAtLimit == 0 {
		t.Error("no rolling wave of any scenario is bound by maxUnavailable at its limit")
	}
}
