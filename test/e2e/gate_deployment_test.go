package e2e

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/test/kubelet"
)

// TestGateNativeDeploymentRollout: the Deployment controller's own rolling
// update (4 replicas, maxSurge 1, maxUnavailable 1) runs through the gate
// without one denial. The gate counts a Deployment's unavailability as
// upstream does, desired minus available: the surge pod still starting
// costs nothing, so the controller's scale-down of an old pod fits. It
// once counted that pod, denied every such delete and held the rollout to
// maxUnavailable 0 (a ReplicaFailure condition on the Deployment).
func TestGateNativeDeploymentRollout(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate(nil)
	d := managedDeployment(e.ns, "front", 4, "1")
	d.Annotations = nil // native: its controller rolls it
	one := intstr.FromInt32(1)
	d.Spec.Strategy.RollingUpdate.MaxSurge = &one
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployment("front", "rolled out", func(dep *appsv1.Deployment) bool {
		return dep.Status.AvailableReplicas == 4 && dep.Status.UpdatedReplicas == 4
	})
	// New pods take a while to become Ready: the old ones' deletions come
	// while a surge pod is still starting.
	e.kubelet.SetImage("example.com/app:v2", kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 1500 * time.Millisecond})
	e.setDeploymentTemplate("front", func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	e.waitDeployment("front", "rolled out at v2", func(dep *appsv1.Deployment) bool {
		return dep.Status.UpdatedReplicas == 4 && dep.Status.AvailableReplicas == 4 && dep.Status.Replicas == 4
	})
	denied := 0
	for _, n := range a.decisions("deny", "pods DELETE") {
		denied += n
	}
	if denied > 0 {
		t.Errorf("the gate denied %d of the Deployment controller's deletes within its budget:\n%s", denied, denials(a.log.String()))
	}
	if allowed := a.decisions("allow", "pods DELETE"); len(allowed) == 0 {
		t.Errorf("the gate saw none of the controller's deletes; log:\n%s", a.log.String())
	}
	for _, c := range e.deployment("front").Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure {
			t.Errorf("Deployment condition %s: %s", c.Type, c.Message)
		}
	}
}

// denials are the gate's decision log lines that deny.
func denials(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"decision":"deny"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
