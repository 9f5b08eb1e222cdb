package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
)

// deployCluster: a managed Deployment "api" of 3 (maxUnavailable 1, maxSurge
// 0), its ReplicaSet api-aaa at revision 1 with template v1, and 3 pods
// running podImage. The Deployment's template is dep (image, env).
func deployCluster(paused bool, image, env, podImage string, complete bool) []runtime.Object {
	tmpl := func(image, env string) corev1.PodTemplateSpec {
		t := template(image, env)
		t.Labels = map[string]string{"app": "api"}
		return t
	}
	d := testobj.Deployment(ns, "api").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "api", UID: "dep-uid", Generation: 3, ResourceVersion: "10"}).Managed().
		Replicas(3).Template(tmpl(image, env)).RollingUpdate("0", "1").Obj()
	d.Spec.Paused = paused
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, AvailableReplicas: 3}
	if complete {
		d.Status.UpdatedReplicas = 3
	}
	rsT := tmpl("example.com/app:v1", "a")
	rsT.Labels["pod-template-hash"] = "aaa"
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-aaa", UID: "rs-uid", ResourceVersion: "20",
			Labels:            map[string]string{"app": "api", "pod-template-hash": "aaa"},
			Annotations:       map[string]string{"deployment.kubernetes.io/revision": "1"},
			CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: "dep-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api", "pod-template-hash": "aaa"}}, Template: rsT},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, AvailableReplicas: 3, ReadyReplicas: 3},
	}
	objs := []runtime.Object{d, rs}
	for i := range 3 {
		p := pod(fmt.Sprintf("api-aaa-%d", i), podImage, "", true)
		p.Labels = map[string]string{"app": "api", "pod-template-hash": "aaa"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-aaa", UID: "rs-uid", Controller: ptr.To(true)}}
		objs = append(objs, p)
	}
	return objs
}

func deployExec(t *testing.T, cs *fake.Clientset, log *bytes.Buffer) *Executor {
	t.Helper()
	return testExec(t, cs, "Deployment", "api", native.New(), false, log)
}

func TestDeploymentStep(t *testing.T) {
	tests := []struct {
		name     string
		objs     []runtime.Object
		patched  int    // pods patched in place
		paused   bool   // spec.paused after the step
		done     bool   // the step reports the rollout done
		rsImage  string // the ReplicaSet's template image after the step
		revision string // its revision annotation
		note     string
	}{
		{name: "held, image change: the first wave is patched in place, the ReplicaSet keeps its template",
			objs: deployCluster(true, "example.com/app:v2", "a", "example.com/app:v1", false), patched: 1, paused: true,
			rsImage: "example.com/app:v1", revision: "1"},
		{name: "held, every pod runs the new image: the ReplicaSet takes the template as revision 2",
			objs: deployCluster(true, "example.com/app:v2", "a", "example.com/app:v2", false), paused: true,
			rsImage: "example.com/app:v2", revision: "2"},
		{name: "held, env change: handed to the Deployment controller",
			objs: deployCluster(true, "example.com/app:v1", "b", "example.com/app:v1", false), paused: false,
			rsImage: "example.com/app:v1", revision: "1", note: "Deployment controller rolls it"},
		{name: "not held, complete: held again and done",
			objs: deployCluster(false, "example.com/app:v1", "a", "example.com/app:v1", true), paused: true, done: true,
			rsImage: "example.com/app:v1", revision: "1"},
		{name: "not held, the controller rolls: wait",
			objs: deployCluster(false, "example.com/app:v1", "b", "example.com/app:v1", false), paused: false,
			rsImage: "example.com/app:v1", revision: "1", note: "rollplan pauses it again once it is complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(tt.objs...)
			var log bytes.Buffer
			step, err := deployExec(t, cs, &log).Step(context.Background())
			if err != nil {
				t.Fatalf("step: %v\n%s", err, log.String())
			}
			patched := 0
			for _, a := range step.Actions {
				if a.Type == "InPlaceUpdate" && a.Outcome == Done {
					patched++
				}
			}
			if patched != tt.patched || step.Done != tt.done || !strings.Contains(step.Note, tt.note) {
				t.Errorf("patched %d, done %t, note %q; want %d, %t, %q\n%s", patched, step.Done, step.Note, tt.patched, tt.done, tt.note, log.String())
			}
			d, _ := cs.AppsV1().Deployments(ns).Get(context.Background(), "api", metav1.GetOptions{})
			if d.Spec.Paused != tt.paused {
				t.Errorf("spec.paused %t, want %t", d.Spec.Paused, tt.paused)
			}
			rs, _ := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), "api-aaa", metav1.GetOptions{})
			if img := rs.Spec.Template.Spec.Containers[0].Image; img != tt.rsImage || rs.Annotations["deployment.kubernetes.io/revision"] != tt.revision {
				t.Errorf("ReplicaSet template %s revision %s, want %s %s", img, rs.Annotations["deployment.kubernetes.io/revision"], tt.rsImage, tt.revision)
			}
			if rs.Spec.Template.Labels["pod-template-hash"] != "aaa" {
				t.Errorf("the ReplicaSet's template lost pod-template-hash: %v", rs.Spec.Template.Labels)
			}
			if tt.revision == "2" {
				hist, err := live.RevisionHistory(rs)
				if err != nil || len(hist) != 1 || hist[0].Revision != 1 || hist[0].Template.Spec.Containers[0].Image != "example.com/app:v1" {
					t.Errorf("revision history %+v (%v): want revision 1 at v1", hist, err)
				}
				if _, ok := hist[0].Template.Labels["pod-template-hash"]; ok {
					t.Errorf("the recorded template keeps pod-template-hash")
				}
			}
			for _, p := range mustPods(t, cs) {
				if p.Labels["pod-template-hash"] != "aaa" {
					t.Errorf("pod %s lost its pod-template-hash", p.Name)
				}
			}
		})
	}
}

