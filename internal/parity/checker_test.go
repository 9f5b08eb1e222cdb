package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// found is a real workload plan the planner made, with what is behind it.
type found struct {
	wp  plan.WorkloadPlan
	det *plan.Detail
	id  string
}

// clone deep-copies the workload plan (the mutation must not touch det).
func (f *found) clone(t *testing.T) plan.WorkloadPlan {
	t.Helper()
	b, err := json.Marshal(f.wp)
	if err != nil {
		t.Fatal(err)
	}
	var wp plan.WorkloadPlan
	if err := json.Unmarshal(b, &wp); err != nil {
		t.Fatal(err)
	}
	return wp
}

// find scans generated cases for a workload plan that keeps every
// invariant and satisfies want (deterministic: fixed seeds).
func find(t *testing.T, eng engine.Engine, what string, want func(f *found) bool) *found {
	t.Helper()
	for i := 0; i < 4000; i++ {
		c := Generate(rand.New(rand.NewSource(caseSeed(1, i))))
		rollouts, err := facts.Build(c.Snap, c.FactsOptions())
		if err != nil {
			t.Fatal(err)
		}
		res, err := plan.Build(context.Background(), rollouts, eng, plan.Metadata{}, upstreamOptions)
		if err != nil {
			t.Fatal(err)
		}
		for wi := range res.Plan.Workloads {
			f := &found{wp: res.Plan.Workloads[wi], det: res.Details[wi]}
			f.id = fmt.Sprintf("%s %s/%s", f.wp.Kind, f.wp.Namespace, f.wp.Name)
			if len(CheckWorkload(&f.wp, f.det, plan.DefaultOptions)) == 0 && want(f) {
				return f
			}
		}
	}
	t.Fatalf("no generated plan has %s", what)
	return nil
}

// load plans a snapshot file (at Now) and returns its only workload plan,
// which must keep every invariant.
func load(t *testing.T, eng engine.Engine, path string) *found {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	c := &Case{Snap: snap, Now: Now}
	rollouts, err := facts.Build(c.Snap, c.FactsOptions())
	if err != nil {
		t.Fatal(err)
	}
	res, err := plan.Build(context.Background(), rollouts, eng, plan.Metadata{}, upstreamOptions)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Workloads) != 1 {
		t.Fatalf("%s: want one workload, got %d", path, len(res.Plan.Workloads))
	}
	f := &found{wp: res.Plan.Workloads[0], det: res.Details[0]}
	f.id = fmt.Sprintf("%s %s/%s", f.wp.Kind, f.wp.Namespace, f.wp.Name)
	if vs := CheckWorkload(&f.wp, f.det, plan.DefaultOptions); len(vs) > 0 {
		t.Fatalf("%s: the plan breaks invariants before any mutation: %v", path, vs)
	}
	return f
}

// expect asserts that the mutated plan breaks rule at wave for pod, and
// returns the violation (the first one, when several match).
func expect(t *testing.T, f *found, wp *plan.WorkloadPlan, rule string, wave int, pod string) Violation {
	t.Helper()
	vs := CheckWorkload(wp, f.det, plan.DefaultOptions)
	var hit *Violation
	for i, v := range vs {
		if v.Rule == rule && v.Wave == wave && v.Pod == pod && v.Workload == f.id {
			t.Logf("reported: %s", v)
			if hit == nil || strings.Contains(v.Message, ".env") {
				hit = &vs[i]
			}
		}
	}
	if hit != nil {
		return *hit
	}
	t.Errorf("the checker does not report rule %s at wave %d for pod %s of %s; it reports:", rule, wave, pod, f.id)
	for _, v := range vs {
		t.Errorf("  %s", v)
	}
	return Violation{}
}

func podPlan(f *found) bool {
	for _, w := range f.wp.Waves {
		for _, a := range w.Actions {
			if a.Type == plan.ActionScaleRS {
				return false
			}
		}
	}
	return len(f.wp.Waves) > 0
}

func (f *found) pod(name string) *facts.Pod {
	for i := range f.det.Facts.Pods {
		if f.det.Facts.Pods[i].Name == name {
			return &f.det.Facts.Pods[i]
		}
	}
	return nil
}

// replaced: a surge DaemonSet's old pods whose replacement already runs
// beside them, by name (surgeReplaced).
func (f *found) replaced() map[string]string {
	c := &checker{wp: &f.wp, r: f.det.Facts, d: f.det.Decisions}
	out := map[string]string{}
	for o, n := range c.surgeReplaced() {
		out[c.r.Pods[o].Name] = c.r.Pods[n].Name
	}
	return out
}

