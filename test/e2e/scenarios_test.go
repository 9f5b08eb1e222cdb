package e2e

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/test/kubelet"
)

// oneZonePolicy is the example policy, as rollplan apply --policy takes it
// (the test runs in test/e2e).
const oneZonePolicy = "../../policies/examples/one-zone-at-a-time"

// daemonSet is a managed OnDelete DaemonSet kept to the test's own nodes.
func daemonSet(ns, name, image string) *appsv1.DaemonSet {
	return testobj.DaemonSet(ns, name).Managed().OnDelete().NodeSelector(map[string]string{envLabel: ns}).
		Image(image).Env("MODE", "a").Obj()
}

// waitDaemonSet waits until the DaemonSet's n pods are Ready and the
// controller observed the spec; with updated, until it counts all n
// updated.
func (e *env) waitDaemonSet(name string, n int32, updated bool) *appsv1.DaemonSet {
	e.t.Helper()
	var got *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().DaemonSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = d
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.DesiredNumberScheduled == n && s.NumberReady == n &&
			(!updated || s.UpdatedNumberScheduled == n), nil
	})
	if err != nil {
		e.t.Fatalf("DaemonSet %s did not settle: %v (status %+v)", name, err, got.Status)
	}
	return got
}

// setDaemonSetTemplate changes the DaemonSet's template and waits until the
// controller has seen it (it counts no pod updated).
func (e *env) setDaemonSetTemplate(name string, change func(*corev1.PodSpec)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.client.AppsV1().DaemonSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&d.Spec.Template.Spec)
		_, err = e.client.AppsV1().DaemonSets(e.ns).Update(e.ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := e.client.AppsV1().DaemonSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedNumberScheduled == 0, err
	}); err != nil {
		e.t.Fatalf("the DaemonSet controller did not see the new template: %v", err)
	}
}

// zones maps the test's nodes to their zone, and counts nodes per zone.
func (e *env) zones() (map[string]string, map[string]int) {
	e.t.Helper()
	nodes, err := e.client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: envLabel + "=" + e.ns})
	if err != nil {
		e.t.Fatal(err)
	}
	of, count := map[string]string{}, map[string]int{}
	for _, n := range nodes.Items {
		z := n.Labels[kubelet.ZoneLabel]
		of[n.Name] = z
		count[z]++
	}
	return of, count
}

// waitAvailable waits until the selected pods number n, none terminating,
// each Ready and running the images its spec names.
func (e *env) waitAvailable(selector string, n int) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		pods := e.pods(selector)
		if len(pods) != n {
			return false, nil
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
				return false, nil
			}
			for i, c := range p.Spec.Containers {
				if p.Status.ContainerStatuses[i].Image != c.Image {
					return false, nil
				}
			}
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("pods %s not all available: %v", selector, err)
	}
}

// runOnce carries out one step and fails the test unless it acted.
func runOnce(t *testing.T, x *executor.Executor, ctx context.Context, log *bytes.Buffer) *executor.Summary {
	t.Helper()
	sum, err := x.Run(ctx, true)
	if err != nil || sum.Last == nil || sum.Last.Acted() == 0 {
		t.Fatalf("first step: %v, %+v\n%s", err, sum, log.String())
	}
	return sum
}

// TestDaemonSetOneZoneAtATime: a managed OnDelete DaemonSet on 10 nodes in
// 3 zones (4, 3, 3), max-unavailable 4, gets an env change (so every pod
// is recreated, through the Eviction API) under the example policy
// one-zone-at-a-time. Every pod is recreated once on its node with the new
// env, the controller counts all updated, and the watcher shows that at
// every moment the unavailable pods (missing ones included) all sat in
// one zone, and never more than 4.
func TestDaemonSetOneZoneAtATime(t *testing.T) {
	e := newEnv(t, 10)
	const name, nodes = "zonal", 10
	ds := daemonSet(e.ns, name, "example.com/agent:v1")
	ds.Annotations[facts.AnnMaxUnavailable] = "4"
	if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet(name, nodes, false)
	before := e.pods("app=" + name)
	zoneOf, perZone := e.zones()
	if len(perZone) != 3 || len(zoneOf) != nodes {
		t.Fatalf("nodes per zone %v, want 10 nodes in 3 zones", perZone)
	}
	w := e.watch("app="+name, nodes)
	w.groups(func(p *corev1.Pod) string { return zoneOf[p.Spec.NodeName] }, perZone)
	// New pods take a while to become Ready, so that several of one zone
	// are in flight at once whatever the machine's speed.
	e.kubelet.SetImage("example.com/agent:v2", kubelet.Behavior{ReadyDelay: 1500 * time.Millisecond})
	e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Env[0].Value = "b"
		s.Containers[0].Image = "example.com/agent:v2"
	})

	var log bytes.Buffer
	sum := run(t, e.executorFor("DaemonSet", name, []string{oneZonePolicy}, &log, false), e.ctx, &log)
	if sum.Actions["Recreate"] != nodes || sum.Actions["InPlaceUpdate"] != 0 {
		t.Errorf("actions %v, want %d Recreate", sum.Actions, nodes)
	}
	e.waitDaemonSet(name, nodes, true)
	old := uids(before)
	onNode := map[string]bool{}
	after := e.pods("app=" + name)
	for _, p := range after {
		if old[p.Name] == p.UID {
			t.Errorf("pod %s kept its UID: want it recreated", p.Name)
		}
		if p.Spec.Containers[0].Env[0].Value != "b" {
			t.Errorf("pod %s: env %v, want MODE=b", p.Name, p.Spec.Containers[0].Env)
		}
		onNode[p.Spec.NodeName] = true
	}
	if len(after) != nodes || len(onNode) != nodes {
		t.Errorf("%d pods on %d nodes, want one on each of %d", len(after), len(onNode), nodes)
	}
	w.result(t, 4)
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("watcher: at most %d zones with pods unavailable at once", w.worstGroups)
	if w.worstGroups != 1 {
		t.Errorf("%d zones had pods unavailable at once, want 1:\n%s", w.worstGroups, w.groupsAt)
	}
	if w.worst < 2 {
		t.Errorf("at most %d pod unavailable at once: the zone, not one pod at a time, should bound the rollout", w.worst)
	}
}

