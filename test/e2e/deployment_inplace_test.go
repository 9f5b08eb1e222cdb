package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/kubelet"
)

// managedDeployment is a Deployment rollplan drives, in place if possible,
// under maxUnavailable; created unpaused, so the controller makes its first
// ReplicaSet.
func managedDeployment(ns, name string, replicas int32, maxUnavailable string) *appsv1.Deployment {
	return testobj.Deployment(ns, name).Managed().Replicas(replicas).RollingUpdate("0", maxUnavailable).
		Image("example.com/app:v1").Obj()
}

// createDeployment creates d and waits until the controller reports it
// rolled out; then it runs the executor once, which holds the managed
// Deployment (spec.paused) and reports done.
func (e *env) createDeployment(d *appsv1.Deployment) {
	e.t.Helper()
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitDeployment(d.Name, "rolled out", func(dep *appsv1.Deployment) bool {
		return dep.Status.AvailableReplicas == *d.Spec.Replicas && dep.Status.UpdatedReplicas == *d.Spec.Replicas
	})
	var log bytes.Buffer
	sum := run(e.t, e.executorFor("Deployment", d.Name, nil, &log, false), e.ctx, &log)
	if !sum.Last.Done {
		e.t.Fatalf("holding the rolled-out Deployment: not done")
	}
	if dep := e.deployment(d.Name); !dep.Spec.Paused {
		e.t.Fatalf("rollplan apply did not hold the managed Deployment (spec.paused false)")
	}
}

func (e *env) deployment(name string) *appsv1.Deployment {
	e.t.Helper()
	d, err := e.client.AppsV1().Deployments(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// waitDeployment polls until the controller has observed the Deployment's
// spec and ok holds.
func (e *env) waitDeployment(name, what string, ok func(*appsv1.Deployment) bool) *appsv1.Deployment {
	e.t.Helper()
	var d *appsv1.Deployment
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		d, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && ok(d), nil
	})
	if err != nil {
		e.t.Fatalf("Deployment %s %s: %v (status %+v)", name, what, err, d.Status)
	}
	return d
}

// setDeploymentTemplate changes the Deployment's pod template.
func (e *env) setDeploymentTemplate(name string, change func(*corev1.PodSpec)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.client.AppsV1().Deployments(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&d.Spec.Template.Spec)
		_, err = e.client.AppsV1().Deployments(e.ns).Update(e.ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) replicaSets() []appsv1.ReplicaSet {
	e.t.Helper()
	l, err := e.client.AppsV1().ReplicaSets(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// kubectlRolloutStatus runs `kubectl rollout status` on the Deployment.
func (e *env) kubectlRolloutStatus(name string) string {
	e.t.Helper()
	return e.kubectl("rollout", "status", "deployment/"+name, "--timeout=30s")
}

// runKilled runs executors for the workload, killing the first kills of
// them at random moments (each after 5 ms to maxRun), and the last one to
// the end; it fails the test unless the rollout converges with every kill
// inside it. A start is its informers too: a killed executor's caches die
// with it.
func (e *env) runKilled(kind, name string, kills int, maxRun time.Duration) {
	e.t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var log bytes.Buffer
	restarts, killed, done := 0, 0, false
	for deadline := time.Now().Add(2 * time.Minute); !done && time.Now().Before(deadline); restarts++ {
		timeout := 5*time.Millisecond + time.Duration(rng.Int64N(int64(maxRun-5*time.Millisecond)))
		if killed >= kills {
			timeout = time.Minute
		}
		ctx, cancel := context.WithTimeout(e.ctx, timeout)
		x, err := e.executorIn(ctx, kind, name, nil, &log, false)
		var sum *executor.Summary
		if err == nil {
			sum, err = x.Run(ctx, false)
		}
		cancel()
		switch {
		case err == nil:
			done = sum.Last != nil && sum.Last.Done
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(ctx.Err(), context.DeadlineExceeded) &&
			// client-go's rate limiter refuses a request that would
			// outlive the deadline before the deadline: a kill too.
			!strings.Contains(err.Error(), "would exceed context deadline"):
			e.t.Fatalf("run %d: %v\n%s", restarts, err, log.String())
		default:
			killed++
		}
	}
	if killed < kills {
		e.t.Fatalf("the rollout ended after %d kills, want %d inside it: make it longer", killed, kills)
	}
	if !done {
		e.t.Fatalf("did not converge after %d starts\n%s", restarts, log.String())
	}
	e.t.Logf("converged after %d starts, %d of them killed", restarts, killed)
}

// TestDeploymentInPlace30: a managed 30-replica Deployment (maxUnavailable
// 3) gets a new image and is updated in place by executors killed at
// random moments 10 times: the same pods (UIDs) run the new image, no
// ReplicaSet was created, the one ReplicaSet holds the new template as
// revision 2 with revision 1's template in its history, the Deployment's
// status counts 30 updated replicas, `kubectl rollout status` reports it
// complete, and a watcher never saw more than 3 pods unavailable.
func TestDeploymentInPlace30(t *testing.T) {
	e := newEnv(t, 6)
	const name, n = "web", 30
	e.createDeployment(managedDeployment(e.ns, name, n, "3"))
	before := uids(e.pods("app=" + name))
	rss := e.replicaSets()
	if len(before) != n || len(rss) != 1 {
		t.Fatalf("%d pods, %d ReplicaSets before the update", len(before), len(rss))
	}
	rs := rss[0].Name
	w := e.watch("app="+name, n)

	e.setDeploymentTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	// Paused: the controller neither creates a ReplicaSet nor counts a pod updated.
	e.waitDeployment(name, "paused with a new template", func(d *appsv1.Deployment) bool { return d.Status.UpdatedReplicas == 0 })
	e.runKilled("Deployment", name, 10, 400*time.Millisecond)

	d := e.waitDeployment(name, "complete", func(d *appsv1.Deployment) bool {
		return d.Status.UpdatedReplicas == n && d.Status.AvailableReplicas == n && d.Status.Replicas == n
	})
	if !d.Spec.Paused {
		t.Errorf("spec.paused is false after the rollout: rollplan must keep holding the Deployment")
	}
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
		t.Errorf("Deployment revision %q, want 2", got)
	}
	after := e.replicaSets()
	if len(after) != 1 || after[0].Name != rs {
		t.Fatalf("ReplicaSets after the rollout: %d (want only %s)", len(after), rs)
	}
	cur := after[0]
	if img := cur.Spec.Template.Spec.Containers[0].Image; img != "example.com/app:v2" {
		t.Errorf("ReplicaSet %s template image %s, want v2", rs, img)
	}
	if cur.Spec.Template.Labels["pod-template-hash"] != cur.Labels["pod-template-hash"] {
		t.Errorf("ReplicaSet %s lost its pod-template-hash in the template: %v", rs, cur.Spec.Template.Labels)
	}
	var hist []live.RevisionRecord
	if err := json.Unmarshal([]byte(cur.Annotations[live.AnnRevisionHistory]), &hist); err != nil || len(hist) != 1 ||
		hist[0].Revision != 1 || hist[0].Template.Spec.Containers[0].Image != "example.com/app:v1" {
		t.Errorf("revision history %q (%v): want revision 1 at v1", cur.Annotations[live.AnnRevisionHistory], err)
	}
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID || p.Status.ContainerStatuses[0].Image != "example.com/app:v2" {
			t.Errorf("pod %s: uid %s (was %s), running %s", p.Name, p.UID, before[p.Name], p.Status.ContainerStatuses[0].Image)
		}
	}
	if out := e.kubectlRolloutStatus(name); !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status:\n%s", out)
	}
	w.result(t, 3)
}

