package node_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/node"
	"github.com/rollplan/rollplan/test/podwatch"
)

// cluster is a control plane serving pods, a real node, and rollplan
// installed on it from its own manifests: the controller and the gate run
// as pods of the image built from the repository's Dockerfile.
type cluster struct {
	t        *testing.T
	cp       *controlplane.ControlPlane
	n        *node.Node
	rollplan string // the host binary: manifests, undo, status
}

// installed starts the cluster and installs rollplan at image tag; at the
// end it uninstalls it (before the node stops: the webhook fails closed).
func installed(t *testing.T, tag string) *cluster {
	t.Helper()
	cp, n := startWith(t, node.Options{Rollplan: []node.RollplanImage{
		{Tag: "v1", Version: "v0.0.0-node.1"},
		{Tag: "v2", Version: "v0.0.0-node.2"},
	}})
	c := &cluster{t: t, cp: cp, n: n, rollplan: buildRollplan(t)}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpSystem()
		}
		if err := n.Uninstall(context.Background(), c.rollplan); err != nil {
			t.Error(err)
		}
	})
	began := time.Now()
	if err := n.Install(t.Context(), c.rollplan, n.Image("rollplan:"+tag)); err != nil {
		t.Fatal(err)
	}
	t.Logf("rollplan %s installed from its manifests in %v", tag, time.Since(began).Round(time.Millisecond))
	return c
}

// buildRollplan builds the rollplan command for the host.
func buildRollplan(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rollplan")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "github.com/rollplan/rollplan/cmd/rollplan")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build rollplan: %v: %s", err, b)
	}
	return out
}

// dumpSystem logs the state of rollplan's pods and their logs, for a
// failed test.
func (c *cluster) dumpSystem() {
	ctx := context.Background()
	out, err := c.n.Kubectl(ctx, nil, "-n", node.SystemNamespace, "get", "pods,events", "-o", "wide")
	c.t.Logf("rollplan-system:\n%s%v", out, err)
	pods, err := c.cp.Client.CoreV1().Pods(node.SystemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			out, err := c.n.ContainerOutput(ctx, p.Namespace, p.Name, ct.Name)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			c.t.Logf("%s/%s's log ends:\n%s%v", p.Name, ct.Name, out, err)
		}
	}
}

// cli runs the host rollplan against the cluster; it returns stdout,
// stderr and the exit code.
func (c *cluster) cli(args ...string) (string, string, int) {
	cmd := exec.CommandContext(c.t.Context(), c.rollplan, append(args, "--kubeconfig", c.cp.Kubeconfig)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("rollplan %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

// inPlace are the annotations of a workload rollplan drives in place.
func inPlace(maxUnavailable int, extra ...string) map[string]string {
	a := map[string]string{
		facts.AnnManaged:         "true",
		facts.AnnPodUpdatePolicy: "InPlaceIfPossible",
		facts.AnnMaxUnavailable:  strconv.Itoa(maxUnavailable),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		a[extra[i]] = extra[i+1]
	}
	return a
}

// workload is one of the suite's workloads.
type workload struct {
	kind, name string
	replicas   int
	budget     int    // the most pods that may be unready at once
	label      string // whose value is name on its pods; "": app
	// native: rolled by its own controller, the baseline. Its budget is
	// upstream's to keep, not rollplan's: the real kubelet's status
	// updates and the controller's view of a terminating pod race (it
	// can count a pod still Ready while deleting it), so a second pod
	// unready at once is logged, not failed.
	native bool
}

// system is one of rollplan's own Deployments (rollplan-gate,
// rollplan-controller), whose pods the manifests label
// app.kubernetes.io/name.
func system(name string) workload {
	return workload{kind: "Deployment", name: name, label: "app.kubernetes.io/name"}
}

// selector selects the workload's pods.
func (w workload) selector() string {
	if w.label == "" {
		return "app=" + w.name
	}
	return w.label + "=" + w.name
}

func (w workload) ref() string { return strings.ToLower(w.kind) + "/" + w.name }

// create makes the workload in ns from its template and waits until its
// pods are all Ready.
func (c *cluster) create(ns string, obj any, w workload) {
	c.t.Helper()
	ctx := c.t.Context()
	apps := c.cp.Client.AppsV1()
	var err error
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		_, err = apps.StatefulSets(ns).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = apps.DaemonSets(ns).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.Deployment:
		_, err = apps.Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		c.t.Fatalf("create %s in %s: %v", w.ref(), ns, err)
	}
	c.waitPods(ns, w, "all Ready", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, ready)
	})
}