// A rollplan pause during a fallback holds the Deployment controller too.
func TestDeploymentPauseDuringFallback(t *testing.T) {
	objs := deployCluster(false, "example.com/app:v1", "b", "example.com/app:v1", false)
	objs[0].(*appsv1.Deployment).Annotations[facts.AnnPaused] = "true"
	cs := fake.NewClientset(objs...)
	var log bytes.Buffer
	if _, err := deployExec(t, cs, &log).Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, _ := cs.AppsV1().Deployments(ns).Get(context.Background(), "api", metav1.GetOptions{})
	if !d.Spec.Paused {
		t.Errorf("spec.paused stays false under rollplan pause")
	}
}

// The adoption history is bounded by revisionHistoryLimit and drops an
// older record of the template that becomes current (a rollback).
func TestAdoptHistory(t *testing.T) {
	objs := deployCluster(true, "example.com/app:v2", "a", "example.com/app:v2", false)
	d := objs[0].(*appsv1.Deployment)
	d.Spec.RevisionHistoryLimit = ptr.To(int32(2))
	rs := objs[1].(*appsv1.ReplicaSet)
	rs.Annotations["deployment.kubernetes.io/revision"] = "5"
	old := func(n int64, image string) string {
		t := template(image, "a")
		t.Labels = map[string]string{"app": "api"}
		raw, _ := json.Marshal(live.RevisionRecord{Revision: n, Template: t})
		return string(raw)
	}
	rs.Annotations[live.AnnRevisionHistory] = "[" + old(2, "example.com/app:v0") + "," + old(3, "example.com/app:v2") + "," + old(4, "example.com/app:v9") + "]"
	cs := fake.NewClientset(objs...)
	var log bytes.Buffer
	if _, err := deployExec(t, cs, &log).Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), "api-aaa", metav1.GetOptions{})
	hist, err := live.RevisionHistory(got)
	if err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, h := range hist {
		nums = append(nums, fmt.Sprintf("%d:%s", h.Revision, h.Template.Spec.Containers[0].Image))
	}
	// v2 (revision 3) becomes current as revision 6; the limit keeps 2.
	if strings.Join(nums, " ") != "4:example.com/app:v9 5:example.com/app:v1" || got.Annotations["deployment.kubernetes.io/revision"] != "6" {
		t.Errorf("history %v, revision %s; want [4:v9 5:v1], 6", nums, got.Annotations["deployment.kubernetes.io/revision"])
	}
}

