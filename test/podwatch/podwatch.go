// Package podwatch records the status steps pods go through, for cluster
// suites that check what a rollout did to pods (a real or a simulated
// kubelet): per pod, each distinct step of the fields readiness and
// restarts are read from — the pod's phase, its Ready, ContainersReady,
// PodReadyToStartContainers, Initialized and PodScheduled conditions, each
// container's spec image, status image, imageID, ready, started, restart
// count and state — and nothing else: an update that changes none of them
// (a heartbeat, a transition time, an annotation) is no step.
//
// A Recorder lists the pods of a namespace matching a label selector and
// watches them from the list's resourceVersion, so the first step of a pod
// that exists is its state at the start and every later change is seen in
// the apiserver's order (one watch stream: resourceVersion order across
// pods, which is what MaxUnready replays).
package podwatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Conditions are the pod conditions a step keeps, in no particular order:
// a step lists them in the order the pod does.
var Conditions = []corev1.PodConditionType{
	corev1.PodReady,
	corev1.ContainersReady,
	corev1.PodReadyToStartContainers,
	corev1.PodInitialized,
	corev1.PodScheduled,
}

// Condition is one pod condition's type and status.
type Condition struct {
	Type   corev1.PodConditionType
	Status corev1.ConditionStatus
}

// Container is what a step keeps of one container.
type Container struct {
	Name string
	// SpecImage is the image the pod's spec names; Image is the one the
	// status reports (the running container's, until it restarts).
	SpecImage    string
	Image        string
	ImageID      string
	Ready        bool
	Started      *bool
	RestartCount int32
	// State is "waiting:REASON", "running" or "terminated:REASON:EXITCODE";
	// "" when the status has no entry for the container yet.
	State string
}

// Step is one distinct status of a pod.
type Step struct {
	// Seq orders steps across all pods of a recording (watch order).
	Seq int
	// At is when the recorder saw the step (not the apiserver's time).
	At              time.Time
	ResourceVersion string
	UID             types.UID
	Phase           corev1.PodPhase
	// Terminating: the pod's deletion was requested.
	Terminating bool
	// Gone: the pod was deleted (the last step of its life).
	Gone       bool
	Conditions []Condition
	Containers []Container
}

// Life is one pod object (one UID) under a name.
type Life struct {
	UID   types.UID
	Steps []Step
}

// Pod is every life of one pod name, in order: a pod deleted and created
// anew (a StatefulSet's recreate) has two.
type Pod struct {
	Name  string
	Lives []*Life
}

