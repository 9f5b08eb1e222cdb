package history

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/live"
)

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
}

// cluster: Deployment api at template image; ReplicaSet api-a (revision 1,
// v1, no replicas) and api-b (revision 3, v3) whose in-place record keeps
// revision 2 (v2).
func cluster(t *testing.T, image string) *fake.Clientset {
	t.Helper()
	d := testobj.Deployment("ns", "api").UID("d").Selector(nil).Image(image).Obj()
	rs := func(name string, rev int, image string, replicas int32, hist []live.RevisionRecord) *appsv1.ReplicaSet {
		tmpl := podTemplate(image)
		tmpl.Labels["pod-template-hash"] = name
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api-" + name,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(rev)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "api", UID: "d", Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Template: tmpl}}
		if hist != nil {
			raw, _ := json.Marshal(hist)
			r.Annotations[live.AnnRevisionHistory] = string(raw)
		}
		return r
	}
	objs := []runtime.Object{d,
		rs("a", 1, "v1", 0, nil),
		rs("b", 3, "v3", 3, []live.RevisionRecord{{Revision: 2, Template: podTemplate("v2")}}),
	}
	return fake.NewClientset(objs...)
}

func describe(revs []Revision) string {
	var s []string
	for _, r := range revs {
		s = append(s, fmt.Sprintf("%d %s inPlace=%t current=%t pending=%t %s [%s]", r.Number, r.Source, r.InPlace, r.Current, r.Pending,
			r.Template.Spec.Containers[0].Image, r.Changes))
	}
	return strings.Join(s, "\n")
}

func TestListAndFind(t *testing.T) {
	target := live.Target{Namespace: "ns", Kind: "Deployment", Name: "api"}
	tests := []struct {
		name     string
		image    string // the Deployment's template
		want     string
		previous int64 // Find(revs, 0)
	}{
		// Revision 2 came with a new ReplicaSet (new pods): an image change,
		// which could go in place, but did not. Revision 3 replaced it in
		// place within api-b. The pending template is not rolled out yet.
		{"at the newest revision", "v3", strings.Join([]string{
			"1 ReplicaSet/api-a inPlace=false current=false pending=false v1 []",
			"2 ReplicaSet/api-b inPlace=true current=false pending=false v2 [spec.containers[app].image changed]",
			"3 ReplicaSet/api-b inPlace=false current=true pending=false v3 [spec.containers[app].image changed in place]",
		}, "\n"), 2},
		{"a new template no revision records yet", "v4", strings.Join([]string{
			"1 ReplicaSet/api-a inPlace=false current=false pending=false v1 []",
			"2 ReplicaSet/api-b inPlace=true current=false pending=false v2 [spec.containers[app].image changed]",
			"3 ReplicaSet/api-b inPlace=false current=false pending=false v3 [spec.containers[app].image changed in place]",
			"0 the workload's template inPlace=false current=true pending=true v4 [spec.containers[app].image changed]",
		}, "\n"), 3},
		{"rolled back to an in-place revision's template", "v2", strings.Join([]string{
			"1 ReplicaSet/api-a inPlace=false current=false pending=false v1 []",
			"2 ReplicaSet/api-b inPlace=true current=true pending=false v2 [spec.containers[app].image changed]",
			"3 ReplicaSet/api-b inPlace=false current=false pending=false v3 [spec.containers[app].image changed in place]",
		}, "\n"), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			revs, err := List(context.Background(), cluster(t, tt.image), target)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(revs); got != tt.want {
				t.Errorf("List:\n%s\nwant:\n%s", got, tt.want)
			}
			prev, err := Find(revs, target, 0)
			if err != nil || prev.Number != tt.previous {
				t.Errorf("Find(0) = %+v, %v; want revision %d", prev, err, tt.previous)
			}
			if _, err := Find(revs, target, 0+9); err == nil || !strings.Contains(err.Error(), "revisions: 1, 2, 3") {
				t.Errorf("Find(9): %v, want an error listing the revisions", err)
			}
		})
	}
}

// Revisions rolled out by the Deployment controller's RollingUpdate (one
// ReplicaSet each, pods recreated) are not reported as in place, though an
// image change could have gone in place; nor are a StatefulSet's, whose
// ControllerRevisions do not record how the pods were updated.
func TestListNativeRolloutsAreNotInPlace(t *testing.T) {
	owner := []metav1.OwnerReference{{Kind: "Deployment", Name: "api", UID: "d", Controller: ptr.To(true)}}
	objs := []runtime.Object{testobj.Deployment("ns", "api").UID("d").Selector(nil).Image("v3").Obj()}
	for rev, image := range []string{"v1", "v2", "v3"} {
		tmpl := podTemplate(image)
		tmpl.Labels["pod-template-hash"] = image
		objs = append(objs, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api-" + image, OwnerReferences: owner,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(rev + 1)}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Template: tmpl}})
	}
	revs, err := List(context.Background(), fake.NewClientset(objs...), live.Target{Namespace: "ns", Kind: "Deployment", Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"1 ReplicaSet/api-v1 inPlace=false current=false pending=false v1 []",
		"2 ReplicaSet/api-v2 inPlace=false current=false pending=false v2 [spec.containers[app].image changed]",
		"3 ReplicaSet/api-v3 inPlace=false current=true pending=false v3 [spec.containers[app].image changed]",
	}, "\n")
	if got := describe(revs); got != want {
		t.Errorf("List:\n%s\nwant:\n%s", got, want)
	}

	sts := testobj.StatefulSet("ns", "web").UID("s").Template(podTemplate("v2")).Selector(nil).Obj()
	objs = []runtime.Object{sts}
	for rev, image := range []string{"v1", "v2"} {
		tmpl := podTemplate(image)
		raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"$patch": "replace", "metadata": tmpl.ObjectMeta, "spec": tmpl.Spec}}})
		objs = append(objs, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-" + image,
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "web", UID: "s", Controller: ptr.To(true)}}},
			Data: runtime.RawExtension{Raw: raw}, Revision: int64(rev + 1)})
	}
	revs, err = List(context.Background(), fake.NewClientset(objs...), live.Target{Namespace: "ns", Kind: "StatefulSet", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Join([]string{
		"1 ControllerRevision/web-v1 inPlace=false current=false pending=false v1 []",
		"2 ControllerRevision/web-v2 inPlace=false current=true pending=false v2 [spec.containers[app].image changed]",
	}, "\n")
	if got := describe(revs); got != want {
		t.Errorf("List of a StatefulSet:\n%s\nwant:\n%s", got, want)
	}
}

// Rollback writes the revision's template (hash label aside) and reports
// no change when the template is that already.
func TestRollback(t *testing.T) {
	target := live.Target{Namespace: "ns", Kind: "Deployment", Name: "api"}
	c := cluster(t, "v3")
	revs, err := List(context.Background(), c, target)
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := Find(revs, target, 1)
	for i, want := range []bool{true, false} {
		changed, err := Rollback(context.Background(), c, target, rev, false)
		if err != nil || changed != want {
			t.Fatalf("rollback %d: changed %t, %v; want %t", i+1, changed, err, want)
		}
	}
	d, _ := c.AppsV1().Deployments("ns").Get(context.Background(), "api", metav1.GetOptions{})
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "v1" {
		t.Errorf("template image %s after the rollback, want v1", img)
	}
	if _, ok := d.Spec.Template.Labels["pod-template-hash"]; ok {
		t.Errorf("the rolled-back template carries pod-template-hash")
	}
}
