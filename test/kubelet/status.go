package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// terminate removes a pod whose deletion was requested, after the image's
// termination delay: first its status says its containers exited, as the
// real kubelet's does (not on a node that is not ready: no kubelet writes
// there).
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod, node Node) (time.Duration, error) {
	var delay time.Duration
	for _, c := range pod.Spec.Containers {
		delay = max(delay, k.behavior(c.Image).TerminationDelay)
	}
	requested := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		requested = requested.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	if wait := time.Until(requested.Add(delay)); wait > 0 {
		return wait, nil
	}
	if st := terminated(pod, time.Now()); st != nil && !node.NotReady {
		p := pod.DeepCopy()
		p.Status = *st
		if _, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return 0, nil
			}
			return 0, fmt.Errorf("pod %s/%s: status of its exited containers: %w", pod.Namespace, pod.Name, err)
		}
	}
	uid := pod.UID
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return 0, nil
}

// terminated is the status of a deleted pod whose containers have exited
// on SIGTERM: each running container terminated Completed with exit code
// 0, not ready, not started; the pod Succeeded once none runs, and Ready,
// ContainersReady and PodReadyToStartContainers False (the sandbox is
// gone), as the real kubelet reports it. nil: no container ran (nothing
// to report).
func terminated(pod *corev1.Pod, now time.Time) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	t := metav1.NewTime(now.Truncate(time.Second))
	ran := false
	allDone := true
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if r := cs.State.Running; r != nil {
			ran = true
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", StartedAt: r.StartedAt, FinishedAt: t, ContainerID: cs.ContainerID,
			}}
		}
		cs.Ready, cs.Started = false, new(bool)
		if cs.State.Terminated == nil {
			allDone = false
		}
	}
	if !ran {
		return nil
	}
	if allDone {
		st.Phase = corev1.PodSucceeded
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		setCondition(st, typ, corev1.ConditionFalse, t)
	}
	orderConditions(st)
	return st
}

// ImageID is the imageID the kubelet reports for an image: a digest
// derived from the name, so a changed image has a changed ID.
func ImageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	repo := image
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// nextStatus computes the pod's next status at now, or nil when nothing
// changes yet, and when to look again.
func (k *Kubelet) nextStatus(pod *corev1.Pod, now time.Time) (*corev1.PodStatus, time.Duration) {
	old := &pod.Status
	st := old.DeepCopy()
	t := metav1.NewTime(now.Truncate(time.Second))
	if st.StartTime == nil {
		// The pod was just bound: Pending until the first container starts.
		st.Phase = corev1.PodPending
		st.StartTime = &t
		st.HostIP = "10.0.0.1"
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
		setCondition(st, corev1.PodScheduled, corev1.ConditionTrue, t)
		// The sandbox is not made yet: its condition turns True in the
		// next update, before any container runs.
		setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionFalse, t)
		setCondition(st, corev1.PodInitialized, corev1.ConditionTrue, t)
		setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, t)
		setCondition(st, corev1.PodReady, corev1.ConditionFalse, t)
		orderConditions(st)
		st.InitContainerStatuses = nil
		for _, c := range pod.Spec.InitContainers {
			st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: ImageID(c.Image),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: t, FinishedAt: t}},
			})
		}
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Started: new(bool),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
		return st, time.Millisecond
	}
	if c := condition(st, corev1.PodReadyToStartContainers); c == nil || c.Status != corev1.ConditionTrue {
		// The sandbox is up, its network too (the pod's IP): an update of
		// its own, as the real kubelet's.
		setCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionTrue, t)
		if st.PodIP == "" {
			ip := podIP(pod.UID)
			st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
		orderConditions(st)
		return st, time.Millisecond
	}

	var next time.Duration
	soon := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	allReady := true
	for i, c := range pod.Spec.Containers {
		if i >= len(st.ContainerStatuses) || st.ContainerStatuses[i].Name != c.Name {
			st.ContainerStatuses = resetStatuses(pod)
		}
		cs := &st.ContainerStatuses[i]
		b := k.behavior(c.Image)
		running := cs.State.Running != nil
		if running && cs.Image != c.Image {
			// In-place image change: the container restarts with the new
			// image. The real kubelet kills and starts it in one sync and
			// writes the status after: the next update shows the new
			// container running (new imageID, one more restart, started)
			// and not Ready, never a waiting container in between; its
			// Ready waits StartDelay and ReadyDelay (restartedInPlace).
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", ExitCode: 0, StartedAt: cs.State.Running.StartedAt, FinishedAt: t, ContainerID: cs.ContainerID,
			}}
			cs.RestartCount++
			cs.Image, cs.ImageID = c.Image, ImageID(c.Image)
			cs.Ready = false
			cs.Started = ptrTrue()
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}
			cs.ContainerID = "test://" + string(pod.UID) + "/" + c.Name + fmt.Sprint("/", cs.RestartCount)
			if !b.NeverReady && !b.CrashLoop {
				soon(max(b.StartDelay+b.ReadyDelay, time.Millisecond))
			}
			allReady = false
			continue
		}
		switch {
		case b.CrashLoop:
			interval := b.CrashInterval
			if interval <= 0 {
				interval = time.Second
			}
			cs.Image, cs.ImageID, cs.Ready = c.Image, ImageID(c.Image), false
			last := st.StartTime.Time
			if ts := cs.LastTerminationState.Terminated; ts != nil {
				last = ts.FinishedAt.Time
			}
			if wait := last.Add(interval).Sub(now); wait > 0 {
				soon(wait)
			} else {
				cs.RestartCount++
				cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: t}}
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
				soon(interval)
			}
			allReady = false
		case !running:
			since := st.StartTime.Time
			if ts := cs.LastTerminationState.Terminated; ts != nil && ts.FinishedAt.After(since) {
				since = ts.FinishedAt.Time
			}
			if wait := since.Add(b.StartDelay).Sub(now); wait > 0 {
				soon(wait)
				allReady = false
				continue
			}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}
			cs.Image, cs.ImageID = c.Image, ImageID(c.Image)
			cs.ContainerID = "test://" + string(pod.UID) + "/" + c.Name + fmt.Sprint("/", cs.RestartCount)
			cs.Started = ptrTrue()
			// Not Ready in the update that reports it running: the real
			// kubelet's readiness probe runs after the start.
			cs.Ready = false
			allReady = false
			if !b.NeverReady && !k.isBroken(pod) {
				soon(max(b.ReadyDelay, time.Millisecond))
			}
			continue
		default:
			if b.NeverReady || !k.isReleased(pod, cs) || k.isBroken(pod) {
				cs.Ready = false
				allReady = false
				continue
			}
			if !cs.Ready {
				delay := b.ReadyDelay
				if restartedInPlace(cs) {
					delay += b.StartDelay
				}
				if wait := cs.State.Running.StartedAt.Add(delay).Sub(now); wait > 0 {
					soon(wait)
					allReady = false
					continue
				}
				cs.Ready = true
			}
		}
		cs.Resources = resourcesOf(c)
	}
	// Running once a container has started, as upstream: a restarting
	// container keeps the pod Running.
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running != nil || cs.RestartCount > 0 {
			st.Phase = corev1.PodRunning
		}
	}
	if st.PodIP == "" {
		ip := podIP(pod.UID)
		st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	cready := corev1.ConditionFalse
	if allReady {
		cready = corev1.ConditionTrue
	}
	setCondition(st, corev1.ContainersReady, cready, t)
	// Ready also needs every readiness gate's condition True, as upstream.
	ready := cready
	for _, g := range pod.Spec.ReadinessGates {
		if c := condition(st, g.ConditionType); c == nil || c.Status != corev1.ConditionTrue {
			ready = corev1.ConditionFalse
		}
	}
	setCondition(st, corev1.PodReady, ready, t)
	orderConditions(st)
	if statusEqual(old, st) {
		return nil, next
	}
	return st, next
}