// podImages maps each pod of the Deployment to its spec image.
func (e *env) podImages(selector string) map[string]string {
	out := map[string]string{}
	for _, p := range e.pods(selector) {
		out[p.Name] = p.Spec.Containers[0].Image
	}
	return out
}

func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// TestDeploymentFallbackHistoryUndoPause walks one managed Deployment of 8
// through what issue 7 asks beyond the in-place update itself:
//
//  1. an env change cannot go in place: rollplan hands it to the
//     Deployment controller (unpauses), which rolls it to a new
//     ReplicaSet; rollplan holds the Deployment again when it is complete;
//  2. an image change goes in place (same pods, no new ReplicaSet);
//  3. history lists the ReplicaSet revisions and the in-place one;
//  4. undo rolls back to the previous revision in place, renumbered as
//     upstream does;
//  5. pause stops the rollout after the actions in flight, whatever
//     executor runs; resume finishes it.
func TestDeploymentFallbackHistoryUndoPause(t *testing.T) {
	e := newEnv(t, 4)
	const name, n = "shop", 8
	sel := "app=" + name
	target := live.Target{Namespace: e.ns, Kind: "Deployment", Name: name}
	e.createDeployment(managedDeployment(e.ns, name, n, "2"))
	first := uids(e.pods(sel))

	// 1. Fallback.
	e.setDeploymentTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
	})
	var log bytes.Buffer
	run(t, e.executorFor("Deployment", name, nil, &log, false), e.ctx, &log)
	if !strings.Contains(log.String(), "spec.paused=false") {
		t.Errorf("the executor did not hand the env change to the Deployment controller")
	}
	d := e.waitDeployment(name, "rolled by the controller", func(d *appsv1.Deployment) bool {
		return d.Status.UpdatedReplicas == n && d.Status.AvailableReplicas == n && d.Status.Replicas == n
	})
	if !d.Spec.Paused {
		t.Errorf("1. not held again after the controller's rollout")
	}
	if rss := e.replicaSets(); len(rss) != 2 {
		t.Fatalf("1. %d ReplicaSets after the fallback, want 2", len(rss))
	}
	second := uids(e.pods(sel))
	for p, uid := range second {
		if first[p] == uid {
			t.Errorf("1. pod %s survived an env change: it must have been recreated", p)
		}
	}

	// 2. In place.
	e.setDeploymentTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	log.Reset()
	run(t, e.executorFor("Deployment", name, nil, &log, false), e.ctx, &log)
	e.waitDeployment(name, "updated in place", func(d *appsv1.Deployment) bool { return d.Status.UpdatedReplicas == n })
	if got := uids(e.pods(sel)); len(got) != n || !sameUIDs(got, second) {
		t.Errorf("2. pods changed in an in-place update: %v, were %v", got, second)
	}
	if rss := e.replicaSets(); len(rss) != 2 {
		t.Errorf("2. %d ReplicaSets after the in-place update, want 2", len(rss))
	}

	// 3. History: 1 (first ReplicaSet), 2 (replaced in place), 3 (current).
	revs, err := history.List(e.ctx, e.client, target)
	if err != nil {
		t.Fatal(err)
	}
	describe := func(revs []history.Revision) string {
		var s []string
		for _, r := range revs {
			s = append(s, fmt.Sprintf("%d inPlace=%t current=%t image=%s env=%d changes=%q", r.Number, r.InPlace, r.Current,
				r.Template.Spec.Containers[0].Image, len(r.Template.Spec.Containers[0].Env), r.Changes))
		}
		return strings.Join(s, "\n")
	}
	want := []string{"1 inPlace=false current=false image=example.com/app:v1 env=0",
		"2 inPlace=true current=false image=example.com/app:v1 env=1",
		"3 inPlace=false current=true image=example.com/app:v2 env=1"}
	if got := describe(revs); !prefixes(got, want) {
		t.Errorf("3. history:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if !strings.Contains(revs[2].Changes, "spec.containers[app].image changed in place") {
		t.Errorf("3. revision 3 changes %q", revs[2].Changes)
	}

	// 4. Undo: back to revision 2 (v1 with the env), in place; it becomes revision 4.
	rev, err := history.Find(revs, target, 0)
	if err != nil || rev.Number != 2 {
		t.Fatalf("4. previous revision: %v %v", rev, err)
	}
	if changed, err := history.Rollback(e.ctx, e.client, target, rev, false); err != nil || !changed {
		t.Fatalf("4. rollback: changed %t, %v", changed, err)
	}
	log.Reset()
	run(t, e.executorFor("Deployment", name, nil, &log, false), e.ctx, &log)
	d = e.waitDeployment(name, "rolled back", func(d *appsv1.Deployment) bool { return d.Status.UpdatedReplicas == n })
	if got := uids(e.pods(sel)); !sameUIDs(got, second) {
		t.Errorf("4. pods changed in an in-place rollback")
	}
	if imgs := e.podImages(sel); count(imgs, "example.com/app:v1") != n {
		t.Errorf("4. pod images after the rollback: %v", imgs)
	}
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "4" {
		t.Errorf("4. revision %q after the rollback, want 4", got)
	}
	revs, _ = history.List(e.ctx, e.client, target)
	want = []string{"1 inPlace=false current=false image=example.com/app:v1 env=0",
		"3 inPlace=true current=false image=example.com/app:v2 env=1",
		"4 inPlace=false current=true image=example.com/app:v1 env=1"}
	if got := describe(revs); !prefixes(got, want) {
		t.Errorf("4. history:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	// 5. Pause after the first wave has started, resume later.
	e.kubelet.SetImage("example.com/app:v3", kubelet.Behavior{ReadyDelay: 1500 * time.Millisecond})
	e.setDeploymentTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v3" })
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	log.Reset()
	x, err := e.executorIn(ctx, "Deployment", name, nil, &syncWriter{w: &log}, false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := x.Run(ctx, false); done <- err }()
	err = wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return count(e.podImages(sel), "example.com/app:v3") > 0, nil
	})
	if err != nil {
		t.Fatalf("5. no pod started updating: %v", err)
	}
	if err := executor.SetPaused(e.ctx, e.client, target, true, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the executor's read sees the annotation
	paused := count(e.podImages(sel), "example.com/app:v3")
	time.Sleep(4 * time.Second) // several waves' time
	if now := count(e.podImages(sel), "example.com/app:v3"); now != paused || now == n {
		t.Errorf("5. paused at %d pods updated, %d later (of %d): the pause did not hold", paused, now, n)
	}
	if err := executor.SetPaused(e.ctx, e.client, target, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("5. run: %v\n%s", err, log.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("5. not done a minute after resume\n%s", log.String())
	}
	if imgs := e.podImages(sel); count(imgs, "example.com/app:v3") != n {
		t.Errorf("5. pod images after resume: %v", imgs)
	}
	if got := uids(e.pods(sel)); !sameUIDs(got, second) {
		t.Errorf("5. pods changed")
	}
}

func sameUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// prefixes: each line of got starts with the corresponding want.
func prefixes(got string, want []string) bool {
	lines := strings.Split(got, "\n")
	if len(lines) != len(want) {
		return false
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			return false
		}
	}
	return true
}

// syncWriter serialises writes from the executor's goroutine.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
