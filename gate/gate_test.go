package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const ns = "shop"

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// statefulSet "db": n pods, managed, OnDelete, max-unavailable 2, at rest
// (every pod at the one revision, Ready for an hour), except the pods
// named in unready.
func statefulSet(n int, unready ...string) []runtime.Object {
	set := testobj.StatefulSet(ns, "db").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "db", UID: "db-uid", Generation: 1, Labels: map[string]string{"tier": "critical"}}).
		Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: "2"}).
		Replicas(int32(n)).PodManagement(appsv1.ParallelPodManagement).OnDelete().Template(template("example.com/db:v1")).Obj()
	set.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: int32(n), CurrentRevision: "db-1", UpdateRevision: "db-1"}
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"$patch": "replace", "metadata": set.Spec.Template.ObjectMeta, "spec": set.Spec.Template.Spec}}})
	objs := []runtime.Object{set, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-1", Labels: map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "db-uid", Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1,
	}}
	for i := range n {
		name := fmt.Sprintf("db-%d", i)
		ready := corev1.ConditionTrue
		for _, u := range unready {
			if u == name {
				ready = corev1.ConditionFalse
			}
		}
		p := testobj.Pod(ns, name).
			Meta(metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "10", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}).
			Labels(map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-1"}).Owner("StatefulSet", "db", "db-uid").
			Node("node-1").Image("example.com/db:v1").Obj()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "example.com/db:v1", ImageID: "id-v1", Ready: ready == corev1.ConditionTrue,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Hour))}}}}}
		objs = append(objs, p)
	}
	return objs
}

// fixture is a gate over a fake API server's informer cache.
type fixture struct {
	t      testing.TB
	client *fake.Clientset
	gate   *Gate
	store  *MemoryStore
}

var (
	engineOnce sync.Once
	defaultEng engine.Engine
	engineErr  error
)

// defaultEngine: the built-in strategy in Rego, compiled once for the tests.
func defaultEngine(t testing.TB) engine.Engine {
	engineOnce.Do(func() {
		defaultEng, engineErr = rego.Load(context.Background(), nil, time.Minute)
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return defaultEng
}

func newFixture(t testing.TB, o Options, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	src := capture.NewListerSource(f, f)
	f.Start(t.Context().Done())
	if err := src.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	store := &MemoryStore{}
	if o.Engine == nil {
		o.Engine = defaultEngine(t)
	}
	o.Cache, o.Store, o.Now = src, store, func() time.Time { return now }
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, client: client, gate: g, store: store}
}

func podResource() metav1.GroupVersionResource {
	return metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
}

func evict(name string, dryRun bool) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{UID: types.UID("req-" + name), Namespace: ns, Name: name, Resource: podResource(),
		SubResource: "eviction", Operation: admissionv1.Create, DryRun: &dryRun}
}

func (f *fixture) podJSON(name string, change func(*corev1.Pod)) []byte {
	p, err := f.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if change != nil {
		change(p)
	}
	raw, _ := json.Marshal(p)
	return raw
}

func (f *fixture) review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	f.t.Helper()
	resp, decision, _ := f.gate.Review(context.Background(), req)
	if resp.UID != req.UID {
		f.t.Errorf("response uid %q, want %q", resp.UID, req.UID)
	}
	return resp, decision
}

func (f *fixture) reserved() []string {
	var out []string
	for _, r := range f.store.m[workloadKey(ns, "StatefulSet", "db")] {
		out = append(out, r.Pod)
	}
	return out
}