// pods lists the workload's running pods (not terminating).
func (c *cluster) pods(ns string, w workload) []corev1.Pod {
	list, err := c.cp.Client.CoreV1().Pods(ns).List(c.t.Context(), metav1.ListOptions{LabelSelector: w.selector()})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *cluster) waitPods(ns string, w workload, what string, timeout time.Duration, ok func([]corev1.Pod) bool) []corev1.Pod {
	c.t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(c.t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		pods = c.pods(ns, w)
		return ok(pods), nil
	})
	if err != nil {
		var b strings.Builder
		for _, p := range pods {
			fmt.Fprintf(&b, "\n  %s ready=%v %s", p.Name, ready(&p), podwatch.StepOf(&p))
		}
		c.t.Fatalf("%s %s/%s: pods not %s within %v:%s", w.kind, ns, w.name, what, timeout, b.String())
	}
	return pods
}

func all(pods []corev1.Pod, f func(*corev1.Pod) bool) bool {
	for i := range pods {
		if !f(&pods[i]) {
			return false
		}
	}
	return true
}

// runs reports whether the pod's container runs the image of tag (the
// registry's digest) and is Ready.
func (c *cluster) runs(tag string) func(*corev1.Pod) bool {
	digest := c.n.Digests["testapp:"+tag]
	return func(p *corev1.Pod) bool {
		if !ready(p) || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.Ready && cs.State.Running != nil && strings.HasSuffix(cs.ImageID, "@"+digest)
	}
}

// setImage sets the workload's container image as `kubectl set image`
// does.
func (c *cluster) setImage(ns string, w workload, image string) {
	c.t.Helper()
	if _, err := c.n.Kubectl(c.t.Context(), nil, "-n", ns, "set", "image", w.ref(), "app="+image); err != nil {
		c.t.Fatal(err)
	}
}

// writes reads the API server's count of write requests (POST, PUT,
// PATCH, DELETE, and APPLY: a server-side apply, as the controller writes
// the rollout state and the Rollout) per resource and subresource: the
// difference of two readings is what a rollout wrote.
func (c *cluster) writes() map[string]float64 {
	c.t.Helper()
	raw, err := c.cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		if !ok {
			continue
		}
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY":
		default:
			continue
		}
		if l["dry_run"] != "" && l["dry_run"] != "none" {
			continue
		}
		key := l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		out[key] += v
	}
	return out
}

// diff is after minus before, for the resources a rollout touches.
func diff(before, after map[string]float64) string {
	var parts []string
	total := 0.0
	for _, k := range []string{"pods", "pods/status", "pods/resize", "pods/eviction", "statefulsets", "statefulsets/status", "daemonsets", "daemonsets/status", "deployments", "deployments/status", "replicasets", "replicasets/status", "controllerrevisions", "events", "leases", "configmaps"} {
		if d := after[k] - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, int(d)))
			total += d
		}
	}
	return fmt.Sprintf("%d (%s)", int(total), strings.Join(parts, ", "))
}

// TestRollplanOnRealNode installs rollplan from its own manifests (the
// controller and the gate as pods of the image built from the Dockerfile,
// under the restricted Pod Security profile, the webhook through its
// Service) and proves on the real kubelet, in order on one cluster: in
// place per kind, a broken image halting and undone, the gate refusing a
// drain past the budget (and failing closed without its pods), the
// controller's leader lost mid-rollout, an upgrade of rollplan, analysis
// gates on a real Prometheus (added to the install), and an uninstall that
// leaves nothing.
func TestRollplanOnRealNode(t *testing.T) {
	c := installed(t, "v1")
	ctx := t.Context()
	for _, p := range c.pods(node.SystemNamespace, system("rollplan-controller")) {
		if got, want := p.Status.ContainerStatuses[0].ImageID, c.n.Digests["rollplan:v1"]; !strings.HasSuffix(got, "@"+want) {
			t.Errorf("pod %s: imageID %s, want rollplan:v1's digest %s", p.Name, got, want)
		}
	}
	if _, err := c.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		run  func(*cluster)
	}{
		{"in place per kind, recreate as baseline", (*cluster).inPlacePerKind},
		{"broken image halts, undo restores in place", (*cluster).brokenImage},
		{"resize in place: cpu without a restart, memory with one", (*cluster).resize},
		{"gate refuses a drain past the budget", (*cluster).drainRefused},
		{"controller leader lost mid-rollout", (*cluster).leaderLost},
		{"upgrade rollplan", (*cluster).upgrade},
		{"analysis gates: Prometheus passes a good version, fails and rolls back an erroring one", (*cluster).analysisGates},
		{"uninstall leaves nothing", (*cluster).uninstall},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(c.with(t)) }) {
			t.Fatalf("%s failed: the later steps build on it", s.name)
		}
	}
}

