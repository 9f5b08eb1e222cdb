package live

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReadinessGate is the pod readiness gate rollplan drives (as OpenKruise
// does with InPlaceUpdateReady). A pod whose spec.readinessGates declares
// it is Ready only while its condition of this type is True, so:
//
//   - Before an in-place update that restarts a container (an image
//     change, or a resize of a resource whose resizePolicy is
//     RestartContainer), the executor sets the condition False (pods/status, with the
//     resourceVersion read as precondition), waits (up to GateWait) for the
//     kubelet to report the pod not Ready, and only then patches the pod,
//     with the resourceVersion of that last read (and the same UID and
//     images as the read the plan was checked on): the pod leaves its
//     Services before the kubelet restarts the container. If the kubelet
//     does not answer in time the patch goes ahead (it will not act on
//     the new image either). A change of labels or annotations only
//     restarts nothing and leaves the gate alone.
//   - Once the update is complete — judged as InFlight judges it, but on
//     the ContainersReady condition instead of Ready (with the gate False,
//     Ready stays False whatever the containers do): every changed
//     container running its new image, and the containers Ready for
//     minReadySeconds since — the executor sets the condition True. The
//     pod then becomes Ready, and counts as available (for the planner and
//     the workload's controller alike) minReadySeconds later: a gated pod
//     waits minReadySeconds twice, once before it is let back into its
//     Services and once as any pod does to be available.
//   - Every pod declaring the gate whose condition is missing (a pod just
//     created by the workload's controller, a recreated one included) or
//     False with no in-place update in flight gets it True: without that it
//     would never become Ready. So a gated workload needs `rollplan apply`
//     to run for its new pods to become Ready; a run with nothing to roll
//     out does just that and stops.
//
// Crash safety: the False condition is written before the patch, so an
// executor that dies (or whose patch conflicts) between the two leaves a
// pod with the gate False and no update in flight; the next step sets it
// True again and plans that pod afresh. All the state is on the pod.
const ReadinessGate corev1.PodConditionType = "rollplan.dev/in-place-update-ready"

// HasReadinessGate: the pod declares ReadinessGate.
func HasReadinessGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == ReadinessGate {
			return true
		}
	}
	return false
}

// PodCondition is the pod's condition of type t, nil when it has none.
func PodCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// GatedInFlight is InFlight for a pod that declares the readiness gate:
// the same judgement, with the ContainersReady condition standing in for
// Ready (which the False gate holds False).
func GatedInFlight(p *corev1.Pod, minReady int, now time.Time) (bool, string) {
	cp := p.DeepCopy()
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	if c := PodCondition(p, corev1.ContainersReady); c != nil {
		ready.Status, ready.LastTransitionTime = c.Status, c.LastTransitionTime
	}
	if c := PodCondition(cp, corev1.PodReady); c != nil {
		*c = ready
	} else {
		cp.Status.Conditions = append(cp.Status.Conditions, ready)
	}
	return InFlight(cp, minReady, now)
}
