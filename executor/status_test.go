package executor

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
)

// TestStatus computes the status of StatefulSets in several states through
// a fake clientset, and checks that it only reads.
func TestStatus(t *testing.T) {
	v2 := "example.com/app:v2"
	tests := []struct {
		name  string
		setup func() *cluster
		check func(t *testing.T, st *RolloutStatus)
	}{
		{
			name: "mid-rollout: two pods done, one in flight, the next wave fills the budget",
			setup: func() *cluster {
				c := newCluster(6, appsv1.OnDeleteStatefulSetStrategyType, true, v2, "a")
				c.pods[0] = pod("web-0", v2, newRev, true)
				c.pods[1] = pod("web-1", v2, newRev, true)
				// Patched in place: the spec says v2, the kubelet still runs v1.
				p := pod("web-2", v2, newRev, true)
				p.Status.ContainerStatuses[0].Image = "example.com/app:v1"
				c.pods[2] = p
				return c
			},
			check: func(t *testing.T, st *RolloutStatus) {
				want := StatusPods{Desired: 6, Total: 6, Updated: 3, Available: 5, Held: 0, InFlight: 1}
				if st.Pods != want {
					t.Errorf("pods %+v, want %+v", st.Pods, want)
				}
				if st.State != StatusInProgress {
					t.Errorf("state %s, want %s", st.State, StatusInProgress)
				}
				if len(st.InFlight) != 1 || st.InFlight[0].Pod != "web-2" || !strings.Contains(st.InFlight[0].Reason, "spec says") {
					t.Errorf("in flight %+v, want web-2 with the image reason", st.InFlight)
				}
				if !reflect.DeepEqual(st.Revisions, StatusRevisions{Current: oldRev, Update: newRev}) {
					t.Errorf("revisions %+v", st.Revisions)
				}
				// The rollout's own plan: 3 waves of 2 pods. Three pods
				// have started (two done, web-2 in flight): web-2 is in
				// wave 2, and the plan's first wave (one pod, now) joins it.
				if want := (StatusWaves{Done: 1, Current: 2, Remaining: 2, Total: 3}); st.Waves != want {
					t.Errorf("waves %+v, want %+v", st.Waves, want)
				}
				if want := "in progress: wave 2 of 3"; st.Verdict != want {
					t.Errorf("verdict %q, want %q", st.Verdict, want)
				}
				cw := st.CurrentWave
				if cw == nil || cw.Number != 2 || len(cw.Actions) != 1 || cw.Actions[0].Type != "InPlaceUpdate" {
					t.Fatalf("current wave %+v, want wave 2 with one InPlaceUpdate (budget 2, one in use)", cw)
				}
				if p := cw.Actions[0].Pod; p == "web-0" || p == "web-1" || p == "web-2" {
					t.Errorf("the next wave updates %s again", p)
				}
				if len(st.Budgets) == 0 || st.Budgets[0].InUse != 1 || st.Budgets[0].Limit != 2 {
					t.Errorf("budgets %+v, want 1/2 in use", st.Budgets)
				}
			},
		},
		{
			name: "done: every pod runs the update revision and is available",
			setup: func() *cluster {
				c := newCluster(3, appsv1.OnDeleteStatefulSetStrategyType, true, v2, "a")
				for i := range c.pods {
					c.pods[i] = pod(fmt.Sprintf("web-%d", i), v2, newRev, true)
				}
				c.set.Status.CurrentRevision, c.set.Status.UpdatedReplicas = newRev, 3
				return c
			},
			check: func(t *testing.T, st *RolloutStatus) {
				if st.State != StatusRolledOut || st.Verdict != "rolled out" {
					t.Errorf("state %s %q, want rolled out", st.State, st.Verdict)
				}
				if st.Pods.Updated != 3 || st.Pods.Available != 3 || st.CurrentWave != nil || len(st.Halted) != 0 {
					t.Errorf("status %+v", st)
				}
			},
		},
		{
			name: "halted: InPlaceOnly and an env change",
			setup: func() *cluster {
				c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
				c.set.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
				return c
			},
			check: func(t *testing.T, st *RolloutStatus) {
				if st.State != StatusHalted || len(st.Halted) == 0 || !strings.HasPrefix(st.Verdict, "halted: "+st.Halted[0]) {
					t.Errorf("state %s %q halted %v, want Halted with the first reason", st.State, st.Verdict, st.Halted)
				}
				if st.CurrentWave != nil {
					t.Errorf("a halted rollout has a current wave: %+v", st.CurrentWave)
				}
			},
		},
		{
			name: "a native RollingUpdate StatefulSet apply refuses: status reports it",
			setup: func() *cluster {
				c := newCluster(4, appsv1.RollingUpdateStatefulSetStrategyType, false, v2, "a")
				c.pods[3] = pod("web-3", v2, newRev, true)
				return c
			},
			check: func(t *testing.T, st *RolloutStatus) {
				if st.State != StatusInProgress || st.Pods.Updated != 1 || st.Workload.Strategy != "RollingUpdate" || st.Workload.Managed {
					t.Errorf("status %+v", st)
				}
				if st.CurrentWave == nil || !strings.HasPrefix(st.Verdict, "in progress: wave 2 of ") {
					t.Errorf("verdict %q, current wave %+v", st.Verdict, st.CurrentWave)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			cs := tt.setup().client(rec, nil)
			x := newExec(t, cs, false, &bytes.Buffer{})
			st, err := x.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.APIVersion != statusAPIVersion || st.Kind != statusKind || st.Workload.Name != "web" {
				t.Errorf("header %s %s %+v", st.APIVersion, st.Kind, st.Workload)
			}
			tt.check(t, st)
			for _, a := range cs.Actions() {
				if v := a.GetVerb(); v != "list" && v != "get" && v != "watch" {
					t.Errorf("status wrote: %s %s", v, a.GetResource().Resource)
				}
			}
			if len(rec.evictions) > 0 { // the fake API server's, not in Actions
				t.Errorf("status evicted %v", rec.evictions)
			}
		})
	}
}

// Pods in flight only: the plan has nothing left, the rollout is not done.
func TestStatusLastWaveInFlight(t *testing.T) {
	v2 := "example.com/app:v2"
	c := newCluster(2, appsv1.OnDeleteStatefulSetStrategyType, true, v2, "a")
	c.pods[0] = pod("web-0", v2, newRev, true)
	p := pod("web-1", v2, newRev, true)
	p.Status.ContainerStatuses[0].Image = "example.com/app:v1"
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	c.pods[1] = p
	st, err := newExec(t, c.client(&recorder{}, nil), false, &bytes.Buffer{}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StatusInProgress || st.CurrentWave != nil || st.Pods.InFlight != 1 {
		t.Errorf("status %+v", st)
	}
	// Its own plan is one wave of both pods (max-unavailable 2).
	if st.Waves != (StatusWaves{Done: 0, Current: 1, Remaining: 1, Total: 1}) || st.Verdict != "in progress: wave 1 of 1" {
		t.Errorf("waves %+v verdict %q, want wave 1 of 1", st.Waves, st.Verdict)
	}
}

// The controller's record is marked stale when it no longer describes the
// rollout: recorded for another revision (a record kept while paused
// carries the previous rollout's counts), or by a driver that no longer
// holds the driver Lease (the controller stopped).
func TestStatusControllerRecordStale(t *testing.T) {
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		renew := metav1.NewMicroTime(now.Add(-renewedAgo))
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DriverLeaseName(live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"})},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew, LeaseDurationSeconds: ptr.To[int32](15)}}
	}
	tests := []struct {
		name   string
		record live.RolloutState
		lease  *coordinationv1.Lease
		stale  string // substring; "" not stale
	}{
		{name: "paused, with the previous rollout's counts",
			record: live.RolloutState{Phase: live.RolloutPaused, Revision: oldRev, Desired: 6, Updated: 6, Available: 6},
			stale:  "recorded for revision web-old; the rollout now rolls to web-new"},
		{name: "in progress, its driver's Lease lapsed",
			record: live.RolloutState{Phase: live.RolloutInProgress, Revision: newRev, Wave: 1, Waves: 3, Desired: 6, Driver: "controller c1"},
			lease:  lease("controller c1", time.Minute),
			stale:  "controller c1 no longer holds the driver Lease (it lapsed)"},
		{name: "in progress, its driver's Lease gone",
			record: live.RolloutState{Phase: live.RolloutInProgress, Revision: newRev, Wave: 1, Waves: 3, Desired: 6, Driver: "controller c1"},
			stale:  "controller c1 no longer holds the driver Lease (nobody holds it)"},
		{name: "in progress, someone else holds the Lease",
			record: live.RolloutState{Phase: live.RolloutInProgress, Revision: newRev, Wave: 1, Waves: 3, Desired: 6, Driver: "controller c1"},
			lease:  lease("apply alice", 0),
			stale:  "controller c1 no longer holds the driver Lease (apply alice does)"},
		{name: "in progress, its driver holds the Lease: current",
			record: live.RolloutState{Phase: live.RolloutInProgress, Revision: newRev, Wave: 1, Waves: 3, Desired: 6, Driver: "controller c1"},
			lease:  lease("controller c1", time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(6, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			c.set.Annotations[facts.AnnRolloutState] = tt.record.Encode()
			cs := c.client(&recorder{}, nil)
			if tt.lease != nil {
				if err := cs.Tracker().Add(tt.lease); err != nil {
					t.Fatal(err)
				}
			}
			st, err := newExec(t, cs, false, &bytes.Buffer{}).Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Controller == nil {
				t.Fatal("no controller record")
			}
			switch {
			case tt.stale == "" && st.ControllerStale != "":
				t.Errorf("stale %q, want current", st.ControllerStale)
			case !strings.Contains(st.ControllerStale, tt.stale):
				t.Errorf("stale %q, want %q", st.ControllerStale, tt.stale)
			}
		})
	}
}