// appsNS is the namespace of the suite's workloads.
const appsNS = "apps"

// with is the cluster for a subtest: failures are the subtest's.
func (c *cluster) with(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

// The suite's workloads.
var (
	webSts    = workload{kind: "StatefulSet", name: "web", replicas: 3, budget: 1}
	plainSts  = workload{kind: "StatefulSet", name: "plain", replicas: 3, budget: 1, native: true}
	agentDs   = workload{kind: "DaemonSet", name: "agent", replicas: 1, budget: 1}
	apiDeploy = workload{kind: "Deployment", name: "api", replicas: 3, budget: 1}
)

// inPlacePerKind: a managed StatefulSet, DaemonSet and Deployment roll to a
// new image in place through the controller: every pod keeps its UID, its
// container restarts once, runs the new image's digest and passes its real
// readiness probe again, and no more pods are unready at once than the
// budget. The same StatefulSet rolled by its own controller
// (RollingUpdate, the same maxUnavailable) is the recreate baseline the
// log compares: time from `kubectl set image` to the last pod Ready, and
// the API writes each took.
func (c *cluster) inPlacePerKind() {
	t, ctx := c.t, c.t.Context()
	ns := appsNS
	v1, v2 := c.n.Image("testapp:1.0"), c.n.Image("testapp:2.0")
	sts, recreate, ds, deploy := webSts, plainSts, agentDs, apiDeploy
	c.create(ns, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: sts.name, Namespace: ns, Annotations: inPlace(sts.budget)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(sts.replicas)), ServiceName: sts.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": sts.name}},
			Template:       node.TestappTemplate(sts.name, v1),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}, sts)
	c.create(ns, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: recreate.name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(recreate.replicas)), ServiceName: recreate.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": recreate.name}},
			Template: node.TestappTemplate(recreate.name, v1),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(int32(recreate.budget)))}},
		},
	}, recreate)
	c.create(ns, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: ds.name, Namespace: ns, Annotations: inPlace(ds.budget)},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": ds.name}},
			Template:       node.TestappTemplate(ds.name, v1),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
		},
	}, ds)
	c.create(ns, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploy.name, Namespace: ns, Annotations: inPlace(deploy.budget)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(deploy.replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": deploy.name}},
			Template: node.TestappTemplate(deploy.name, v1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(int32(deploy.budget))), MaxSurge: ptr.To(intstr.FromInt32(0))}},
		},
	}, deploy)
	// A managed Deployment is held (spec.paused) by its driver before its
	// template may change: otherwise the Deployment controller would roll
	// it first.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.cp.Client.AppsV1().Deployments(ns).Get(ctx, deploy.name, metav1.GetOptions{})
		return err == nil && d.Spec.Paused, err
	})
	if err != nil {
		t.Fatalf("Deployment %s/%s: never held (spec.paused) by the controller: %v", ns, deploy.name, err)
	}

	// One at a time, so that each one's time and writes are its own.
	for _, w := range []workload{sts, recreate, ds, deploy} {
		r := c.roll(w, v2, "2.0")
		how := "in place by rollplan's controller"
		if w == recreate {
			how = "recreated by the StatefulSet controller"
			for _, p := range r.before {
				if r.rec.UIDKept(p.Name) {
					t.Errorf("%s %s: pod %s kept its UID under its own controller's RollingUpdate, want it recreated", w.kind, w.name, p.Name)
				}
			}
		} else {
			c.checkInPlace(w, r, 1)
			// The controller's Rollout says so, as kubectl wait reads it.
			rollout := "rollout.rollplan.dev/" + strings.ToLower(w.kind) + "-" + w.name
			if out, err := c.n.Kubectl(ctx, nil, "-n", ns, "wait", "--for=condition=Ready", rollout, "--timeout=60s"); err != nil {
				t.Errorf("kubectl wait --for=condition=Ready %s after the rollout: %v\n%s", rollout, err, out)
			}
			out, err := c.n.Kubectl(ctx, nil, "-n", ns, "get", rollout, "-o", "jsonpath={.status.phase} {.status.updatedReplicas}/{.status.replicas}")
			if want := fmt.Sprintf("Complete %d/%d", w.replicas, w.replicas); err != nil || out != want {
				t.Errorf("%s: status %q (%v), want %q", rollout, out, err, want)
			}
		}
		t.Logf("%s %s (%d pods, budget %d) %s: set image to last pod Ready %v; API writes %s",
			w.kind, w.name, w.replicas, w.budget, how, r.took.Round(time.Millisecond), r.writes)
	}
}

