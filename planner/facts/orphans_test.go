package facts

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// A pod that a workload's selector matches but no controller owns is
// neither planned nor counted: the workload warns about it.
func TestUnownedPodWarning(t *testing.T) {
	const want = "matches spec.selector of StatefulSet default/web but no controller owns it (no ownerReference with controller: true): it is neither planned nor counted"
	pod := func(ns, name string, labels map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	yes := true
	cases := []struct {
		name string
		pod  *corev1.Pod
		warn bool
	}{
		{"matching, no owner", pod("default", "stray", map[string]string{"app": "web", "extra": "x"}, nil), true},
		{"matching, owner not a controller", pod("default", "stray", map[string]string{"app": "web"}, &metav1.OwnerReference{Kind: "ConfigMap", Name: "c"}), true},
		{"matching, another controller", pod("default", "job-pod", map[string]string{"app": "web"}, &metav1.OwnerReference{Kind: "Job", Name: "j", Controller: &yes}), false},
		{"other namespace", pod("other", "stray", map[string]string{"app": "web"}, nil), false},
		{"labels do not match", pod("default", "stray", map[string]string{"app": "api"}, nil), false},
		{"no labels", pod("default", "stray", nil, nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap, _, err := snapshot.LoadFiles([]string{filepath.Join("../../testdata/scenarios/sts-partition-gate-off/snapshot.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			pods := len(snap.Pods)
			snap.Pods = append(snap.Pods, c.pod)
			rs, err := Build(snap, Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 {
				t.Fatalf("%d rollouts, want 1", len(rs))
			}
			r := rs[0]
			if len(r.Pods) != pods || slices.ContainsFunc(r.Pods, func(p Pod) bool { return p.Name == c.pod.Name }) {
				t.Errorf("the facts hold %d pods, want the %d the StatefulSet owns", len(r.Pods), pods)
			}
			got := slices.ContainsFunc(r.Warnings, func(w string) bool {
				return w == "pod "+c.pod.Namespace+"/"+c.pod.Name+" "+want
			})
			if got != c.warn {
				t.Errorf("warned %t, want %t; warnings:\n%s", got, c.warn, strings.Join(r.Warnings, "\n"))
			}
		})
	}
}
