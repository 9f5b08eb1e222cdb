// Package controllerscale measures `rollplan controller` at scale on a
// real control plane (etcd, kube-apiserver, kube-controller-manager of
// rollplan's newest Kubernetes version) with the test kubelet: 100
// workloads of the three kinds rolled at once, first by the native
// controllers (RollingUpdate), then, the same objects made managed, by one
// rollplan controller process. It records the time to roll them all, the
// API requests per pod of each, and the controller's CPU time and peak
// memory (BENCHMARKS.md, "Controller at scale").
//
// It has a control plane of its own, so it runs beside the other cluster
// suites without sharing their nodes or their kube-controller-manager.
// The tests skip when the control-plane binaries are not built (set
// ROLLPLAN_CLUSTER_BIN, or run `make test-cluster`).
package controllerscale

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// TestMain removes the rollplan binary harness.BuildRollplan builds.
func TestMain(m *testing.M) { harness.Main(m) }

// SizeEnv picks the size: "full" is issue 20's (100 workloads, 2,000
// pods), the one BENCHMARKS.md reports; anything else the make-test size
// (the same 100 workloads on fewer nodes with fewer replicas: 400 pods),
// which asserts the same properties in a fraction of the time.
const SizeEnv = "ROLLPLAN_SCALE"

// size is the shape of the test: statefulSets, deployments and daemonSets
// workloads, replicas pods each for the first two kinds, one pod per node
// for the DaemonSets.
type size struct {
	nodes, replicas                       int
	statefulSets, deployments, daemonSets int
}

func (s size) pods() int {
	return (s.statefulSets+s.deployments)*s.replicas + s.daemonSets*s.nodes
}

func (s size) workloads() int { return s.statefulSets + s.deployments + s.daemonSets }

var (
	full  = size{nodes: 20, replicas: 20, statefulSets: 40, deployments: 30, daemonSets: 30}
	small = size{nodes: 4, replicas: 4, statefulSets: 40, deployments: 30, daemonSets: 30}
)

// budget is every workload's maxUnavailable, native and rollplan's alike.
const budget = "25%"

const (
	ns      = "scale"
	leaseNS = "rollplan-scale"
)

func image(v int) string { return fmt.Sprintf("example.com/app:v%d", v) }

// figures are one phase's measurements.
type figures struct {
	wall          time.Duration
	requests      map[string]float64 // by method, and "total"
	kcmRequests   map[string]float64
	kcmCPU        time.Duration
	controllerCPU time.Duration
	worst         int
}