func mustPods(t *testing.T, cs *fake.Clientset) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// InPlaceOnly: a change that cannot go in place halts; the Deployment stays
// held (the controller does not roll it either).
func TestDeploymentInPlaceOnlyHalts(t *testing.T) {
	objs := deployCluster(true, "example.com/app:v1", "b", "example.com/app:v1", false)
	objs[0].(*appsv1.Deployment).Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
	cs := fake.NewClientset(objs...)
	var log bytes.Buffer
	_, err := deployExec(t, cs, &log).Step(context.Background())
	var h *HaltedError
	if !errors.As(err, &h) || !strings.Contains(err.Error(), "InPlaceOnly") {
		t.Fatalf("err %v, want a halt naming InPlaceOnly", err)
	}
	d, _ := cs.AppsV1().Deployments(ns).Get(context.Background(), "api", metav1.GetOptions{})
	if !d.Spec.Paused {
		t.Errorf("a halted InPlaceOnly rollout was handed to the controller (spec.paused false)")
	}
}

// The first apply of a rolled-out Deployment that is not held holds it and
// says why, in one story: no "the controller rolls it" after the hold. Its
// summary counts pods as status does: old pods still terminating are not
// in the total.
func TestDeploymentRolledOutRun(t *testing.T) {
	withTerminating := func(objs []runtime.Object) []runtime.Object {
		old := objs[1].(*appsv1.ReplicaSet).DeepCopy()
		old.Name, old.UID, old.Spec.Replicas = "api-old", "rs-old-uid", ptr.To(int32(0))
		old.Status = appsv1.ReplicaSetStatus{Replicas: 3}
		old.Labels["pod-template-hash"], old.Spec.Template.Labels["pod-template-hash"] = "old", "old"
		old.Spec.Template.Spec.Containers[0].Image = "example.com/app:v0"
		old.CreationTimestamp = metav1.NewTime(now.Add(-3 * time.Hour))
		objs = append(objs, old)
		for i := range 3 {
			p := pod(fmt.Sprintf("api-old-%d", i), "example.com/app:v0", "", true)
			p.Labels = map[string]string{"app": "api", "pod-template-hash": "old"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-old", UID: "rs-old-uid", Controller: ptr.To(true)}}
			p.DeletionTimestamp, p.Finalizers = ptr.To(metav1.NewTime(now.Add(-time.Second))), []string{"example.com/hold"}
			objs = append(objs, p)
		}
		return objs
	}
	tests := []struct {
		name                   string
		objs                   []runtime.Object
		done                   bool
		pods, desired, updated int
		log, notLog            []string
	}{
		{name: "rolled out, never held: held, and the log says why",
			objs: deployCluster(false, "example.com/app:v1", "a", "example.com/app:v1", true), done: true, pods: 3, desired: 3, updated: 3,
			log:    []string{"msg=hold", "spec.paused=true", "rolled out and not held"},
			notLog: []string{"spec.paused is false", "msg=wait", "controller rolls it"}},
		{name: "rolled out by the controller, old pods still terminating: not in the total",
			objs: withTerminating(deployCluster(false, "example.com/app:v1", "a", "example.com/app:v1", true)), done: true, pods: 6, desired: 3, updated: 3,
			log:    []string{"msg=hold", "spec.paused=true"},
			notLog: []string{"spec.paused is false", "msg=wait"}},
		{name: "the controller still rolls: wait, no hold",
			objs: deployCluster(false, "example.com/app:v1", "b", "example.com/app:v1", false), pods: 3, desired: 3,
			log:    []string{"msg=wait", "the Deployment controller rolls it"},
			notLog: []string{"msg=hold"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(tt.objs...)
			var log bytes.Buffer
			sum, err := deployExec(t, cs, &log).Run(context.Background(), true)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, log.String())
			}
			l := sum.Last
			if l.Done != tt.done || l.Pods != tt.pods || l.Desired != tt.desired || l.Updated != tt.updated {
				t.Errorf("done %t, pods %d, desired %d, updated %d; want %t, %d, %d, %d", l.Done, l.Pods, l.Desired, l.Updated, tt.done, tt.pods, tt.desired, tt.updated)
			}
			for _, s := range tt.log {
				if !strings.Contains(log.String(), s) {
					t.Errorf("log lacks %q:\n%s", s, log.String())
				}
			}
			for _, s := range tt.notLog {
				if strings.Contains(log.String(), s) {
					t.Errorf("log has %q:\n%s", s, log.String())
				}
			}
		})
	}
}
