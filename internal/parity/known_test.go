package parity

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
)

// knownIssue is a planner bug the harness found. planner/plan is not this
// package's to fix, so violations that match an entry are logged instead of
// failing TestRandomParityAndInvariants (-parity.strict fails on them), and
// TestKnownIssuesStillReproduce fails once the repro no longer shows the
// bug: then the planner is fixed and the entry must go.
type knownIssue struct {
	id      string
	summary string
	// repro: a minimal snapshot under testdata/known, planned at now with gates.
	repro string
	now   time.Time
	gates map[string]bool
	rule  string
	// facts: the issue is in facts.Build itself (repro: two builds differ).
	facts bool
	// match: the violation is this issue (narrowly: the rule and the
	// condition under which the planner is known to be wrong).
	match func(v Violation, det *plan.Detail) bool
}

// knownIssues: none open. The issues fixed so far are regression checks in
// fixedIssues below.
var knownIssues = []knownIssue{}

// fixedIssue is a planner bug the harness found and that is fixed: its
// minimal snapshot under testdata/known must plan without any violation
// (the rule that caught it included) and identically with every engine.
type fixedIssue struct {
	id    string
	repro string
	gates map[string]bool
	rule  string
	// want: the plan shows the fix (beyond the absence of violations).
	want func(t *testing.T, wp *plan.WorkloadPlan)
}

var fixedIssues = []fixedIssue{
	{
		// pods.go run() declared a stall when the next event was due at the
		// current time; setup() judged a terminating pod that still reports
		// Ready as available again at once.
		id: "false-stall-due-event", repro: "testdata/known/false-stall-terminating-ready.yaml", rule: RuleStall,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "1m Recreate agent-1", "2m Recreate agent-2")
		},
	},
	{
		// Native Parallel StatefulSet, gate off: only unavailable pods above
		// the next to replace hold it (§4.5).
		id: "sts-gate-off-parallel-stall", repro: "testdata/known/sts-gate-off-parallel-stall.yaml", rule: RuleSTSProgress,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "0s Recreate db-4", "1m Recreate db-3", "2m Recreate db-2", "3m Recreate db-1", "4m Recreate db-0")
		},
	},
	{
		// Missing replicas are created first and count as unavailable (§4.3, §4.7).
		id: "sts-missing-replica", repro: "testdata/known/sts-missing-replica.yaml", rule: RuleSTSMissing,
		gates: map[string]bool{GateMaxUnavailableStatefulSet: true},
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "1m Recreate db-4", "2m Recreate db-3", "3m Recreate db-1", "4m Recreate db-0")
		},
	},
	{
		// Condemned pods are deleted, not recreated (processCondemned, §4.4).
		id: "sts-condemned", repro: "testdata/known/sts-condemned.yaml", rule: RuleSTSCondemned,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "0s Delete db-4", "30s Delete db-3", "1m Recreate db-2", "2m Recreate db-1", "3m Recreate db-0")
		},
	},
	{
		// manage() deletes pods of untolerated NoExecute nodes at once (§3.4).
		id: "ds-noexecute", repro: "testdata/known/ds-noexecute.yaml", rule: RuleDSEvict,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "0s Delete agent-3", "30s Recreate agent-0", "1m30s Recreate agent-1", "2m30s Recreate agent-2")
		},
	},
	{
		// Surge DaemonSet: misscheduled available pods go while
		// availableCount > desired (§3.7 rule 3).
		id: "ds-surge-misscheduled", repro: "testdata/known/ds-surge-misscheduled.yaml", rule: RuleDSProgress,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "0s Recreate(surge) agent-0, Delete agent-3", "1m Recreate(surge) agent-1", "2m Recreate(surge) agent-2")
		},
	},
	{
		// Surge DaemonSet, a node holding an old pod beside its replacement
		// (found by test/fidelity against kube-controller-manager): the old
		// pod goes once the new one is available, outside any budget, and
		// the node counts as a surge pod only until then; an unavailable
		// old pod's replacement spends no surge in its own wave, none at
		// all when the old pod is not Ready (§3.4, §3.7).
		id: "ds-surge-replaced", repro: "testdata/known/ds-surge-replaced.yaml", rule: RuleDSReplaced,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			wantWaves(t, wp, "0s Delete agent-1, Recreate agent-3", "1m Delete agent-2, Recreate(surge) agent-0", "2m Recreate(surge) agent-4")
		},
	},
	{
		// The ReplicaSet deletes by readiness (§2.10): the pod it just
		// created goes, not the Ready pod short of minReadySeconds.
		id: "rs-rank-min-ready", repro: "testdata/known/rs-rank-min-ready.yaml", rule: RuleRSRank,
		want: func(t *testing.T, wp *plan.WorkloadPlan) {
			if len(wp.Waves) == 0 {
				t.Fatalf("want the cleanup in wave 1, got no wave")
			}
			i := slices.IndexFunc(wp.Waves[0].Actions, func(a plan.Action) bool { return a.ReplicaSet == "web-old" })
			if i < 0 {
				t.Fatalf("wave 1 does not scale web-old: %+v", wp.Waves[0].Actions)
			}
			if a := wp.Waves[0].Actions[i]; *a.From != 2 || *a.To != 1 || len(a.Pods) != 0 {
				t.Errorf("wave 1 should scale web-old 2 -> 1 removing the pod the ReplicaSet just created (unnamed), got %+v pods %v", a, a.Pods)
			}
		},
	},
}

