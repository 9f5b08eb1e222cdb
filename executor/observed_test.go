package executor

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// status tells a rollout nobody drives and one whose pods do not move from
// one in progress, from the cluster's signs of activity.
func TestObservedStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *Activity {
		return &Activity{Time: now.Add(-d).Format(time.RFC3339), What: "pod web-0 created"}
	}
	wave := []plan.Wave{{Index: 1, Start: "0s", Actions: []plan.Action{{Type: plan.ActionRecreate, Pod: "web-2"}}}}
	later := []plan.Wave{{Index: 1, Start: "40s", Actions: []plan.Action{{Type: plan.ActionRecreate, Pod: "web-2"}}}}
	budget := []plan.Budget{{Name: "maxUnavailable", Type: "unavailable", Limit: 1, InUse: 1}}
	stall := &plan.Stall{After: "0s", Reason: "pod web-2 cannot start without exceeding budget maxUnavailable, and nothing in flight frees it"}
	cases := []struct {
		name     string
		kind     string
		managed  bool
		paused   bool
		wp       plan.WorkloadPlan
		inFlight map[string]string
		act      *Activity
		state    string
		verdict  string // prefix
	}{
		{name: "managed, wave now, quiet for an hour", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Waves: wave}, act: ago(time.Hour),
			state: StatusWaitingForDriver, verdict: "waiting for a driver (run rollplan apply, or install the controller): nothing has moved for 1h0m0s"},
		{name: "managed, no activity known", kind: "DaemonSet", managed: true, wp: plan.WorkloadPlan{Waves: wave},
			state: StatusWaitingForDriver, verdict: "waiting for a driver (run rollplan apply, or install the controller)"},
		{name: "managed, moved a moment ago", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Waves: wave}, act: ago(10 * time.Second),
			state: StatusInProgress, verdict: "in progress"},
		{name: "managed, a pod in flight", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Waves: wave}, act: ago(time.Hour),
			inFlight: map[string]string{"web-1": "container app runs v1, spec says v2"}, state: StatusInProgress, verdict: "in progress"},
		{name: "managed, next wave waits for availability", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Waves: later}, act: ago(time.Hour),
			state: StatusInProgress, verdict: "in progress"},
		{name: "native: its controller drives it", kind: "StatefulSet", wp: plan.WorkloadPlan{Waves: wave}, act: ago(time.Hour),
			state: StatusInProgress, verdict: "in progress"},
		{name: "managed Deployment handed to its controller (not paused)", kind: "Deployment", managed: true, wp: plan.WorkloadPlan{Waves: wave}, act: ago(time.Hour),
			state: StatusInProgress, verdict: "in progress"},
		{name: "managed Deployment held paused by rollplan", kind: "Deployment", managed: true, paused: true, wp: plan.WorkloadPlan{Waves: wave}, act: ago(time.Hour),
			state: StatusWaitingForDriver, verdict: "waiting for a driver"},
		{name: "stalled on a budget", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Budgets: budget, Stalled: stall}, act: ago(5 * time.Minute),
			state: StatusStalled, verdict: "stalled for 5m0s: budget maxUnavailable is used up (1/1): pod web-2 cannot start"},
		{name: "stalled, native", kind: "StatefulSet", wp: plan.WorkloadPlan{Budgets: budget, Stalled: stall}, act: ago(5 * time.Minute),
			state: StatusStalled, verdict: "stalled for 5m0s: budget maxUnavailable"},
		{name: "stall predicted, but something moved a moment ago", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Budgets: budget, Stalled: stall}, act: ago(5 * time.Second),
			state: StatusInProgress, verdict: "in progress"},
		{name: "stalls later: waves first", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Waves: wave, Budgets: budget, Stalled: &plan.Stall{After: "2m", Reason: "x"}}, act: ago(time.Hour),
			state: StatusWaitingForDriver, verdict: "waiting for a driver"},
		{name: "halted stays halted", kind: "StatefulSet", managed: true, wp: plan.WorkloadPlan{Halted: []string{"crash loop: pod web-3"}, Stalled: stall}, act: ago(time.Hour),
			state: StatusHalted, verdict: "halted: crash loop: pod web-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &facts.Rollout{Workload: facts.Workload{Kind: c.kind, Namespace: "default", Name: "web", Managed: c.managed, Paused: c.paused, Replicas: 3,
				Annotations: map[string]string{}, Strategy: facts.Strategy{Type: "OnDelete"}}}
			for _, n := range []string{"web-0", "web-1", "web-2"} {
				r.Pods = append(r.Pods, facts.Pod{Name: n, Available: n != "web-0" || c.wp.Stalled == nil, Ready: true, Updated: n == "web-0"})
			}
			wp := c.wp
			wp.Kind, wp.Namespace, wp.Name = c.kind, "default", "web"
			if wp.Halted == nil {
				wp.Halted = []string{}
			}
			if c.inFlight == nil {
				c.inFlight = map[string]string{}
			}
			st := BuildStatus(r, wp, nil, c.inFlight, now)
			observed(st, r, wp, c.act, now)
			if st.State != c.state || !strings.HasPrefix(st.Verdict, c.verdict) {
				t.Errorf("%s %q, want %s %q...", st.State, st.Verdict, c.state, c.verdict)
			}
			if c.state == StatusStalled && (st.Stalled == nil || st.Stalled.Reason != stall.Reason || st.Stalled.For != "5m0s") {
				t.Errorf("stalled %+v", st.Stalled)
			}
		})
	}
}

