package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	rolloutv1 "github.com/rollplan/rollplan/api/v1alpha1"
	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
)

// Every state the controller records gives the conditions kstatus reads
// as the rollout's phase: InProgress, Current or Failed, and Ready only
// when rolled out.
func TestRolloutConditions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		st           live.RolloutState
		kstatus      status.Status
		ready        metav1.ConditionStatus
		reason, want string // the Reconciling or Stalled reason; a word of the message
	}{
		{"rolled out", live.RolloutState{Phase: live.RolloutComplete, Desired: 3, Updated: 3, Available: 3}, status.CurrentStatus, metav1.ConditionTrue, "RolledOut", "3/3 pods updated"},
		{"rolling, wave 2 of 3", live.RolloutState{Phase: live.RolloutInProgress, Wave: 2, Waves: 3}, status.InProgressStatus, metav1.ConditionFalse, "Wave2Of3", "wave 2 of 3"},
		{"rolling, before the first action", live.RolloutState{Phase: live.RolloutInProgress, Waves: 3}, status.InProgressStatus, metav1.ConditionFalse, "Starting", "wave 0 of 3"},
		{"halted", live.RolloutState{Phase: live.RolloutHalted, Message: "halted by policy: crash-looping"}, status.FailedStatus, metav1.ConditionFalse, "Halted", "crash-looping"},
		{"stalled", live.RolloutState{Phase: live.RolloutInProgress, Stalled: true, Message: "stalled for 1m: budget maxUnavailable is used up"}, status.FailedStatus, metav1.ConditionFalse, "BudgetUsedUp", "budget maxUnavailable"},
		{"paused", live.RolloutState{Phase: live.RolloutPaused}, status.InProgressStatus, metav1.ConditionFalse, "Paused", "Paused"},
		{"driven by a person", live.RolloutState{Phase: live.RolloutWaiting, Driver: "apply alice@laptop"}, status.InProgressStatus, metav1.ConditionFalse, "DrivenElsewhere", "alice"},
		{"not drivable", live.RolloutState{Phase: live.RolloutWaiting, NotDriven: true, Message: "updateStrategy RollingUpdate"}, status.FailedStatus, metav1.ConditionFalse, "NotDriven", "RollingUpdate"},
		{"policy unknown", live.RolloutState{Phase: live.RolloutWaiting, Message: "policy \"zones\" is not loaded"}, status.FailedStatus, metav1.ConditionFalse, "PolicyUnknown", "zones"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := rolloutConditions(tc.st, 1)
			now := metav1.Now()
			for i := range conds {
				conds[i].LastTransitionTime = now
			}
			st := rolloutStatus(tc.st, 1)
			st.Conditions = conds
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rolloutv1.Rollout{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rollplan.dev/v1alpha1", Kind: "Rollout"},
				ObjectMeta: metav1.ObjectMeta{Name: "statefulset-web", Namespace: "prod", Generation: 1},
				Status:     st,
			})
			if err != nil {
				t.Fatal(err)
			}
			r, err := status.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.kstatus {
				t.Errorf("kstatus %s (%s), want %s", r.Status, r.Message, tc.kstatus)
			}
			found := false
			for _, c := range conds {
				switch c.Type {
				case rolloutv1.ConditionReady:
					if c.Status != tc.ready {
						t.Errorf("Ready %s, want %s", c.Status, tc.ready)
					}
				case rolloutv1.ConditionReconciling, rolloutv1.ConditionStalled:
					if c.Reason == tc.reason && strings.Contains(c.Message, tc.want) {
						found = true
					}
				}
				if c.ObservedGeneration != 1 || c.Reason == "" {
					t.Errorf("condition %s: observedGeneration %d, reason %q", c.Type, c.ObservedGeneration, c.Reason)
				}
			}
			if !found {
				t.Errorf("no Reconciling or Stalled condition with reason %s and %q in its message: %+v", tc.reason, tc.want, conds)
			}
		})
	}
}

func TestRolloutName(t *testing.T) {
	if got := RolloutName("StatefulSet", "web"); got != "statefulset-web" {
		t.Errorf("RolloutName = %q", got)
	}
	long := RolloutName("Deployment", strings.Repeat("a", 253))
	if len(long) != 253 || !strings.HasPrefix(long, "deployment-aaa") || long == RolloutName("Deployment", strings.Repeat("a", 252)+"b") {
		t.Errorf("RolloutName of a 253-character name: %q (%d): want 253 characters, distinct per name", long, len(long))
	}
}

