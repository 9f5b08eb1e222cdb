package testobj

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// DeploymentWrapper builds a Deployment.
type DeploymentWrapper struct{ appsv1.Deployment }

// Deployment is ns/name selecting app=name, with the default strategy.
func Deployment(ns, name string) *DeploymentWrapper {
	labels := map[string]string{"app": name}
	return &DeploymentWrapper{appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DeploymentSpec{Selector: selector(labels), Template: template(labels, Image)},
	}}
}

// Obj returns the Deployment.
func (w *DeploymentWrapper) Obj() *appsv1.Deployment { return &w.Deployment }

// Meta replaces the object metadata.
func (w *DeploymentWrapper) Meta(m metav1.ObjectMeta) *DeploymentWrapper { w.ObjectMeta = m; return w }

// UID sets the UID.
func (w *DeploymentWrapper) UID(uid types.UID) *DeploymentWrapper { w.ObjectMeta.UID = uid; return w }

// Managed marks the Deployment as driven by rollplan, in place if possible.
func (w *DeploymentWrapper) Managed() *DeploymentWrapper { annotate(&w.ObjectMeta, managed); return w }

// Replicas sets spec.replicas.
func (w *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// Selector sets spec.selector (nil: none).
func (w *DeploymentWrapper) Selector(s *metav1.LabelSelector) *DeploymentWrapper {
	w.Spec.Selector = s
	return w
}

// Template sets the pod template and selects its labels.
func (w *DeploymentWrapper) Template(t corev1.PodTemplateSpec) *DeploymentWrapper {
	w.Spec.Template, w.Spec.Selector = t, selector(t.Labels)
	return w
}

// Image sets the image of the container.
func (w *DeploymentWrapper) Image(image string) *DeploymentWrapper {
	container(&w.Spec.Template).Image = image
	return w
}

// Strategy sets spec.strategy.
func (w *DeploymentWrapper) Strategy(s appsv1.DeploymentStrategy) *DeploymentWrapper {
	w.Spec.Strategy = s
	return w
}

// RollingUpdate sets a RollingUpdate strategy of maxSurge and maxUnavailable
// ("1", "25%").
func (w *DeploymentWrapper) RollingUpdate(maxSurge, maxUnavailable string) *DeploymentWrapper {
	return w.Strategy(RollingUpdate(maxSurge, maxUnavailable))
}

// RollingUpdate is a Deployment's RollingUpdate strategy of maxSurge and
// maxUnavailable ("1", "25%").
func RollingUpdate(maxSurge, maxUnavailable string) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: intOrPercent(maxSurge), MaxUnavailable: intOrPercent(maxUnavailable)}}
}

// MinReadySeconds sets spec.minReadySeconds.
func (w *DeploymentWrapper) MinReadySeconds(s int32) *DeploymentWrapper {
	w.Spec.MinReadySeconds = s
	return w
}

// StatefulSetWrapper builds a StatefulSet.
type StatefulSetWrapper struct{ appsv1.StatefulSet }

// StatefulSet is ns/name selecting app=name, with the default strategy.
func StatefulSet(ns, name string) *StatefulSetWrapper {
	labels := map[string]string{"app": name}
	return &StatefulSetWrapper{appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.StatefulSetSpec{Selector: selector(labels), Template: template(labels, Image)},
	}}
}

// Obj returns the StatefulSet.
func (w *StatefulSetWrapper) Obj() *appsv1.StatefulSet { return &w.StatefulSet }

// Meta replaces the object metadata.
func (w *StatefulSetWrapper) Meta(m metav1.ObjectMeta) *StatefulSetWrapper {
	w.ObjectMeta = m
	return w
}

// UID sets the UID.
func (w *StatefulSetWrapper) UID(uid types.UID) *StatefulSetWrapper { w.ObjectMeta.UID = uid; return w }

// Managed marks the StatefulSet as driven by rollplan, in place if possible.
func (w *StatefulSetWrapper) Managed() *StatefulSetWrapper {
	annotate(&w.ObjectMeta, managed)
	return w
}

// Annotate adds annotations.
func (w *StatefulSetWrapper) Annotate(kv map[string]string) *StatefulSetWrapper {
	annotate(&w.ObjectMeta, kv)
	return w
}

// Replicas sets spec.replicas.
func (w *StatefulSetWrapper) Replicas(n int32) *StatefulSetWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// Selector sets spec.selector (nil: none).
func (w *StatefulSetWrapper) Selector(s *metav1.LabelSelector) *StatefulSetWrapper {
	w.Spec.Selector = s
	return w
}

// Template sets the pod template and selects its labels.
func (w *StatefulSetWrapper) Template(t corev1.PodTemplateSpec) *StatefulSetWrapper {
	w.Spec.Template, w.Spec.Selector = t, selector(t.Labels)
	return w
}

// Image sets the image of the container.
func (w *StatefulSetWrapper) Image(image string) *StatefulSetWrapper {
	container(&w.Spec.Template).Image = image
	return w
}