// rolled is what roll saw.
type rolled struct {
	before, after []corev1.Pod
	rec           *podwatch.Recorder
	took          time.Duration
	writes        string
}

// roll sets the workload's image and waits until every pod runs it (the
// registry's tag) Ready, recording the pods' statuses on the way.
func (c *cluster) roll(w workload, image, tag string) rolled {
	t := c.t
	rec, err := podwatch.Start(t.Context(), c.cp.Client, appsNS, "app="+w.name)
	if err != nil {
		t.Fatal(err)
	}
	r := rolled{rec: rec, before: c.pods(appsNS, w)}
	writes := c.writes()
	began := time.Now()
	c.setImage(appsNS, w, image)
	r.after = c.waitPods(appsNS, w, "all Ready on testapp:"+tag, 3*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, c.runs(tag))
	})
	r.took = time.Since(began)
	c.caughtUp(rec.Recording, r.after)
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	r.writes = diff(writes, c.writes())
	names := make([]string, 0, len(r.before))
	for _, p := range r.before {
		names = append(names, p.Name)
	}
	if u := rec.MaxUnready(names...); u.Count > w.budget && w.native {
		t.Logf("%s %s (its own controller): %d pods unready at once (%v), maxUnavailable %d", w.kind, w.name, u.Count, u.Pods, w.budget)
	} else if u.Count > w.budget {
		t.Errorf("%s %s: %d pods unready at once (%v), budget %d", w.kind, w.name, u.Count, u.Pods, w.budget)
	}
	return r
}

