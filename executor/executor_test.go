package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	ns     = "default"
	oldRev = "web-old"
	newRev = "web-new"
)

// cluster is a StatefulSet "web" of n pods at oldRev running image v1,
// whose template now says v2 (or, with env, a changed env), all Ready for
// an hour.
type cluster struct {
	set  *appsv1.StatefulSet
	pods []*corev1.Pod
	revs []*appsv1.ControllerRevision
	pdbs []*policyv1.PodDisruptionBudget
}

func template(image, env string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: image, Env: []corev1.EnvVar{{Name: "MODE", Value: env}},
		}}},
	}
}

func revision(name string, t corev1.PodTemplateSpec, n int64, owner *appsv1.StatefulSet) *appsv1.ControllerRevision {
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{
		"$patch": "replace", "metadata": map[string]any{"labels": t.Labels}, "spec": t.Spec,
	}}}
	raw, _ := json.Marshal(patch)
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: n,
	}
}

func newCluster(n int, strategy appsv1.StatefulSetUpdateStrategyType, managed bool, newImage, newEnv string) *cluster {
	ann := map[string]string{facts.AnnPodUpdatePolicy: "InPlaceIfPossible", facts.AnnMaxUnavailable: "2"}
	if managed {
		ann[facts.AnnManaged] = "true"
	}
	w := testobj.StatefulSet(ns, "web").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "sts-uid", Generation: 2, Annotations: ann, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))}).
		Replicas(int32(n)).PodManagement(appsv1.ParallelPodManagement).Template(template(newImage, newEnv))
	switch strategy {
	case appsv1.RollingUpdateStatefulSetStrategyType:
		w.Partition(0)
	case appsv1.OnDeleteStatefulSetStrategyType:
		w.OnDelete()
	default:
		w.Spec.UpdateStrategy.Type = strategy
	}
	set := w.Obj()
	set.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: int32(n), ReadyReplicas: int32(n), CurrentRevision: oldRev, UpdateRevision: newRev, CurrentReplicas: int32(n)}
	c := &cluster{set: set, revs: []*appsv1.ControllerRevision{
		revision(oldRev, template("example.com/app:v1", "a"), 1, set),
		revision(newRev, template(newImage, newEnv), 2, set),
	}}
	for i := range n {
		c.pods = append(c.pods, pod(fmt.Sprintf("web-%d", i), "example.com/app:v1", oldRev, true))
	}
	return c
}

// pod is a pod of "web" at revision rev on node-1, running image (env
// MODE=a) since an hour ago, Ready or not.
func pod(name, image, rev string, ready bool) *corev1.Pod {
	return running(testobj.Pod(ns, name).Meta(podMeta(name)).
		Labels(map[string]string{"app": "web", appsv1.ControllerRevisionHashLabelKey: rev}).Owner("StatefulSet", "web", "sts-uid").
		Node("node-1").Image(image).Env("MODE", "a"), ready)
}

// podMeta is the metadata of a pod created an hour ago: UID name-uid,
// resourceVersion 7.
func podMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "7", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}
}

// running is the pod w builds with its container running since an hour
// ago, Ready since then or not.
func running(w *testobj.PodWrapper, ready bool) *corev1.Pod {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	p, image := w.Obj(), w.Spec.Containers[0].Image
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: image, ImageID: "id-" + image, Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Hour))}}}}}
	return p
}

func (c *cluster) objects() []runtime.Object {
	out := []runtime.Object{c.set}
	for _, r := range c.revs {
		out = append(out, r)
	}
	for _, p := range c.pods {
		out = append(out, p)
	}
	for _, p := range c.pdbs {
		out = append(out, p)
	}
	return out
}

// recorder keeps the writes the executor sent.
type recorder struct {
	patches   []string // pod name
	evictions []string
	dryRun    []bool
}

// testClient is a fake clientset holding a cluster, and the API server's
// side of the executor's writes to it: the executors of the tests' helpers
// (testExec, observedExecutor) write through its clusterWriter.
type testClient struct {
	*fake.Clientset
	rec   *recorder
	evict func(name string) error
}

// client is the cluster in a fake clientset. A pod patch must carry the
// pod's resourceVersion; an eviction removes the pod (unless evictErr
// refuses it, or in a dry run). rec records both.
func (c *cluster) client(rec *recorder, evictErr func(name string) error) *testClient {
	return &testClient{Clientset: fake.NewClientset(c.objects()...), rec: rec, evict: evictErr}
}

