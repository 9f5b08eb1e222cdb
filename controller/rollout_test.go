package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	rolloutv1 "github.com/rollplan/rollplan/api/v1alpha1"
	"github.com/rollplan/rollplan/planner/live"
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