// Condition returns the status of a condition in the step, "" when the
// pod does not have it.
func (s Step) Condition(t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Ready: the pod serves — Ready True, not terminating, not gone (the
// endpoints controller takes a terminating pod out of service).
func (s Step) Ready() bool {
	return !s.Gone && !s.Terminating && s.Condition(corev1.PodReady) == corev1.ConditionTrue
}

// Container returns the step's container of that name.
func (s Step) Container(name string) (Container, bool) {
	for _, c := range s.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return Container{}, false
}

// StepOf reduces a pod to the fields a step keeps.
func StepOf(p *corev1.Pod) Step {
	s := Step{
		ResourceVersion: p.ResourceVersion,
		UID:             p.UID,
		Phase:           p.Status.Phase,
		Terminating:     p.DeletionTimestamp != nil,
	}
	for _, c := range p.Status.Conditions {
		if slices.Contains(Conditions, c.Type) {
			s.Conditions = append(s.Conditions, Condition{Type: c.Type, Status: c.Status})
		}
	}
	for _, c := range p.Spec.Containers {
		ct := Container{Name: c.Name, SpecImage: c.Image}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != c.Name {
				continue
			}
			ct.Image, ct.ImageID, ct.Ready, ct.RestartCount = cs.Image, cs.ImageID, cs.Ready, cs.RestartCount
			if cs.Started != nil {
				ct.Started = new(bool)
				*ct.Started = *cs.Started
			}
			ct.State = stateOf(cs.State)
		}
		s.Containers = append(s.Containers, ct)
	}
	return s
}

func stateOf(st corev1.ContainerState) string {
	switch {
	case st.Waiting != nil:
		return "waiting:" + st.Waiting.Reason
	case st.Running != nil:
		return "running"
	case st.Terminated != nil:
		return fmt.Sprintf("terminated:%s:%d", st.Terminated.Reason, st.Terminated.ExitCode)
	}
	return "" // the kubelet's default: waiting with no reason
}

// Same: the steps agree on every recorded field (not Seq, At, or the
// resourceVersion).
func Same(a, b Step) bool {
	a.Seq, a.At, a.ResourceVersion = 0, time.Time{}, ""
	b.Seq, b.At, b.ResourceVersion = 0, time.Time{}, ""
	return a.String() == b.String()
}

// String renders the step on one line, e.g.
// "Running Ready=True ContainersReady=True app[img app:2 id=... ready started restarts=1 running]".
func (s Step) String() string {
	var b strings.Builder
	b.WriteString(string(s.Phase))
	if s.Phase == "" {
		b.WriteString("-")
	}
	if s.Terminating {
		b.WriteString(" terminating")
	}
	if s.Gone {
		b.WriteString(" gone")
	}
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, c := range s.Containers {
		b.WriteString(" " + c.String())
	}
	return b.String()
}

// String renders the container's fields.
func (c Container) String() string {
	started := "started=nil"
	if c.Started != nil {
		started = fmt.Sprintf("started=%v", *c.Started)
	}
	img := c.Image
	if img != c.SpecImage {
		img = fmt.Sprintf("%s (spec %s)", c.Image, c.SpecImage)
	}
	return fmt.Sprintf("%s[image=%s id=%s ready=%v %s restarts=%d %s]", c.Name, img, c.ImageID, c.Ready, started, c.RestartCount, c.State)
}

// Recording is what a recorder has seen so far. Its zero value is empty;
// Observe adds to it, so it can be built from hand-made pods as well.
type Recording struct {
	mu   sync.Mutex
	pods map[string]*Pod
	seq  int
}

// Observe adds a pod's state seen at time at: a new step of its life when
// a recorded field changed, a new life when its UID is new, nothing when
// nothing recorded changed. It reports whether a step was added.
func (r *Recording) Observe(p *corev1.Pod, at time.Time) bool {
	s := StepOf(p)
	s.At = at
	return r.add(p.Name, s)
}

// ObserveGone records the pod's deletion: a last step as the pod was,
// marked Gone.
func (r *Recording) ObserveGone(p *corev1.Pod, at time.Time) bool {
	s := StepOf(p)
	s.At, s.Gone = at, true
	return r.add(p.Name, s)
}

func (r *Recording) add(name string, s Step) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods == nil {
		r.pods = map[string]*Pod{}
	}
	pod := r.pods[name]
	if pod == nil {
		pod = &Pod{Name: name}
		r.pods[name] = pod
	}
	var life *Life
	if n := len(pod.Lives); n > 0 && pod.Lives[n-1].UID == s.UID {
		life = pod.Lives[n-1]
	} else {
		life = &Life{UID: s.UID}
		pod.Lives = append(pod.Lives, life)
	}
	if n := len(life.Steps); n > 0 && (life.Steps[n-1].Gone || Same(life.Steps[n-1], s)) {
		return false
	}
	r.seq++
	s.Seq = r.seq
	life.Steps = append(life.Steps, s)
	return true
}

// Pod returns a copy of what was recorded of a pod name; ok is false when
// nothing was.
func (r *Recording) Pod(name string) (Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[name]
	if !ok {
		return Pod{Name: name}, false
	}
	out := Pod{Name: name}
	for _, l := range p.Lives {
		out.Lives = append(out.Lives, &Life{UID: l.UID, Steps: slices.Clone(l.Steps)})
	}
	return out, true
}

// Has reports whether the recording has caught up with p: the last step
// recorded under its name is of its UID and the same as p's status. A
// test that saw a pod's final state by a GET waits for Has before it
// stops the recorder: the watch may deliver that state a moment later.
func (r *Recording) Has(p *corev1.Pod) bool {
	rec, ok := r.Pod(p.Name)
	if !ok || len(rec.Lives) == 0 {
		return false
	}
	last := rec.Lives[len(rec.Lives)-1]
	return last.UID == p.UID && len(last.Steps) > 0 && Same(last.Steps[len(last.Steps)-1], StepOf(p))
}