// lastActivity takes the latest of what the executor and the controllers
// write: revision creation, pod creation, deletion, in-place update,
// readiness at the update revision.
func TestLastActivity(t *testing.T) {
	at := func(hm string) metav1.Time {
		tm, _ := time.Parse(time.RFC3339, "2026-03-01T"+hm+":00Z")
		return metav1.NewTime(tm)
	}
	pod := func(name, created string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: at(created)}}
	}
	r := &facts.Rollout{Workload: facts.Workload{Namespace: "default", Name: "web", UpdateRevision: "web-2"},
		Pods: []facts.Pod{{Name: "web-0"}, {Name: "web-1", Updated: true}, {Name: "web-2"}}}
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-2", CreationTimestamp: at("10:00")}}
	cases := []struct {
		name string
		pods []*corev1.Pod
		want string // time and what; "" for nil
	}{
		{"the template change", []*corev1.Pod{pod("web-0", "09:00")}, "2026-03-01T10:00:00Z update revision web-2 created"},
		{"a pod created", []*corev1.Pod{pod("web-0", "10:30")}, "2026-03-01T10:30:00Z pod web-0 created"},
		{"an in-place update", func() []*corev1.Pod {
			p := pod("web-1", "09:00")
			p.Annotations = map[string]string{live.AnnInPlaceUpdate: `{"revision":"web-2","at":"2026-03-01T11:00:00Z","imageIDs":{}}`}
			return []*corev1.Pod{p}
		}(), "2026-03-01T11:00:00Z pod web-1 updated in place"},
		{"a deletion, less its grace period", func() []*corev1.Pod {
			p := pod("web-2", "09:00")
			ts, grace := at("11:30"), int64(30)
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
			return []*corev1.Pod{p}
		}(), "2026-03-01T11:29:30Z pod web-2 deleted"},
		{"Ready at the update revision", func() []*corev1.Pod {
			p := pod("web-1", "09:00")
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at("11:45")}}
			return []*corev1.Pod{p}
		}(), "2026-03-01T11:45:00Z pod web-1 Ready at the update revision"},
		{"Ready at an old revision does not count", func() []*corev1.Pod {
			p := pod("web-0", "09:00")
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at("11:45")}}
			return []*corev1.Pod{p}
		}(), "2026-03-01T10:00:00Z update revision web-2 created"},
		{"another workload's pod does not count", []*corev1.Pod{pod("api-0", "11:59")}, "2026-03-01T10:00:00Z update revision web-2 created"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := &snapshot.Snapshot{ControllerRevisions: []*appsv1.ControllerRevision{rev}, Pods: c.pods}
			a := lastActivity(snap, r)
			got := ""
			if a != nil {
				got = a.Time + " " + a.What
			}
			if got != c.want {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}
