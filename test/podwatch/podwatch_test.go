package podwatch

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod builds a one-container pod: uid, ready (the Ready and
// ContainersReady conditions and the container's ready), restarts, image,
// and the container's state.
type podSpec struct {
	name, uid      string
	ready          bool
	restarts       int32
	image, imageID string
	state          corev1.ContainerState
	rv             string
	terminating    bool
}

func pod(s podSpec) *corev1.Pod {
	st := corev1.ConditionFalse
	if s.ready {
		st = corev1.ConditionTrue
	}
	if s.name == "" {
		s.name = "web-0"
	}
	if s.state == (corev1.ContainerState{}) {
		s.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, UID: types.UID(s.uid), ResourceVersion: s.rv},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: s.image}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: st},
				{Type: corev1.ContainersReady, Status: st},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: "example.com/gate", Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Image: s.image, ImageID: s.imageID, Ready: s.ready, RestartCount: s.restarts, State: s.state,
			}},
		},
	}
	if s.terminating {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return p
}

func TestObserveKeepsDistinctSteps(t *testing.T) {
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	heartbeat := pod(podSpec{uid: "a", image: "app:1", imageID: "id1", ready: true, rv: "2"})
	heartbeat.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: time.Unix(99, 0)}
	heartbeat.Status.Conditions[3].Status = corev1.ConditionFalse // not a condition we keep
	heartbeat.Annotations = map[string]string{"x": "y"}
	tests := []struct {
		name  string
		pods  []*corev1.Pod
		gone  int // index of the pod observed as deleted; -1: none
		added []bool
		lives []int // steps per life
	}{
		{
			name: "a resourceVersion, a transition time, an annotation or an unkept condition is no step",
			pods: []*corev1.Pod{
				pod(podSpec{uid: "a", image: "app:1", imageID: "id1", ready: true, rv: "1"}),
				heartbeat,
			},
			gone: -1, added: []bool{true, false}, lives: []int{1},
		},
		{
			name: "in place: not ready, restarted, new image id, ready again; one life",
			pods: []*corev1.Pod{
				pod(podSpec{uid: "a", image: "app:1", imageID: "id1", ready: true}),
				pod(podSpec{uid: "a", image: "app:2", imageID: "id1", ready: true}), // spec changed, status not yet
				pod(podSpec{uid: "a", image: "app:2", imageID: "id2", restarts: 1}),
				pod(podSpec{uid: "a", image: "app:2", imageID: "id2", restarts: 1}),
				pod(podSpec{uid: "a", image: "app:2", imageID: "id2", restarts: 1, ready: true}),
			},
			gone: -1, added: []bool{true, true, true, false, true}, lives: []int{4},
		},
		{
			name: "recreate: terminating, gone, a new UID starts a second life",
			pods: []*corev1.Pod{
				pod(podSpec{uid: "a", image: "app:1", ready: true}),
				pod(podSpec{uid: "a", image: "app:1", ready: true, terminating: true}),
				pod(podSpec{uid: "a", image: "app:1", ready: true, terminating: true}),
				pod(podSpec{uid: "b", image: "app:2", state: waiting}),
				pod(podSpec{uid: "b", image: "app:2", imageID: "id2"}),
			},
			gone: 2, added: []bool{true, true, true, true, true}, lives: []int{3, 2},
		},
		{
			name: "nothing after gone in the same life",
			pods: []*corev1.Pod{
				pod(podSpec{uid: "a", image: "app:1", ready: true}),
				pod(podSpec{uid: "a", image: "app:1"}),
				pod(podSpec{uid: "a", image: "app:1", ready: true}),
			},
			gone: 1, added: []bool{true, true, false}, lives: []int{2},
		},
		{
			name: "waiting reason and started are steps",
			pods: []*corev1.Pod{
				pod(podSpec{uid: "a", image: "app:1", state: waiting}),
				pod(podSpec{uid: "a", image: "app:1", state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}),
				func() *corev1.Pod {
					p := pod(podSpec{uid: "a", image: "app:1", state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}})
					p.Status.ContainerStatuses[0].Started = new(bool)
					return p
				}(),
			},
			gone: -1, added: []bool{true, true, true}, lives: []int{3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Recording
			for i, p := range tt.pods {
				var got bool
				if i == tt.gone {
					got = r.ObserveGone(p, time.Unix(int64(i), 0))
				} else {
					got = r.Observe(p, time.Unix(int64(i), 0))
				}
				if got != tt.added[i] {
					t.Errorf("pod %d: added %v, want %v", i, got, tt.added[i])
				}
			}
			p, _ := r.Pod("web-0")
			var lives []int
			for _, l := range p.Lives {
				lives = append(lives, len(l.Steps))
			}
			if !slices.Equal(lives, tt.lives) {
				t.Errorf("steps per life %v, want %v; steps:\n%v", lives, tt.lives, p.Steps())
			}
		})
	}
}