// The analysis gate's state becomes the AnalysisPassed condition and
// status.analysis: its verdict, with the query and value in the message,
// while Ready, Reconciling and Stalled (what kstatus reads) stay as the
// phase says.
func TestRolloutAnalysisCondition(t *testing.T) {
	gate := &plan.Gate{Soak: "2s", OnFail: "rollback", Measurements: []plan.GateMeasurement{{Name: "errors", Provider: "prometheus", Query: `max(errors{pod=~"web-2|web-3"})`}}}
	results := map[string][]facts.Result{"errors": {{Value: 0.9, Taken: "2026-11-29T10:00:00Z"}}}
	for _, tc := range []struct {
		name    string
		a       executor.AnalysisState
		phase   string
		state   string
		status  metav1.ConditionStatus
		kstatus status.Status
		want    string // a part of the condition's message
	}{
		{"wave in progress", executor.AnalysisState{Wave: 1, Attempt: 1, Gate: gate, Pods: []string{"web-2", "web-3"}}, live.RolloutInProgress,
			plan.AnalysisWaveInProgress, metav1.ConditionUnknown, status.InProgressStatus, "wave 1 (web-2, web-3) in progress, then soak 2s"},
		{"soaking", executor.AnalysisState{Wave: 1, Attempt: 1, Gate: gate, AvailableAt: "2026-11-29T10:00:00Z", MeasureAt: "2026-11-29T10:00:02Z"}, live.RolloutInProgress,
			plan.AnalysisSoaking, metav1.ConditionUnknown, status.InProgressStatus, "measured from 2026-11-29T10:00:02Z"},
		{"passed", executor.AnalysisState{Wave: 2, Attempt: 1, Gate: gate, Verdict: "pass", Message: "errors at most 0.5", Results: map[string][]facts.Result{"errors": {{Value: 0.1}}}}, live.RolloutInProgress,
			plan.AnalysisPassed, metav1.ConditionTrue, status.InProgressStatus, "wave 2 (try 1): pass: errors at most 0.5; errors = 0.1"},
		{"inconclusive, measured again", executor.AnalysisState{Wave: 1, Attempt: 2, Gate: gate, Verdict: "inconclusive", Message: "no value", MeasureAt: "2026-11-29T10:00:05Z"}, live.RolloutInProgress,
			plan.AnalysisInconclusive, metav1.ConditionFalse, status.InProgressStatus, "try 2 from 2026-11-29T10:00:05Z"},
		{"halted", executor.AnalysisState{Wave: 1, Attempt: 2, Gate: gate, Verdict: "inconclusive", Halted: "analysis after wave 1 inconclusive after 2 tries"}, live.RolloutHalted,
			plan.AnalysisHalted, metav1.ConditionFalse, status.FailedStatus, "inconclusive after 2 tries"},
		{"failed", executor.AnalysisState{Wave: 1, Attempt: 1, Gate: gate, Verdict: "fail", Message: "errors = 0.9, above 0.5", Results: results}, live.RolloutInProgress,
			plan.AnalysisFailed, metav1.ConditionFalse, status.InProgressStatus, "errors = 0.9"},
		{"rolled back, complete", executor.AnalysisState{Wave: 1, From: "web-v2", Gate: gate, Verdict: "fail", RolledBack: true, Message: "analysis after wave 1 failed: errors = 0.9, above 0.5"}, live.RolloutComplete,
			plan.AnalysisRolledBack, metav1.ConditionFalse, status.CurrentStatus, "rolled back from web-v2 after wave 1"},
		{"promoted", executor.AnalysisState{Wave: 1, Gate: gate, Promoted: true}, live.RolloutInProgress,
			plan.AnalysisPromoted, metav1.ConditionTrue, status.InProgressStatus, "promoted by hand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := live.RolloutState{Phase: tc.phase, Wave: 1, Waves: 3, Analysis: executor.AnalysisRecord(&tc.a), Message: tc.a.Halted}
			conds := rolloutConditions(st, 1)
			var got *metav1.Condition
			for i := range conds {
				conds[i].LastTransitionTime = metav1.Now()
				if conds[i].Type == rolloutv1.ConditionAnalysisPassed {
					got = &conds[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s condition in %+v", rolloutv1.ConditionAnalysisPassed, conds)
			}
			if got.Status != tc.status || got.Reason != tc.state || !strings.Contains(got.Message, tc.want) {
				t.Errorf("AnalysisPassed %s, reason %s, message %q: want %s, %s, with %q", got.Status, got.Reason, got.Message, tc.status, tc.state, tc.want)
			}
			rs := rolloutStatus(st, 1)
			if rs.Analysis == nil || rs.Analysis.State != tc.state || int(rs.Analysis.Wave) != tc.a.Wave || rs.Analysis.Verdict != tc.a.Verdict {
				t.Errorf("status.analysis %+v, want state %s, wave %d, verdict %q", rs.Analysis, tc.state, tc.a.Wave, tc.a.Verdict)
			}
			rs.Conditions = conds
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rolloutv1.Rollout{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rollplan.dev/v1alpha1", Kind: "Rollout"},
				ObjectMeta: metav1.ObjectMeta{Name: "statefulset-web", Namespace: "prod", Generation: 1},
				Status:     rs,
			})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := status.Compute(&unstructured.Unstructured{Object: obj}); err != nil || r.Status != tc.kstatus {
				t.Errorf("kstatus %v (%v), want %s: the gate's condition must not change what kstatus reads", r, err, tc.kstatus)
			}
		})
	}
	// A rollout without a gate carries no AnalysisPassed condition.
	for _, c := range rolloutConditions(live.RolloutState{Phase: live.RolloutComplete}, 1) {
		if c.Type == rolloutv1.ConditionAnalysisPassed {
			t.Errorf("a rollout without a gate has %s: %+v", c.Type, c)
		}
	}
}