func TestControllerAtScale(t *testing.T) {
	if _, err := controlplane.VersionDir(kubeversion.Newest.String()); err != nil {
		t.Skip(err)
	}
	sz := small
	if os.Getenv(SizeEnv) == "full" {
		sz = full
	}
	// The controller's flags at their defaults unless these say otherwise.
	workers, qps := envInt(t, "ROLLPLAN_SCALE_WORKERS", 10), envInt(t, "ROLLPLAN_SCALE_QPS", 50)
	t.Logf("size: %d workloads (%d StatefulSets and %d Deployments of %d pods, %d DaemonSets on %d nodes): %d pods; --concurrent-rollouts %d --kube-api-qps %d",
		sz.workloads(), sz.statefulSets, sz.deployments, sz.replicas, sz.daemonSets, sz.nodes, sz.pods(), workers, qps)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	dir := t.TempDir()
	type build struct {
		bin string
		err error
	}
	built := make(chan build, 1)
	go func() { // while the plane starts
		bin, err := harness.BuildRollplan()
		built <- build{bin, err}
	}()

	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{Version: kubeversion.Newest.String()})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	c := cp.Client
	kcm, kcmURL, err := controllerManager(cp)
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(ctx, t, c, ns)
	createNamespace(ctx, t, c, leaseNS)
	kcmScrape, err := kcmMetrics(ctx, c, leaseNS, kcmURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kcmScrape.counter("rest_client_requests_total", "method"); err != nil {
		t.Fatalf("kube-controller-manager's request count: %v", err)
	}
	var nodes []kubelet.Node
	for i := range sz.nodes {
		nodes = append(nodes, kubelet.Node{Name: fmt.Sprintf("node-%02d", i), Zone: fmt.Sprintf("zone-%d", i%3)})
	}
	kl := kubelet.New(c, kubelet.Options{Nodes: nodes, Namespace: ns,
		Default: kubelet.Behavior{StartDelay: 200 * time.Millisecond, ReadyDelay: 300 * time.Millisecond, TerminationDelay: 100 * time.Millisecond}})
	if err := kl.Run(ctx); err != nil {
		t.Fatal(err)
	}

	// The workloads, with the native strategies: StatefulSets and
	// DaemonSets RollingUpdate, Deployments RollingUpdate without surge,
	// every one maxUnavailable 25%.
	ws := createWorkloads(ctx, t, c, sz)
	tr := newTracker(ctx, t, c, ns, ws)
	waitRolled(ctx, t, tr, image(1), len(ws), "created", 10*time.Minute)
	t.Logf("control plane up and %d pods available in %s", sz.pods(), time.Since(start).Round(time.Second))

	// Native: the controllers of kube-controller-manager roll v1 → v2.
	native := measure(ctx, t, c, tr, ws, kcm, kcmScrape, nil, proc{}, image(2))
	if worst, over := tr.over(); len(over) > 0 {
		// Not rollplan's to assert; logged, as it says the tracker works.
		t.Logf("native: most pods unavailable at once %d; over budget: %s", worst, strings.Join(over, "\n"))
	}

	// The same objects made managed: OnDelete, annotated; the controller
	// holds the Deployments (spec.paused) and reports every rollout
	// Complete before the template changes.
	manage(ctx, t, c, ws)
	b := <-built
	if b.err != nil {
		t.Fatal(b.err)
	}
	bin := b.bin
	metricsAddr := harness.FreeAddr(t)
	logPath := filepath.Join(dir, "controller.log")
	cmd, stop := startController(t, bin, cp, []string{
		"--leader-elect", "--leader-elect-resource-namespace", leaseNS,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", harness.FreeAddr(t),
		"--concurrent-rollouts", strconv.Itoa(workers),
		"--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(2 * qps),
	}, logPath)
	ctrl := proc{cmd.Process.Pid}
	scrape := metrics{url: "http://" + metricsAddr + "/metrics", client: http.DefaultClient}
	defer func() {
		if t.Failed() {
			t.Logf("controller log (tail):\n%s", tail(logPath, 40))
		}
	}()
	held := time.Now()
	waitStates(ctx, t, c, ws, 5*time.Minute)
	t.Logf("controller: every workload Complete (Deployments held) %s after its start", time.Since(held).Round(100*time.Millisecond))

	before := tr.uids()
	roll := measure(ctx, t, c, tr, ws, kcm, kcmScrape, &scrape, ctrl, image(3))
	waitStates(ctx, t, c, ws, time.Minute)
	peak, err := ctrl.memory("VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	rss, _ := ctrl.memory("VmRSS")
	total, err := ctrl.cpu()
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := scrape.counter("rollplan_controller_step_errors_total", "")
	if err := stop(); err != nil {
		t.Errorf("rollplan controller: %v\n%s", err, tail(logPath, 40))
	}

	// Every rollout within its budget, every pod updated in place.
	worst, over := tr.over()
	for _, o := range over {
		t.Errorf("rollplan: %s", o)
	}
	if worst == 0 {
		t.Errorf("rollplan: the tracker never saw a pod unavailable: it did not observe the rollout")
	}
	after := tr.uids()
	kept := 0
	for uid := range after {
		if before[uid] != "" {
			kept++
		}
	}
	if kept != sz.pods() {
		t.Errorf("rollplan: %d of %d pods kept their UID (updated in place); want all", kept, sz.pods())
	}

	pods := float64(sz.pods())
	t.Logf("RESULTS (%d workloads, %d pods, --concurrent-rollouts %d --kube-api-qps %d)", sz.workloads(), sz.pods(), workers, qps)
	t.Logf("native (kube-controller-manager, RollingUpdate): rolled all in %s; kcm requests %.0f (%.2f/pod) %s; kcm CPU %s; most unavailable %d",
		native.wall.Round(100*time.Millisecond), native.kcmRequests["total"], native.kcmRequests["total"]/pods, byMethod(native.kcmRequests), native.kcmCPU.Round(10*time.Millisecond), native.worst)
	t.Logf("rollplan controller: rolled all in %s; its requests %.0f (%.2f/pod) %s; its CPU %s in the roll, %s since start; peak RSS %.1f MiB (now %.1f MiB); step errors %.0f; most unavailable %d; %d/%d pods in place",
		roll.wall.Round(100*time.Millisecond), roll.requests["total"], roll.requests["total"]/pods, byMethod(roll.requests), roll.controllerCPU.Round(10*time.Millisecond), total.Round(10*time.Millisecond),
		float64(peak)/(1<<20), float64(rss)/(1<<20), errs["total"], worst, kept, sz.pods())
	t.Logf("  kube-controller-manager meanwhile: %.0f requests (%.2f/pod) %s; kcm CPU %s",
		roll.kcmRequests["total"], roll.kcmRequests["total"]/pods, byMethod(roll.kcmRequests), roll.kcmCPU.Round(10*time.Millisecond))
}

// envInt reads a positive number from the environment variable name, or
// returns def when it is unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func byMethod(m map[string]float64) string {
	var keys []string
	for k := range m {
		if k != "total" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func createWorkloads(ctx context.Context, t *testing.T, c kubernetes.Interface, sz size) []*workload {
	t.Helper()
	var ws []*workload
	// 25% of the desired pods, rounded down as the native controllers
	// round maxUnavailable (at least 1).
	quarter := func(n int) int { return max(1, n/4) }
	for i := range sz.statefulSets {
		name := fmt.Sprintf("sts-%02d", i)
		s := testobj.StatefulSet(ns, name).Replicas(int32(sz.replicas)).ServiceName(name).
			PodManagement(appsv1.ParallelPodManagement).MaxUnavailable(budget).Image(image(1)).Obj()
		if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create StatefulSet %s: %v", name, err)
		}
		ws = append(ws, &workload{kind: "StatefulSet", name: name, desired: sz.replicas, budget: quarter(sz.replicas)})
	}
	for i := range sz.deployments {
		name := fmt.Sprintf("deploy-%02d", i)
		d := testobj.Deployment(ns, name).Replicas(int32(sz.replicas)).RollingUpdate("0", budget).Image(image(1)).Obj()
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Deployment %s: %v", name, err)
		}
		ws = append(ws, &workload{kind: "Deployment", name: name, desired: sz.replicas, budget: quarter(sz.replicas)})
	}
	for i := range sz.daemonSets {
		name := fmt.Sprintf("ds-%02d", i)
		d := testobj.DaemonSet(ns, name).RollingUpdate("0", budget).Image(image(1)).Obj()
		if _, err := c.AppsV1().DaemonSets(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create DaemonSet %s: %v", name, err)
		}
		ws = append(ws, &workload{kind: "DaemonSet", name: name, desired: sz.nodes, budget: quarter(sz.nodes)})
	}
	return ws
}