// caughtUp waits until the recording holds the pods' states a GET saw:
// the watch may deliver them a moment later.
func (c *cluster) caughtUp(rec *podwatch.Recording, pods []corev1.Pod) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(c.t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for i := range pods {
			if !rec.Has(&pods[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		c.t.Fatalf("the pod watch never delivered the pods' last states: %v", err)
	}
}

// checkInPlace: the same pods after as before, each restarted restarts
// times and Ready again through its probe.
func (c *cluster) checkInPlace(w workload, r rolled, restarts int32) {
	t := c.t
	if len(r.after) != len(r.before) {
		t.Fatalf("%s %s: %d pods after, %d before", w.kind, w.name, len(r.after), len(r.before))
	}
	for i, p := range r.after {
		if p.Name != r.before[i].Name || p.UID != r.before[i].UID || !r.rec.UIDKept(p.Name) {
			t.Errorf("%s %s: pod %s (UID %s) after, %s (UID %s) before: not the same pod", w.kind, w.name, p.Name, p.UID, r.before[i].Name, r.before[i].UID)
			continue
		}
		if d, err := r.rec.RestartDelta(p.Name, "app"); err != nil || d != restarts {
			t.Errorf("%s %s: pod %s: restartCount +%d (%v), want +%d", w.kind, w.name, p.Name, d, err, restarts)
		}
		// Ready again at the end. Not necessarily False on the way: the
		// kubelet's status manager may write the restarted container
		// running and already Ready in one update when the probe passes
		// at once (seen under load), so an API watcher can miss the gap.
		if flips := r.rec.ReadyFlips(p.Name); len(flips) == 0 || !flips[len(flips)-1] {
			t.Errorf("%s %s: pod %s: Ready went %v, want True at the end", w.kind, w.name, p.Name, flips)
		}
	}
}

// state reads the controller's rollout state of the StatefulSet.
func (c *cluster) state(name string) *live.RolloutState {
	c.t.Helper()
	s, err := c.cp.Client.AppsV1().StatefulSets(appsNS).Get(c.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := live.ParseRolloutState(s.Annotations[facts.AnnRolloutState])
	if err != nil {
		c.t.Fatalf("StatefulSet %s/%s: %v", appsNS, name, err)
	}
	return st
}

func (c *cluster) waitState(name, what string, timeout time.Duration, ok func(*live.RolloutState) bool) *live.RolloutState {
	c.t.Helper()
	var st *live.RolloutState
	err := wait.PollUntilContextTimeout(c.t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		st = c.state(name)
		return st != nil && ok(st), nil
	})
	if err != nil {
		last := "none"
		if st != nil {
			last = st.Summary()
		}
		c.t.Fatalf("StatefulSet %s/%s: rollout never %s within %v (last state: %s)", appsNS, name, what, timeout, last)
	}
	return st
}

// brokenImage: an image the real kubelet runs but whose readiness probe
// never passes halts the rollout at its first pod once the progress
// deadline passes (the budget holds: one pod out), and `rollplan undo`
// restores that pod in place.
func (c *cluster) brokenImage() {
	t := c.t
	w := webSts
	if _, err := c.n.Kubectl(t.Context(), nil, "-n", appsNS, "annotate", "--overwrite", w.ref(), facts.AnnProgressDeadline+"=10"); err != nil {
		t.Fatal(err)
	}
	rec, err := podwatch.Start(t.Context(), c.cp.Client, appsNS, "app="+w.name)
	if err != nil {
		t.Fatal(err)
	}
	before := c.pods(appsNS, w)
	began := time.Now()
	c.setImage(appsNS, w, c.n.Image("testapp:broken"))
	st := c.waitState(w.name, "halted", 90*time.Second, func(st *live.RolloutState) bool { return st.Phase == live.RolloutHalted })
	t.Logf("halted %v after set image: %s", time.Since(began).Round(time.Millisecond), st.Summary())
	pods := c.pods(appsNS, w)
	var broken []string
	for _, p := range pods {
		if p.Spec.Containers[0].Image == c.n.Image("testapp:broken") {
			broken = append(broken, p.Name)
			if ready(&p) {
				t.Errorf("pod %s on testapp:broken is Ready: its probe never passes", p.Name)
			}
		}
	}
	if len(broken) != w.budget {
		t.Errorf("%d pods on testapp:broken at the halt (%v), want the budget's %d: the rollout went on past an unready pod", len(broken), broken, w.budget)
	}
	if !strings.Contains(strings.Join(st.Reasons, " ")+st.Message, broken[0]) {
		t.Errorf("halt reasons %q, message %q: want them to name the pod %s", st.Reasons, st.Message, broken[0])
	}

	began = time.Now()
	if out, errOut, code := c.cli("undo", w.ref(), "-n", appsNS); code != 0 {
		t.Fatalf("rollplan undo %s: exit %d\n%s%s", w.ref(), code, out, errOut)
	}
	after := c.waitPods(appsNS, w, "all Ready on testapp:2.0 after undo", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, c.runs("2.0"))
	})
	t.Logf("undone in %v", time.Since(began).Round(time.Millisecond))
	c.caughtUp(rec.Recording, after)
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(before))
	for i, p := range after {
		names = append(names, p.Name)
		if p.UID != before[i].UID || !rec.UIDKept(p.Name) {
			t.Errorf("pod %s: UID %s after undo, %s before the broken image: not restored in place", p.Name, p.UID, before[i].UID)
		}
	}
	if u := rec.MaxUnready(names...); u.Count > w.budget {
		t.Errorf("%d pods unready at once (%v), budget %d", u.Count, u.Pods, w.budget)
	}
}