// wantWaves compares a pod-by-pod plan with "start Action pod, …" lines.
func wantWaves(t *testing.T, wp *plan.WorkloadPlan, want ...string) {
	t.Helper()
	var got []string
	for _, w := range wp.Waves {
		var as []string
		for _, a := range w.Actions {
			typ := a.Type
			if a.Surge {
				typ += "(surge)"
			}
			as = append(as, typ+" "+a.Pod)
		}
		got = append(got, w.Start+" "+strings.Join(as, ", "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("waves:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}
}

// TestFixedIssuesStayFixed: the minimal snapshots of the fixed known issues
// plan with every engine alike and without any violation.
func TestFixedIssuesStayFixed(t *testing.T) {
	engs := engines(t)
	for _, k := range fixedIssues {
		t.Run(k.id, func(t *testing.T) {
			data, err := os.ReadFile(filepath.FromSlash(k.repro))
			if err != nil {
				t.Fatal(err)
			}
			s, err := DecodeYAML(data)
			if err != nil {
				t.Fatal(err)
			}
			o := evaluate(engs, &Case{Snap: s, Now: Now, Version: kubeversion.V1_36, Gates: k.gates})
			if o.err != nil {
				t.Fatal(o.err)
			}
			if o.parity != "" {
				t.Errorf("plans differ (%s):\n%s", o.parity, o.diff)
			}
			for _, v := range o.violations {
				t.Errorf("regression of %s (rule %s): %s", k.id, k.rule, v)
			}
			for id, v := range o.known {
				t.Errorf("regression of %s: matches known issue %s: %s", k.id, id, v)
			}
			for _, res := range o.results {
				if len(res.Plan.Workloads) != 1 {
					t.Fatalf("want one workload, got %d", len(res.Plan.Workloads))
				}
				k.want(t, &res.Plan.Workloads[0])
			}
		})
	}
}

// matchKnownIssue returns the id of the known issue v is an instance of.
func matchKnownIssue(v Violation, det *plan.Detail) string {
	for _, k := range knownIssues {
		if k.match != nil && k.match(v, det) {
			return k.id
		}
	}
	return ""
}

// TestKnownIssuesStillReproduce: every known planner issue still shows on
// its minimal snapshot. When one does not, the planner was fixed: delete
// the entry from knownIssues (and its testdata) so the invariant is
// enforced again.
func TestKnownIssuesStillReproduce(t *testing.T) {
	engs := engines(t)
	for _, k := range knownIssues {
		t.Run(k.id, func(t *testing.T) {
			data, err := os.ReadFile(filepath.FromSlash(k.repro))
			if err != nil {
				t.Fatal(err)
			}
			s, err := DecodeYAML(data)
			if err != nil {
				t.Fatal(err)
			}
			c := &Case{Snap: s, Now: k.now, Version: kubeversion.V1_36, Gates: k.gates}
			if k.facts {
				// Map order: a few builds show both answers when the bug is there.
				first, err := facts.Build(c.Snap, c.FactsOptions())
				if err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(first)
				for i := 0; i < 50; i++ {
					again, _ := facts.Build(c.Snap, c.FactsOptions())
					if b, _ := json.Marshal(again); !bytes.Equal(a, b) {
						t.Logf("still reproduces: build %d differs", i+2)
						return
					}
				}
				t.Errorf("known issue %s no longer reproduces on %s: facts.Build seems deterministic now; remove it from knownIssues", k.id, k.repro)
				return
			}
			o := evaluate(engs, c)
			if o.err != nil {
				t.Fatal(o.err)
			}
			found := false
			for _, res := range o.results {
				for wi := range res.Plan.Workloads {
					for _, v := range CheckWorkload(&res.Plan.Workloads[wi], res.Details[wi], plan.DefaultOptions) {
						if v.Rule == k.rule && k.match(v, res.Details[wi]) {
							found = true
							t.Logf("still reproduces: %s", v)
						}
					}
				}
			}
			if !found {
				t.Errorf("known issue %s (%s) no longer reproduces on %s: the planner seems fixed; remove it from knownIssues so rule %s is enforced again (and add the repro to fixedIssues)", k.id, k.summary, k.repro, k.rule)
			}
		})
	}
}

// TestFactsDeterministicOnResizeRemoval: the fixed known issue
// facts-resize-detail-order (resizable() reported the first removed
// resource in map order) stays fixed.
func TestFactsDeterministicOnResizeRemoval(t *testing.T) {
	data, err := os.ReadFile("testdata/known/facts-resize-detail-order.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	c := &Case{Snap: s, Now: Now}
	first, err := facts.Build(c.Snap, c.FactsOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(first)
	if !bytes.Contains(a, []byte("cpu removed: requests and limits cannot be removed by a resize")) {
		t.Fatalf("want the first removed resource in name order (cpu) in the facts:\n%s", a)
	}
	for i := 0; i < 50; i++ {
		again, _ := facts.Build(c.Snap, c.FactsOptions())
		if b, _ := json.Marshal(again); !bytes.Equal(a, b) {
			t.Fatalf("build %d differs from build 1", i+2)
		}
	}
}
