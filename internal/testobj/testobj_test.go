package testobj

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/facts"
)

// The builders compose: each call sets its own field and keeps the others.
func TestBuildersCompose(t *testing.T) {
	s := StatefulSet("ns", "db").Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: "2"}).
		Partition(1).MaxUnavailable("25%").Env("MODE", "a").Obj()
	if s.Annotations[facts.AnnManaged] != "true" || s.Annotations[facts.AnnMaxUnavailable] != "2" {
		t.Errorf("annotations %v", s.Annotations)
	}
	ru := s.Spec.UpdateStrategy.RollingUpdate
	if s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || ru == nil || *ru.Partition != 1 || ru.MaxUnavailable.String() != "25%" {
		t.Errorf("update strategy %+v", s.Spec.UpdateStrategy)
	}
	if c := s.Spec.Template.Spec.Containers[0]; c.Image != Image || len(c.Env) != 1 || s.Spec.Selector.MatchLabels["app"] != "db" {
		t.Errorf("template %+v, selector %v", s.Spec.Template, s.Spec.Selector)
	}

	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "tier": "y"}}}
	if d := Deployment("ns", "web").Template(tmpl).Obj(); len(d.Spec.Selector.MatchLabels) != 2 {
		t.Errorf("Template should select the template's labels, selector %v", d.Spec.Selector)
	}
	if d := Deployment("ns", "web").Selector(nil).Obj(); d.Spec.Selector != nil || d.Spec.Template.Labels["app"] != "web" {
		t.Errorf("Selector(nil) should drop only the selector: %+v", d.Spec)
	}
}
