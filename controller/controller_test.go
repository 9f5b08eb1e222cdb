package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

const ns = "prod"

var now = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func tmpl(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func revision(name string, t corev1.PodTemplateSpec, n int64, owner *appsv1.StatefulSet) *appsv1.ControllerRevision {
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{
		"$patch": "replace", "metadata": map[string]any{"labels": t.Labels}, "spec": t.Spec,
	}}}
	raw, _ := json.Marshal(patch)
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: n,
	}
}

// webSet is a managed OnDelete StatefulSet "web" of 4 pods at web-old
// (image v1) whose template says v2 (web-new), maxUnavailable 2, in place
// if possible, with ann added to its annotations.
func webSet(ann map[string]string) []runtime.Object {
	a := map[string]string{facts.AnnManaged: "true", facts.AnnPodUpdatePolicy: "InPlaceIfPossible", facts.AnnMaxUnavailable: "2"}
	for k, v := range ann {
		a[k] = v
	}
	set := testobj.StatefulSet(ns, "web").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "sts-uid", Generation: 2, Annotations: a, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))}).
		Replicas(4).PodManagement(appsv1.ParallelPodManagement).Template(tmpl("example.com/app:v2")).OnDelete().Obj()
	set.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 4, ReadyReplicas: 4, CurrentRevision: "web-old", UpdateRevision: "web-new", CurrentReplicas: 4}
	objs := []runtime.Object{set, revision("web-old", tmpl("example.com/app:v1"), 1, set), revision("web-new", tmpl("example.com/app:v2"), 2, set),
		testobj.Node("node-1").Images("example.com/app:v1", "example.com/app:v2").Ready().Obj()}
	for i := range 4 {
		name := fmt.Sprintf("web-%d", i)
		p := testobj.Pod(ns, name).Meta(metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}).
			Labels(map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: "web-old"}).Owner("StatefulSet", "web", "sts-uid").
			Node("node-1").Image("example.com/app:v1").Obj()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "example.com/app:v1", ImageID: "id-v1", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Hour))}}}}}
		objs = append(objs, p)
	}
	return objs
}

// policies serves the default strategy, and "other" when named.
type policies struct {
	def   engine.Engine
	named map[string]engine.Engine
}

func (p policies) For(name string) (engine.Engine, error) {
	if name == "" {
		return p.def, nil
	}
	if e, ok := p.named[name]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("policy %q unknown", name)
}

type fixture struct {
	client *fake.Clientset
	ctrl   *Controller
	events *events.FakeRecorder
	log    *bytes.Buffer
}

