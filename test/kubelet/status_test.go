package kubelet

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/internal/testobj"
)

// step applies nextStatus until nothing changes or until is reached,
// advancing a fake clock to each requested look-again time.
func step(t *testing.T, k *Kubelet, pod *corev1.Pod, now time.Time, until time.Time) (*corev1.Pod, time.Time) {
	t.Helper()
	for i := 0; i < 50; i++ {
		st, after := k.nextStatus(pod, now)
		if st != nil {
			pod = pod.DeepCopy()
			pod.Status = *st
		}
		if after == 0 || now.Add(after).After(until) {
			return pod, now
		}
		now = now.Add(after)
	}
	t.Fatal("nextStatus did not settle in 50 steps")
	return nil, now
}

func readyOf(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

func testPod(image string) *corev1.Pod {
	return testobj.Pod("ns", "p").UID("u1").Node("n1").Image(image).Obj()
}

func TestPodLifecycle(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k := New(nil, Options{
		Default: Behavior{StartDelay: 2 * time.Second, ReadyDelay: 3 * time.Second},
		Images: map[string]Behavior{
			"never": {NeverReady: true},
			"crash": {CrashLoop: true, CrashInterval: time.Second},
		},
	})

	t.Run("pending, running, ready with transition time", func(t *testing.T) {
		p, now := step(t, k, testPod("app:1"), t0, t0.Add(time.Second))
		if p.Status.Phase != corev1.PodPending || readyOf(p) != corev1.ConditionFalse {
			t.Fatalf("after 1s: phase %s ready %s, want Pending/False", p.Status.Phase, readyOf(p))
		}
		p, now = step(t, k, p, now, t0.Add(4*time.Second))
		if p.Status.Phase != corev1.PodRunning || readyOf(p) != corev1.ConditionFalse {
			t.Fatalf("after 4s: phase %s ready %s, want Running/False", p.Status.Phase, readyOf(p))
		}
		p, _ = step(t, k, p, now, t0.Add(time.Minute))
		if readyOf(p) != corev1.ConditionTrue {
			t.Fatalf("after 1m: ready %s", readyOf(p))
		}
		var ready metav1.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.LastTransitionTime
			}
		}
		if want := t0.Add(5 * time.Second); !ready.Time.Equal(want) {
			t.Fatalf("Ready lastTransitionTime %s, want %s (start 2s + ready 3s)", ready.Time, want)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.ImageID != ImageID("app:1") || cs.State.Running == nil || !cs.Ready {
			t.Fatalf("container status %+v", cs)
		}
	})

	t.Run("in-place image change restarts the container", func(t *testing.T) {
		p, now := step(t, k, testPod("app:1"), t0, t0.Add(time.Minute))
		p.Spec.Containers[0].Image = "app:2"
		st, _ := k.nextStatus(p, now)
		if st == nil {
			t.Fatal("image change: no status change")
		}
		p.Status = *st
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.Ready || readyOf(p) != corev1.ConditionFalse {
			t.Fatalf("right after the change: restarts %d ready %v/%s, want 1 false False", cs.RestartCount, cs.Ready, readyOf(p))
		}
		p, _ = step(t, k, p, now, now.Add(time.Minute))
		cs = p.Status.ContainerStatuses[0]
		if readyOf(p) != corev1.ConditionTrue || cs.ImageID != ImageID("app:2") || cs.Image != "app:2" || cs.RestartCount != 1 {
			t.Fatalf("after restart: ready %s status %+v", readyOf(p), cs)
		}
	})

	t.Run("never ready", func(t *testing.T) {
		p, _ := step(t, k, testPod("never"), t0, t0.Add(time.Hour))
		if p.Status.Phase != corev1.PodRunning || readyOf(p) != corev1.ConditionFalse {
			t.Fatalf("phase %s ready %s", p.Status.Phase, readyOf(p))
		}
	})

	t.Run("crash loop restarts keep counting", func(t *testing.T) {
		p, _ := step(t, k, testPod("crash"), t0, t0.Add(5*time.Second+time.Millisecond))
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < 4 || readyOf(p) != corev1.ConditionFalse || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			t.Fatalf("after 5s: restarts %d ready %s state %+v", cs.RestartCount, readyOf(p), cs.State)
		}
	})

	t.Run("readiness gate holds Ready", func(t *testing.T) {
		pod := testPod("app:1")
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "rollplan.dev/in-place-update-ready"}}
		p, _ := step(t, k, pod, t0, t0.Add(time.Minute))
		if readyOf(p) != corev1.ConditionFalse {
			t.Fatalf("gate unset: ready %s", readyOf(p))
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "rollplan.dev/in-place-update-ready", Status: corev1.ConditionTrue})
		p, _ = step(t, k, p, t0.Add(time.Minute), t0.Add(2*time.Minute))
		if readyOf(p) != corev1.ConditionTrue {
			t.Fatalf("gate true: ready %s", readyOf(p))
		}
	})
}

func TestFeasible(t *testing.T) {
	k := New(nil, Options{})
	taint := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	dsPod := testPod("a")
	dsPod.Spec.NodeName = ""
	dsPod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}},
		}}},
	}}
	tolerant := testPod("a")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node Node
		want bool
	}{
		{"plain pod, plain node", testPod("a"), Node{Name: "n1"}, true},
		{"not ready node", testPod("a"), Node{Name: "n1", NotReady: true}, false},
		{"cordoned node", testPod("a"), Node{Name: "n1", Unschedulable: true}, false},
		{"tainted node", testPod("a"), Node{Name: "n1", Taints: []corev1.Taint{taint}}, false},
		{"tolerated taint", tolerant, Node{Name: "n1", Taints: []corev1.Taint{taint}}, true},
		{"daemon pod, other node", dsPod, Node{Name: "n1"}, false},
		{"daemon pod, its node", dsPod, Node{Name: "n2"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := k.feasible(tt.pod, tt.node); got != tt.want {
				t.Fatalf("feasible = %v, want %v", got, tt.want)
			}
		})
	}
}

