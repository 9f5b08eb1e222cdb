package live

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	ready := PodCondition(p, corev1.PodReady)
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
		done = SameQuantity(spec.Resources.Requests, cs.Resources.Requests, rn) && SameQuantity(spec.Resources.Limits, cs.Resources.Limits, rn)
	}
	if done {
		return ""
	}
	why := fmt.Sprintf("container %s has not been resized yet", name)
	for _, t := range []corev1.PodConditionType{corev1.PodResizePending, corev1.PodResizeInProgress} {
		if c := PodCondition(p, t); c != nil && c.Status == corev1.ConditionTrue {
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
		// Unready from when the kubelet took it out of service, but not
		// before rollplan's in-place update began (it may have been
		// unready before, on the old image): the progress deadline runs
		// from there, so that an image whose container runs but never
		// turns Ready halts the rollout instead of holding it in flight
		// for ever. Without rollplan's record (the spec changed by
		// someone else) or still Ready (the kubelet has not acted): now.
		since := now
		cp := p.DeepCopy()
		c := PodCondition(cp, corev1.PodReady)
		if at := updateStart(p); !at.IsZero() && c != nil && c.Status == corev1.ConditionFalse {
			since = c.LastTransitionTime.Time
			if at.After(since) {
				since = at
			}
			if since.After(now) {
				since = now
			}
		}
		if c != nil {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(since)
		} else {
			cp.Status.Conditions = append(cp.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(since)})
		}
		s.Pods[i] = cp
	}
	return inFlight
}

// updateStart is when the pod's in-place update (its AnnInPlaceUpdate
// record) began; zero without a readable record.
func updateStart(p *corev1.Pod) time.Time {
	raw, ok := p.Annotations[AnnInPlaceUpdate]
	if !ok {
		return time.Time{}
	}
	var rec InPlaceRecord
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339, rec.At)
	return at
}

// MinReadySeconds of the target workload in the snapshot.
func MinReadySeconds(s *snapshot.Snapshot, t Target) int {
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

// SameQuantity: resource rn is the same (or absent) in both lists.
func SameQuantity(a, b corev1.ResourceList, rn corev1.ResourceName) bool {
	qa, oka := a[rn]
	qb, okb := b[rn]
	return oka == okb && (!oka || qa.Cmp(qb) == 0)
}
