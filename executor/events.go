package executor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/rollplan/rollplan/planner/plan"
)

// Recorder records Kubernetes Events (events.k8s.io/v1) about the
// workload. It is the method of client-go's events.EventRecorder, so
// events.FakeRecorder serves in tests.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// ReportingController is the reportingController of the executor's Events.
const ReportingController = "rollplan.dev/executor"

// Event reasons.
const (
	ReasonInPlaceUpdate   = "InPlaceUpdate"
	reasonEvicted         = "Evicted"
	reasonDeleted         = "Deleted"
	reasonRolloutHalted   = "RolloutHalted"
	reasonRolloutComplete = "RolloutComplete"
	// reasonHold: rollplan set a managed Deployment's spec.paused (its hold
	// on the Deployment controller) or cleared it for a fallback.
	reasonHold = "Hold"
	// reasonInPlaceRevision: a ReplicaSet whose pods were all updated in
	// place took the Deployment's template as a new revision.
	reasonInPlaceRevision = "InPlaceRevision"
)

// maxNote: the API server refuses an Event whose note is longer.
const maxNote = 1024

// event records one Event on the workload (with the pod as related object,
// when there is one). A dry run records nothing: it logs the Event instead.
func (e *Executor) event(state *liveState, pod *corev1.Pod, eventtype, reason, action, note string) {
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	if e.opts.DryRun || e.opts.Events == nil {
		e.opts.Log.Debug("event", "workload", e.opts.Target.String(), "type", eventtype, "reason", reason, "note", note, "dryRun", e.opts.DryRun)
		return
	}
	var related runtime.Object
	if pod != nil {
		related = pod
	}
	e.opts.Events.Eventf(e.workloadObject(state), related, eventtype, reason, action, "%s", note)
}

// workloadObject is the workload as read, or a reference to it.
func (e *Executor) workloadObject(state *liveState) runtime.Object {
	t := e.opts.Target
	if state != nil {
		for _, s := range state.snap.StatefulSets {
			if s.Name == t.Name && s.Namespace == t.Namespace {
				return s
			}
		}
		for _, d := range state.snap.DaemonSets {
			if d.Name == t.Name && d.Namespace == t.Namespace {
				return d
			}
		}
		if d := state.deployment(t); d != nil {
			return d
		}
	}
	return &corev1.ObjectReference{APIVersion: "apps/v1", Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
}

// actionEvent records an action carried out on a pod.
func (e *Executor) actionEvent(state *liveState, pod *corev1.Pod, a plan.Action) {
	reason, verb := ReasonInPlaceUpdate, "updated pod %s in place to revision %s"
	switch a.Type {
	case plan.ActionRecreate:
		reason, verb = reasonEvicted, "evicted pod %s to recreate it at revision %s"
	case plan.ActionDelete:
		reason, verb = reasonDeleted, "deleted pod %s through the Eviction API (revision %s)"
	}
	if a.Type != plan.ActionInPlace && e.opts.DeleteMethod == DeletePlain {
		if a.Type == plan.ActionRecreate {
			reason, verb = reasonDeleted, "deleted pod %s (no eviction: --delete-method=delete) to recreate it at revision %s"
		} else {
			verb = "deleted pod %s (no eviction: --delete-method=delete; revision %s)"
		}
	}
	note := fmt.Sprintf(verb, pod.Name, state.rollout.Workload.UpdateRevision)
	if len(a.Reasons) > 0 {
		note += ": " + strings.Join(a.Reasons, "; ")
	}
	e.event(state, pod, corev1.EventTypeNormal, reason, a.Type, note)
}

// EventRecorder records the executor's Events through client-go's
// events.k8s.io/v1 EventBroadcaster. Start it with StartEvents and call
// Shutdown before the process exits.
type EventRecorder struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	cancel      context.CancelFunc
	sent, done  atomic.Int64
}

// StartEvents starts recording Events with the client, as ReportingController.
func StartEvents(client kubernetes.Interface) (*EventRecorder, error) {
	r := &EventRecorder{}
	r.broadcaster = events.NewBroadcaster(&countingSink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}, done: &r.done})
	// Not the command's context: an Event of the last step is still sent
	// after Ctrl-C, until Shutdown.
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, err
	}
	r.recorder = r.broadcaster.NewRecorder(scheme.Scheme, ReportingController)
	return r, nil
}

// Eventf implements Recorder.
func (r *EventRecorder) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.sent.Add(1)
	r.recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Shutdown waits up to timeout for the Events recorded so far to be
// written (the broadcaster sends them asynchronously; best effort), then
// stops.
func (r *EventRecorder) Shutdown(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for r.done.Load() < r.sent.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.cancel()
	r.broadcaster.Shutdown()
}

// countingSink counts the Events written (or given up on).
type countingSink struct {
	events.EventSink
	done *atomic.Int64
}

func (s *countingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSink.Create(ctx, ev)
	s.done.Add(1)
	return out, err
}

func (s *countingSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSink.Patch(ctx, ev, data)
	s.done.Add(1)
	return out, err
}