func TestEvictionsStopAtTheBudget(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5)...)
	for _, pod := range []string{"db-0", "db-1"} {
		if resp, d := f.review(evict(pod, false)); !resp.Allowed || d != Allowed {
			t.Fatalf("eviction of %s: %s %v, want admitted", pod, d, resp.Result)
		}
	}
	if got := f.reserved(); strings.Join(got, ",") != "db-0,db-1" {
		t.Errorf("reserved %v, want db-0,db-1", got)
	}
	resp, d := f.review(evict("db-2", false))
	if resp.Allowed || d != Denied {
		t.Fatalf("third eviction against max-unavailable 2: %s, want denied", d)
	}
	msg := resp.Result.Message
	for _, want := range []string{"StatefulSet shop/db", "budget maxUnavailable allows 2", "would make 3", "db-0 (disruption admitted, not yet seen), db-1 (disruption admitted, not yet seen)", "eviction of pod shop/db-2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("denial %q does not say %q", msg, want)
		}
	}
	if resp.Result.Code != 429 {
		t.Errorf("eviction denial code %d, want 429 (drains retry)", resp.Result.Code)
	}
	// The API server hands the webhook's status to the caller as is.
	if err := (&apierrors.StatusError{ErrStatus: *resp.Result}); !live.GateDenied(err) || !apierrors.IsTooManyRequests(err) {
		t.Errorf("eviction denial %+v: want a 429 carrying %s", resp.Result, live.GateDenialCause)
	}
	// A pod already unavailable may always go, budget full or not.
	f2 := newFixture(t, Options{}, statefulSet(5, "db-3", "db-4")...)
	if resp, _ := f2.review(evict("db-4", false)); !resp.Allowed {
		t.Errorf("eviction of an unready pod denied: %v", resp.Result)
	}
	if resp, _ := f2.review(evict("db-0", false)); resp.Allowed {
		t.Errorf("eviction of a Ready pod with two unready and max-unavailable 2 admitted")
	}
}

func TestDryRunNeverReserves(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5)...)
	for range 5 {
		if resp, _ := f.review(evict("db-0", true)); !resp.Allowed {
			t.Fatalf("dry-run eviction denied: %v", resp.Result)
		}
	}
	if got := f.reserved(); len(got) != 0 {
		t.Errorf("dry runs reserved %v", got)
	}
}

// evictObject: an eviction request whose Eviction (apiVersion) asks for a
// dry run in its deleteOptions, as kubectl drain --dry-run=server sends
// it: the request's own dryRun is false.
func evictObject(name, apiVersion string, dryRun []string) *admissionv1.AdmissionRequest {
	req := evict(name, false)
	raw, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "Eviction",
		"metadata": map[string]any{"name": name, "namespace": ns}, "deleteOptions": map[string]any{"dryRun": dryRun}})
	req.Object = runtime.RawExtension{Raw: raw}
	return req
}

// Dry runs, however they say so, are judged but reserve nothing: three in
// a row against max-unavailable 2 are all admitted.
func TestDryRunEvictions(t *testing.T) {
	for _, c := range []struct {
		name    string
		req     func(pod string) *admissionv1.AdmissionRequest
		dryRun  bool
		reserve string
	}{
		{"request dryRun", func(pod string) *admissionv1.AdmissionRequest { return evict(pod, true) }, true, ""},
		{"policy/v1 deleteOptions.dryRun All", func(pod string) *admissionv1.AdmissionRequest {
			return evictObject(pod, "policy/v1", []string{metav1.DryRunAll})
		}, true, ""},
		{"policy/v1beta1 deleteOptions.dryRun All", func(pod string) *admissionv1.AdmissionRequest {
			return evictObject(pod, "policy/v1beta1", []string{metav1.DryRunAll})
		}, true, ""},
		{"an Eviction without dryRun is real", func(pod string) *admissionv1.AdmissionRequest {
			return evictObject(pod, "policy/v1", nil)
		}, false, "db-0,db-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, statefulSet(5)...)
			for i, pod := range []string{"db-0", "db-1", "db-2"} {
				resp, _, v := f.gate.Review(context.Background(), c.req(pod))
				if want := c.dryRun || i < 2; resp.Allowed != want {
					t.Errorf("eviction of %s: allowed %v, want %v: %s", pod, resp.Allowed, want, v.text())
				}
				if v.dryRun != c.dryRun {
					t.Errorf("eviction of %s: dry run %v, want %v", pod, v.dryRun, c.dryRun)
				}
			}
			if got := strings.Join(f.reserved(), ","); got != c.reserve {
				t.Errorf("reserved %q, want %q", got, c.reserve)
			}
		})
	}
}