// install makes x write through the cluster's writer.
func (c *testClient) install(x *Executor) {
	x.writer = clusterWriter{writer: x.writer, client: c}
}

// clusterWriter plays the API server for the writes the fake clientset
// cannot: it checks a pod patch's resourceVersion precondition before the
// clientset applies the patch, and carries out evictions (the fake's
// Eviction API stores nothing). Other writes go to next unchanged.
type clusterWriter struct {
	writer
	client *testClient
}

func (w clusterWriter) dryRun() bool {
	cw, ok := w.writer.(clientWriter)
	return ok && cw.dryRun
}

func (w clusterWriter) patchPod(ctx context.Context, pod *corev1.Pod, pt types.PatchType, data []byte, sub ...string) (*corev1.Pod, error) {
	w.client.rec.patches = append(w.client.rec.patches, pod.Name)
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &body)
	if body.Metadata.ResourceVersion == "" {
		return nil, fmt.Errorf("patch without resourceVersion precondition")
	}
	return w.writer.patchPod(ctx, pod, pt, data, sub...)
}

func (w clusterWriter) evictPod(ctx context.Context, pod *corev1.Pod) error {
	if pod.UID == "" {
		return fmt.Errorf("eviction without UID precondition")
	}
	rec := w.client.rec
	rec.evictions = append(rec.evictions, pod.Name)
	rec.dryRun = append(rec.dryRun, w.dryRun())
	if w.client.evict != nil {
		if err := w.client.evict(pod.Name); err != nil {
			return err
		}
	}
	if !w.dryRun() {
		_ = w.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name)
	}
	return nil
}

