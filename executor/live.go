package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// AnnInPlaceUpdate is the pod annotation an in-place update writes, in the
// same patch as the new images and the revision label: a JSON InPlaceRecord.
// It is the only state the executor keeps, and it lives on the pod, so a
// restarted executor sees which pods are being updated (see InFlight).
const AnnInPlaceUpdate = "rollplan.dev/in-place-update"

// InPlaceRecord is the value of AnnInPlaceUpdate.
type InPlaceRecord struct {
	// Revision the pod was updated to.
	Revision string `json:"revision"`
	// At: when the patch was sent (RFC 3339, whole seconds).
	At string `json:"at"`
	// ImageIDs: container name → the imageID it ran before the patch, for
	// the containers whose image changed.
	ImageIDs map[string]string `json:"imageIDs"`
	// RestartCounts: every container's restartCount before the patch, so
	// the crash-loop rule counts only restarts since the update (facts
	// subtract them, and the one restart an image change causes).
	RestartCounts map[string]int32 `json:"restartCounts,omitempty"`
	// Resized: the containers whose cpu/memory the update changed through
	// pods/resize; complete once their status.containerStatuses[].resources
	// report the spec's cpu/memory.
	Resized []string `json:"resized,omitempty"`
}

// Reader reads the live state of one workload.
type Reader interface {
	Read(ctx context.Context, t Target) (*snapshot.Snapshot, error)
}

// CaptureReader reads through capture.Capture: the workload, its
// ControllerRevisions, its pods, the PDBs selecting them (with their other
// pods) and the Nodes — the very objects `rollplan snapshot` captures, so
// the executor plans what `rollplan plan` would show for the same state.
// Every Read lists afresh from the API server (no cache), which is what
// the budget re-check before each write needs.
type CaptureReader struct {
	Client kubernetes.Interface
	Now    func() time.Time
}

// Read implements Reader.
func (c CaptureReader) Read(ctx context.Context, t Target) (*snapshot.Snapshot, error) {
	snap, _, err := capture.Capture(ctx, c.Client, capture.Options{
		Namespace: t.Namespace,
		Workloads: []capture.Ref{{Kind: t.Kind, Name: t.Name}},
		Now:       c.Now,
	})
	return snap, err
}

// InFlight reports whether a pod is being updated in place right now, and
// why: a container's spec image differs from the image its status reports
// (the kubelet has not restarted it yet), or the pod carries an
// AnnInPlaceUpdate record whose update has not completed: every changed
// container running the new image with a new imageID (or started after
// the patch), every resized container's status resources reporting the
// spec's cpu/memory requests and limits, and the pod Ready for
// minReadySeconds since then.
func InFlight(p *corev1.Pod, minReady int, now time.Time) (bool, string) {
	statuses := map[string]corev1.ContainerStatus{}
	for _, cs := range p.Status.ContainerStatuses {
		statuses[cs.Name] = cs
	}
	for _, c := range p.Spec.Containers {
		cs, ok := statuses[c.Name]
		if ok && cs.Image != "" && !sameImage(cs.Image, c.Image) {
			return true, fmt.Sprintf("container %s runs %s, spec says %s", c.Name, cs.Image, c.Image)
		}
	}
	raw, ok := p.Annotations[AnnInPlaceUpdate]
	if !ok {
		return false, ""
	}
	var rec InPlaceRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return false, ""
	}
	at, _ := time.Parse(time.RFC3339, rec.At)
	var started time.Time
	for name, oldID := range rec.ImageIDs {
		cs, ok := statuses[name]
		if !ok || cs.State.Running == nil || cs.ImageID == "" {
			return true, fmt.Sprintf("container %s is restarting with its new image", name)
		}
		if cs.ImageID == oldID && cs.State.Running.StartedAt.Time.Before(at) {
			return true, fmt.Sprintf("container %s has not restarted with its new image yet", name)
		}
		if cs.State.Running.StartedAt.After(started) {
			started = cs.State.Running.StartedAt.Time
		}
	}
	for _, name := range rec.Resized {
		if why := resizePending(p, name, statuses[name]); why != "" {
			return true, why
		}
	}
	ready := readyCondition(p)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return true, "not Ready since its in-place update"
	}
	since := ready.LastTransitionTime.Time
	if started.After(since) {
		since = started
	}
	if since.Add(time.Duration(minReady) * time.Second).After(now) {
		return true, fmt.Sprintf("Ready for less than minReadySeconds (%ds) since its in-place update", minReady)
	}
	return false, ""
}

// resizePending says why container name's resize is not complete: its
// status resources do not report the spec's cpu/memory requests and
// limits yet (with the pod's PodResizePending or PodResizeInProgress
// condition, when the kubelet set one); "" once they do.
func resizePending(p *corev1.Pod, name string, cs corev1.ContainerStatus) string {
	var spec *corev1.Container
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			spec = &p.Spec.Containers[i]
		}
	}
	if spec == nil {
		return ""
	}
	done := cs.Resources != nil
	for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !done {
			break
		}
		done = sameQuantity(spec.Resources.Requests, cs.Resources.Requests, rn) && sameQuantity(spec.Resources.Limits, cs.Resources.Limits, rn)
	}
	if done {
		return ""
	}
	why := fmt.Sprintf("container %s has not been resized yet", name)
	for _, t := range []corev1.PodConditionType{corev1.PodResizePending, corev1.PodResizeInProgress} {
		if c := podCondition(p, t); c != nil && c.Status == corev1.ConditionTrue {
			why += fmt.Sprintf(" (%s", t)
			if c.Reason != "" {
				why += " " + c.Reason
			}
			if c.Message != "" {
				why += ": " + c.Message
			}
			why += ")"
		}
	}
	return why
}

