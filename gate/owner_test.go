package gate

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// deleting marks obj as being deleted (a foreground delete: the garbage
// collector's finalizer holds it until its dependents are gone).
func deleting(obj metav1.Object) {
	t := metav1.NewTime(now.Add(-10 * time.Second))
	obj.SetDeletionTimestamp(&t)
	obj.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
}

// edit returns copies of objs without those drop names ("Kind/name"),
// change applied to each.
func edit(objs []runtime.Object, drop []string, change func(runtime.Object)) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if slices.Contains(drop, typeName(o)+"/"+o.(metav1.Object).GetName()) {
			continue
		}
		o = o.DeepCopyObject()
		if change != nil {
			change(o)
		}
		out = append(out, o)
	}
	return out
}

func typeName(o runtime.Object) string {
	switch o.(type) {
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.DaemonSet:
		return "DaemonSet"
	case *appsv1.ReplicaSet:
		return "ReplicaSet"
	case *appsv1.ControllerRevision:
		return "ControllerRevision"
	case *corev1.Pod:
		return "Pod"
	case *corev1.Node:
		return "Node"
	}
	return "?"
}

// A pod whose owner is gone or being deleted is the garbage collector's:
// its delete is admitted (a foreground delete waits for every pod, and no
// replacement comes), and as an allow, not an error. The same pods are
// held to the budget while their owner lives.
func TestPodsOfOwnersGoneOrBeingDeleted(t *testing.T) {
	// db: 5 replicas, max-unavailable 2, db-0 and db-1 deleted already by
	// the garbage collector: a third disruption breaks the budget.
	sts := edit(statefulSet(5), []string{"Pod/db-0", "Pod/db-1"}, nil)
	// front: 4 replicas, maxUnavailable 1, front-old-0 deleted already.
	deploy := edit(rollingDeployment(), []string{"Pod/front-old-0"}, nil)
	mark := func(names ...string) func(runtime.Object) {
		return func(o runtime.Object) {
			if slices.Contains(names, typeName(o)+"/"+o.(metav1.Object).GetName()) {
				deleting(o.(metav1.Object))
			}
		}
	}
	cases := []struct {
		name     string
		objs     []runtime.Object
		pod      string
		decision string
		want     string // in the reason
	}{
		{"StatefulSet alive: the budget holds", sts, "db-2", Denied, "budget maxUnavailable allows 2 pods unavailable, this would make 3"},
		{"StatefulSet deleted in the foreground", edit(sts, nil, mark("StatefulSet/db")), "db-2", Allowed,
			"deletion of pod db-2 admitted: owner StatefulSet shop/db is being deleted"},
		{"StatefulSet gone (background delete)", edit(sts, []string{"StatefulSet/db"}, nil), "db-2", Allowed,
			"owner StatefulSet shop/db is gone"},
		{"StatefulSet replaced by a namesake", edit(sts, nil, func(o runtime.Object) {
			if s, ok := o.(*appsv1.StatefulSet); ok {
				s.UID = "db-uid-2"
			}
		}), "db-2", Allowed, "owner StatefulSet shop/db is gone (the StatefulSet of that name now has uid db-uid-2, not db-uid)"},
		{"Deployment alive: the budget holds", deploy, "front-old-1", Denied, "budget maxUnavailable allows 1 pod unavailable"},
		{"Deployment deleted in the foreground", edit(deploy, nil, mark("Deployment/front", "ReplicaSet/front-old", "ReplicaSet/front-new")), "front-old-1", Allowed,
			"owner ReplicaSet shop/front-old is being deleted"},
		{"Deployment being deleted, its ReplicaSets not yet", edit(deploy, nil, mark("Deployment/front")), "front-old-1", Allowed,
			"owner Deployment shop/front is being deleted"},
		{"ReplicaSet being deleted", edit(deploy, nil, mark("ReplicaSet/front-old")), "front-old-1", Allowed,
			"owner ReplicaSet shop/front-old is being deleted"},
		{"Deployment gone, its ReplicaSet left", edit(deploy, []string{"Deployment/front"}, nil), "front-old-1", Allowed,
			"owner Deployment shop/front is gone"},
		{"ReplicaSet gone", edit(deploy, []string{"ReplicaSet/front-old"}, nil), "front-old-1", Allowed,
			"owner ReplicaSet shop/front-old is gone"},
		{"DaemonSet gone", edit(daemonSet(3, nil), []string{"DaemonSet/agent"}, nil), "agent-1", Allowed,
			"owner DaemonSet shop/agent is gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, c.objs...)
			req := &admissionv1.AdmissionRequest{UID: types.UID("del-" + c.pod), Namespace: ns, Name: c.pod, Resource: podResource(),
				Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON(c.pod, nil)}}
			resp, d, v := f.gate.Review(context.Background(), req)
			if d != c.decision || resp.Allowed != (c.decision == Allowed) {
				t.Fatalf("decision %s (allowed %v), want %s: %s", d, resp.Allowed, c.decision, v.text())
			}
			if !strings.Contains(v.text(), c.want) {
				t.Errorf("reason %q, want it to say %q", v.text(), c.want)
			}
		})
	}
}