// drainRefused: `kubectl drain` of the managed StatefulSet's pods evicts
// as many as the budget allows and is refused by the gate while the
// evicted one cannot come back (the node is cordoned); once it is back an
// eviction is admitted again. With both gate pods gone the webhook fails
// closed: evictions are refused, not let through.
func (c *cluster) drainRefused() {
	t, ctx := c.t, c.t.Context()
	w := webSts
	out, err := c.n.Kubectl(ctx, nil, "drain", c.n.Name, "--pod-selector", "app="+w.name, "--ignore-daemonsets", "--timeout=15s")
	if err == nil {
		t.Fatalf("kubectl drain of %s's pods succeeded past its budget %d:\n%s", w.ref(), w.budget, out)
	}
	// kubectl drain retries a 429 and prints each refusal with the
	// webhook's name (the error also quotes paths that say rollplan).
	if !strings.Contains(err.Error(), `admission webhook "pods.gate.rollplan.dev" denied the request`) {
		t.Errorf("kubectl drain refused, but not by the gate: %v", err)
	}
	t.Logf("kubectl drain refused: %s", gateLine(err.Error()))
	serving := 0
	for _, p := range c.pods(appsNS, w) {
		if ready(&p) {
			serving++
		}
	}
	if serving != w.replicas-w.budget {
		t.Errorf("%d of %s's %d pods Ready after the refused drain, want %d (the budget %d evicted, no more)", serving, w.ref(), w.replicas, w.replicas-w.budget, w.budget)
	}
	if _, err := c.n.Kubectl(ctx, nil, "uncordon", c.n.Name); err != nil {
		t.Fatal(err)
	}
	c.waitPods(appsNS, w, "all Ready after uncordon", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, ready)
	})
	victim := c.pods(appsNS, w)[0].Name
	if err := c.evict(victim); err != nil {
		t.Errorf("eviction of %s with every pod Ready refused: %v", victim, err)
	}
	c.waitPods(appsNS, w, "all Ready after the eviction", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, ready)
	})

	// Both gate pods gone: the pods webhook fails closed.
	if _, err := c.n.Kubectl(ctx, nil, "-n", node.SystemNamespace, "scale", "deploy/rollplan-gate", "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	// Gone, not just terminating: a terminating gate pod still serves
	// (kube-proxy sends to terminating endpoints when no other is left).
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.cp.Client.CoreV1().Pods(node.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=rollplan-gate"})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("gate pods not gone a minute after scaling to 0: %v", err)
	}
	victim = c.pods(appsNS, w)[0].Name
	err = c.evict(victim)
	if err == nil {
		t.Errorf("eviction of %s admitted with no gate pod: the webhook should fail closed", victim)
	} else {
		t.Logf("with no gate pod, eviction refused: %v", err)
	}
	if _, err := c.n.Kubectl(ctx, nil, "-n", node.SystemNamespace, "scale", "deploy/rollplan-gate", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.n.Kubectl(ctx, nil, "-n", node.SystemNamespace, "rollout", "status", "deploy/rollplan-gate", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	c.waitPods(appsNS, w, "all Ready", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, ready)
	})
}

// evict asks the Eviction API to evict a pod of the apps namespace.
func (c *cluster) evict(pod string) error {
	return c.cp.Client.CoreV1().Pods(appsNS).EvictV1(c.t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: appsNS}})
}

// gateLine is the first line of kubectl's output that quotes the gate.
func gateLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "pods.gate.rollplan.dev") {
			return strings.TrimSpace(l)
		}
	}
	return s
}

// leaderLost: mid-rollout the controller's leader pod is deleted, then the
// next leader's container is killed outright (no lease released); a
// standby takes over each time and finishes the rollout, and no pod is
// updated twice: each pod's image changed once and its container
// restarted once.
func (c *cluster) leaderLost() {
	t, ctx := c.t, c.t.Context()
	w := workload{kind: "StatefulSet", name: "slow", replicas: 5, budget: 1}
	tmpl := node.TestappTemplate(w.name, c.n.Image("testapp:1.0"))
	c.create(appsNS, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: appsNS, Annotations: inPlace(w.budget)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(w.replicas)), ServiceName: w.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			// Each updated pod counts as available 4 s after Ready: the
			// rollout lasts long enough to lose its leader twice.
			MinReadySeconds: 4,
			Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}},
			Template:        tmpl,
			UpdateStrategy:  appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}, w)
	rec, err := podwatch.Start(ctx, c.cp.Client, appsNS, "app="+w.name)
	if err != nil {
		t.Fatal(err)
	}
	before := c.pods(appsNS, w)
	first := c.leader()
	began := time.Now()
	c.setImage(appsNS, w, c.n.Image("testapp:2.0"))
	c.waitState(w.name, "1 pod updated", time.Minute, func(st *live.RolloutState) bool { return st.Updated >= 1 })
	if _, err := c.n.Kubectl(ctx, nil, "-n", node.SystemNamespace, "delete", "pod", first, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: deleted the leader pod %s", time.Since(began).Round(time.Millisecond), first)
	second := c.waitLeader(first)
	t.Logf("%v: %s leads", time.Since(began).Round(time.Millisecond), second)
	st := c.state(w.name)
	if st.Phase == live.RolloutComplete {
		t.Fatalf("rollout of %s complete before the second leader could be killed: make it slower", w.ref())
	}
	id := c.containerID(second)
	if err := c.n.KillContainer(id); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: killed %s's container outright (SIGKILL, no lease released)", time.Since(began).Round(time.Millisecond), second)
	after := c.waitPods(appsNS, w, "all Ready on testapp:2.0", 3*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, c.runs("2.0"))
	})
	t.Logf("%v: rolled out; leader %s", time.Since(began).Round(time.Millisecond), c.leader())
	c.caughtUp(rec.Recording, after)
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	c.checkInPlace(w, rolled{before: before, after: after, rec: rec}, 1)
	for _, p := range after {
		if n := imageChanges(rec, p.Name); n != 1 {
			t.Errorf("pod %s: its spec image changed %d times, want once", p.Name, n)
		}
	}
}