func (f *found) budget(typ string) *plan.Budget {
	for i, b := range f.wp.Budgets {
		if b.Type == typ && !b.Advisory && b.PDB == "" && b.GroupBy == "" {
			return &f.wp.Budgets[i]
		}
	}
	return nil
}

func (f *found) onlyStrategyBudgets() bool {
	for _, b := range f.wp.Budgets {
		if !b.Advisory && b.PDB != "" {
			return false
		}
	}
	return true
}

// moveFirstOfWave2 moves the first action of wave 2 to the end of wave 1.
func moveFirstOfWave2(wp *plan.WorkloadPlan) plan.Action {
	a := wp.Waves[1].Actions[0]
	wp.Waves[0].Actions = append(wp.Waves[0].Actions, a)
	wp.Waves[1].Actions = wp.Waves[1].Actions[1:]
	if len(wp.Waves[1].Actions) == 0 {
		wp.Waves = append(wp.Waves[:1], wp.Waves[2:]...)
		for i := range wp.Waves {
			wp.Waves[i].Index = i + 1
		}
		wp.Summary.Waves = len(wp.Waves)
	}
	return a
}

// TestCheckerCatchesViolations: real plans, mutated the way a broken
// planner would get them wrong, are reported with the right rule, wave and
// pod — so a passing run of the harness means something.
func TestCheckerCatchesViolations(t *testing.T) {
	eng := engines(t)[0]

	t.Run("duplicate pod", func(t *testing.T) {
		f := find(t, eng, "a pod-by-pod plan", podPlan)
		wp := f.clone(t)
		a := wp.Waves[0].Actions[0]
		last := len(wp.Waves) - 1
		wp.Waves[last].Actions = append(wp.Waves[last].Actions, a)
		expect(t, f, &wp, RuleDuplicatePod, last+1, a.Pod)
	})

	t.Run("unknown pod", func(t *testing.T) {
		f := find(t, eng, "a pod-by-pod plan", podPlan)
		wp := f.clone(t)
		wp.Waves[0].Actions = append(wp.Waves[0].Actions, plan.Action{Type: plan.ActionRecreate, Pod: "no-such-pod"})
		expect(t, f, &wp, RuleUnknownPod, 1, "no-such-pod")
	})

	t.Run("held pod touched", func(t *testing.T) {
		f := find(t, eng, "a plan with held pods and waves", func(f *found) bool { return podPlan(f) && len(f.wp.Held) > 0 })
		wp := f.clone(t)
		h := wp.Held[0].Pod
		wp.Waves[0].Actions = append(wp.Waves[0].Actions, plan.Action{Type: plan.ActionRecreate, Pod: h})
		expect(t, f, &wp, RuleHeldTouched, 1, h)
	})

	t.Run("in-place update of an env change", func(t *testing.T) {
		var wave int
		var pod string
		f := find(t, eng, "a Recreate of a pod whose env changed, in a workload that opted in to in-place updates", func(f *found) bool {
			if w := f.det.Facts.Workload; !w.Managed || w.PodUpdatePolicy == "Recreate" {
				return false
			}
			for wi, w := range f.wp.Waves {
				for _, a := range w.Actions {
					if p := f.pod(a.Pod); a.Type == plan.ActionRecreate && p != nil {
						for _, c := range p.Changes {
							if c.Class == facts.ClassEnv {
								wave, pod = wi+1, a.Pod
								return true
							}
						}
					}
				}
			}
			return false
		})
		wp := f.clone(t)
		for i, a := range wp.Waves[wave-1].Actions {
			if a.Pod == pod {
				wp.Waves[wave-1].Actions[i].Type = plan.ActionInPlace
			}
		}
		wp.Summary.InPlace++
		wp.Summary.Recreate--
		v := expect(t, f, &wp, RuleInPlace, wave, pod)
		if !strings.Contains(v.Message, ".env") {
			t.Errorf("the in-place violation does not name the env change: %s", v)
		}
		expect(t, f, &wp, RuleActionDecision, wave, pod)
	})

	t.Run("swapped order", func(t *testing.T) {
		f := find(t, eng, "a wave of two pods with different order keys", func(f *found) bool {
			if !podPlan(f) || len(f.wp.Waves[0].Actions) < 2 {
				return false
			}
			a, b := f.pod(f.wp.Waves[0].Actions[0].Pod), f.pod(f.wp.Waves[0].Actions[1].Pod)
			var ka, kb []any
			for i, p := range f.det.Facts.Pods {
				if p.Name == a.Name {
					ka = f.det.Decisions.Pods[i].Order
				}
				if p.Name == b.Name {
					kb = f.det.Decisions.Pods[i].Order
				}
			}
			return compareOrder(ka, kb) < 0
		})
		wp := f.clone(t)
		acts := wp.Waves[0].Actions
		acts[0], acts[1] = acts[1], acts[0]
		expect(t, f, &wp, RuleOrder, 1, acts[1].Pod)
	})

	t.Run("unavailability budget exceeded", func(t *testing.T) {
		f := find(t, eng, "a DaemonSet whose second wave waits for its maxUnavailable budget", func(f *found) bool {
			if f.wp.Kind != "DaemonSet" || !podPlan(f) || len(f.wp.Waves) < 2 || f.det.Decisions.Pacing != engine.PacingRolling || !f.onlyStrategyBudgets() {
				return false
			}
			s, u := f.budget("surge"), f.budget("unavailable")
			p := f.pod(f.wp.Waves[1].Actions[0].Pod)
			return u != nil && (s == nil || s.Limit == 0) && p != nil && p.Available
		})
		wp := f.clone(t)
		a := moveFirstOfWave2(&wp)
		expect(t, f, &wp, RuleBudgetUnavailable, 1, a.Pod)
	})

	t.Run("StatefulSet budget exceeded", func(t *testing.T) {
		f := find(t, eng, "a StatefulSet whose second wave waits for its budget", func(f *found) bool {
			if f.wp.Kind != "StatefulSet" || !podPlan(f) || len(f.wp.Waves) < 2 || f.det.Decisions.Pacing != engine.PacingRolling || !f.onlyStrategyBudgets() {
				return false
			}
			p := f.pod(f.wp.Waves[1].Actions[0].Pod)
			return f.budget("unavailable") != nil && p != nil && p.Available
		})
		wp := f.clone(t)
		a := moveFirstOfWave2(&wp)
		expect(t, f, &wp, RuleStatefulSetBudget, 1, a.Pod)
		expect(t, f, &wp, RuleBudgetUnavailable, 1, a.Pod)
	})

	t.Run("surge budget exceeded", func(t *testing.T) {
		f := find(t, eng, "a surge DaemonSet with two waves", func(f *found) bool {
			if f.wp.Kind != "DaemonSet" || !podPlan(f) || len(f.wp.Waves) < 2 || !f.onlyStrategyBudgets() {
				return false
			}
			s := f.budget("surge")
			return s != nil && s.Limit > 0 && f.wp.Waves[1].Actions[0].Surge && f.pod(f.wp.Waves[1].Actions[0].Pod).Available
		})
		wp := f.clone(t)
		a := moveFirstOfWave2(&wp)
		expect(t, f, &wp, RuleBudgetSurge, 1, a.Pod)
	})

	t.Run("groups budget exceeded", func(t *testing.T) {
		var second string
		f := find(t, eng, "a first wave over two zones", func(f *found) bool {
			if !podPlan(f) {
				return false
			}
			zones := map[string]bool{}
			for _, a := range f.wp.Waves[0].Actions {
				p := f.pod(a.Pod)
				if p == nil || !p.Available || a.Surge {
					return false
				}
				if !zones[p.Zone] && len(zones) == 1 {
					second = a.Pod
				}
				zones[p.Zone] = true
			}
			return len(zones) >= 2 && f.wp.Kind != "DaemonSet"
		})
		wp := f.clone(t)
		// The plan claims one zone at a time; its first wave spans two.
		wp.Budgets = append(wp.Budgets, plan.Budget{Name: "one-zone", Type: "groups", GroupBy: "zone", Limit: 1, Source: "test"})
		expect(t, f, &wp, RuleBudgetGroups, 1, second)
	})

	t.Run("wave pacing broken", func(t *testing.T) {
		f := find(t, eng, "a wave-paced plan with two waves", func(f *found) bool {
			return podPlan(f) && len(f.wp.Waves) >= 2 && f.det.Decisions.Pacing == engine.PacingWave
		})
		wp := f.clone(t)
		wp.Waves[1].Start = wp.Waves[0].Start
		expect(t, f, &wp, RulePacing, 2, "")
	})

	t.Run("DaemonSet delete on a node that runs it", func(t *testing.T) {
		f := find(t, eng, "a DaemonSet Recreate", func(f *found) bool {
			return f.wp.Kind == "DaemonSet" && podPlan(f) && f.wp.Waves[0].Actions[0].Type == plan.ActionRecreate
		})
		wp := f.clone(t)
		wp.Waves[0].Actions[0].Type = plan.ActionDelete
		wp.Waves[0].Actions[0].Surge = false
		expect(t, f, &wp, RuleActionDecision, 1, wp.Waves[0].Actions[0].Pod)
	})

	t.Run("surge DaemonSet: old pod beside its available replacement recreated", func(t *testing.T) {
		// The fixed issue's snapshot: agent-1 goes at 0s, agent-1n is available.
		f := load(t, eng, "testdata/known/ds-surge-replaced.yaml")
		idx := -1
		replaced := f.replaced()
		for ai, a := range f.wp.Waves[0].Actions {
			if n, ok := replaced[a.Pod]; ok && a.Type == plan.ActionDelete && f.pod(a.Pod).Ready && f.pod(n).Available && f.wp.Waves[0].Start == "0s" {
				idx = ai
			}
		}
		if idx < 0 {
			t.Fatalf("the plan of ds-surge-replaced.yaml deletes no old pod beside an available replacement at 0s: %+v", f.wp.Waves)
		}
		wp := f.clone(t)
		a := &wp.Waves[0].Actions[idx]
		a.Type, a.Surge = plan.ActionRecreate, true
		wp.Summary.Recreate++
		expect(t, f, &wp, RuleDSReplaced, 1, a.Pod)
		expect(t, f, &wp, RuleActionDecision, 1, a.Pod)
	})

	t.Run("surge DaemonSet: old pod deleted before its replacement is available", func(t *testing.T) {
		// Rare in generated cases: the fixed issue's snapshot has one
		// (agent-2, deleted at 1m once agent-2n is available).
		f := load(t, eng, "testdata/known/ds-surge-replaced.yaml")
		wave, idx := -1, -1
		for wi, w := range f.wp.Waves {
			for ai, a := range w.Actions {
				if a.Pod == "agent-2" && a.Type == plan.ActionDelete && wi > 0 {
					wave, idx = wi+1, ai
				}
			}
		}
		if wave < 0 {
			t.Fatalf("the plan of ds-surge-replaced.yaml does not delete agent-2 after its first wave: %+v", f.wp.Waves)
		}
		wp := f.clone(t)
		a := wp.Waves[wave-1].Actions[idx]
		wp.Waves[wave-1].Actions = append(wp.Waves[wave-1].Actions[:idx:idx], wp.Waves[wave-1].Actions[idx+1:]...)
		wp.Waves[0].Actions = append(wp.Waves[0].Actions, a)
		expect(t, f, &wp, RuleDSReplaced, 1, a.Pod)
	})

	t.Run("surge DaemonSet: first wave short of upstream's surge", func(t *testing.T) {
		var idx int
		f := find(t, eng, "a native surge DaemonSet whose first wave surges an available old pod", func(f *found) bool {
			if f.wp.Kind != "DaemonSet" || f.det.Facts.Workload.Managed || !podPlan(f) || len(f.wp.Waves) < 2 || f.wp.Waves[0].Start != "0s" || !f.onlyStrategyBudgets() {
				return false
			}
			for ai, a := range f.wp.Waves[0].Actions {
				if a.Surge && f.pod(a.Pod).Available {
					idx = ai
					return true
				}
			}
			return false
		})
		wp := f.clone(t)
		// The surge goes a wave later, as if something still held it.
		a := wp.Waves[0].Actions[idx]
		wp.Waves[0].Actions = append(wp.Waves[0].Actions[:idx:idx], wp.Waves[0].Actions[idx+1:]...)
		wp.Waves[1].Actions = append([]plan.Action{a}, wp.Waves[1].Actions...)
		expect(t, f, &wp, RuleDSSurge, 1, "")
	})

	t.Run("summary", func(t *testing.T) {
		f := find(t, eng, "a pod-by-pod plan", podPlan)
		wp := f.clone(t)
		wp.Summary.Recreate++
		expect(t, f, &wp, RuleSummary, 0, "")
	})

	// The summary adds up: the ways a planner once got it wrong.
	summaryCases := []struct {
		name, what string
		want       func(f *found) bool
		mutate     func(wp *plan.WorkloadPlan) (pod string)
	}{
		{"halted with nothing to update", "a halted plan with pods to update",
			func(f *found) bool { return len(f.wp.Halted) > 0 && f.wp.Summary.Blocked > 0 },
			func(wp *plan.WorkloadPlan) string {
				// As before: "6 updated, 0 to update".
				wp.Summary.ToUpdate, wp.Summary.Blocked, wp.Blocked = 0, 0, []plan.Held{}
				return ""
			}},
		{"blocked pod not listed", "a stalled plan", func(f *found) bool { return len(f.wp.Waves) > 0 && f.wp.Summary.Blocked > 0 },
			func(wp *plan.WorkloadPlan) string {
				pod := wp.Blocked[0].Pod
				wp.Blocked = wp.Blocked[1:]
				return pod
			}},
		{"blocked pod without a reason", "a stalled plan", func(f *found) bool { return len(f.wp.Waves) > 0 && f.wp.Summary.Blocked > 0 },
			func(wp *plan.WorkloadPlan) string {
				wp.Blocked[0].Reason = ""
				return wp.Blocked[0].Pod
			}},
		{"acted-on pod listed as blocked", "a pod-by-pod plan", podPlan,
			func(wp *plan.WorkloadPlan) string {
				pod := wp.Waves[0].Actions[0].Pod
				wp.Blocked = append(wp.Blocked, plan.Held{Pod: pod, Reason: "stalled"})
				return pod
			}},
		{"blocked counted as recreated", "a stalled plan", func(f *found) bool { return len(f.wp.Waves) > 0 && f.wp.Summary.Blocked > 0 },
			func(wp *plan.WorkloadPlan) string {
				// The sums still hold; the counts do not match the waves.
				wp.Summary.Blocked--
				wp.Summary.Recreate++
				return ""
			}},
		{"Delete not counted", "a plan with a Delete action", func(f *found) bool { return f.wp.Summary.Deleted > 0 },
			func(wp *plan.WorkloadPlan) string {
				wp.Summary.Deleted--
				return ""
			}},
	}
	for _, c := range summaryCases {
		t.Run("summary: "+c.name, func(t *testing.T) {
			f := find(t, eng, c.what, c.want)
			wp := f.clone(t)
			expect(t, f, &wp, RuleSummary, 0, c.mutate(&wp))
		})
	}

	t.Run("ReplicaSet surge exceeded", func(t *testing.T) {
		var wave, idx int
		f := find(t, eng, "a Deployment that scales its new ReplicaSet up", func(f *found) bool {
			for wi, w := range f.wp.Waves {
				for ai, a := range w.Actions {
					if a.Type == plan.ActionScaleRS && *a.To > *a.From && a.ReplicaSet == f.det.Facts.Workload.UpdateRevision {
						wave, idx = wi+1, ai
						return true
					}
				}
			}
			return false
		})
		wp := f.clone(t)
		a := &wp.Waves[wave-1].Actions[idx]
		to := *a.To + f.det.Facts.Workload.Replicas + 10
		a.To = &to
		expect(t, f, &wp, RuleRSSurge, wave, a.ReplicaSet)
	})

	t.Run("ReplicaSet scale-down below minimum availability", func(t *testing.T) {
		var rsName string
		f := find(t, eng, "a Deployment with one old ReplicaSet of available pods scaled down in wave 1", func(f *found) bool {
			r := f.det.Facts
			if r.Workload.Kind != "Deployment" || r.Workload.MinReadySeconds != 0 || r.Workload.Replicas < 2 || len(f.wp.Waves) == 0 {
				return false
			}
			u := f.budget("unavailable")
			if u == nil || u.Limit >= r.Workload.Replicas {
				return false
			}
			var old []facts.ReplicaSet
			for _, rs := range r.ReplicaSets {
				if rs.MinReadySeconds != 0 {
					return false
				}
				if !rs.New && rs.Replicas > 0 {
					old = append(old, rs)
				}
			}
			if len(old) != 1 || old[0].Replicas != r.Workload.Replicas {
				return false
			}
			for _, p := range r.Pods {
				if p.Owner == old[0].Name && (!p.Available || p.Terminating) {
					return false
				}
				if p.Owner != old[0].Name && p.Available {
					return false
				}
			}
			if old[0].Pods != old[0].Replicas {
				return false
			}
			for _, a := range f.wp.Waves[0].Actions {
				if a.Type == plan.ActionScaleRS && a.ReplicaSet == old[0].Name && *a.To < *a.From {
					rsName = a.ReplicaSet
					return true
				}
			}
			return false
		})
		wp := f.clone(t)
		for i, a := range wp.Waves[0].Actions {
			if a.ReplicaSet == rsName && *a.To < *a.From {
				zero := 0
				var all []string
				for _, p := range f.det.Facts.Pods {
					if p.Owner == rsName {
						all = append(all, p.Name)
					}
				}
				wp.Waves[0].Actions[i].To = &zero
				wp.Waves[0].Actions[i].Pods = all
				break
			}
		}
		expect(t, f, &wp, RuleRSAvailable, 1, rsName)
	})
}