// testExec is an executor for one workload of the namespace, on the fixed
// clock, logging to log.
func testExec(t *testing.T, cs kubernetes.Interface, kind, name string, eng engine.Engine, dryRun bool, log *bytes.Buffer) *Executor {
	t.Helper()
	x, err := New(cs, Options{
		Target: live.Target{Namespace: ns, Kind: kind, Name: name},
		Engine: eng, DryRun: dryRun, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(log, nil)), Poll: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := cs.(interface{ install(*Executor) }); ok { // testClient, dsClient
		c.install(x)
	}
	return x
}

func newExec(t *testing.T, cs kubernetes.Interface, dryRun bool, log *bytes.Buffer) *Executor {
	t.Helper()
	return testExec(t, cs, "StatefulSet", "web", native.New(), dryRun, log)
}

func outcomes(s *StepResult) []string {
	var out []string
	for _, a := range s.Actions {
		out = append(out, a.Pod+":"+a.Type+":"+a.Outcome)
	}
	return out
}

func TestStep(t *testing.T) {
	tooMany := func(string) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	}
	tests := []struct {
		name    string
		image   string
		env     string
		setup   func(c *cluster)
		dryRun  bool
		evict   func(string) error
		want    []string // pod:type:outcome of the first wave
		patched []string
		evicted []string
	}{
		{
			name: "image change: the first wave is patched in place, two at a time",
			want: []string{"web-3:InPlaceUpdate:done", "web-2:InPlaceUpdate:done"}, patched: []string{"web-3", "web-2"},
		},
		{
			name: "env change: recreated through the Eviction API",
			env:  "b", want: []string{"web-3:Recreate:done", "web-2:Recreate:done"}, evicted: []string{"web-3", "web-2"},
		},
		{
			name: "a PDB refusing the eviction (429) is not now, not an error",
			env:  "b", evict: tooMany,
			want:    []string{"web-3:Recreate:skipped", "web-2:Recreate:skipped"},
			evicted: []string{"web-3", "web-2"},
		},
		{
			name: "a pod already updating in place spends the budget: one more at most",
			setup: func(c *cluster) {
				// web-3 was patched by an earlier run: spec v2, still running v1.
				p := c.pods[3]
				p.Spec.Containers[0].Image = "example.com/app:v2"
				p.Labels[appsv1.ControllerRevisionHashLabelKey] = newRev
			},
			want: []string{"web-2:InPlaceUpdate:done"}, patched: []string{"web-2"},
		},
		{
			// Replacing a pod that is down costs no availability: all three
			// go first, whatever the budget (2, already over), and the
			// available pod waits.
			name: "three old pods not Ready already: they are updated whatever the budget, nothing else",
			setup: func(c *cluster) {
				c.pods[0] = pod("web-0", "example.com/app:v1", oldRev, false)
				c.pods[1] = pod("web-1", "example.com/app:v1", oldRev, false)
				c.pods[2] = pod("web-2", "example.com/app:v1", oldRev, false)
			},
			want: []string{"web-2:InPlaceUpdate:done", "web-1:InPlaceUpdate:done", "web-0:InPlaceUpdate:done"}, patched: []string{"web-2", "web-1", "web-0"},
		},
		{
			name: "an evicted pod not yet recreated counts against the budget",
			env:  "b",
			setup: func(c *cluster) {
				c.pods = c.pods[:3] // web-3 is gone, the controller has not recreated it
			},
			want: []string{"web-2:Recreate:done"}, evicted: []string{"web-2"},
		},
		{
			name:   "dry run: writes carry dryRun=All, nothing changes",
			env:    "b",
			dryRun: true,
			want:   []string{"web-3:Recreate:would", "web-2:Recreate:would"}, evicted: []string{"web-3", "web-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, env := tt.image, tt.env
			if img == "" {
				img = "example.com/app:v2"
				if env != "" {
					img = "example.com/app:v1"
				}
			}
			if env == "" {
				env = "a"
			}
			c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, img, env)
			if tt.setup != nil {
				tt.setup(c)
			}
			rec := &recorder{}
			cs := c.client(rec, tt.evict)
			var log bytes.Buffer
			res, err := newExec(t, cs, tt.dryRun, &log).Step(context.Background())
			if err != nil {
				t.Fatalf("step: %v\n%s", err, log.String())
			}
			if got := strings.Join(outcomes(res), " "); got != strings.Join(tt.want, " ") {
				t.Errorf("actions %s, want %s\nlog:\n%s", got, strings.Join(tt.want, " "), log.String())
			}
			if strings.Join(rec.patches, ",") != strings.Join(tt.patched, ",") {
				t.Errorf("patched %v, want %v", rec.patches, tt.patched)
			}
			if strings.Join(rec.evictions, ",") != strings.Join(tt.evicted, ",") {
				t.Errorf("evicted %v, want %v", rec.evictions, tt.evicted)
			}
			for _, d := range rec.dryRun {
				if d != tt.dryRun {
					t.Errorf("eviction dryRun %v, want %v", d, tt.dryRun)
				}
			}
		})
	}
}

// staleReader returns a stale snapshot at the first read (the one the plan
// is made from) and the live state afterwards.
type staleReader struct {
	stale *snapshot.Snapshot
	fresh live.Reader
	reads int
}

func (s *staleReader) Read(ctx context.Context, t live.Target) (*snapshot.Snapshot, error) {
	s.reads++
	if s.reads == 1 {
		return s.stale, nil
	}
	return s.fresh.Read(ctx, t)
}