// An image's behaviour: its name in Images, else its tag in Tags (one
// convention for every repository, as the dev cluster's ":crashloop"),
// else Default. A registry's port or a digest is not a tag.
func TestBehaviorByTag(t *testing.T) {
	deflt := Behavior{StartDelay: time.Second}
	crash := Behavior{CrashLoop: true}
	never := Behavior{NeverReady: true}
	named := Behavior{ReadyDelay: time.Minute}
	k := New(nil, Options{
		Default: deflt,
		Images:  map[string]Behavior{"example.com/web:crashloop-named": named, "example.com/named:never-ready": named},
		Tags:    map[string]Behavior{"crashloop": crash, "never-ready": never},
	})
	for _, tc := range []struct {
		image string
		want  Behavior
	}{
		{"example.com/web:crashloop", crash},
		{"example.com/api:crashloop", crash},
		{"crashloop", deflt},
		{"web:never-ready", never},
		{"registry.example:5000/web:never-ready", never},
		{"registry.example:5000/crashloop", deflt},
		{"example.com/web:crashloop@sha256:0123abcd", crash},
		{"example.com/web@sha256:crashloop", deflt},
		{"example.com/web:v2-crashloop", deflt},
		{"example.com/named:never-ready", named}, // Images wins over Tags
		{"example.com/web:v2", deflt},
	} {
		if got := k.behavior(tc.image); got != tc.want {
			t.Errorf("behavior(%q) = %+v, want %+v", tc.image, got, tc.want)
		}
	}
	// canBeReady reads the same behaviour: a pod on a tagged image is not
	// waited for by Release.
	k.mu.Lock()
	ok := k.canBeReady(testPod("example.com/web:crashloop"))
	k.mu.Unlock()
	if ok {
		t.Error("canBeReady(example.com/web:crashloop) = true, want false: the tag says it crash-loops")
	}
}

// The steps a pod's status goes through, as the real kubelet writes them
// (test/node's TestKubeletsCompared checks the same against a real node):
// each nextStatus result one update.
func TestStatusStepsAsTheRealKubelet(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k := New(nil, Options{Default: Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 500 * time.Millisecond}})
	type want struct {
		sandbox, ready corev1.ConditionStatus
		state          string
		started        string
		imageID        string
		restarts       int32
	}
	summary := func(p *corev1.Pod) want {
		cs := p.Status.ContainerStatuses[0]
		w := want{sandbox: condition(&p.Status, corev1.PodReadyToStartContainers).Status, ready: readyOf(p), imageID: cs.ImageID, restarts: cs.RestartCount, started: "nil"}
		if cs.Started != nil {
			w.started = map[bool]string{true: "true", false: "false"}[*cs.Started]
		}
		switch {
		case cs.State.Waiting != nil:
			w.state = "waiting:" + cs.State.Waiting.Reason
		case cs.State.Running != nil:
			w.state = "running"
		case cs.State.Terminated != nil:
			w.state = "terminated:" + cs.State.Terminated.Reason
		}
		if c := condition(&p.Status, corev1.ContainersReady); c.Status != readyOf(p) {
			t.Errorf("ContainersReady %s, Ready %s: the kubelet flips them in one update", c.Status, readyOf(p))
		}
		return w
	}
	// every runs nextStatus until it settles and returns each update.
	every := func(p *corev1.Pod, now time.Time) ([]want, *corev1.Pod, time.Time) {
		var out []want
		for range 20 {
			st, after := k.nextStatus(p, now)
			if st != nil {
				p = p.DeepCopy()
				p.Status = *st
				out = append(out, summary(p))
			}
			if after == 0 {
				return out, p, now
			}
			now = now.Add(after)
		}
		t.Fatal("nextStatus did not settle in 20 updates")
		return nil, nil, now
	}
	F, T := corev1.ConditionFalse, corev1.ConditionTrue
	steps, p, now := every(testPod("app:1"), t0)
	wantSteps := []want{
		{F, F, "waiting:ContainerCreating", "false", "", 0},
		{T, F, "waiting:ContainerCreating", "false", "", 0},
		{T, F, "running", "true", ImageID("app:1"), 0},
		{T, T, "running", "true", ImageID("app:1"), 0},
	}
	if !slices.Equal(steps, wantSteps) {
		t.Errorf("creation: updates\n%+v\nwant\n%+v", steps, wantSteps)
	}
	var order []corev1.PodConditionType
	for _, c := range p.Status.Conditions {
		order = append(order, c.Type)
	}
	if !slices.Equal(order, kubeletConditions) {
		t.Errorf("conditions in order %v, want the real kubelet's %v", order, kubeletConditions)
	}

	p.Spec.Containers[0].Image = "app:2"
	steps, p, _ = every(p, now.Add(time.Minute))
	wantSteps = []want{
		{T, F, "running", "true", ImageID("app:2"), 1},
		{T, T, "running", "true", ImageID("app:2"), 1},
	}
	if !slices.Equal(steps, wantSteps) {
		t.Errorf("in place: updates\n%+v\nwant\n%+v", steps, wantSteps)
	}

	st := terminated(p, now.Add(2*time.Minute))
	p.Status = *st
	if got, w := summary(p), (want{F, F, "terminated:Completed", "false", ImageID("app:2"), 1}); got != w || p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("deleted: %+v phase %s, want %+v Succeeded", got, p.Status.Phase, w)
	}
	if terminated(testPod("app:1"), t0) != nil {
		t.Error("a pod whose containers never ran: a status of exited containers")
	}
}