func start(t *testing.T, extra ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	objs := extra
	c := fake.NewClientset(objs...)
	eng, err := engines.Open(ctx, engine.Native, nil, engines.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(100)
	var log bytes.Buffer
	ctrl, err := New(Options{Client: c, Policies: policies{def: eng, named: map[string]engine.Engine{"other": eng}}, Metrics: NewMetrics(prometheus.NewRegistry()),
		Identity: "replica-a", Liveness: "rollplan-system/rollplan-controller", Events: rec, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{client: c, ctrl: ctrl, events: rec, log: &log}
}

var web = key{capture.StatefulSet, ns, "web"}

// images counts the pods by their spec image.
func (f *fixture) images(t *testing.T) map[string]int {
	t.Helper()
	pods, err := f.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		out[p.Spec.Containers[0].Image]++
	}
	return out
}

// state reads the rollout state annotation from the API.
func (f *fixture) state(t *testing.T) *live.RolloutState {
	t.Helper()
	s, err := f.client.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := live.ParseRolloutState(s.Annotations[facts.AnnRolloutState])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) holder(t *testing.T) string {
	t.Helper()
	l, err := f.client.CoordinationV1().Leases(ns).Get(context.Background(), "rollplan-statefulset-web", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func TestSyncDrivesAManagedRollout(t *testing.T) {
	f := start(t, append(webSet(nil), leaderLease("replica-a"))...)
	after, err := f.ctrl.sync(context.Background(), web)
	if err != nil {
		t.Fatal(err)
	}
	// maxUnavailable 2: the first wave updates two pods in place.
	if got := f.images(t); got["example.com/app:v2"] != 2 || got["example.com/app:v1"] != 2 {
		t.Errorf("images after one step: %v, want 2 at v2 and 2 at v1", got)
	}
	st := f.state(t)
	// The state is the step's read, before its writes: wave 1 of 2.
	if st == nil || st.Phase != live.RolloutInProgress || st.Revision != "web-new" || st.Wave != 1 || st.Waves != 2 || st.Desired != 4 || !strings.HasPrefix(st.Driver, "controller replica-a") {
		t.Errorf("rollout state %+v: want InProgress to web-new, wave 1 of 2, 4 desired, driven by the controller", st)
	}
	if h := f.holder(t); h != "controller replica-a" {
		t.Errorf("driver Lease held by %q, want the controller", h)
	}
	if after <= 0 || after > 5*time.Second {
		t.Errorf("a rollout in progress is stepped again within the recheck, got %s", after)
	}
	if got := testutil.ToFloat64(f.ctrl.o.Metrics.Rollouts.WithLabelValues("inprogress")); got != 1 {
		t.Errorf("rollouts in progress metric %v, want 1", got)
	}
	want := []string{
		fmt.Sprintf("rollplan_controller_rollout_last_progress_timestamp_seconds{kind=StatefulSet,workload=web,workload_namespace=prod} %d", now.Unix()),
		"rollplan_controller_rollout_phase{kind=StatefulSet,phase=inprogress,workload=web,workload_namespace=prod} 1",
	}
	if got := append(series(t, f.ctrl.o.Metrics.RolloutProgress), series(t, f.ctrl.o.Metrics.RolloutPhase)...); !slices.Equal(got, want) {
		t.Errorf("per-rollout series %q, want %q", got, want)
	}
}

func TestSyncLeavesAlone(t *testing.T) {
	personLease := func() runtime.Object {
		id := "apply alice@laptop (pid 7)"
		renew := metav1.NewMicroTime(now)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollplan-statefulset-web"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, RenewTime: &renew, AcquireTime: &renew, LeaseDurationSeconds: ptr.To[int32](15)}}
	}
	halted := live.RolloutState{Phase: live.RolloutHalted, Generation: 2, Revision: "web-new", Reasons: []string{"ProgressDeadline: stuck"}}.Encode()
	tests := []struct {
		name      string
		ann       map[string]string
		extra     []runtime.Object
		wantPhase string // "" no state written
		wantInMsg string
		wantEvent string
		wantAfter time.Duration
	}{
		{name: "paused", ann: map[string]string{facts.AnnPaused: "true"}, wantPhase: live.RolloutPaused, wantInMsg: "rollplan resume"},
		{name: "a person drives it", extra: []runtime.Object{personLease()}, wantPhase: live.RolloutWaiting, wantInMsg: "apply alice@laptop", wantAfter: executor.DriverLeaseDuration},
		{name: "halted at this generation", ann: map[string]string{facts.AnnRolloutState: halted}, wantPhase: live.RolloutHalted},
		{name: "a policy the controller does not have", ann: map[string]string{facts.AnnPolicy: "nope"}, wantPhase: live.RolloutWaiting, wantInMsg: `"nope" unknown`, wantEvent: "Warning PolicyUnknown"},
		{name: "not managed", ann: map[string]string{facts.AnnManaged: "false"}},
		// The template says v2 and the pods run v1, but the record says
		// complete at this generation: nothing is stepped (a rollout
		// does not restart without a spec change or rollplan resume).
		{name: "complete at this generation", ann: map[string]string{facts.AnnRolloutState: live.RolloutState{Phase: live.RolloutComplete, Generation: 2}.Encode()}, wantPhase: live.RolloutComplete},
		{name: "not the executor's to drive at this generation", ann: map[string]string{facts.AnnRolloutState: live.RolloutState{Phase: live.RolloutWaiting, Generation: 2, NotDriven: true, Message: "updateStrategy RollingUpdate"}.Encode()}, wantPhase: live.RolloutWaiting, wantInMsg: "RollingUpdate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, append(append(webSet(tc.ann), leaderLease("replica-a")), tc.extra...)...)
			after, err := f.ctrl.sync(context.Background(), web)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.images(t); got["example.com/app:v1"] != 4 {
				t.Errorf("pods changed: %v", got)
			}
			st := f.state(t)
			switch {
			case tc.wantPhase == "" && st != nil:
				t.Errorf("state written: %+v", st)
			case tc.wantPhase != "" && (st == nil || st.Phase != tc.wantPhase || !strings.Contains(st.Message, tc.wantInMsg)):
				t.Errorf("state %+v, want phase %s with %q", st, tc.wantPhase, tc.wantInMsg)
			}
			if h := f.holder(t); strings.HasPrefix(h, "controller") {
				t.Errorf("the controller holds the Lease of a workload it leaves alone")
			}
			if after != tc.wantAfter {
				t.Errorf("stepped again after %s, want %s", after, tc.wantAfter)
			}
			select {
			case ev := <-f.events.Events:
				if tc.wantEvent == "" || !strings.HasPrefix(ev, tc.wantEvent) {
					t.Errorf("event %q, want %q", ev, tc.wantEvent)
				}
			default:
				if tc.wantEvent != "" {
					t.Errorf("no event, want %q", tc.wantEvent)
				}
			}
		})
	}
}

// A halt holds until the template changes: a new generation steps again.
func TestHaltEndsWithANewGeneration(t *testing.T) {
	halted := live.RolloutState{Phase: live.RolloutHalted, Generation: 1, Revision: "web-old", Reasons: []string{"old"}}.Encode()
	f := start(t, append(webSet(map[string]string{facts.AnnRolloutState: halted}), leaderLease("replica-a"))...)
	if _, err := f.ctrl.sync(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	if got := f.images(t); got["example.com/app:v2"] != 2 {
		t.Errorf("a halt recorded at generation 1 held generation 2: %v", got)
	}
	if st := f.state(t); st.Phase != live.RolloutInProgress {
		t.Errorf("state %+v, want InProgress", st)
	}
}

func leaderLease(id string) *coordinationv1.Lease {
	renew := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "rollplan-system", Name: "rollplan-controller"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, RenewTime: &renew, LeaseDurationSeconds: ptr.To[int32](15)}}
}

// The events of a pod reach its managed workload's key, and nothing else's.
func TestPodEventsQueueTheirWorkload(t *testing.T) {
	f := start(t, webSet(nil)...)
	pod, err := f.client.CoreV1().Pods(ns).Get(context.Background(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl.enqueuePod(pod)
	orphan := pod.DeepCopy()
	orphan.OwnerReferences = nil
	f.ctrl.enqueuePod(orphan)
	if n := f.ctrl.queue.Len(); n != 1 {
		t.Fatalf("queue length %d, want 1", n)
	}
	k, _ := f.ctrl.queue.Get()
	if k != web {
		t.Errorf("queued %v, want %v", k, web)
	}
}

// The per-rollout metrics follow a rollout's steps: one phase series per
// workload, and the progress clock moves only when a step sees the rollout
// move, and goes when it leaves InProgress.
func TestRolloutMetrics(t *testing.T) {
	type step struct {
		phase string
		st    live.RolloutState // counts of an InProgress step
		at    time.Duration     // since now
		// want: web's series of both metrics, as series() writes them.
		want []string
	}
	counts := func(wave, updated, available, inFlight int) live.RolloutState {
		return live.RolloutState{Revision: "web-new", Wave: wave, Waves: 3, Updated: updated, Available: available, InFlight: inFlight}
	}
	// since is the progress series of web at now+d.
	since := func(d time.Duration) string {
		return fmt.Sprintf("rollplan_controller_rollout_last_progress_timestamp_seconds{kind=StatefulSet,workload=web,workload_namespace=prod} %d", now.Add(d).Unix())
	}
	phase := func(p string) string {
		return "rollplan_controller_rollout_phase{kind=StatefulSet,phase=" + p + ",workload=web,workload_namespace=prod} 1"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "moving, then stuck, then moving", steps: []step{
			{phase: live.RolloutInProgress, st: counts(1, 0, 4, 2), at: 0, want: []string{since(0), phase("inprogress")}},
			{phase: live.RolloutInProgress, st: counts(1, 2, 2, 2), at: time.Minute, want: []string{since(time.Minute), phase("inprogress")}},
			{phase: live.RolloutInProgress, st: counts(1, 2, 2, 2), at: 5 * time.Minute, want: []string{since(time.Minute), phase("inprogress")}},
			{phase: live.RolloutInProgress, st: counts(2, 2, 4, 0), at: 6 * time.Minute, want: []string{since(6 * time.Minute), phase("inprogress")}},
			{phase: live.RolloutComplete, at: 7 * time.Minute, want: []string{phase("complete")}},
		}},
		{name: "halted, resumed: the clock starts again", steps: []step{
			{phase: live.RolloutInProgress, st: counts(1, 1, 3, 1), at: 0, want: []string{since(0), phase("inprogress")}},
			{phase: live.RolloutHalted, at: time.Minute, want: []string{phase("halted")}},
			{phase: live.RolloutInProgress, st: counts(1, 1, 3, 1), at: 10 * time.Minute, want: []string{since(10 * time.Minute), phase("inprogress")}},
		}},
		{name: "paused, waiting, then no longer managed", steps: []step{
			{phase: live.RolloutPaused, at: 0, want: []string{phase("paused")}},
			{phase: live.RolloutWaiting, at: time.Minute, want: []string{phase("waiting")}},
			{phase: "", at: 2 * time.Minute, want: nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			m := NewMetrics(prometheus.NewRegistry())
			c := &Controller{o: Options{Metrics: m, Now: func() time.Time { return clock }},
				phases: map[key]string{}, progress: map[key]progress{}, dryRuns: map[key]string{}, ownGen: map[key][2]int64{}}
			// Another workload's series stay as they are.
			other := key{capture.Deployment, ns, "api"}
			c.setPhase(other, live.RolloutHalted)
			otherSeries := "rollplan_controller_rollout_phase{kind=Deployment,phase=halted,workload=api,workload_namespace=prod} 1"
			for i, s := range tc.steps {
				clock = now.Add(s.at)
				c.setPhase(web, s.phase)
				if s.phase == live.RolloutInProgress {
					c.markProgress(web, s.st)
				}
				got := append(series(t, m.RolloutProgress), series(t, m.RolloutPhase)...)
				want := append(append([]string{}, s.want...), otherSeries)
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("step %d (%s at +%s): series\n  %s\nwant\n  %s", i, s.phase, s.at, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
			}
		})
	}
}

// series lists what c exposes, one "name{label=value,...} value" each.
func series(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	go func() { c.Collect(ch); close(ch) }()
	var out []string
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var ls []string
		for _, l := range d.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		name := m.Desc().String()
		name = name[strings.Index(name, `fqName: "`)+len(`fqName: "`):]
		name = name[:strings.Index(name, `"`)]
		out = append(out, fmt.Sprintf("%s{%s} %s", name, strings.Join(ls, ","), strconv.FormatFloat(d.GetGauge().GetValue(), 'f', -1, 64)))
	}
	return out
}
