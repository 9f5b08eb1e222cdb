// Package e2e runs rollplan apply's executor on a real control plane
// (etcd, kube-apiserver, kube-controller-manager of rollplan's newest
// Kubernetes version, v1.37) with the test kubelet.
// The tests skip when the control-plane binaries are not built (set
// ROLLPLAN_CLUSTER_BIN, or run `make test-cluster`).
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

func TestMain(m *testing.M) { harness.Main(m) }

// envLabel on a node names the test namespace whose kubelet keeps it.
const envLabel = "e2e.rollplan.dev/env"

// env is one test's namespace with a test kubelet for it.
type env struct {
	t       *testing.T
	ctx     context.Context
	client  kubernetes.Interface
	ns      string
	kubelet *kubelet.Kubelet
}

func newEnv(t *testing.T, nodes int) *env {
	cp := harness.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ns_ []kubelet.Node
	for i := range nodes {
		// The env label keeps DaemonSets to the nodes of their own test:
		// the nodes of earlier tests stay, with no kubelet behind them.
		ns_ = append(ns_, kubelet.Node{Name: fmt.Sprintf("%s-node-%d", ns, i), Zone: fmt.Sprintf("zone-%d", i%3), Labels: map[string]string{envLabel: ns}})
	}
	k := kubelet.New(cp.Client, kubelet.Options{Nodes: ns_, Namespace: ns,
		Default: kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 500 * time.Millisecond, TerminationDelay: 200 * time.Millisecond}})
	if err := k.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, client: cp.Client, ns: ns, kubelet: k}
}

// statefulSet is a managed OnDelete StatefulSet updated in place if possible.
func statefulSet(ns, name string, replicas int32, maxUnavailable string) *appsv1.StatefulSet {
	return testobj.StatefulSet(ns, name).Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: maxUnavailable}).
		Replicas(replicas).ServiceName(name).PodManagement(appsv1.ParallelPodManagement).OnDelete().
		Image("example.com/app:v1").Env("MODE", "a").Obj()
}

func (e *env) pods(selector string) []corev1.Pod {
	e.t.Helper()
	list, err := e.client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// waitRolledOut waits until the StatefulSet's pods all exist and are Ready
// and the controller has observed the spec.
// rolloutStatefulSet creates a managed OnDelete StatefulSet with the given
// max-unavailable, waits until it has settled, and starts watching its
// pods' availability: the set-up of every StatefulSet rollout test. It
// returns the pods' UIDs before the rollout and the watcher.
func (e *env) rolloutStatefulSet(name string, replicas int, maxUnavailable string) (map[string]types.UID, *watcher) {
	e.t.Helper()
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, statefulSet(e.ns, name, int32(replicas), maxUnavailable), metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	return uids(e.pods("app=" + name)), e.watch("app="+name, replicas)
}

func (e *env) waitSettled(name string, replicas int) *appsv1.StatefulSet {
	e.t.Helper()
	var set *appsv1.StatefulSet
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		set = s
		return s.Status.ObservedGeneration == s.Generation && int(s.Status.ReadyReplicas) == replicas && int(s.Status.Replicas) == replicas, nil
	})
	if err != nil {
		e.t.Fatalf("StatefulSet %s did not settle: %v (status %+v)", name, err, set.Status)
	}
	return set
}

// watcher records, at every pod event, how many of the workload's pods are
// unavailable: missing, terminating, not Ready, or running another image
// than their spec names (an in-place update the kubelet has not acted on).
type watcher struct {
	mu       sync.Mutex
	replicas int
	pods     map[string]*corev1.Pod
	worst    int
	samples  int
	synced   bool
	// at: the pods' state when worst was first reached.
	at string
	// With groupBy (see groups): the most groups with a pod unavailable at
	// once, and the pods' state when first reached.
	groupOf     func(*corev1.Pod) string
	groupWant   map[string]int
	worstGroups int
	groupsAt    string
}

// groups makes the watcher also record how many groups (e.g. zones) have
// a pod unavailable at once: a group's unavailable pods are want[group]
// minus its available pods, so a missing pod counts too.
func (w *watcher) groups(of func(*corev1.Pod) string, want map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.groupOf, w.groupWant = of, want
	w.record()
}