// TestRacingEvictions: 50 concurrent evictions, through two gate replicas
// sharing one store, against max-unavailable 2 admit exactly 2.
func TestRacingEvictions(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(50)...)
	other, err := New(f.gate.opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 50 {
		g := f.gate
		if i%2 == 1 {
			g = other
		}
		wg.Go(func() {
			resp, _, _ := g.Review(context.Background(), evict(fmt.Sprintf("db-%d", i), false))
			if resp.Allowed {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != 2 {
		t.Errorf("admitted %d of 50 racing evictions, want exactly 2", admitted)
	}
}

// TestReservationEndsWhenTheCacheShowsIt: once the evicted pod is gone and
// its replacement available, the budget has room again.
func TestReservationEndsWhenTheCacheShowsIt(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5)...)
	f.review(evict("db-0", false))
	f.review(evict("db-1", false))
	if resp, _ := f.review(evict("db-2", false)); resp.Allowed {
		t.Fatal("budget full, yet admitted")
	}
	// db-0 is deleted and comes back Ready (new UID): its reservation lapses.
	p, _ := f.client.CoreV1().Pods(ns).Get(context.Background(), "db-0", metav1.GetOptions{})
	_ = f.client.CoreV1().Pods(ns).Delete(context.Background(), "db-0", metav1.DeleteOptions{})
	p.UID, p.ResourceVersion = "db-0-new", ""
	if _, err := f.client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := f.review(evict("db-2", false))
		if resp.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still denied after db-0 came back: %v", resp.Result.Message)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And a reservation lapses after its TTL even if the cache never shows it.
	g := f.gate
	g.opts.Now = func() time.Time { return now.Add(time.Minute) }
	if resp, _ := f.review(evict("db-3", false)); !resp.Allowed {
		t.Errorf("reservations older than the TTL still held: %v", resp.Result.Message)
	}
}

// TestReservationOutlivesUnrelatedChanges: a pod that changed after its
// eviction was admitted (a label, a status write: a later resourceVersion)
// but is still available has not been disrupted yet: its reservation
// still counts. (Counting it as shown let a third eviction through on the
// real control plane.)
func TestReservationOutlivesUnrelatedChanges(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5)...)
	f.review(evict("db-0", false))
	f.review(evict("db-1", false))
	for _, name := range []string{"db-0", "db-1"} {
		p, _ := f.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		p.ResourceVersion = "11"
		p.Labels["touched"] = "yes"
		if _, err := f.client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the cache has the later versions, then ask.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, _ := f.gate.opts.Cache.Pod(ns, "db-1")
		if p != nil && p.Labels["touched"] == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw the change")
		}
	}
	time.Sleep(100 * time.Millisecond) // the state cache's handlers
	if resp, _ := f.review(evict("db-2", false)); resp.Allowed {
		t.Fatal("a third eviction admitted: reservations of changed but available pods were dropped")
	}
}

// TestUpdateReservationEndsWhenTheCacheShowsIt: an in-place image update
// the gate admitted restarts the pod, which is Ready again before the next
// request: the cache never showed it unavailable, but its spec has the new
// image, so the reservation has done its work.
func TestUpdateReservationEndsWhenTheCacheShowsIt(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5)...)
	update := &admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Update,
		OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)},
		Object:    runtime.RawExtension{Raw: f.podJSON("db-0", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.com/db:v2" })}}
	if resp, _ := f.review(update); !resp.Allowed {
		t.Fatalf("image update denied: %v", resp.Result)
	}
	f.review(evict("db-1", false))
	if resp, _ := f.review(evict("db-2", false)); resp.Allowed {
		t.Fatal("budget full, yet admitted")
	}
	p, _ := f.client.CoreV1().Pods(ns).Get(context.Background(), "db-0", metav1.GetOptions{})
	p.Spec.Containers[0].Image = "example.com/db:v2"
	p.Status.ContainerStatuses[0].Image = "example.com/db:v2"
	if _, err := f.client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, _ := f.review(evict("db-2", false))
		if resp.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update is in the cache, yet its reservation still counts: %s", resp.Result.Message)
		}
	}
}