// each runs f on every workload, 10 at a time.
func each(ws []*workload, f func(*workload) error) error {
	var mu sync.Mutex
	var errs []string
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(w); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s %s: %v", w.kind, w.name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// patch patches the workload and records the generation it gave it.
func patch(ctx context.Context, c kubernetes.Interface, w *workload, pt types.PatchType, body []byte) error {
	var m metav1.Object
	var err error
	switch w.kind {
	case "StatefulSet":
		m, err = c.AppsV1().StatefulSets(ns).Patch(ctx, w.name, pt, body, metav1.PatchOptions{})
	case "Deployment":
		m, err = c.AppsV1().Deployments(ns).Patch(ctx, w.name, pt, body, metav1.PatchOptions{})
	case "DaemonSet":
		m, err = c.AppsV1().DaemonSets(ns).Patch(ctx, w.name, pt, body, metav1.PatchOptions{})
	}
	if err == nil {
		w.patched = m.GetGeneration()
	}
	return err
}

// setImage changes every workload's template at once (one patch each).
func setImage(ctx context.Context, c kubernetes.Interface, ws []*workload, img string) error {
	body := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, img)
	return each(ws, func(w *workload) error { return patch(ctx, c, w, types.StrategicMergePatchType, body) })
}

// manage makes every workload one rollplan drives: annotated managed, in
// place if possible, maxUnavailable 25% (the Deployments keep theirs in
// their strategy); the StatefulSets and DaemonSets OnDelete.
func manage(ctx context.Context, t *testing.T, c kubernetes.Interface, ws []*workload) {
	t.Helper()
	ann := map[string]string{facts.AnnManaged: "true", facts.AnnPodUpdatePolicy: "InPlaceIfPossible"}
	err := each(ws, func(w *workload) error {
		p := map[string]any{}
		if w.kind == "Deployment" {
			p["metadata"] = map[string]any{"annotations": ann}
		} else {
			a := map[string]string{facts.AnnMaxUnavailable: budget}
			for k, v := range ann {
				a[k] = v
			}
			p["metadata"] = map[string]any{"annotations": a}
			p["spec"] = map[string]any{"updateStrategy": map[string]any{"type": "OnDelete", "rollingUpdate": nil}}
		}
		body, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return patch(ctx, c, w, types.MergePatchType, body)
	})
	if err != nil {
		t.Fatalf("make the workloads managed: %v", err)
	}
}

