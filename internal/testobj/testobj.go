// Package testobj builds the Kubernetes objects rollplan's tests plan,
// capture and create, one builder per kind, in the style of kube-scheduler's
// test wrappers (pkg/scheduler/testing/wrappers.go): start from the
// smallest object that works, set what the test is about, take it with Obj.
//
// A workload named N selects and labels its pods app=N (one map, shared by
// selector and template, as a hand-written object would) and runs one
// container "app" of image Image.
package testobj

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/facts"
)

// Image is the container image of a template no test set one for.
const Image = "app:1"

// template is a pod template: labels, one container "app" running image.
func template(labels map[string]string, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// selector selects labels.
func selector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

// managed: the annotations of a workload rollplan drives, in place where
// it can.
var managed = map[string]string{facts.AnnManaged: "true", facts.AnnPodUpdatePolicy: "InPlaceIfPossible"}

func annotate(m *metav1.ObjectMeta, kv map[string]string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	for k, v := range kv {
		m.Annotations[k] = v
	}
}

// intOrPercent parses "2" or "25%".
func intOrPercent(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// container is the template's first container, the one the builders set.
func container(t *corev1.PodTemplateSpec) *corev1.Container {
	return &t.Spec.Containers[0]
}
