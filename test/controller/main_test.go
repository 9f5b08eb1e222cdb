// Package controller proves `rollplan controller` on a real control plane
// (etcd, kube-apiserver, kube-controller-manager of rollplan's newest
// Kubernetes version) with the test kubelet: the built rollplan binary runs
// as two controller processes with leader election, each test in its own
// namespace (the processes are scoped to it with -n), and the tests change
// templates, kill the leader, pause, halt and evict, and check what the
// cluster shows. They skip when the control-plane binaries are not built
// (set ROLLPLAN_CLUSTER_BIN, or run `make test-cluster`).
package controller

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

func TestMain(m *testing.M) { harness.Main(m) }

// envLabel on a node names the test namespace whose kubelet keeps it, so
// DaemonSets stay on their own test's nodes.
const envLabel = "controller.rollplan.dev/env"

// env is one test's namespace, the namespace of its leader-election Lease
// (ns-system), and a test kubelet for its pods.
type env struct {
	t       *testing.T
	ctx     context.Context
	client  kubernetes.Interface
	ns      string
	sysNS   string
	nodes   int
	kubelet *kubelet.Kubelet
	start   time.Time
	// gateMetrics: host:port of the gate's /metrics (startGate).
	gateMetrics string
	// changed: the generation of each workload (KIND/NAME) after the
	// test's last template change.
	mu      sync.Mutex
	changed map[string]int64
}

// newEnv creates the namespaces and nodes (in three zones) of one test;
// everything it starts lives until the test ends, at most timeout.
func newEnv(t *testing.T, prefix string, nodes int, timeout time.Duration) *env {
	cp := harness.Cluster(t)
	harness.RollplanBinary(t) // before the clock of the test starts
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
	e := &env{t: t, ctx: ctx, client: cp.Client, ns: ns, sysNS: ns + "-system", nodes: nodes, start: time.Now(), changed: map[string]int64{}}
	for _, name := range []string{e.ns, e.sysNS} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var kn []kubelet.Node
	for i := range nodes {
		kn = append(kn, kubelet.Node{Name: fmt.Sprintf("%s-node-%d", ns, i), Zone: fmt.Sprintf("zone-%d", i%3), Labels: map[string]string{envLabel: ns}})
	}
	e.kubelet = kubelet.New(cp.Client, kubelet.Options{Nodes: kn, Namespace: ns,
		Default: kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 500 * time.Millisecond, TerminationDelay: 200 * time.Millisecond}})
	if err := e.kubelet.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// logf logs with the seconds since the test's start.
func (e *env) logf(format string, args ...any) {
	e.t.Helper()
	e.t.Logf("[%5.1fs] %s", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// The workloads: managed (in place if possible, testobj's Managed), one
// container "app" at example.com/app:v1 with env MODE=a, selected by
// app=NAME.

func statefulSet(ns, name string, replicas int32, maxUnavailable string) *appsv1.StatefulSet {
	return testobj.StatefulSet(ns, name).Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: maxUnavailable}).
		Replicas(replicas).ServiceName(name).PodManagement(appsv1.ParallelPodManagement).OnDelete().
		Image("example.com/app:v1").Env("MODE", "a").Obj()
}

func daemonSet(ns, name string, maxUnavailable string) *appsv1.DaemonSet {
	ds := testobj.DaemonSet(ns, name).Managed().OnDelete().NodeSelector(map[string]string{envLabel: ns}).
		Image("example.com/app:v1").Env("MODE", "a").Obj()
	if maxUnavailable != "" {
		ds.Annotations[facts.AnnMaxUnavailable] = maxUnavailable
	}
	return ds
}

func deployment(ns, name string, replicas int32, maxUnavailable string) *appsv1.Deployment {
	d := testobj.Deployment(ns, name).Managed().Replicas(replicas).RollingUpdate("0", maxUnavailable).Image("example.com/app:v1").Obj()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "a"}}
	return d
}

// workload names one workload of the test and what the test expects of it.
type workload struct {
	Kind, Name string
	// Want: the pods it should run; Budget: the most that may be
	// unavailable at once.
	Want, Budget int
	// InPlace: the template change goes in place (every pod keeps its
	// UID); otherwise every pod is recreated once.
	InPlace bool
	// CrashLoops: the new image crash-loops, so restarts are not
	// updates.
	CrashLoops bool
}

func (w workload) ref() string { return strings.ToLower(w.Kind) + "/" + w.Name }

func (e *env) create(obj any) {
	e.t.Helper()
	var err error
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		_, err = e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, o, metav1.CreateOptions{})
	case *appsv1.Deployment:
		_, err = e.client.AppsV1().Deployments(e.ns).Create(e.ctx, o, metav1.CreateOptions{})
	default:
		e.t.Fatalf("create %T", obj)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// object reads the workload's metadata and pod template.