func TestStepOf(t *testing.T) {
	p := pod(podSpec{uid: "a", image: "app:2", imageID: "id1", restarts: 3,
		state: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}})
	p.Status.ContainerStatuses[0].Image = "app:1"
	p.Status.ContainerStatuses[0].Started = new(bool)
	s := StepOf(p)
	want := "Running Ready=False ContainersReady=False PodScheduled=True app[image=app:1 (spec app:2) id=id1 ready=false started=false restarts=3 terminated:Error:2]"
	if got := s.String(); got != want {
		t.Errorf("step\n got %s\nwant %s", got, want)
	}
	// A container with no status yet.
	p.Status.ContainerStatuses = nil
	if c, _ := StepOf(p).Container("app"); c.State != "" || c.SpecImage != "app:2" || c.Image != "" {
		t.Errorf("container without status: %+v", c)
	}
}

func TestHelpers(t *testing.T) {
	var r Recording
	obs := func(p *corev1.Pod) { r.Observe(p, time.Time{}) }
	// web-0 in place (restart 0 -> 1), web-1 recreated; at one moment both
	// are unready.
	obs(pod(podSpec{name: "web-0", uid: "a", ready: true, image: "app:1"}))
	obs(pod(podSpec{name: "web-1", uid: "b", ready: true, image: "app:1"}))
	obs(pod(podSpec{name: "web-0", uid: "a", restarts: 1, image: "app:2"})) // seq 3: 1 unready
	obs(pod(podSpec{name: "web-1", uid: "b", ready: true, image: "app:1", terminating: true}))
	r.ObserveGone(pod(podSpec{name: "web-1", uid: "b", ready: true, image: "app:1", terminating: true}), time.Time{})
	obs(pod(podSpec{name: "web-0", uid: "a", restarts: 1, ready: true, image: "app:2"})) // seq 6
	obs(pod(podSpec{name: "web-1", uid: "c", image: "app:2"}))
	obs(pod(podSpec{name: "web-1", uid: "c", image: "app:2", ready: true}))

	for _, tc := range []struct {
		p    *corev1.Pod
		want bool
	}{
		{pod(podSpec{name: "web-0", uid: "a", restarts: 1, ready: true, image: "app:2"}), true},
		{pod(podSpec{name: "web-0", uid: "a", restarts: 1, image: "app:2"}), false}, // an earlier step
		{pod(podSpec{name: "web-1", uid: "b", ready: true, image: "app:2"}), false}, // an earlier life
		{pod(podSpec{name: "web-1", uid: "c", image: "app:2", ready: true}), true},
		{pod(podSpec{name: "web-2", uid: "d", image: "app:2", ready: true}), false}, // never seen
	} {
		if got := r.Has(tc.p); got != tc.want {
			t.Errorf("Has(%s %s %s) = %v, want %v", tc.p.Name, tc.p.UID, StepOf(tc.p), got, tc.want)
		}
	}
	if !r.UIDKept("web-0") || r.UIDKept("web-1") || r.UIDKept("web-2") {
		t.Errorf("UIDKept web-0 %v web-1 %v web-2 %v, want true false false", r.UIDKept("web-0"), r.UIDKept("web-1"), r.UIDKept("web-2"))
	}
	if d, err := r.RestartDelta("web-0", "app"); err != nil || d != 1 {
		t.Errorf("RestartDelta web-0 = %d, %v; want 1", d, err)
	}
	if _, err := r.RestartDelta("web-1", "app"); err == nil {
		t.Error("RestartDelta web-1 (two lives): no error")
	}
	if _, err := r.RestartDelta("web-0", "sidecar"); err == nil {
		t.Error("RestartDelta of a container not in the spec: no error")
	}
	for name, want := range map[string][]bool{"web-0": {true, false, true}, "web-1": {true, false, true}} {
		if got := r.ReadyFlips(name); !slices.Equal(got, want) {
			t.Errorf("ReadyFlips %s = %v, want %v", name, got, want)
		}
	}
	tests := []struct {
		names []string
		want  Unready
	}{
		{[]string{"web-0", "web-1"}, Unready{Count: 2, Pods: []string{"web-0", "web-1"}, After: 4}},
		{[]string{"web-0"}, Unready{Count: 1, Pods: []string{"web-0"}, After: 3}},
		// A name never seen counts for nothing.
		{[]string{"web-0", "web-9"}, Unready{Count: 1, Pods: []string{"web-0"}, After: 3}},
		{[]string{"web-9"}, Unready{}},
	}
	for _, tt := range tests {
		got := r.MaxUnready(tt.names...)
		if got.Count != tt.want.Count || got.After != tt.want.After || !slices.Equal(got.Pods, tt.want.Pods) {
			t.Errorf("MaxUnready(%v) = %+v, want %+v", tt.names, got, tt.want)
		}
	}
}