func TestPodRequests(t *testing.T) {
	unowned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debug"}}
	system := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "dns"}}
	objs := append(statefulSet(5, "db-3", "db-4"), unowned, system)
	cases := []struct {
		name  string
		o     Options
		req   func(f *fixture) *admissionv1.AdmissionRequest
		allow bool
		want  string // in the message or a warning
		dont  string // nowhere in them
	}{
		{name: "delete of an unowned pod", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "debug", Resource: podResource(), Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON("debug", nil)}}
		}, allow: true},
		{name: "kube-system is exempt", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: "kube-system", Name: "dns", Resource: podResource(), Operation: admissionv1.Delete}
		}, allow: true},
		{name: "delete of a Ready pod with the budget spent", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)}}
		}, allow: false, want: "deletion of pod shop/db-0 denied: StatefulSet shop/db budget maxUnavailable allows 2 pods unavailable, this would make 3 (already unavailable: db-3, db-4)"},
		{name: "warn enforcement admits with a warning", o: Options{Enforcement: Warn}, req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)}}
		}, allow: true, want: "deletion of pod shop/db-0 would be denied in deny mode: StatefulSet shop/db budget maxUnavailable allows 2 pods unavailable, this would make 3", dont: "retry"},
		{name: "an image change is a disruption", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Update,
				OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)},
				Object:    runtime.RawExtension{Raw: f.podJSON("db-0", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.com/db:v2" })}}
		}, allow: false, want: "update (container app image example.com/db:v1 → example.com/db:v2) of pod shop/db-0 denied"},
		{name: "a label change is not", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Update,
				OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)},
				Object:    runtime.RawExtension{Raw: f.podJSON("db-0", func(p *corev1.Pod) { p.Labels["x"] = "y" })}}
		}, allow: true},
		{name: "a resize that restarts the container is", req: func(f *fixture) *admissionv1.AdmissionRequest {
			withPolicy := func(p *corev1.Pod) {
				p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
			}
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), SubResource: "resize", Operation: admissionv1.Update,
				OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", withPolicy)},
				Object: runtime.RawExtension{Raw: f.podJSON("db-0", func(p *corev1.Pod) {
					withPolicy(p)
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resourceQuantity("1Gi")}
				})}}
		}, allow: false, want: "memory resized with resizePolicy RestartContainer"},
		{name: "a bad oldObject is an error, admitted (fail open for what cannot be read)", req: func(f *fixture) *admissionv1.AdmissionRequest {
			return &admissionv1.AdmissionRequest{Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Update,
				OldObject: runtime.RawExtension{Raw: []byte(`{"spec": 7}`)}, Object: runtime.RawExtension{Raw: f.podJSON("db-0", nil)}}
		}, allow: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.o, objs...)
			req := c.req(f)
			req.UID = "u"
			resp, _ := f.review(req)
			if resp.Allowed != c.allow {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, c.allow, resp.Result)
			}
			said := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				said += "\n" + resp.Result.Message
			}
			if c.want != "" && !strings.Contains(said, c.want) {
				t.Errorf("response says\n%s\nwant it to say %q", said, c.want)
			}
			if c.dont != "" && strings.Contains(said, c.dont) {
				t.Errorf("response says\n%s\nwant it not to say %q", said, c.dont)
			}
		})
	}
}