// Env adds an environment variable to the container.
func (w *StatefulSetWrapper) Env(name, value string) *StatefulSetWrapper {
	c := container(&w.Spec.Template)
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// ServiceName sets spec.serviceName.
func (w *StatefulSetWrapper) ServiceName(s string) *StatefulSetWrapper {
	w.Spec.ServiceName = s
	return w
}

// PodManagement sets spec.podManagementPolicy.
func (w *StatefulSetWrapper) PodManagement(p appsv1.PodManagementPolicyType) *StatefulSetWrapper {
	w.Spec.PodManagementPolicy = p
	return w
}

// OnDelete sets updateStrategy.type OnDelete.
func (w *StatefulSetWrapper) OnDelete() *StatefulSetWrapper {
	w.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	return w
}

// Recreate sets updateStrategy.type Recreate (v1.37, gate
// StatefulSetRecreateStrategy).
func (w *StatefulSetWrapper) Recreate() *StatefulSetWrapper {
	w.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RecreateStatefulSetStrategyType}
	return w
}

// rollingUpdate makes the strategy RollingUpdate and returns its parameters.
func (w *StatefulSetWrapper) rollingUpdate() *appsv1.RollingUpdateStatefulSetStrategy {
	w.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	if w.Spec.UpdateStrategy.RollingUpdate == nil {
		w.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
	}
	return w.Spec.UpdateStrategy.RollingUpdate
}

// Partition sets a RollingUpdate strategy's partition.
func (w *StatefulSetWrapper) Partition(p int32) *StatefulSetWrapper {
	w.rollingUpdate().Partition = ptr.To(p)
	return w
}

// MaxUnavailable sets a RollingUpdate strategy's maxUnavailable ("2", "25%").
func (w *StatefulSetWrapper) MaxUnavailable(s string) *StatefulSetWrapper {
	w.rollingUpdate().MaxUnavailable = intOrPercent(s)
	return w
}

// MinReadySeconds sets spec.minReadySeconds.
func (w *StatefulSetWrapper) MinReadySeconds(s int32) *StatefulSetWrapper {
	w.Spec.MinReadySeconds = s
	return w
}

// DaemonSetWrapper builds a DaemonSet.
type DaemonSetWrapper struct{ appsv1.DaemonSet }

// DaemonSet is ns/name selecting app=name, with the default strategy.
func DaemonSet(ns, name string) *DaemonSetWrapper {
	labels := map[string]string{"app": name}
	return &DaemonSetWrapper{appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DaemonSetSpec{Selector: selector(labels), Template: template(labels, Image)},
	}}
}

// Obj returns the DaemonSet.
func (w *DaemonSetWrapper) Obj() *appsv1.DaemonSet { return &w.DaemonSet }

// Meta replaces the object metadata.
func (w *DaemonSetWrapper) Meta(m metav1.ObjectMeta) *DaemonSetWrapper { w.ObjectMeta = m; return w }

// UID sets the UID.
func (w *DaemonSetWrapper) UID(uid types.UID) *DaemonSetWrapper { w.ObjectMeta.UID = uid; return w }

// Managed marks the DaemonSet as driven by rollplan, in place if possible.
func (w *DaemonSetWrapper) Managed() *DaemonSetWrapper { annotate(&w.ObjectMeta, managed); return w }

// Selector sets spec.selector (nil: none).
func (w *DaemonSetWrapper) Selector(s *metav1.LabelSelector) *DaemonSetWrapper {
	w.Spec.Selector = s
	return w
}

// Template sets the pod template and selects its labels.
func (w *DaemonSetWrapper) Template(t corev1.PodTemplateSpec) *DaemonSetWrapper {
	w.Spec.Template, w.Spec.Selector = t, selector(t.Labels)
	return w
}

// Image sets the image of the container.
func (w *DaemonSetWrapper) Image(image string) *DaemonSetWrapper {
	container(&w.Spec.Template).Image = image
	return w
}

// Env adds an environment variable to the container.
func (w *DaemonSetWrapper) Env(name, value string) *DaemonSetWrapper {
	c := container(&w.Spec.Template)
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// NodeSelector sets the pods' node selector.
func (w *DaemonSetWrapper) NodeSelector(s map[string]string) *DaemonSetWrapper {
	w.Spec.Template.Spec.NodeSelector = s
	return w
}

// OnDelete sets updateStrategy.type OnDelete.
func (w *DaemonSetWrapper) OnDelete() *DaemonSetWrapper {
	w.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	return w
}

// RollingUpdate sets a RollingUpdate strategy of maxSurge and maxUnavailable
// ("1", "25%").
func (w *DaemonSetWrapper) RollingUpdate(maxSurge, maxUnavailable string) *DaemonSetWrapper {
	w.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: intOrPercent(maxSurge), MaxUnavailable: intOrPercent(maxUnavailable)}}
	return w
}

// MinReadySeconds sets spec.minReadySeconds.
func (w *DaemonSetWrapper) MinReadySeconds(s int32) *DaemonSetWrapper {
	w.Spec.MinReadySeconds = s
	return w
}