// A plan made from a stale read (every pod available) would update two
// pods; by the time of the write two pods went unready: the live re-check
// before each write refuses both, and nothing is written.
func TestStalePlanDoesNotOverDisrupt(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
	staleSnap, err := live.CaptureReader{Client: c.client(&recorder{}, nil), Now: func() time.Time { return now }}.Read(context.Background(), live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	c.pods[0] = pod("web-0", "example.com/app:v1", oldRev, false)
	c.pods[1] = pod("web-1", "example.com/app:v1", oldRev, false)
	rec := &recorder{}
	cs := c.client(rec, nil)
	var log bytes.Buffer
	x := newExec(t, cs, false, &log)
	x.reader = &staleReader{stale: staleSnap, fresh: live.CaptureReader{Client: cs, Now: func() time.Time { return now }}}
	res, err := x.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) == 0 {
		t.Fatalf("the stale plan had no action: the test proves nothing")
	}
	for _, a := range res.Actions {
		if a.Outcome != Skipped || !strings.Contains(a.Reason, "budget maxUnavailable would be") {
			t.Errorf("%s %s: %s (%s), want skipped for the budget", a.Type, a.Pod, a.Outcome, a.Reason)
		}
	}
	if len(rec.patches)+len(rec.evictions) > 0 {
		t.Errorf("wrote %v %v, want nothing", rec.patches, rec.evictions)
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		name     string
		strategy appsv1.StatefulSetUpdateStrategyType
		managed  bool
		kind     string
		want     []string
	}{
		{"native RollingUpdate", appsv1.RollingUpdateStatefulSetStrategyType, false, "StatefulSet",
			[]string{"StatefulSet default/web", "updateStrategy RollingUpdate", "controller drives this rollout", "`rollplan plan` previews it"}},
		{"managed RollingUpdate: the controller would fight", appsv1.RollingUpdateStatefulSetStrategyType, true, "StatefulSet",
			[]string{"controller drives this rollout"}},
		{"OnDelete, not managed", appsv1.OnDeleteStatefulSetStrategyType, false, "StatefulSet",
			[]string{"not managed by rollplan", facts.AnnManaged}},
		{"an unmanaged Deployment", appsv1.OnDeleteStatefulSetStrategyType, true, "Deployment",
			[]string{"Deployment default/web", "not managed by rollplan", "the Deployment controller rolls it", "kubectl annotate deploy/web -n default " + facts.AnnManaged + "=true", "holds the Deployment with spec.paused itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(4, tt.strategy, tt.managed, "example.com/app:v2", "a")
			objs := c.objects()
			if tt.kind == "Deployment" {
				objs = append(objs, testobj.Deployment(ns, "web").Template(template("x", "a")).
					Selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}).Obj())
			}
			cs := fake.NewClientset(objs...)
			x, err := New(cs, Options{Target: live.Target{Namespace: ns, Kind: tt.kind, Name: "web"}, Engine: native.New(), Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			w := record(x, false)
			_, err = x.Run(context.Background(), false)
			var r *RefusedError
			if !errors.As(err, &r) {
				t.Fatalf("err %v, want a RefusedError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if n := len(cs.Actions()); n == 0 || len(w.calls) > 0 {
				t.Errorf("wrote to a refused workload")
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "get" {
					t.Errorf("refused workload: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// InPlaceOnly with a change that cannot go in place: the policy halts and
// Run returns a HaltedError with its reasons, having written nothing.
func TestHalt(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
	c.set.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
	rec := &recorder{}
	var log bytes.Buffer
	_, err := newExec(t, c.client(rec, nil), false, &log).Run(context.Background(), false)
	var h *HaltedError
	if !errors.As(err, &h) || len(h.Reasons) == 0 {
		t.Fatalf("err %v, want a HaltedError with reasons", err)
	}
	if len(rec.patches)+len(rec.evictions) > 0 {
		t.Errorf("a halted rollout wrote %v %v", rec.patches, rec.evictions)
	}
}

// The in-place patch: images, the revision label the controller counts,
// the in-place record, and the resourceVersion precondition; dryRun=All
// in a dry run.
func TestInPlacePatch(t *testing.T) {
	for _, dry := range []bool{false, true} {
		c := newCluster(1, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
		var log bytes.Buffer
		x := newExec(t, c.client(&recorder{}, nil), dry, &log)
		w := record(x, false)
		res, err := x.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := outcomes(res); len(got) != 1 {
			t.Fatalf("actions %v", got)
		}
		var patch []byte
		for _, c := range w.calls {
			if c.verb == "patchPod" {
				patch = c.data
			}
		}
		var body struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Containers []map[string]string `json:"containers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(patch, &body); err != nil {
			t.Fatal(err)
		}
		if body.Metadata.ResourceVersion != "7" || body.Metadata.Labels[appsv1.ControllerRevisionHashLabelKey] != newRev ||
			len(body.Spec.Containers) != 1 || body.Spec.Containers[0]["image"] != "example.com/app:v2" {
			t.Errorf("patch %s", patch)
		}
		var rec live.InPlaceRecord
		if err := json.Unmarshal([]byte(body.Metadata.Annotations[live.AnnInPlaceUpdate]), &rec); err != nil || rec.Revision != newRev || rec.ImageIDs["app"] != "id-example.com/app:v1" {
			t.Errorf("in-place record %q: %v", body.Metadata.Annotations[live.AnnInPlaceUpdate], err)
		}
		// TestClientWriter: a dry-run writer's requests carry dryRun=All.
		if cw, ok := sends(w.next); !ok || cw.dryRun != dry {
			t.Errorf("dry run %v: writer %+v", dry, w.next)
		}
	}
}

func TestInFlight(t *testing.T) {
	at := now.Add(-10 * time.Second)
	record := func(p *corev1.Pod) {
		raw, _ := json.Marshal(live.InPlaceRecord{Revision: newRev, At: at.Format(time.RFC3339), ImageIDs: map[string]string{"app": "id-example.com/app:v1"}})
		p.Annotations = map[string]string{live.AnnInPlaceUpdate: string(raw)}
		p.Spec.Containers[0].Image = "example.com/app:v2"
	}
	running := func(p *corev1.Pod, image string, started time.Time) {
		cs := &p.Status.ContainerStatuses[0]
		cs.Image, cs.ImageID = image, "id-"+image
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
	}
	tests := []struct {
		name     string
		minReady int
		mutate   func(p *corev1.Pod)
		want     bool
	}{
		{"untouched pod", 0, func(*corev1.Pod) {}, false},
		{"docker.io spelling of the same image", 0, func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "nginx"
			p.Status.ContainerStatuses[0].Image = "docker.io/library/nginx:latest"
		}, false},
		{"patched, the kubelet has not restarted the container", 0, record, true},
		{"restarting with the new image", 0, func(p *corev1.Pod) {
			record(p)
			p.Status.ContainerStatuses[0].Image = "example.com/app:v2"
			p.Status.ContainerStatuses[0].ImageID = ""
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}, true},
		{"new image running and Ready", 0, func(p *corev1.Pod) { record(p); running(p, "example.com/app:v2", now.Add(-5*time.Second)) }, false},
		{"new image Ready for less than minReadySeconds", 30, func(p *corev1.Pod) { record(p); running(p, "example.com/app:v2", now.Add(-5*time.Second)) }, true},
		{"new image Ready for minReadySeconds", 5, func(p *corev1.Pod) { record(p); running(p, "example.com/app:v2", now.Add(-5*time.Second)) }, false},
		{"running but not Ready", 0, func(p *corev1.Pod) {
			record(p)
			running(p, "example.com/app:v2", now.Add(-5*time.Second))
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("web-0", "example.com/app:v1", oldRev, true)
			tt.mutate(p)
			if got, why := live.InFlight(p, tt.minReady, now); got != tt.want {
				t.Errorf("InFlight = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

// A managed OnDelete StatefulSet whose pods are all updated and Ready, as
// its controller counted them: before v1.37 the controller never completes
// the revision and the executor writes status.currentRevision; from v1.37
// the controller does (completeUpdate, reference §8) and the executor only
// waits for it, never writing the status.
func TestOnDeleteCompletionFollowsVersion(t *testing.T) {
	cases := []struct {
		version   kubeversion.Version
		wantWrite bool
	}{
		{kubeversion.V1_35, true},
		{kubeversion.V1_36, true},
		{kubeversion.V1_37, false},
	}
	for _, c := range cases {
		t.Run(c.version.String(), func(t *testing.T) {
			cl := newCluster(3, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			cl.pods = nil
			for i := range 3 {
				cl.pods = append(cl.pods, pod(fmt.Sprintf("web-%d", i), "example.com/app:v2", newRev, true))
			}
			cl.set.Status.UpdatedReplicas, cl.set.Status.CurrentReplicas = 3, 0
			cs := cl.client(&recorder{}, nil)
			var log bytes.Buffer
			x, err := New(cs, Options{
				Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}, Engine: native.New(),
				KubernetesVersion: c.version, Now: func() time.Time { return now },
				Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			cs.install(x)
			w := record(x, false)
			res, err := x.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			wrote := slices.ContainsFunc(w.calls, func(c writeCall) bool { return c.verb == "patchWorkload" && c.subresource == "status" })
			if wrote != c.wantWrite {
				t.Fatalf("status written: %v, want %v (log: %s)", wrote, c.wantWrite, log.String())
			}
			// Done once the revision is recorded complete: by the executor
			// before v1.37, by the controller's next status write after.
			if res.Done != c.wantWrite {
				t.Errorf("done %v, want %v", res.Done, c.wantWrite)
			}
		})
	}
}