// TestEnforcementModes: the workload's annotation over its policy's mode
// over the gate's.
func TestEnforcementModes(t *testing.T) {
	withAnn := func(ann map[string]string) []runtime.Object {
		objs := statefulSet(3, "db-2")
		set := objs[0].(*appsv1.StatefulSet)
		set.Annotations[facts.AnnMaxUnavailable] = "1"
		for k, v := range ann {
			set.Annotations[k] = v
		}
		return objs
	}
	cases := []struct {
		name     string
		o        Options
		ann      map[string]string
		allow    bool
		decision string
	}{
		{"gate deny", Options{}, nil, false, Denied},
		{"gate warn", Options{Enforcement: Warn}, nil, true, WouldDeny},
		{"policy dryrun over gate deny", Options{PolicyEnforcement: map[string]string{"strict": DryRun}}, map[string]string{facts.AnnPolicy: "strict"}, true, WouldDeny},
		{"another policy's mode does not apply", Options{PolicyEnforcement: map[string]string{"other": Warn}}, map[string]string{facts.AnnPolicy: "strict"}, false, Denied},
		{"annotation deny over policy warn", Options{PolicyEnforcement: map[string]string{"strict": Warn}}, map[string]string{facts.AnnPolicy: "strict", AnnEnforcement: Deny}, false, Denied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.o, withAnn(c.ann)...)
			resp, d := f.review(evict("db-0", false))
			if resp.Allowed != c.allow || d != c.decision {
				t.Errorf("allowed %v (%s), want %v (%s)", resp.Allowed, d, c.allow, c.decision)
			}
		})
	}
	if _, err := New(Options{Engine: defaultEngine(t), Cache: &capture.ListerSource{}, PolicyEnforcement: map[string]string{"x": "block"}}); err == nil {
		t.Error("an unknown mode for a policy was accepted")
	}
}

// TestStateCache: within a second and without a change in the namespace, a
// workload's state is built once; any change in the namespace rebuilds it
// (the clock is fixed here, so only the invalidation can let db-0 go).
func TestStateCache(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(5, "db-3", "db-4")...)
	// The gate's handlers first see the cache's objects as adds: let them.
	for last := uint64(1 << 63); last != f.gate.states.gens.of(ns); {
		last = f.gate.states.gens.of(ns)
		time.Sleep(100 * time.Millisecond)
	}
	for range 3 {
		if resp, _ := f.review(evict("db-0", true)); resp.Allowed {
			t.Fatal("budget spent by two unready pods, yet admitted")
		}
	}
	if n := f.gate.states.builds.Load(); n != 1 {
		t.Errorf("built the state %d times for three requests in one second, want 1", n)
	}
	// A second later the state still answers; from refreshAfter on it
	// answers while a new one is built in the background; past maxAge a
	// request waits for a new one.
	clock := now
	f.gate.opts.Now = func() time.Time { return clock }
	clock = now.Add(time.Second)
	f.review(evict("db-0", true))
	if n := f.gate.states.builds.Load(); n != 1 {
		t.Errorf("%d builds a second later, want 1", n)
	}
	clock = now.Add(refreshAfter * time.Second)
	f.review(evict("db-0", true))
	for deadline := time.Now().Add(5 * time.Second); f.gate.states.builds.Load() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no background build at age %ds (%d builds)", refreshAfter, f.gate.states.builds.Load())
		}
	}
	clock = clock.Add((maxAge + 1) * time.Second)
	f.review(evict("db-0", true))
	if n := f.gate.states.builds.Load(); n != 3 {
		t.Errorf("%d builds after a state older than maxAge, want 3", n)
	}
	p, _ := f.client.CoreV1().Pods(ns).Get(context.Background(), "db-3", metav1.GetOptions{})
	p.Status.Conditions[0].Status = corev1.ConditionTrue
	p.Status.ContainerStatuses[0].Ready = true
	if _, err := f.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if resp, _ := f.review(evict("db-0", true)); resp.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("db-3 is Ready again, yet the cached state still counts it")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clocked hides the engine's ClockFree answer: its budgets may read the clock.
type clocked struct{ engine.Engine }