func (e *env) object(kind, name string) (metav1.Object, *corev1.PodTemplateSpec, error) {
	switch kind {
	case "StatefulSet":
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return s, &s.Spec.Template, nil
	case "DaemonSet":
		d, err := e.client.AppsV1().DaemonSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return d, &d.Spec.Template, nil
	case "Deployment":
		d, err := e.client.AppsV1().Deployments(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return d, &d.Spec.Template, nil
	}
	return nil, nil, fmt.Errorf("kind %s", kind)
}

// state reads the controller's rollout state of the workload (nil: none).
func (e *env) state(kind, name string) (*live.RolloutState, metav1.Object) {
	e.t.Helper()
	m, _, err := e.object(kind, name)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := live.ParseRolloutState(m.GetAnnotations()[facts.AnnRolloutState])
	if err != nil {
		e.t.Fatalf("%s %s: %v", kind, name, err)
	}
	return st, m
}

// waitState polls the rollout state until ok holds.
func (e *env) waitState(kind, name, what string, timeout time.Duration, ok func(*live.RolloutState, metav1.Object) bool) *live.RolloutState {
	e.t.Helper()
	var st *live.RolloutState
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var m metav1.Object
		st, m = e.state(kind, name)
		return st != nil && ok(st, m), nil
	})
	if err != nil {
		e.t.Fatalf("%s %s: rollout state never %s: %v (last %s)", kind, name, what, err, summary(st))
	}
	return st
}

func summary(st *live.RolloutState) string {
	if st == nil {
		return "none"
	}
	return st.Summary()
}

// setTemplate changes the workload's pod template (retrying conflicts with
// the controllers' writes).
func (e *env) setTemplate(kind, name string, change func(*corev1.PodSpec)) {
	e.t.Helper()
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		switch kind {
		case "StatefulSet":
			var s *appsv1.StatefulSet
			if s, err = e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, name, metav1.GetOptions{}); err == nil {
				change(&s.Spec.Template.Spec)
				s, err = e.client.AppsV1().StatefulSets(e.ns).Update(e.ctx, s, metav1.UpdateOptions{})
				gen = s.Generation
			}
		case "DaemonSet":
			var d *appsv1.DaemonSet
			if d, err = e.client.AppsV1().DaemonSets(e.ns).Get(e.ctx, name, metav1.GetOptions{}); err == nil {
				change(&d.Spec.Template.Spec)
				d, err = e.client.AppsV1().DaemonSets(e.ns).Update(e.ctx, d, metav1.UpdateOptions{})
				gen = d.Generation
			}
		case "Deployment":
			var d *appsv1.Deployment
			if d, err = e.client.AppsV1().Deployments(e.ns).Get(e.ctx, name, metav1.GetOptions{}); err == nil {
				change(&d.Spec.Template.Spec)
				d, err = e.client.AppsV1().Deployments(e.ns).Update(e.ctx, d, metav1.UpdateOptions{})
				gen = d.Generation
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatalf("change the template of %s %s: %v", kind, name, err)
	}
	e.mu.Lock()
	e.changed[kind+"/"+name] = gen
	e.mu.Unlock()
}

func setImage(image string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) { s.Containers[0].Image = image }
}

// setEnv changes MODE: a change that cannot go in place.
func setEnv(value string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = value }
}