func (e *env) watch(selector string, replicas int) *watcher {
	w := &watcher{replicas: replicas, pods: map[string]*corev1.Pod{}}
	harness.WatchPods(e.t, e.client, e.ns, selector, harness.PodHandlers{
		Put: func(p *corev1.Pod) {
			w.mu.Lock()
			w.put(p)
			w.record()
			w.mu.Unlock()
		},
		Delete: func(p *corev1.Pod) {
			w.mu.Lock()
			if cur, ok := w.pods[p.Name]; ok && cur.UID == p.UID {
				delete(w.pods, p.Name)
			}
			w.record()
			w.mu.Unlock()
		},
		Synced: func(pods []*corev1.Pod) {
			w.mu.Lock()
			for _, p := range pods {
				w.put(p)
			}
			w.synced = true
			w.record()
			w.mu.Unlock()
		},
	})
	return w
}

// put keeps the newest state of a pod (notifications of the initial list
// may arrive after the cache was read).
func (w *watcher) put(p *corev1.Pod) {
	if old, ok := w.pods[p.Name]; ok {
		a, _ := strconv.ParseInt(old.ResourceVersion, 10, 64)
		b, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
		if b < a {
			return
		}
	}
	w.pods[p.Name] = p
}

func (w *watcher) record() {
	if !w.synced {
		return // the initial list arrives pod by pod
	}
	available := 0
	byGroup := map[string]int{}
	var desc []string
	for _, p := range w.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ready := harness.Available(p)
		if ready {
			available++
			if w.groupOf != nil {
				byGroup[w.groupOf(p)]++
			}
		}
		desc = append(desc, fmt.Sprintf("%s(ready=%t rv=%s node=%s spec=%s status=%v)", p.Name, ready, p.ResourceVersion, p.Spec.NodeName, p.Spec.Containers[0].Image, p.Status.ContainerStatuses))
	}
	w.samples++
	sort.Strings(desc)
	if w.replicas-available > w.worst {
		w.worst = w.replicas - available
		w.at = strings.Join(desc, "\n")
	}
	if w.groupOf != nil {
		var short []string
		for g, n := range w.groupWant {
			if byGroup[g] < n {
				short = append(short, fmt.Sprintf("%s: %d of %d available", g, byGroup[g], n))
			}
		}
		if len(short) > w.worstGroups {
			sort.Strings(short)
			w.worstGroups = len(short)
			w.groupsAt = strings.Join(short, "; ") + "\n" + strings.Join(desc, "\n")
		}
	}
}

func (w *watcher) result(t *testing.T, budget int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("watcher: %d samples, at most %d pods unavailable", w.samples, w.worst)
	if w.worst > budget {
		t.Errorf("at some point %d pods were unavailable, budget is %d:\n%s", w.worst, budget, w.at)
	}
	if w.worst == 0 {
		t.Errorf("the watcher never saw a pod unavailable: it did not observe the rollout")
	}
}

// setTemplate changes the StatefulSet's template and waits for the
// controller to record the new update revision.
func (e *env) setTemplate(name string, change func(*corev1.PodSpec)) {
	e.t.Helper()
	var old string
	// The controller may write the status in between: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		set, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old = set.Status.UpdateRevision
		change(&set.Spec.Template.Spec)
		_, err = e.client.AppsV1().StatefulSets(e.ns).Update(e.ctx, set, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && s.Status.UpdateRevision != old && s.Status.ObservedGeneration == s.Generation, err
	})
	if err != nil {
		e.t.Fatalf("no new update revision: %v", err)
	}
}

func (e *env) executor(name string, log *bytes.Buffer) *executor.Executor {
	return e.newExecutor(name, log, false)
}

func (e *env) newExecutor(name string, log io.Writer, dryRun bool) *executor.Executor {
	e.t.Helper()
	return e.executorFor("StatefulSet", name, nil, log, dryRun)
}