// TestStateCacheTimeless: when every pod is available, none is being
// updated and the budgets read no clock fact, time alone cannot change a
// workload's state: it is kept however old, with no rebuild, until an
// object changes. An engine that cannot promise that gets the rebuilds.
func TestStateCacheTimeless(t *testing.T) {
	for _, c := range []struct {
		name   string
		engine func(testing.TB) engine.Engine
		builds int64
	}{
		{"clock-free budgets", defaultEngine, 1},
		{"budgets that may read the clock", func(t testing.TB) engine.Engine { return clocked{defaultEngine(t)} }, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{Engine: c.engine(t)}, statefulSet(5)...)
			for last := uint64(1 << 63); last != f.gate.states.gens.of(ns); {
				last = f.gate.states.gens.of(ns)
				time.Sleep(100 * time.Millisecond)
			}
			clock := now
			f.gate.opts.Now = func() time.Time { return clock }
			if resp, _ := f.review(evict("db-0", true)); !resp.Allowed {
				t.Fatal("an eviction within the budget was denied")
			}
			clock = now.Add(time.Hour)
			if resp, _ := f.review(evict("db-1", true)); !resp.Allowed {
				t.Fatal("an eviction within the budget was denied an hour later")
			}
			if n := f.gate.states.builds.Load(); n != c.builds {
				t.Errorf("%d builds for two requests an hour apart, want %d", n, c.builds)
			}
		})
	}
}

// failing is an engine whose policy fails.
type failing struct{ engine.Engine }

func (failing) Decide(context.Context, *facts.Rollout) (*engine.Decisions, error) {
	return nil, errors.New("rego_type_error: undefined function")
}

func TestPolicyErrorDeniesDisruptions(t *testing.T) {
	f := newFixture(t, Options{Engine: failing{defaultEngine(t)}}, statefulSet(5)...)
	resp, d := f.review(evict("db-0", false))
	if resp.Allowed || d != Errored {
		t.Fatalf("a policy error admitted the eviction (%s)", d)
	}
	if !strings.Contains(resp.Result.Message, "undefined function") || !strings.Contains(resp.Result.Message, "StatefulSet shop/db") {
		t.Errorf("denial does not say why: %q", resp.Result.Message)
	}
}

// stsUpdate is the admission request of an update of set that change
// makes (to a copy).
func stsUpdate(set *appsv1.StatefulSet, change func(*appsv1.StatefulSet)) *admissionv1.AdmissionRequest {
	old, cur := set.DeepCopy(), set.DeepCopy()
	change(cur)
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(cur)
	return &admissionv1.AdmissionRequest{UID: "u", Namespace: set.Namespace, Name: set.Name, Operation: admissionv1.Update,
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"},
		OldObject: runtime.RawExtension{Raw: o}, Object: runtime.RawExtension{Raw: n}}
}

