package testobj

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// PodWrapper builds a Pod.
type PodWrapper struct{ corev1.Pod }

// Pod is ns/name: one container "app" of Image, on no node.
func Pod(ns, name string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: Image}}},
	}}
}

// Obj returns the Pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Meta replaces the object metadata.
func (w *PodWrapper) Meta(m metav1.ObjectMeta) *PodWrapper { w.ObjectMeta = m; return w }

// UID sets the UID.
func (w *PodWrapper) UID(uid types.UID) *PodWrapper { w.ObjectMeta.UID = uid; return w }

// Node binds the pod to a node.
func (w *PodWrapper) Node(name string) *PodWrapper { w.Spec.NodeName = name; return w }

// Image sets the image of the container.
func (w *PodWrapper) Image(image string) *PodWrapper { w.Spec.Containers[0].Image = image; return w }

// Env adds an environment variable to the container.
func (w *PodWrapper) Env(name, value string) *PodWrapper {
	c := &w.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// Containers replaces the containers.
func (w *PodWrapper) Containers(c ...corev1.Container) *PodWrapper { w.Spec.Containers = c; return w }

// Labels replaces the labels.
func (w *PodWrapper) Labels(l map[string]string) *PodWrapper { w.ObjectMeta.Labels = l; return w }

// Owner makes the apps/v1 workload kind name (uid) the pod's controller.
func (w *PodWrapper) Owner(kind, name string, uid types.UID) *PodWrapper {
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	return w
}

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// Node is a node named name, schedulable, with no status.
func Node(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the Node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Meta replaces the object metadata.
func (w *NodeWrapper) Meta(m metav1.ObjectMeta) *NodeWrapper { w.ObjectMeta = m; return w }

// Images lists images the node holds, one name each.
func (w *NodeWrapper) Images(names ...string) *NodeWrapper {
	for _, n := range names {
		w.Status.Images = append(w.Status.Images, corev1.ContainerImage{Names: []string{n}})
	}
	return w
}

// Ready adds the condition Ready True.
func (w *NodeWrapper) Ready() *NodeWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
	return w
}