// executorFor is an executor for any kind, with the Rego engine loaded
// from policies (as rollplan apply --policy loads them; nil: the built-in
// strategy).
func (e *env) executorFor(kind, name string, policies []string, log io.Writer, dryRun bool) *executor.Executor {
	e.t.Helper()
	x, err := e.executorIn(e.ctx, kind, name, policies, log, dryRun)
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

// executorIn is executorFor with its informers living as long as ctx. As
// rollplan apply does, a run that is not a dry run reads from informer
// caches (an InformerReader) and steps on their changes.
func (e *env) executorIn(ctx context.Context, kind, name string, policies []string, log io.Writer, dryRun bool) (*executor.Executor, error) {
	eng, err := rego.Load(e.ctx, policies, time.Minute)
	if err != nil {
		return nil, err
	}
	opts := executor.Options{
		Target: live.Target{Namespace: e.ns, Kind: kind, Name: name},
		Engine: eng, Poll: 200 * time.Millisecond, MaxPoll: time.Second, DryRun: dryRun, PlanOptions: upstreamOptions(),
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if !dryRun {
		if opts.Reader, err = live.NewInformerReader(ctx, e.client, e.ns, nil); err != nil {
			return nil, err
		}
	}
	return executor.New(e.client, opts)
}

func uids(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

func run(t *testing.T, x *executor.Executor, ctx context.Context, log *bytes.Buffer) *executor.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sum, err := x.Run(ctx, false)
	t.Logf("executor log:\n%s", log.String())
	if err != nil {
		var h *executor.HaltedError
		if errors.As(err, &h) {
			t.Fatalf("halted: %v", h.Reasons)
		}
		t.Fatalf("run: %v", err)
	}
	return sum
}

// TestInPlaceStatefulSet: a managed OnDelete StatefulSet of 6 pods with
// InPlaceIfPossible and max-unavailable 2 gets a new image: every pod is
// patched in place (same UIDs), runs the new image, the controller counts
// all of them updated and reports currentRevision == updateRevision, and
// the watcher never saw more than 2 pods unavailable.
func TestInPlaceStatefulSet(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "web", 6
	before, w := e.rolloutStatefulSet(name, replicas, "2")
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })

	// --dry-run=server: the apiserver accepts the writes of one step and
	// changes nothing.
	versions := map[string]string{}
	for _, p := range e.pods("app=" + name) {
		versions[p.Name] = p.ResourceVersion
	}
	var dryLog bytes.Buffer
	dry, err := e.newExecutor(name, &dryLog, true).Run(e.ctx, false)
	if err != nil || dry.Steps != 1 || dry.Actions["InPlaceUpdate"] != 2 {
		t.Fatalf("dry run: %v, %+v, want one step with 2 InPlaceUpdate\n%s", err, dry, dryLog.String())
	}
	for _, p := range e.pods("app=" + name) {
		if versions[p.Name] != p.ResourceVersion || p.Spec.Containers[0].Image != "example.com/app:v1" {
			t.Errorf("dry run changed pod %s (resourceVersion %s -> %s, image %s)", p.Name, versions[p.Name], p.ResourceVersion, p.Spec.Containers[0].Image)
		}
	}

	var log bytes.Buffer
	sum := run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions["InPlaceUpdate"] != replicas || sum.Actions["Recreate"] != 0 {
		t.Errorf("actions %v, want %d InPlaceUpdate and no Recreate", sum.Actions, replicas)
	}

	set := e.waitSettled(name, replicas)
	pods := e.pods("app=" + name)
	after := uids(pods)
	if len(after) != replicas {
		t.Fatalf("%d pods after the rollout, want %d", len(after), replicas)
	}
	for n, uid := range before {
		if after[n] != uid {
			t.Errorf("pod %s was recreated (uid %s -> %s), want an in-place update", n, uid, after[n])
		}
	}
	for _, p := range pods {
		cs := p.Status.ContainerStatuses
		if p.Spec.Containers[0].Image != "example.com/app:v2" || len(cs) != 1 || cs[0].Image != "example.com/app:v2" || cs[0].ImageID != kubelet.ImageID("example.com/app:v2") {
			t.Errorf("pod %s: spec image %s, status %+v; want v2 running", p.Name, p.Spec.Containers[0].Image, cs)
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != set.Status.UpdateRevision {
			t.Errorf("pod %s: controller-revision-hash %s, want the update revision %s", p.Name, got, set.Status.UpdateRevision)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d (want %d), currentRevision %s, updateRevision %s (want equal)",
			set.Status.UpdatedReplicas, replicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	// The controller keeps the recorded revision on later syncs.
	time.Sleep(time.Second)
	set = e.waitSettled(name, replicas)
	if set.Status.CurrentRevision != set.Status.UpdateRevision || set.Status.UpdatedReplicas != replicas {
		t.Errorf("after a resync: currentRevision %s, updateRevision %s, updatedReplicas %d", set.Status.CurrentRevision, set.Status.UpdateRevision, set.Status.UpdatedReplicas)
	}
	w.result(t, 2)
}

// TestEnvChangeRecreates: an env change cannot go in place, so under
// InPlaceIfPossible every pod is recreated through the Eviction API (new
// UIDs), never more than the budget at once.
func TestEnvChangeRecreates(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "db", 5
	before, w := e.rolloutStatefulSet(name, replicas, "2")
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "b" })

	var log bytes.Buffer
	sum := run(t, e.executor(name, &log), e.ctx, &log)
	if sum.Actions["Recreate"] != replicas || sum.Actions["InPlaceUpdate"] != 0 {
		t.Errorf("actions %v, want %d Recreate", sum.Actions, replicas)
	}
	set := e.waitSettled(name, replicas)
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] == p.UID {
			t.Errorf("pod %s kept its UID: want it recreated", p.Name)
		}
		if p.Spec.Containers[0].Env[0].Value != "b" {
			t.Errorf("pod %s: env %v, want MODE=b", p.Name, p.Spec.Containers[0].Env)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d, currentRevision %s, updateRevision %s",
			set.Status.UpdatedReplicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	w.result(t, 2)
}

// TestKilledAtRandomMoments: the executor is stopped 20 times at random
// moments (its context cancelled, mid-step included) and started afresh
// during one in-place rollout of 12 pods. All its state is on the pods, so
// it converges, and never spends the budget twice.
func TestKilledAtRandomMoments(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas, kills = "kv", 12, 20
	before, w := e.rolloutStatefulSet(name, replicas, "2")
	// Six waves of a second each at least: long enough for 20 kills of
	// 5-300 ms runs to land inside the rollout.
	e.kubelet.SetImage("example.com/app:v3", kubelet.Behavior{ReadyDelay: time.Second})
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v3" })
	e.runKilled("StatefulSet", name, kills, 300*time.Millisecond)
	set := e.waitSettled(name, replicas)
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID || p.Status.ContainerStatuses[0].Image != "example.com/app:v3" {
			t.Errorf("pod %s: uid %s (was %s), running %s", p.Name, p.UID, before[p.Name], p.Status.ContainerStatuses[0].Image)
		}
	}
	if set.Status.UpdatedReplicas != replicas || set.Status.CurrentRevision != set.Status.UpdateRevision {
		t.Errorf("StatefulSet status: updatedReplicas %d, currentRevision %s, updateRevision %s",
			set.Status.UpdatedReplicas, set.Status.CurrentRevision, set.Status.UpdateRevision)
	}
	w.result(t, 2)
}