// sameImage compares images as a container runtime reports them:
// "nginx:1" and "docker.io/library/nginx:1" are the same image.
func sameImage(a, b string) bool {
	return normImage(a) == normImage(b)
}

func normImage(s string) string {
	s = strings.TrimPrefix(s, "docker.io/")
	s = strings.TrimPrefix(s, "library/")
	if !strings.Contains(s, "@") {
		if i := strings.LastIndex(s, ":"); i <= strings.LastIndex(s, "/") {
			s += ":latest"
		}
	}
	return s
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// normalise makes the snapshot say what the executor knows: a pod being
// updated in place is not Ready, whatever its last status write says (the
// kubelet may not have acted on the patch yet). The planner then counts it
// against the budgets, and a restarted executor never spends it twice.
// It returns the pods in flight. The snapshot's pods are copied, not changed.
func normalise(s *snapshot.Snapshot, minReady int, now time.Time) map[string]string {
	inFlight := map[string]string{}
	for i, p := range s.Pods {
		busy, why := InFlight(p, minReady, now)
		if !busy {
			continue
		}
		inFlight[p.Name] = why
		cp := p.DeepCopy()
		if c := readyCondition(cp); c != nil {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
		} else {
			cp.Status.Conditions = append(cp.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now)})
		}
		s.Pods[i] = cp
	}
	return inFlight
}

// minReadySeconds of the target workload in the snapshot.
func minReadySeconds(s *snapshot.Snapshot, t Target) int {
	switch t.Kind {
	case capture.StatefulSet:
		for _, o := range s.StatefulSets {
			if o.Name == t.Name && o.Namespace == t.Namespace {
				return int(o.Spec.MinReadySeconds)
			}
		}
	case capture.DaemonSet:
		for _, o := range s.DaemonSets {
			if o.Name == t.Name && o.Namespace == t.Namespace {
				return int(o.Spec.MinReadySeconds)
			}
		}
	case capture.Deployment:
		for _, o := range s.Deployments {
			if o.Name == t.Name && o.Namespace == t.Namespace {
				return int(o.Spec.MinReadySeconds)
			}
		}
	}
	return 0
}

// liveState is one fresh read, normalised, with the workload's facts.
type liveState struct {
	snap     *snapshot.Snapshot
	rollout  *facts.Rollout
	inFlight map[string]string
	now      time.Time
}

func (e *Executor) read(ctx context.Context) (*liveState, error) {
	return e.readFrom(ctx, e.reader)
}

func (e *Executor) readFrom(ctx context.Context, r Reader) (*liveState, error) {
	snap, err := r.Read(ctx, e.opts.Target)
	if err != nil {
		return nil, err
	}
	now := e.now()
	rollout, inFlight, err := Observe(snap, e.opts.Target, now, e.opts.Cluster())
	if err != nil {
		return nil, err
	}
	return &liveState{snap: snap, rollout: rollout, inFlight: inFlight, now: now}, nil
}

// Observe builds the facts of the target as the executor sees it: pods
// being updated in place are not Ready (normalise), whatever their status
// says. It returns the pods in flight, with why. The gate observes the
// same way, so both count the same pods against a budget. The snapshot's
// pod slice is changed (in-flight pods replaced by copies), not its pods.
// The cluster's version and gates come from opts, whose Now is replaced by now.
func Observe(snap *snapshot.Snapshot, t Target, now time.Time, opts facts.Options) (*facts.Rollout, map[string]string, error) {
	inFlight := normalise(snap, minReadySeconds(snap, t), now)
	opts.Now = now
	// Only the target's own error fails it: another workload the snapshot
	// holds (a bulk read) has no say in the target's facts.
	rollouts, failed, err := facts.BuildEach(snap, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range failed {
		if f.Kind == t.Kind && f.Namespace == t.Namespace && f.Name == t.Name {
			return nil, nil, f
		}
	}
	for _, r := range rollouts {
		w := r.Workload
		if w.Kind == t.Kind && w.Namespace == t.Namespace && w.Name == t.Name {
			return r, inFlight, nil
		}
	}
	return nil, nil, fmt.Errorf("%s %w", t, capture.ErrNotFound)
}

// budgetUse counts what a budget would hold if the pods in extra were
// disrupted on top of the live state, through the planner's ledger: the
// pods the workload lacks count as unavailable (a deleted pod frees no
// budget until its replacement is available), and so do terminating pods.
func budgetUse(r *facts.Rollout, b plan.Budget, extra map[string]bool) int {
	return plan.Count{Down: func(p *facts.Pod) bool { return extra[p.Name] }, Missing: true}.Use(r, b)
}

// overBudget names the first enforced budget the extra pods would break
// on top of the live state, or "" when every budget holds.
func overBudget(r *facts.Rollout, budgets []plan.Budget, extra map[string]bool) string {
	for _, b := range budgets {
		if b.Advisory || (b.Type != "unavailable" && b.Type != "groups") {
			continue
		}
		if use := budgetUse(r, b, extra); use > b.Limit {
			return fmt.Sprintf("budget %s would be %d/%d", b.Name, use, b.Limit)
		}
	}
	return ""
}
