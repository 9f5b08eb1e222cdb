package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/planner/live"
)

// ActionReadinessGate is the ActionResult type of a write of the gate
// condition outside an in-place update (setting it True).
const ActionReadinessGate = "ReadinessGate"

// gateWait: how long an in-place update waits, after setting the gate
// False, for the kubelet to report the pod not Ready.
const gateWait = 10 * time.Second

// waitNotReady polls the pod after its gate was set False until its Ready
// condition is not True, for at most gateWait, and returns the
// resourceVersion to patch with. The pod must keep its UID and images
// (else a Conflict: someone else changed it, the step skips it).
func (e *Executor) waitNotReady(ctx context.Context, pod *corev1.Pod, rv string) (string, error) {
	if e.opts.DryRun {
		return rv, nil
	}
	deadline := time.Now().Add(gateWait)
	for {
		cur, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if cur.UID != pod.UID || !sameContainers(cur, pod) {
			return "", apierrors.NewConflict(corev1.Resource("pods"), pod.Name, fmt.Errorf("the pod changed while its readiness gate was set False"))
		}
		if c := live.PodCondition(cur, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
			return cur.ResourceVersion, nil
		}
		if !time.Now().Before(deadline) {
			e.opts.Log.Warn("the kubelet did not report the pod not Ready after its readiness gate was set False; patching anyway",
				"workload", e.opts.Target.String(), "pod", pod.Name, "waited", gateWait)
			return cur.ResourceVersion, nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

func sameContainers(a, b *corev1.Pod) bool {
	if len(a.Spec.Containers) != len(b.Spec.Containers) || len(a.Spec.InitContainers) != len(b.Spec.InitContainers) {
		return false
	}
	for i := range a.Spec.Containers {
		if a.Spec.Containers[i].Image != b.Spec.Containers[i].Image {
			return false
		}
	}
	for i := range a.Spec.InitContainers {
		if a.Spec.InitContainers[i].Image != b.Spec.InitContainers[i].Image {
			return false
		}
	}
	return true
}

// setGate writes the gate condition with a strategic-merge patch of
// pods/status (conditions merge by type), with the pod's resourceVersion as
// precondition. It returns the resourceVersion after the write (the one
// read, in a dry run or when the answer has none).
func (e *Executor) setGate(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) (string, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status": map[string]any{"conditions": []map[string]any{{
			"type": string(live.ReadinessGate), "status": string(status), "reason": reason, "message": message,
			"lastTransitionTime": metav1.NewTime(now.UTC().Truncate(time.Second)),
		}}},
	})
	if err != nil {
		return "", err
	}
	got, err := e.writer.patchPod(ctx, pod, types.StrategicMergePatchType, patch, "status")
	if err != nil {
		return "", err
	}
	if e.opts.DryRun || got == nil || got.ResourceVersion == "" {
		return pod.ResourceVersion, nil
	}
	return got.ResourceVersion, nil
}

// syncGates sets the gate condition True on the workload's pods that
// declare it and have it missing, or False with no in-place update in
// flight (complete, or never patched: see ReadinessGate). A pod whose
// update is in flight keeps its condition. A conflict skips the pod until
// the next step.
func (e *Executor) syncGates(ctx context.Context, state *liveState) ([]ActionResult, error) {
	minReady := live.MinReadySeconds(state.snap, e.opts.Target)
	var out []ActionResult
	for _, p := range state.snap.Pods {
		if !live.HasReadinessGate(p) || p.DeletionTimestamp != nil || factPod(state.rollout, p.Name) == nil ||
			p.Namespace != state.rollout.Workload.Namespace || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c := live.PodCondition(p, live.ReadinessGate)
		if c != nil && c.Status == corev1.ConditionTrue {
			continue
		}
		reason := "the pod is new: nothing to wait for"
		if c != nil {
			if busy, why := live.GatedInFlight(p, minReady, state.now); busy {
				e.opts.Log.Debug("gate", "workload", e.opts.Target.String(), "pod", p.Name, "waiting", why)
				continue
			}
			reason = "no in-place update in flight"
			if _, ok := p.Annotations[live.AnnInPlaceUpdate]; ok {
				reason = "in-place update complete"
			}
		}
		r := ActionResult{Type: ActionReadinessGate, Pod: p.Name, Reason: fmt.Sprintf("%s=True: %s", live.ReadinessGate, reason)}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, err := e.setGate(wctx, p, corev1.ConditionTrue, "InPlaceUpdateReady", reason, state.now)
		cancel()
		switch {
		case err == nil:
			r.Outcome = e.outcome()
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			r.Outcome, r.Reason = Skipped, "the pod changed since it was read: "+err.Error()
		default:
			return out, fmt.Errorf("%s %s: %w", ActionReadinessGate, p.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
