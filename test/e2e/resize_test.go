package e2e

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func guaranteedResources(cpu, mem string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// TestInPlaceResize: a new image and new cpu/memory (QoS kept, Guaranteed)
// under InPlaceIfPossible: every pod is updated in place (same UIDs) —
// resources through pods/resize on the real apiserver, mirrored by the test
// kubelet into status.containerStatuses[].resources — within the budget.
func TestInPlaceResize(t *testing.T) {
	e := newEnv(t, 2)
	const name, replicas = "rsz", 4
	set := statefulSet(e.ns, name, replicas, "2")
	set.Spec.Template.Spec.Containers[0].Resources = guaranteedResources("100m", "128Mi")
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	before := uids(e.pods("app=" + name))
	w := e.watch("app="+name, replicas)
	e.setTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Image = "example.com/app:v2"
		s.Containers[0].Resources = guaranteedResources("200m", "256Mi")
	})
	var log bytes.Buffer
	sum := run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions["InPlaceUpdate"] != replicas || sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v, want %d InPlaceUpdate and no Recreate", sum.Actions, replicas)
	}
	e.waitSettled(name, replicas)
	pods := e.pods("app=" + name)
	after := map[string]types.UID{}
	for n, u := range uids(pods) {
		after[n] = u
	}
	want := guaranteedResources("200m", "256Mi")
	for _, p := range pods {
		if before[p.Name] != after[p.Name] {
			t.Errorf("pod %s was recreated", p.Name)
		}
		c := p.Spec.Containers[0]
		if c.Image != "example.com/app:v2" || c.Resources.Requests.Cpu().Cmp(*want.Requests.Cpu()) != 0 || c.Resources.Limits.Memory().Cmp(*want.Limits.Memory()) != 0 {
			t.Errorf("pod %s: spec image %s resources %v", p.Name, c.Image, c.Resources)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].Resources == nil || cs[0].Resources.Limits.Cpu().Cmp(*want.Limits.Cpu()) != 0 {
			t.Errorf("pod %s: container status %+v, want resources resized", p.Name, cs)
		}
	}
	w.result(t, 2)
}
