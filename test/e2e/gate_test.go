package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/kubelet"
)

// readyLog records, per pod, every change of its Ready condition seen by
// a watch, and the moments a pod was Ready while its spec named an image
// its container did not run yet (a restart pending with the pod still in
// its Services).
type readyLog struct {
	mu      sync.Mutex
	seq     map[string][]bool
	exposed []string
}

func (e *env) watchReady(selector string) *readyLog {
	l := &readyLog{seq: map[string][]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	on := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if s := l.seq[p.Name]; len(s) == 0 || s[len(s)-1] != ready {
			l.seq[p.Name] = append(s, ready)
		}
		for _, c := range p.Spec.Containers {
			for _, cs := range p.Status.ContainerStatuses {
				if ready && cs.Name == c.Name && cs.Image != c.Image {
					l.exposed = append(l.exposed, fmt.Sprintf("%s Ready (rv %s) with %s pending (running %s)", p.Name, p.ResourceVersion, c.Image, cs.Image))
				}
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }})
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	e.t.Cleanup(func() { close(stop); f.Shutdown() })
	return l
}

// TestReadinessGate: a StatefulSet whose template declares the readiness
// gate rollplan.dev/in-place-update-ready. Its new pods only become Ready
// once rollplan apply sets the condition True. During an in-place rollout
// every pod's Ready goes False (the gate, set before the image patch)
// then True again (after the update completed), a pod is never Ready
// while a restart is pending, and at the end every pod has the condition
// True, is Ready, and kept its UID. One pod starts with the gate False and
// no update (an executor died between its two writes): it converges too.
func TestReadinessGate(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "gated", 4
	set := statefulSet(e.ns, name, replicas, "2")
	set.Spec.MinReadySeconds = 1
	set.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: live.ReadinessGate}}
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Nothing to roll out: the run sets the new pods' gate True, and
	// returns once they are Ready.
	var log bytes.Buffer
	sum := run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions[executor.ActionReadinessGate] != replicas {
		t.Errorf("actions %v, want %d %s", sum.Actions, replicas, executor.ActionReadinessGate)
	}
	e.waitSettled(name, replicas)
	before := uids(e.pods("app=" + name))
	// An executor that died between setting the gate False and patching
	// the image left gated-0 so: the next run sets it True again.
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"False","reason":"InPlaceUpdate"}]}}`, live.ReadinessGate)
	if _, err := e.client.CoreV1().Pods(e.ns).Patch(e.ctx, name+"-0", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	w := e.watch("app="+name, replicas)
	l := e.watchReady("app=" + name)
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })

	log.Reset()
	sum = run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions["InPlaceUpdate"] != replicas || sum.Actions[executor.ActionReadinessGate] != replicas+1 {
		t.Errorf("actions %v, want %d InPlaceUpdate and %d %s (one for the pod left False)", sum.Actions, replicas, replicas+1, executor.ActionReadinessGate)
	}
	e.waitSettled(name, replicas)
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
		if p.Status.ContainerStatuses[0].Image != "example.com/app:v2" {
			t.Errorf("pod %s runs %s", p.Name, p.Status.ContainerStatuses[0].Image)
		}
		gate, ready := corev1.ConditionStatus(""), corev1.ConditionStatus("")
		for _, c := range p.Status.Conditions {
			switch c.Type {
			case live.ReadinessGate:
				gate = c.Status
			case corev1.PodReady:
				ready = c.Status
			}
		}
		if gate != corev1.ConditionTrue || ready != corev1.ConditionTrue {
			t.Errorf("pod %s: %s=%q Ready=%q, want both True", p.Name, live.ReadinessGate, gate, ready)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("Ready over time: %v", l.seq)
	for n := range before {
		s := fmt.Sprint(l.seq[n])
		if !strings.Contains(s, "true false") || !strings.HasSuffix(s, "true]") {
			t.Errorf("pod %s: Ready over time %s, want it to go False then True", n, s)
		}
	}
	if len(l.exposed) > 0 {
		t.Errorf("pods Ready while a restart was pending:\n%s", strings.Join(l.exposed, "\n"))
	}
	w.result(t, 2)
}

// TestBrokenImageHalts: the new image crash-loops (the test kubelet's
// CrashLoop behaviour). The executor updates the first wave (2 pods, the
// budget) in place, the default policy halts once they restart
// crash_loop_restarts (3) times, the executor returns a HaltedError and
// leaves the cluster as it is: the other pods keep the old image.
func TestBrokenImageHalts(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "broken", 6
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, statefulSet(e.ns, name, replicas, "2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	before := uids(e.pods("app=" + name))
	const bad = "example.com/app:broken"
	e.kubelet.SetImage(bad, kubelet.Behavior{CrashLoop: true, CrashInterval: 200 * time.Millisecond})
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = bad })

	var log bytes.Buffer
	sum, err := e.executor(name, &log).Run(e.ctx, false)
	t.Logf("executor log:\n%s", log.String())
	var h *executor.HaltedError
	if !errors.As(err, &h) {
		t.Fatalf("run: %v, want a HaltedError", err)
	}
	t.Logf("halted: %v", h.Reasons)
	if !strings.Contains(strings.Join(h.Reasons, "; "), "crash-looping") {
		t.Errorf("halt reasons %v, want a crash loop", h.Reasons)
	}
	if n := sum.Actions["InPlaceUpdate"]; n < 1 || n > 2 || sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v, want 1 or 2 InPlaceUpdate (the first wave) and nothing else", sum.Actions)
	}
	// Left as it is: a moment later, still only the first wave changed.
	time.Sleep(time.Second)
	broken := 0
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
		switch p.Spec.Containers[0].Image {
		case bad:
			broken++
		case "example.com/app:v1":
			if p.Status.ContainerStatuses[0].Image != "example.com/app:v1" {
				t.Errorf("pod %s runs %s", p.Name, p.Status.ContainerStatuses[0].Image)
			}
		default:
			t.Errorf("pod %s: image %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
	if broken != sum.Actions["InPlaceUpdate"] {
		t.Errorf("%d pods on the broken image, %d updated by the executor", broken, sum.Actions["InPlaceUpdate"])
	}
}

// TestInPlaceOnlyHalts: under InPlaceOnly an env change (not possible in
// place) halts the rollout at once; no pod is touched.
func TestInPlaceOnlyHalts(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "strict", 3
	set := statefulSet(e.ns, name, replicas, "1")
	set.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	versions := map[string]string{}
	for _, p := range e.pods("app=" + name) {
		versions[p.Name] = p.ResourceVersion
	}
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "b" })

	var log bytes.Buffer
	sum, err := e.executor(name, &log).Run(e.ctx, false)
	t.Logf("executor log:\n%s", log.String())
	var h *executor.HaltedError
	if !errors.As(err, &h) {
		t.Fatalf("run: %v, want a HaltedError", err)
	}
	if !strings.Contains(strings.Join(h.Reasons, "; "), "InPlaceOnly") {
		t.Errorf("halt reasons %v, want InPlaceOnly", h.Reasons)
	}
	if len(sum.Actions) != 0 || sum.Steps != 0 {
		t.Errorf("steps %d, actions %v, want none", sum.Steps, sum.Actions)
	}
	time.Sleep(500 * time.Millisecond)
	for _, p := range e.pods("app=" + name) {
		if versions[p.Name] != p.ResourceVersion {
			t.Errorf("pod %s changed (resourceVersion %s -> %s)", p.Name, versions[p.Name], p.ResourceVersion)
		}
	}
	s, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.CurrentRevision == s.Status.UpdateRevision {
		t.Errorf("currentRevision moved to the update revision")
	}
}

// TestInPlace20 (issue 5's first e2e bullet): a 20-pod managed OnDelete
// StatefulSet, InPlaceIfPossible, maxUnavailable 3, updated in place: UIDs
// unchanged, the controller reports updatedReplicas == replicas and
// currentRevision == updateRevision, and the availability watcher never
// saw more than 3 pods unavailable.
func TestInPlace20(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "big", 20
	before, w := e.rolloutStatefulSet(name, replicas, "3")
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	var log bytes.Buffer
	sum := run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions["InPlaceUpdate"] != replicas || sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v, want %d InPlaceUpdate", sum.Actions, replicas)
	}
	set := e.waitSettled(name, replicas)
	pods := e.pods("app=" + name)
	if len(pods) != replicas {
		t.Fatalf("%d pods, want %d", len(pods), replicas)
	}
	for _, p := range pods {
		if before[p.Name] != p.UID || p.Status.ContainerStatuses[0].Image != "example.com/app:v2" {
			t.Errorf("pod %s: uid %s (was %s), running %s", p.Name, p.UID, before[p.Name], p.Status.ContainerStatuses[0].Image)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d, currentRevision %s, updateRevision %s",
			set.Status.UpdatedReplicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	w.result(t, 3)
}