// Names are the pod names recorded, sorted.
func (r *Recording) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.pods {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// UIDKept: the pod name had one object throughout (an in-place change),
// not a new one (a recreate). False when nothing was recorded of it.
func (r *Recording) UIDKept(name string) bool {
	p, ok := r.Pod(name)
	return ok && len(p.Lives) == 1
}

// RestartDelta is how much a container's restart count grew over the
// pod's first life, the one a change in place keeps: the last step's count
// less the first step's. An error when the pod or the container is not
// recorded or the pod had more than one life (counts start again on a new
// pod, so a delta across lives says nothing).
func (r *Recording) RestartDelta(name, container string) (int32, error) {
	p, ok := r.Pod(name)
	if !ok {
		return 0, fmt.Errorf("pod %s: not recorded", name)
	}
	if len(p.Lives) != 1 {
		return 0, fmt.Errorf("pod %s: %d lives (UIDs %v): a restart count starts again on a new pod", name, len(p.Lives), p.UIDs())
	}
	steps := p.Lives[0].Steps
	first, ok1 := steps[0].Container(container)
	last, ok2 := steps[len(steps)-1].Container(container)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("pod %s: container %s not in its spec", name, container)
	}
	return last.RestartCount - first.RestartCount, nil
}

// UIDs are the pod's lives' UIDs in order.
func (p Pod) UIDs() []types.UID {
	var out []types.UID
	for _, l := range p.Lives {
		out = append(out, l.UID)
	}
	return out
}

// Steps are every step of every life, in order.
func (p Pod) Steps() []Step {
	var out []Step
	for _, l := range p.Lives {
		out = append(out, l.Steps...)
	}
	return out
}

// ReadyFlips is the sequence of the pod name's serving state (Step.Ready),
// each change once: [false true false true] for a pod seen starting, ready,
// restarted in place and ready again. A new life after a gone one adds
// nothing when the name stays unready across it.
func (r *Recording) ReadyFlips(name string) []bool {
	p, _ := r.Pod(name)
	var out []bool
	for _, s := range p.Steps() {
		if len(out) == 0 || out[len(out)-1] != s.Ready() {
			out = append(out, s.Ready())
		}
	}
	return out
}

// Unready is the worst moment of a set of pods: how many were not ready
// at once and the step that made it so.
type Unready struct {
	Count int
	// Pods are the names not ready then, sorted.
	Pods []string
	// After is the step (by Seq) after which they were; 0: none was.
	After int
}

// MaxUnready replays every step of the recording in order and returns the
// largest number of the named pods not ready at once (Step.Ready: Ready
// True, not terminating, not gone), counted after each step: a rollout's
// real unavailability, the number a budget (maxUnavailable, a disruption
// budget) bounds. A name counts from its first step on: a recording
// started before its pods were created does not count them missing before
// they were; one whose pods were never seen counts for nothing.
func (r *Recording) MaxUnready(names ...string) Unready {
	ready := map[string]bool{} // seen names: serving or not
	type ev struct {
		name string
		s    Step
	}
	var all []ev
	for _, n := range names {
		p, _ := r.Pod(n)
		for _, s := range p.Steps() {
			all = append(all, ev{n, s})
		}
	}
	slices.SortFunc(all, func(a, b ev) int { return a.s.Seq - b.s.Seq })
	unready := func() []string {
		var out []string
		for _, n := range names {
			if r, seen := ready[n]; seen && !r {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	var worst Unready
	for _, e := range all {
		ready[e.name] = e.s.Ready()
		if u := unready(); len(u) > worst.Count {
			worst = Unready{Count: len(u), Pods: u, After: e.s.Seq}
		}
	}
	return worst
}

// Recorder watches pods and records their steps until Stop.
type Recorder struct {
	*Recording
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start lists the pods of namespace matching selector (a label selector,
// "" for all), records each, and records every change from the list's
// resourceVersion on until Stop or ctx ends. The watch is resumed from the
// last resourceVersion seen if the apiserver closes it.
func Start(ctx context.Context, client kubernetes.Interface, namespace, selector string) (*Recorder, error) {
	pods := client.CoreV1().Pods(namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("podwatch: list pods in %s (selector %q): %w", namespace, selector, err)
	}
	r := &Recorder{Recording: &Recording{}, done: make(chan struct{})}
	now := time.Now()
	for i := range list.Items {
		r.Observe(&list.Items[i], now)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("podwatch: watch pods in %s from %s: %w", namespace, list.ResourceVersion, err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						r.Observe(p, time.Now())
					}
				case watch.Deleted:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						r.ObserveGone(p, time.Now())
					}
				case watch.Error:
					r.Recording.mu.Lock()
					r.err = fmt.Errorf("podwatch: watch pods in %s: %v", namespace, ev.Object)
					r.Recording.mu.Unlock()
				}
			}
		}
	}()
	return r, nil
}

// Stop ends the watch and returns the error it met, if any: a recording
// with a watch error may have missed steps.
func (r *Recorder) Stop() error {
	r.cancel()
	<-r.done
	r.Recording.mu.Lock()
	defer r.Recording.mu.Unlock()
	return r.err
}