// imageChanges counts the changes of a pod's spec image in a recording.
func imageChanges(rec *podwatch.Recorder, name string) int {
	p, _ := rec.Pod(name)
	n, last := 0, ""
	for _, s := range p.Steps() {
		ct, ok := s.Container("app")
		if !ok {
			continue
		}
		if last != "" && ct.SpecImage != last {
			n++
		}
		last = ct.SpecImage
	}
	return n
}

// leader is the pod holding the controller's leader-election Lease (its
// holder identity is POD_NAME_SUFFIX).
func (c *cluster) leader() string {
	c.t.Helper()
	l, err := c.cp.Client.CoordinationV1().Leases(node.SystemNamespace).Get(c.t.Context(), "rollplan-controller", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		c.t.Fatalf("Lease %s/rollplan-controller: %v (holder %v)", node.SystemNamespace, err, l)
	}
	name, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return name
}

// waitLeader waits for a leader other than not.
func (c *cluster) waitLeader(not string) string {
	c.t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(c.t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.cp.Client.CoordinationV1().Leases(node.SystemNamespace).Get(ctx, "rollplan-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		got, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
		return got != "" && got != not, nil
	})
	if err != nil {
		c.t.Fatalf("no controller replica took over from %s within a minute", not)
	}
	return got
}

// containerID is the runtime's ID of a rollplan-system pod's container.
func (c *cluster) containerID(pod string) string {
	c.t.Helper()
	p, err := c.cp.Client.CoreV1().Pods(node.SystemNamespace).Get(c.t.Context(), pod, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		c.t.Fatalf("pod %s/%s: %v", node.SystemNamespace, pod, err)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	return id
}

// upgrade installs a new rollplan image tag over the running one, as a
// user upgrades (the same manifests, another --image): both Deployments
// roll to it, and the new controller rolls a StatefulSet in place.
func (c *cluster) upgrade() {
	t, ctx := c.t, c.t.Context()
	began := time.Now()
	if err := c.n.Install(ctx, c.rollplan, c.n.Image("rollplan:v2")); err != nil {
		t.Fatal(err)
	}
	t.Logf("upgraded to rollplan:v2 in %v", time.Since(began).Round(time.Millisecond))
	for _, d := range []string{"rollplan-controller", "rollplan-gate"} {
		pods := c.waitPods(node.SystemNamespace, system(d), "all on rollplan:v2", 2*time.Minute, func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if len(p.Status.ContainerStatuses) == 0 || !strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, "@"+c.n.Digests["rollplan:v2"]) {
					return false
				}
			}
			return len(pods) > 0
		})
		t.Logf("%s: %d pods on rollplan:v2", d, len(pods))
	}
	r := c.roll(webSts, c.n.Image("testapp:3.0"), "3.0")
	c.checkInPlace(webSts, r, 1)
}

