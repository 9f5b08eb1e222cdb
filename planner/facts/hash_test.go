package facts

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reference values: k8s-rollout-semantics.md §1.5.1 (computed on v1.36.3).
func TestComputeHashMatchesUpstream(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	nginx := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
	}
	cases := []struct {
		name  string
		tmpl  corev1.PodTemplateSpec
		count *int32
		want  string
	}{
		{"empty, nil count", corev1.PodTemplateSpec{}, nil, "85748b7f68"},
		{"empty, count 0", corev1.PodTemplateSpec{}, i32(0), "777dfcd544"},
		{"empty, count 1", corev1.PodTemplateSpec{}, i32(1), "b54bc767c"},
		{"nginx, nil count", nginx, nil, "6f5c8fdd6d"},
		{"nginx, count 0", nginx, i32(0), "8f5bb6bbd"},
		{"nginx, count 1", nginx, i32(1), "649d769545"},
		{"nginx, count 2", nginx, i32(2), "7b68fdc978"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ComputeHash(&c.tmpl, c.count); got != c.want {
				t.Errorf("ComputeHash = %s, want %s", got, c.want)
			}
		})
	}
}
