package live

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// TestNormaliseUnreadySince: a pod in flight is counted unready from when
// the kubelet took it out of service, but not before rollplan's in-place
// update began; without rollplan's record, or while the kubelet still
// reports it Ready, from now. An image that runs but never turns Ready
// must reach the progress deadline (the real kubelet showed it never did
// when every step restarted the count).
func TestNormaliseUnreadySince(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name     string
		record   time.Time // zero: no record
		ready    corev1.ConditionStatus
		readyLTT time.Time
		want     time.Time
	}{
		{"never Ready since the update", ago(120), corev1.ConditionFalse, ago(118), ago(118)},
		{"unready before the update: from the update", ago(120), corev1.ConditionFalse, ago(3600), ago(120)},
		{"kubelet has not acted: still Ready", ago(1), corev1.ConditionTrue, ago(3600), now},
		{"no record: someone else changed the spec", time.Time{}, corev1.ConditionFalse, ago(3600), now},
		{"record from the future (clock skew)", now.Add(time.Minute), corev1.ConditionFalse, ago(10), now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web-0", Annotations: map[string]string{}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v2"}}},
				Status: corev1.PodStatus{
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: tc.ready, LastTransitionTime: metav1.NewTime(tc.readyLTT)}},
					// The kubelet has not restarted the container: in flight.
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:v1"}},
				},
			}
			if !tc.record.IsZero() {
				raw, err := json.Marshal(InPlaceRecord{Revision: "r2", At: tc.record.Format(time.RFC3339), ImageIDs: map[string]string{"app": "sha256:old"}})
				if err != nil {
					t.Fatal(err)
				}
				p.Annotations[AnnInPlaceUpdate] = string(raw)
			}
			s := &snapshot.Snapshot{Pods: []*corev1.Pod{p}}
			if got := normalise(s, 0, now); got["web-0"] == "" {
				t.Fatalf("web-0 not in flight: %v", got)
			}
			c := PodCondition(s.Pods[0], corev1.PodReady)
			if c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(tc.want) {
				t.Errorf("Ready %s since %v, want False since %v", c.Status, c.LastTransitionTime.Time, tc.want)
			}
			if PodCondition(p, corev1.PodReady).Status != tc.ready {
				t.Error("normalise changed the snapshot's pod, not a copy")
			}
		})
	}
}