func TestWorkloadUpdates(t *testing.T) {
	guard, err := rego.LoadBundle([]string{"../policies/examples/guard-critical"})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := rego.New(context.Background(), guard, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	objs := statefulSet(10)
	f := newFixture(t, Options{Engine: eng}, objs...)
	set := objs[0].(*appsv1.StatefulSet)
	update := func(change func(*appsv1.StatefulSet)) *admissionv1.AdmissionRequest { return stsUpdate(set, change) }
	resp, _ := f.review(update(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "example.com/db:v2" }))
	if !resp.Allowed {
		t.Fatalf("image change denied: %v", resp.Result)
	}
	if want := "rollplan: will update 10 pods in 5 waves: 10 in place"; strings.Join(resp.Warnings, "\n") != want {
		t.Errorf("warnings %q, want %q", resp.Warnings, want)
	}
	resp, _ = f.review(update(func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
	}))
	if want := "10 recreated (spec.containers[app].env changed: env cannot change on a running container)"; !strings.Contains(strings.Join(resp.Warnings, "\n"), want) {
		t.Errorf("warnings %q, want them to say %q", resp.Warnings, want)
	}
	resp, _ = f.review(update(func(s *appsv1.StatefulSet) { s.Annotations[facts.AnnMaxUnavailable] = "40%" }))
	if resp.Allowed {
		t.Fatal("max-unavailable 40% on tier=critical admitted")
	}
	if !strings.Contains(resp.Result.Message, "tier=critical allows at most 25%") || !strings.Contains(resp.Result.Message, "StatefulSet shop/db") {
		t.Errorf("denial %q", resp.Result.Message)
	}
	// The controller recording the rollout state of a workload the guard
	// rails refuse is admitted; any other change of it is still judged.
	set.Annotations[facts.AnnMaxUnavailable] = "40%"
	resp, _ = f.review(update(func(s *appsv1.StatefulSet) {
		s.Annotations[facts.AnnRolloutState] = `{"phase":"Halted"}`
		s.ResourceVersion, s.Generation = "99", 7
	}))
	if !resp.Allowed {
		t.Errorf("the rollout state of a denied workload was refused: %v", resp.Result)
	}
	resp, _ = f.review(update(func(s *appsv1.StatefulSet) {
		s.Annotations[facts.AnnRolloutState] = `{"phase":"Halted"}`
		s.Labels["team"] = "x"
	}))
	if resp.Allowed {
		t.Error("a label change riding along with the rollout state skipped the guard rails")
	}
	delete(set.Annotations, facts.AnnMaxUnavailable)
	// A create of a workload the cache does not hold yet.
	created := set.DeepCopy()
	created.Name, created.UID = "cache", ""
	raw, _ := json.Marshal(created)
	resp, _ = f.review(&admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: "cache", Operation: admissionv1.Create,
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, Object: runtime.RawExtension{Raw: raw}})
	if !resp.Allowed || len(resp.Warnings) != 0 {
		t.Errorf("create of a fine StatefulSet: allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}
}

// A workload update whose plan has pods to update but no wave (a budget
// that lets no pod go) is not "will update 10 pods in 0 waves": the warning
// says why nothing is planned.
func TestWorkloadUpdateWithoutWaves(t *testing.T) {
	objs := statefulSet(10)
	f := newFixture(t, Options{Engine: freezeEngine(t)}, objs...)
	old, cur := objs[0].(*appsv1.StatefulSet).DeepCopy(), objs[0].(*appsv1.StatefulSet).DeepCopy()
	cur.Spec.Template.Spec.Containers[0].Image = "example.com/db:v2"
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(cur)
	resp, _ := f.review(&admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: "db", Operation: admissionv1.Update,
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"},
		OldObject: runtime.RawExtension{Raw: o}, Object: runtime.RawExtension{Raw: n}})
	if !resp.Allowed {
		t.Fatalf("image change denied: %v", resp.Result)
	}
	got := strings.Join(resp.Warnings, "\n")
	if strings.Contains(got, "0 waves") || !strings.HasPrefix(got, "rollplan: 10 pods to update, nothing planned: ") || !strings.Contains(got, "freeze") {
		t.Errorf("warnings %q, want \"rollplan: 10 pods to update, nothing planned: \" and why (budget freeze)", resp.Warnings)
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// Pods the workload no longer wants, which its controller removes anyway,
// cost no budget: a StatefulSet's pods outside its ordinals after a
// scale-down (upstream counts unavailability against the desired
// replicas), a daemon pod on a node with an untolerated NoExecute taint.
// Nor do they cover for the pods the workload keeps.
func TestSurplusPods(t *testing.T) {
	// db scaled down from 4 to replicas (Parallel), max-unavailable 1,
	// db-1 unready, the pods in terminating already being deleted.
	scaledDown := func(replicas, start int32, terminating ...string) []runtime.Object {
		objs := edit(statefulSet(4, "db-1"), nil, func(o runtime.Object) {
			if p, ok := o.(*corev1.Pod); ok && slices.Contains(terminating, p.Name) {
				deleting(p)
			}
		})
		set := objs[0].(*appsv1.StatefulSet)
		set.Spec.Replicas = ptr.To(replicas)
		if start > 0 {
			set.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
		}
		set.Annotations[facts.AnnMaxUnavailable] = "1"
		return objs
	}
	// agent on 3 nodes, max-unavailable 1, agent-0 unready, node-2 tainted
	// NoExecute (maintenance), which the pods do not tolerate.
	tainted := edit(daemonSet(3, nil), nil, func(o runtime.Object) {
		switch o := o.(type) {
		case *corev1.Node:
			if o.Name == "node-2" {
				o.Spec.Taints = []corev1.Taint{{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}}
			}
		case *corev1.Pod:
			if o.Name == "agent-0" {
				o.Status.Conditions[0].Status = corev1.ConditionFalse
				o.Status.ContainerStatuses[0].Ready = false
			}
		}
	})
	cases := []struct {
		name  string
		objs  []runtime.Object
		pod   string
		allow bool
		want  string // in the reason
	}{
		{"StatefulSet pod beyond the replicas, the other one terminating", scaledDown(2, 0, "db-3"), "db-2", true,
			"deletion of pod db-2 costs StatefulSet shop/db no budget: its ordinal 2 is outside the StatefulSet's ordinals 0 to 1 (2 replicas)"},
		{"the last StatefulSet pod beyond the replicas", scaledDown(2, 0), "db-3", true, "its ordinal 3 is outside"},
		{"a StatefulSet pod it keeps, with surplus pods available", scaledDown(2, 0), "db-0", false,
			"budget maxUnavailable allows 1 pod unavailable, this would make 2 (already unavailable: db-1)"},
		{"StatefulSet pod below ordinals.start", scaledDown(3, 1), "db-0", true, "its ordinal 0 is outside the StatefulSet's ordinals 1 to 3 (3 replicas)"},
		{"daemon pod on a node tainted NoExecute", tainted, "agent-2", true, "node node-2 should no longer run it"},
		{"daemon pod on a node that runs it", tainted, "agent-1", false, "budget maxUnavailable allows 1 pod unavailable, this would make 2 (already unavailable: agent-0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, c.objs...)
			req := &admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: c.pod, Resource: podResource(), Operation: admissionv1.Delete,
				OldObject: runtime.RawExtension{Raw: f.podJSON(c.pod, nil)}}
			resp, _, v := f.gate.Review(context.Background(), req)
			if resp.Allowed != c.allow {
				t.Fatalf("allowed %v, want %v: %s", resp.Allowed, c.allow, v.text())
			}
			if !strings.Contains(v.text(), c.want) {
				t.Errorf("reason %q, want it to say %q", v.text(), c.want)
			}
		})
	}
}

// A workload update to two billion replicas (a valid int32) is reviewed in
// the memory and time of any other: the plan behind the gate's warning
// counts the replicas no pod holds, never one by one (issue 33: a million
// took the gate from 97 MB to 758 MB, and the pods webhook fails closed).
func TestWorkloadUpdateHugeReplicas(t *testing.T) {
	objs := statefulSet(10)
	f := newFixture(t, Options{Engine: defaultEngine(t)}, objs...)
	set := objs[0].(*appsv1.StatefulSet)
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	resp, _ := f.review(stsUpdate(set, func(s *appsv1.StatefulSet) {
		s.Spec.Replicas = ptr.To[int32](2_000_000_000)
		s.Spec.Template.Spec.Containers[0].Image = "example.com/db:v2"
	}))
	goruntime.ReadMemStats(&after)
	if !resp.Allowed {
		t.Fatalf("update denied: %v", resp.Result)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the review allocated %d MiB, want it independent of spec.replicas (< 64 MiB)", alloc>>20)
	}
	got := strings.Join(resp.Warnings, "\n")
	if !strings.HasPrefix(got, "rollplan: will update 10 pods in ") || len(got) > 2048 {
		t.Errorf("warnings %q, want the plan's summary for the 10 pods, short", got)
	}
}
