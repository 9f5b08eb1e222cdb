package facts

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func tmpl(image string, mutate func(*corev1.PodTemplateSpec)) *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
	if mutate != nil {
		mutate(t)
	}
	return t
}

func TestDiffClasses(t *testing.T) {
	tests := []struct {
		name string
		to   *corev1.PodTemplateSpec
		want []string // path class inPlace
	}{
		{"image", tmpl("v2", nil), []string{"spec.containers[app].image image true"}},
		{"env", tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}} }),
			[]string{"spec.containers[app].env env false"}},
		{"label", tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Labels["tier"] = "web" }), []string{"metadata.labels[tier] labels true"}},
		{"annotation", tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Annotations = map[string]string{"team": "x"} }),
			[]string{"metadata.annotations[team] annotations true"}},
		{"kubectl rollout restart is not in place", tmpl("v1", func(t *corev1.PodTemplateSpec) {
			t.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-22T04:00:00Z"}
		}), []string{"metadata.annotations[kubectl.kubernetes.io/restartedAt] annotations false"}},
		{"pod-template-hash is a revision label", tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Labels["pod-template-hash"] = "abc" }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(tmpl("v1", nil), tt.to) {
				got = append(got, strings.Join([]string{c.Path, c.Class, map[bool]string{true: "true", false: "false"}[c.InPlace]}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// RunsChanges: a pod runs the update once its spec holds every change, and
// never for a change that cannot go in place.
func TestRunsChanges(t *testing.T) {
	from := tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Annotations = map[string]string{"old": "x"} })
	to := tmpl("v2", func(t *corev1.PodTemplateSpec) {
		t.Labels["tier"] = "web"
		t.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
	})
	from.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	changes := Diff(from, to)
	pod := func(image, cpu string, labels, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	done := map[string]string{"app": "web", "tier": "web", "pod-template-hash": "h"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"all held", pod("v2", "200m", done, nil), true},
		{"old image", pod("v1", "200m", done, nil), false},
		{"old cpu", pod("v2", "100m", done, nil), false},
		{"label missing", pod("v2", "200m", map[string]string{"app": "web"}, nil), false},
		{"removed annotation still there", pod("v2", "200m", done, map[string]string{"old": "x"}), false},
		{"defaults the API server added do not matter", func() *corev1.Pod {
			p := pod("v2", "200m", done, nil)
			p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
			return p
		}(), true},
	}
	for _, tt := range tests {
		if got := RunsChanges(tt.pod, to, changes); got != tt.want {
			t.Errorf("%s: RunsChanges %t, want %t", tt.name, got, tt.want)
		}
	}
	env := Diff(from, tmpl("v1", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A"}} }))
	if RunsChanges(pod("v1", "100m", done, nil), to, env) {
		t.Errorf("a change that cannot go in place counted as held")
	}
}