// measure changes every template to img and waits until every workload has
// rolled: its CPU time and requests counted from just before the change to
// the moment the last pod is available (ctrl and scrape: the rollplan
// controller, when it is the one rolling).
func measure(ctx context.Context, t *testing.T, c kubernetes.Interface, tr *tracker, ws []*workload, kcm proc, kcmScrape metrics, scrape *metrics, ctrl proc, img string) figures {
	t.Helper()
	var f figures
	kcmReq0, err := kcmScrape.counter("rest_client_requests_total", "method")
	if err != nil {
		t.Fatal(err)
	}
	kcmCPU0, err := kcm.cpu()
	if err != nil {
		t.Fatal(err)
	}
	var req0 map[string]float64
	var cpu0 time.Duration
	if scrape != nil {
		if req0, err = scrape.counter("rollplan_controller_api_requests_total", "method"); err != nil {
			t.Fatal(err)
		}
		if cpu0, err = ctrl.cpu(); err != nil {
			t.Fatal(err)
		}
	}
	tr.arm()
	start := time.Now()
	if err := setImage(ctx, c, ws, img); err != nil {
		t.Fatalf("set image %s: %v", img, err)
	}
	waitRolled(ctx, t, tr, img, len(ws), "rolled to "+img, 15*time.Minute)
	f.wall = time.Since(start)
	f.worst, _ = tr.over()
	kcmReq1, err := kcmScrape.counter("rest_client_requests_total", "method")
	if err != nil {
		t.Fatal(err)
	}
	kcmCPU1, err := kcm.cpu()
	if err != nil {
		t.Fatal(err)
	}
	f.kcmRequests, f.kcmCPU = diff(kcmReq1, kcmReq0), kcmCPU1-kcmCPU0
	if scrape != nil {
		req1, err := scrape.counter("rollplan_controller_api_requests_total", "method")
		if err != nil {
			t.Fatal(err)
		}
		cpu1, err := ctrl.cpu()
		if err != nil {
			t.Fatal(err)
		}
		f.requests, f.controllerCPU = diff(req1, req0), cpu1-cpu0
	}
	return f
}

func diff(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// waitRolled polls the tracker until every workload has rolled to img.
func waitRolled(ctx context.Context, t *testing.T, tr *tracker, img string, want int, what string, timeout time.Duration) {
	t.Helper()
	var behind []string
	last := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var done int
		done, behind = tr.rolled(img)
		if time.Since(last) > 30*time.Second {
			last = time.Now()
			t.Logf("%s: %d of %d workloads so far", what, done, want)
		}
		return done == want, nil
	})
	if err != nil {
		if len(behind) > 10 {
			behind = append(behind[:10], fmt.Sprintf("and %d more", len(behind)-10))
		}
		t.Fatalf("workloads not %s within %s: %v\n%s", what, timeout, err, strings.Join(behind, "\n"))
	}
}

// waitStates waits until the controller's rollout state on every workload
// says Complete for the generation the test's last patch gave it or a
// later one (and every Deployment is held: spec.paused).
func waitStates(ctx context.Context, t *testing.T, c kubernetes.Interface, ws []*workload, timeout time.Duration) {
	t.Helper()
	var behind []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		states := map[string]string{}
		gens := map[string]int64{}
		add := func(m metav1.Object) {
			states[m.GetName()], gens[m.GetName()] = m.GetAnnotations()[facts.AnnRolloutState], m.GetGeneration()
		}
		sts, err := c.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range sts.Items {
			add(&sts.Items[i])
		}
		deps, err := c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range deps.Items {
			add(&deps.Items[i])
			if !deps.Items[i].Spec.Paused {
				states[deps.Items[i].Name] = "" // not held yet
			}
		}
		dss, err := c.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range dss.Items {
			add(&dss.Items[i])
		}
		behind = behind[:0]
		for _, w := range ws {
			// The state of a Deployment records the generation before
			// its own writes moved it (they do: annotations are part of a
			// Deployment's generation); the others' the current one.
			st, err := live.ParseRolloutState(states[w.name])
			if err != nil || st == nil || st.Phase != live.RolloutComplete || st.Generation < w.patched || (w.kind != "Deployment" && st.Generation != gens[w.name]) {
				behind = append(behind, fmt.Sprintf("%s %s: %q (generation %d)", w.kind, w.name, states[w.name], gens[w.name]))
			}
		}
		return len(behind) == 0, nil
	})
	if err != nil {
		if len(behind) > 10 {
			behind = append(behind[:10], fmt.Sprintf("and %d more", len(behind)-10))
		}
		t.Fatalf("rollout states not all Complete within %s: %v\n%s", timeout, err, strings.Join(behind, "\n"))
	}
}