// TestPodDeletedMidRollout: during an in-place rollout of a 6-pod
// StatefulSet (max-unavailable 2), after the first step (and its pods
// available again), someone else deletes a pod not yet updated. The
// StatefulSet controller recreates it at the update revision. The rollout
// converges: the recreated pod is not patched (no write by rollplan on it;
// 5 InPlaceUpdate in all), the other pods keep their UIDs, and the watcher,
// counting the deleted pod unavailable, never saw more than 2 unavailable.
func TestPodDeletedMidRollout(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "deleted", 6
	before, w := e.rolloutStatefulSet(name, replicas, "2")
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })

	var log bytes.Buffer
	x := e.executor(name, &log)
	first := runOnce(t, x, e.ctx, &log)
	e.waitAvailable("app="+name, replicas)
	victim := ""
	for _, p := range e.pods("app=" + name) {
		if p.Spec.Containers[0].Image == "example.com/app:v1" && (victim == "" || p.Name < victim) {
			victim = p.Name
		}
	}
	if victim == "" {
		t.Fatalf("no pod left on v1 after the first step")
	}
	if err := e.client.CoreV1().Pods(e.ns).Delete(e.ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %s after the first step", victim)

	sum := run(t, x, e.ctx, &log)
	total := first.Actions["InPlaceUpdate"] + sum.Actions["InPlaceUpdate"]
	if total != replicas-1 || first.Actions["Recreate"]+sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v then %v, want %d InPlaceUpdate in all (not the recreated pod) and no Recreate", first.Actions, sum.Actions, replicas-1)
	}
	set := e.waitSettled(name, replicas)
	for _, p := range e.pods("app=" + name) {
		if p.Spec.Containers[0].Image != "example.com/app:v2" || p.Status.ContainerStatuses[0].Image != "example.com/app:v2" {
			t.Errorf("pod %s: spec %s, running %s; want v2", p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses[0].Image)
		}
		if p.Name == victim {
			if p.UID == before[p.Name] {
				t.Errorf("pod %s kept its UID after the delete", p.Name)
			}
			for _, m := range p.ManagedFields {
				if m.Manager == "rollplan" {
					t.Errorf("the recreated pod %s was written by rollplan (%s %s): it was created at the update revision", p.Name, m.Operation, m.Subresource)
				}
			}
		} else if p.UID != before[p.Name] {
			t.Errorf("pod %s was recreated", p.Name)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d, currentRevision %s, updateRevision %s",
			set.Status.UpdatedReplicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	w.result(t, 2)
}

// TestRollover: after the first step of an in-place rollout v1 -> v2 of a
// 6-pod StatefulSet (max-unavailable 2), the image changes again to v3.
// The executor re-targets the newest revision: at the end every pod runs
// v3 with the update revision's hash, no pod was recreated, the controller
// reports currentRevision == updateRevision, the watcher never saw more
// than 2 pods unavailable, and rollplan status (executor.Status on the
// cluster) says "rolled out".
func TestRollover(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "rollover", 6
	before, w := e.rolloutStatefulSet(name, replicas, "2")
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })

	var log bytes.Buffer
	x := e.executor(name, &log)
	first := runOnce(t, x, e.ctx, &log)
	// The first wave is still in flight: re-target it.
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v3" })
	sum := run(t, x, e.ctx, &log)
	if first.Actions["InPlaceUpdate"]+sum.Actions["InPlaceUpdate"] < replicas || first.Actions["Recreate"]+sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v then %v, want at least %d InPlaceUpdate and no Recreate", first.Actions, sum.Actions, replicas)
	}
	set := e.waitSettled(name, replicas)
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
		if p.Spec.Containers[0].Image != "example.com/app:v3" || p.Status.ContainerStatuses[0].Image != "example.com/app:v3" {
			t.Errorf("pod %s: spec %s, running %s; want v3", p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses[0].Image)
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != set.Status.UpdateRevision {
			t.Errorf("pod %s: controller-revision-hash %s, want the update revision %s", p.Name, got, set.Status.UpdateRevision)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d, currentRevision %s, updateRevision %s",
			set.Status.UpdatedReplicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	w.result(t, 2)

	st, err := e.executorFor("StatefulSet", name, nil, io.Discard, false).Status(e.ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.State != executor.StatusRolledOut || st.Verdict != "rolled out" || st.Revisions.Current != st.Revisions.Update {
		t.Errorf("status: state %s, verdict %q, revisions %+v; want rolled out", st.State, st.Verdict, st.Revisions)
	}
}