// uninstall removes rollplan as the docs say; nothing of it is left: its
// namespace, cluster-scoped objects and per-workload Leases are gone.
func (c *cluster) uninstall() {
	t, ctx := c.t, c.t.Context()
	began := time.Now()
	if err := c.n.Uninstall(ctx, c.rollplan); err != nil {
		t.Fatal(err)
	}
	t.Logf("uninstalled in %v", time.Since(began).Round(time.Millisecond))
	out, err := c.n.Kubectl(ctx, nil, "get", "clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations,customresourcedefinitions,namespaces", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(out) {
		// The test node's own objects (its kubelet's binding, its Lease)
		// carry its name, rollplan-node: not rollplan's.
		if strings.Contains(l, "rollplan") && !strings.HasSuffix(l, "/"+c.n.Name) && !strings.Contains(l, "/"+c.n.Name+":") {
			t.Errorf("left after uninstall: %s", l)
		}
	}
	out, err = c.n.Kubectl(ctx, nil, "get", "leases,configmaps,secrets,services,serviceaccounts,roles,rolebindings,deployments,poddisruptionbudgets", "-A", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(out) {
		// The test node's own objects (its kubelet's binding, its Lease)
		// carry its name, rollplan-node: not rollplan's.
		if strings.Contains(l, "rollplan") && !strings.HasSuffix(l, "/"+c.n.Name) && !strings.Contains(l, "/"+c.n.Name+":") {
			t.Errorf("left after uninstall: %s", l)
		}
	}
}

// resize: a managed StatefulSet's cpu request and memory limit change
// (Burstable before and after) is applied through pods/resize on the real
// kubelet: the same pods, the new values in status.containerStatuses[].resources,
// no restart for cpu (resizePolicy NotRequired) and one for memory
// (RestartContainer).
func (c *cluster) resize() {
	t := c.t
	w := workload{kind: "StatefulSet", name: "sized", replicas: 2, budget: 1}
	tmpl := node.TestappTemplate(w.name, c.n.Image("testapp:1.0"))
	tmpl.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	tmpl.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}
	c.create(appsNS, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: appsNS, Annotations: inPlace(w.budget)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(w.replicas)), ServiceName: w.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}},
			Template:       tmpl,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}, w)
	for _, step := range []struct {
		what     string
		patch    string
		resource corev1.ResourceName
		limit    bool
		want     string
		restarts int32
	}{
		{"cpu request 50m to 100m", `{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"100m"}}}]}}}}`, corev1.ResourceCPU, false, "100m", 0},
		{"memory limit 64Mi to 96Mi", `{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":"96Mi"}}}]}}}}`, corev1.ResourceMemory, true, "96Mi", 1},
	} {
		rec, err := podwatch.Start(t.Context(), c.cp.Client, appsNS, w.selector())
		if err != nil {
			t.Fatal(err)
		}
		before := c.pods(appsNS, w)
		began := time.Now()
		if _, err := c.n.Kubectl(t.Context(), nil, "-n", appsNS, "patch", w.ref(), "--type=strategic", "-p", step.patch); err != nil {
			t.Fatal(err)
		}
		want := resource.MustParse(step.want)
		after := c.waitPods(appsNS, w, step.what+" in status", 2*time.Minute, func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if !ready(&p) || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Resources == nil {
					return false
				}
				r := p.Status.ContainerStatuses[0].Resources
				got, ok := r.Requests[step.resource]
				if step.limit {
					got, ok = r.Limits[step.resource]
				}
				if !ok || got.Cmp(want) != 0 {
					return false
				}
			}
			return len(pods) == w.replicas
		})
		c.caughtUp(rec.Recording, after)
		if err := rec.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: in every pod's status %v after the patch", step.what, time.Since(began).Round(time.Millisecond))
		for i, p := range after {
			if p.UID != before[i].UID {
				t.Errorf("%s: pod %s recreated (UID %s, was %s), want resized in place", step.what, p.Name, p.UID, before[i].UID)
			}
			if d, err := rec.RestartDelta(p.Name, "app"); err != nil || d != step.restarts {
				t.Errorf("%s: pod %s restartCount +%d (%v), want +%d (resizePolicy)", step.what, p.Name, d, err, step.restarts)
			}
			if q := p.Status.QOSClass; q != corev1.PodQOSBurstable {
				t.Errorf("%s: pod %s QoS class %s, want Burstable kept", step.what, p.Name, q)
			}
		}
		names := []string{before[0].Name, before[1].Name}
		if u := rec.MaxUnready(names...); u.Count > w.budget {
			t.Errorf("%s: %d pods unready at once (%v), budget %d", step.what, u.Count, u.Pods, w.budget)
		}
	}
}
