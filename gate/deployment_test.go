package gate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
)

// rollingDeployment is a native Deployment "front" (4 replicas, maxSurge 1,
// maxUnavailable 1) in the middle of its controller's rolling update: the
// old ReplicaSet's 4 pods Ready for an hour, and the surge pod of the new
// ReplicaSet still starting (not Ready).
func rollingDeployment() []runtime.Object {
	labels := func(hash string) map[string]string {
		return map[string]string{"app": "front", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	}
	tmpl := func(image, hash string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(hash)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "front", Image: image}}}}
	}
	d := testobj.Deployment(ns, "front").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "front", UID: "front-uid", Generation: 2, Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}}).
		Replicas(4).Template(corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "front"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "front", Image: "example.com/front:v2"}}}}).
		RollingUpdate("1", "1").Obj()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 5, AvailableReplicas: 4, UpdatedReplicas: 1}
	owner := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	objs := []runtime.Object{d}
	started := metav1.NewTime(now.Add(-time.Hour))
	for _, rs := range []struct {
		hash, image string
		revision    string
		pods        int
		ready       bool
	}{{"old", "example.com/front:v1", "1", 4, true}, {"new", "example.com/front:v2", "2", 1, false}} {
		name := "front-" + rs.hash
		objs = append(objs, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), Labels: labels(rs.hash),
				Annotations: map[string]string{"deployment.kubernetes.io/revision": rs.revision}, OwnerReferences: owner("Deployment", "front", "front-uid")},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(rs.pods)), Selector: &metav1.LabelSelector{MatchLabels: labels(rs.hash)}, Template: tmpl(rs.image, rs.hash)},
			Status: appsv1.ReplicaSetStatus{Replicas: int32(rs.pods), ObservedGeneration: 1},
		})
		for i := range rs.pods {
			pod := fmt.Sprintf("%s-%d", name, i)
			status := corev1.ConditionFalse
			if rs.ready {
				status = corev1.ConditionTrue
			}
			p := testobj.Pod(ns, pod).
				Meta(metav1.ObjectMeta{Namespace: ns, Name: pod, UID: types.UID(pod + "-uid"), ResourceVersion: "10", CreationTimestamp: started}).
				Labels(labels(rs.hash)).Owner("ReplicaSet", name, types.UID(name+"-uid")).
				Node(fmt.Sprintf("node-%d", i)).Containers(corev1.Container{Name: "front", Image: rs.image}).Obj()
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: started}}}
			objs = append(objs, p)
		}
	}
	return objs
}

// A Deployment's budget counts as upstream does, desired minus available:
// the surge pod still starting costs nothing while the old pods cover the
// desired count, so the controller's scale-down of one old pod fits
// maxUnavailable 1, and a second disruption does not.
func TestDeploymentSurgePodIsNotUnavailable(t *testing.T) {
	f := newFixture(t, Options{}, rollingDeployment()...)
	del := func(name string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{UID: types.UID("del-" + name), Namespace: ns, Name: name, Resource: podResource(),
			Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON(name, nil)}}
	}
	if resp, _ := f.review(del("front-old-0")); !resp.Allowed {
		t.Fatalf("the controller's scale-down of front-old-0 denied: %v", resp.Result)
	}
	resp, _ := f.review(del("front-old-1"))
	if resp.Allowed {
		t.Fatal("a second old pod's delete admitted: 2 of 4 unavailable under maxUnavailable 1")
	}
	for _, want := range []string{"Deployment shop/front", "budget maxUnavailable allows 1 pod unavailable, this would make 2"} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("denial %q does not say %q", resp.Result.Message, want)
		}
	}
}