// restartedInPlace: the running container replaced one the image change
// stopped, in the same instant (the in-place restart above), so it has
// not waited its image's StartDelay yet.
func restartedInPlace(cs *corev1.ContainerStatus) bool {
	ts := cs.LastTerminationState.Terminated
	return ts != nil && cs.State.Running != nil && ts.FinishedAt.Equal(&cs.State.Running.StartedAt)
}

// kubeletConditions are the conditions the real kubelet writes, in its
// order; it keeps the pod's other conditions (readiness gates', a
// disruption's) before them.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled,
}

// orderConditions puts the conditions in the real kubelet's order: the
// others first as they were, then the kubelet's own.
func orderConditions(st *corev1.PodStatus) {
	rank := func(t corev1.PodConditionType) int {
		for i, k := range kubeletConditions {
			if k == t {
				return i + 1
			}
		}
		return 0
	}
	sort.SliceStable(st.Conditions, func(i, j int) bool { return rank(st.Conditions[i].Type) < rank(st.Conditions[j].Type) })
}

func resetStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		out[i] = corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	}
	return out
}

func resourcesOf(c corev1.Container) *corev1.ResourceRequirements {
	if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
		return nil
	}
	r := c.Resources.DeepCopy()
	r.Claims = nil
	return r
}

func ptrTrue() *bool { b := true; return &b }

func podIP(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("10.%d.%d.%d", 64+sum[0]%64, sum[1], 1+sum[2]%254)
}

func condition(st *corev1.PodStatus, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition, moving lastTransitionTime only when the
// status changes, as the kubelet does.
func setCondition(st *corev1.PodStatus, typ corev1.PodConditionType, status corev1.ConditionStatus, t metav1.Time) {
	if c := condition(st, typ); c != nil {
		if c.Status != status {
			c.Status, c.LastTransitionTime = status, t
		}
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: t})
}

func statusEqual(a, b *corev1.PodStatus) bool {
	return a.String() == b.String()
}