// TestInPlaceDaemonSet: a managed OnDelete DaemonSet on 4 nodes is updated
// in place; the DaemonSet controller counts every pod updated (the pods
// carry the update revision's controller-revision-hash and
// pod-template-generation), and at most 1 pod (the default budget) is
// unavailable at a time.
func TestInPlaceDaemonSet(t *testing.T) {
	e := newEnv(t, 4)
	const name = "agent"
	if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, daemonSet(e.ns, name, "example.com/agent:v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet(name, 4, false)
	before := uids(e.pods("app=" + name))
	w := e.watch("app="+name, 4)
	e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/agent:v2" })

	var log bytes.Buffer
	x := e.executorFor("DaemonSet", name, nil, &log, false)
	sum := run(t, x, e.ctx, &log)
	if sum.Actions["InPlaceUpdate"] != 4 {
		t.Errorf("actions %v, want 4 InPlaceUpdate", sum.Actions)
	}
	e.waitDaemonSet(name, 4, true)
	for _, p := range e.pods("app=" + name) {
		if before[p.Name] != p.UID || p.Status.ContainerStatuses[0].Image != "example.com/agent:v2" {
			t.Errorf("pod %s: uid %s (was %s), running %s", p.Name, p.UID, before[p.Name], p.Status.ContainerStatuses[0].Image)
		}
	}
	w.result(t, 1)
}

// upstreamOptions are the plan's default estimates with the model of the
// workloads' own controllers, as rollplan apply, status and gate plan.
func upstreamOptions() plan.Options {
	o := plan.DefaultOptions
	o.Upstream = engines.Upstream()
	return o
}