// rolledOut reports whether the workload's own controller counts every
// pod at the newest template and available, and the rollplan controller's
// state says Complete for this generation; if not, why.
func (e *env) rolledOut(w workload) (bool, string) {
	var why string
	var m metav1.Object
	switch w.Kind {
	case "StatefulSet":
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m = s
		st := s.Status
		if st.ObservedGeneration != s.Generation || st.UpdatedReplicas != *s.Spec.Replicas || st.AvailableReplicas != *s.Spec.Replicas ||
			st.Replicas != *s.Spec.Replicas || st.CurrentRevision != st.UpdateRevision {
			why = fmt.Sprintf("status %d updated, %d available of %d, current %s, update %s", st.UpdatedReplicas, st.AvailableReplicas, *s.Spec.Replicas, st.CurrentRevision, st.UpdateRevision)
		}
	case "DaemonSet":
		d, err := e.client.AppsV1().DaemonSets(e.ns).Get(e.ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m = d
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.DesiredNumberScheduled != int32(w.Want) || st.UpdatedNumberScheduled != st.DesiredNumberScheduled ||
			st.NumberAvailable != st.DesiredNumberScheduled || st.CurrentNumberScheduled != st.DesiredNumberScheduled {
			why = fmt.Sprintf("status %d updated, %d available of %d", st.UpdatedNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled)
		}
	case "Deployment":
		d, err := e.client.AppsV1().Deployments(e.ns).Get(e.ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m = d
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != *d.Spec.Replicas || st.AvailableReplicas != *d.Spec.Replicas || st.Replicas != *d.Spec.Replicas {
			why = fmt.Sprintf("status %d updated, %d available, %d replicas of %d", st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, *d.Spec.Replicas)
		}
	}
	st, err := live.ParseRolloutState(m.GetAnnotations()[facts.AnnRolloutState])
	if err != nil {
		return false, err.Error()
	}
	// The state is for the generation of the last template change (a
	// Deployment's generation moves with its annotations too, the state's
	// own among them, so it may be ahead of the state's).
	e.mu.Lock()
	changed := e.changed[w.Kind+"/"+w.Name]
	e.mu.Unlock()
	if st == nil || st.Phase != live.RolloutComplete || st.Generation < changed || (w.Kind != "Deployment" && st.Generation != m.GetGeneration()) {
		why += fmt.Sprintf("; rollout state (generation %d, changed at %d): %s", m.GetGeneration(), changed, summary(st))
	}
	return why == "", why
}

// waitRolledOut waits until every workload is rolled out; it returns how
// long that took.
func (e *env) waitRolledOut(ws []workload, timeout time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	pending := map[string]string{}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		clear(pending)
		for _, w := range ws {
			if ok, why := e.rolledOut(w); !ok {
				pending[w.ref()] = why
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		e.t.Fatalf("not rolled out after %s: %v", timeout, pending)
	}
	return time.Since(start)
}

// checkPods checks every workload's pods after its rollout: Want pods, all
// at want image (and MODE env), the in-place ones with the UIDs they had
// before (before: pod name → UID), the others all new.
func (e *env) checkPods(w workload, before map[string]string, image, mode string) {
	e.t.Helper()
	pods := e.pods("app=" + w.Name)
	if len(pods) != w.Want {
		e.t.Errorf("%s: %d pods, want %d", w.ref(), len(pods), w.Want)
	}
	old := map[string]bool{}
	for _, uid := range before {
		old[uid] = true
	}
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if c.Image != image || c.Env[0].Value != mode || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Image != image {
			e.t.Errorf("%s: pod %s: spec %s MODE=%s, status %v; want %s MODE=%s running", w.ref(), p.Name, c.Image, c.Env[0].Value, p.Status.ContainerStatuses, image, mode)
		}
		if w.InPlace && !old[string(p.UID)] {
			e.t.Errorf("%s: pod %s (uid %s) is new: want it updated in place", w.ref(), p.Name, p.UID)
		}
		if !w.InPlace && old[string(p.UID)] {
			e.t.Errorf("%s: pod %s kept its UID %s: want it recreated", w.ref(), p.Name, p.UID)
		}
	}
}

func (e *env) pods(selector string) []corev1.Pod {
	e.t.Helper()
	l, err := e.client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// uids maps the workload's pods to their UIDs.
func (e *env) uids(name string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, p := range e.pods("app=" + name) {
		out[p.Name] = string(p.UID)
	}
	return out
}

// events lists the Events (events.k8s.io/v1) about the workload with reason.
func (e *env) events(kind, name, reason string) []eventsv1.Event {
	e.t.Helper()
	l, err := e.client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, ev := range l.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// cli runs the rollplan binary against the test's namespace; it returns
// stdout and stderr and the exit code.
func (e *env) cli(args ...string) (string, string, int) {
	e.t.Helper()
	args = append(args, "--kubeconfig", harness.Cluster(e.t).Kubeconfig, "-n", e.ns)
	cmd := exec.CommandContext(e.ctx, harness.RollplanBinary(e.t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		e.t.Fatalf("rollplan %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

// mustCLI runs rollplan and fails the test unless it exits 0.
func (e *env) mustCLI(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.cli(args...)
	if code != 0 {
		e.t.Fatalf("rollplan %s: exit code %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out + errOut
}

// kubectl runs kubectl against the test's namespace.
func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	cp := harness.Cluster(e.t)
	args = append([]string{"--kubeconfig", cp.Kubeconfig, "-n", e.ns}, args...)
	out, err := exec.CommandContext(e.ctx, filepath.Join(cp.BinDir, "kubectl"), args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func wl(kind, name string, want, budget int, inPlace bool) workload {
	return workload{Kind: kind, Name: name, Want: want, Budget: budget, InPlace: inPlace}
}
