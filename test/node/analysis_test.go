package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/node"
	"github.com/rollplan/rollplan/test/podwatch"
	"github.com/rollplan/rollplan/test/prometheus"
)

// examplePolicy is policies/examples/analysis-error-rate's Rego with its
// times cut to seconds (soak 4s, two measurements 2s apart over 10s), its
// queries and limits as they are: what the test proves is the example
// against testapp's real metrics.
func examplePolicy(dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "policies/examples/analysis-error-rate/policy.rego"))
	if err != nil {
		return "", err
	}
	s := string(b)
	for _, r := range []struct {
		old, new string
		n        int
	}{
		{`"soak": "2m"`, `"soak": "4s"`, 1},
		{`"interval": "30s"`, `"interval": "2s"`, 2},
		{`"count": 3`, `"count": 2`, 2},
		{`"window": "1m"`, `"window": "10s"`, 2},
	} {
		if got := strings.Count(s, r.old); got != r.n {
			return "", fmt.Errorf("analysis-error-rate/policy.rego: %d of %s, want %d: update the test's edit", got, r.old, r.n)
		}
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	out := filepath.Join(dir, "policy")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return out, os.WriteFile(filepath.Join(out, "policy.rego"), []byte(s), 0o644)
}

// repoRoot is the folder of rollplan's go.mod: `go test` runs in
// test/node.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Abs(filepath.Join(wd, "..", ".."))
}

// traffic GETs / of each pod of a workload four times a second, from the
// host as a client would, and keeps Prometheus's targets on the same pods
// (their IPs, with namespace and pod labels as a Kubernetes service
// discovery gives them).
type traffic struct {
	ok, failed, refused atomic.Int64
	stop                func()
}

func (c *cluster) startTraffic(prom *prometheus.Server, ns string, w workload) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Second}
	wg.Go(func() {
		var ips []string
		var last string
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if n%4 == 0 {
				list, err := c.cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: w.selector()})
				if err == nil {
					var targets []prometheus.Target
					ips = ips[:0]
					for _, p := range list.Items {
						if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
							continue
						}
						addr := net.JoinHostPort(p.Status.PodIP, "8080")
						ips = append(ips, addr)
						targets = append(targets, prometheus.Target{Addr: addr, Labels: map[string]string{"namespace": ns, "pod": p.Name}})
					}
					if key := fmt.Sprint(targets); key != last {
						if err := prom.SetTargets("pods", targets); err != nil {
							c.t.Errorf("prometheus targets: %v", err)
						}
						last = key
					}
				}
			}
			for _, addr := range ips {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
				resp, err := client.Do(req)
				switch {
				case err != nil:
					tr.refused.Add(1) // the container restarting in place
				case resp.StatusCode == http.StatusOK:
					tr.ok.Add(1)
				default:
					tr.failed.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	tr.stop = func() { cancel(); wg.Wait() }
	return tr
}

// controllerLog is the controller pods' logs, one JSON object a line.
func (c *cluster) controllerLog() []map[string]any {
	ctx := c.t.Context()
	var out []map[string]any
	for _, p := range c.pods(node.SystemNamespace, system("rollplan-controller")) {
		s, err := c.n.ContainerOutput(ctx, p.Namespace, p.Name, "controller")
		if err != nil {
			c.t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				m["pod"] = p.Name
				out = append(out, m)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b map[string]any) int { return strings.Compare(fmt.Sprint(a["time"]), fmt.Sprint(b["time"])) })
	return out
}

// analysisGates: the installed controller started without the optional
// ConfigMap rollplan-analysis and said so; rollplan is then installed
// again as an operator adds analysis (rollplan manifests --policy
// analysis-error-rate --analysis-config FILE), pointing at a real
// Prometheus on the host's bridge address that scrapes the testapp pods'
// /metrics while the test sends them traffic. A StatefulSet rolls to a
// good version wave by wave, each gate soaked and passed in the
// controller's log; then to the errors tag (Ready, half its requests 500):
// the first wave's gate fails naming the query and value, and the
// controller rolls the template back and the pod back in place, never
// more than the budget unavailable.
func (c *cluster) analysisGates() {
	t, ctx := c.t, c.t.Context()
	said := false
	for _, l := range c.controllerLog() {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "no analysis config") && !said {
			t.Logf("before: %s logged %q (file %v)", l["pod"], msg, l["file"])
			said = true
		}
	}
	if !said {
		t.Errorf("the controller, installed without the ConfigMap %s, never logged \"no analysis config\"", deploy.AnalysisConfigMapName)
	}

	w := workload{kind: "StatefulSet", name: "gated", replicas: 3, budget: 1}
	c.create(appsNS, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: appsNS, Annotations: inPlace(w.budget)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(w.replicas)), ServiceName: w.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}},
			Template:       node.TestappTemplate(w.name, c.n.Image("testapp:1.0")),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}, w)

	host, err := c.n.HostIP()
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.Start(t, prometheus.Config{Discovered: []string{"pods"}, Host: host})
	tr := c.startTraffic(prom, appsNS, w)
	defer tr.stop()
	sel := fmt.Sprintf(`{namespace=%q,pod=~"%s-.*"}`, appsNS, w.name)
	if _, err := prom.Wait(fmt.Sprintf(`count(rate(http_requests_total%s[10s]) > 0) == %d`, strings.Replace(sel, "}", `,code="200"}`, 1), w.replicas), 30*time.Second); err != nil {
		t.Fatalf("Prometheus at %s never saw traffic on the %d pods: %v", prom.URL, w.replicas, err)
	}

	dir := t.TempDir()
	policy, err := examplePolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "analysis.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "providers:\n  prometheus:\n    address: %s\n    timeout: 5s\n", prom.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.n.Install(ctx, c.rollplan, c.n.Image("rollplan:v2"), "--policy", policy, "--analysis-config", cfg); err != nil {
		t.Fatal(err)
	}
	// Install waits for the rollout; the old pods may still be going.
	c.waitPods(node.SystemNamespace, system("rollplan-controller"), "all with the analysis config", 2*time.Minute, func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Annotations[deploy.AnalysisChecksumAnnotation] == "" {
				return false
			}
		}
		return len(pods) == 2 && all(pods, ready)
	})
	t.Logf("installed again with policy analysis-error-rate and --analysis-config (Prometheus %s) in %v", prom.URL, time.Since(began).Round(time.Millisecond))
	for _, l := range c.controllerLog() {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "no analysis config") {
			t.Errorf("%s, with the ConfigMap mounted, logged %q", l["pod"], msg)
		}
	}

	// Good: every wave but the last soaks and passes its gate.
	queries := prom.InstantQueries(c.t)
	since := time.Now()
	r := c.roll(w, c.n.Image("testapp:2.0"), "2.0")
	c.checkInPlace(w, r, 1)
	gates, values := harness.GateLog(c.controllerLog(), w.name, since)
	if got := strings.Join(slices.Compact(gates), " "); got != "soak:1 pass:1 soak:2 pass:2" {
		t.Errorf("good: the controller's gates %v, want a soak and a pass for waves 1 and 2", gates)
	}
	good := prom.InstantQueries(c.t) - queries
	t.Logf("good (testapp:2.0): rolled in %v through 2 gates %v; measured %v; Prometheus served %d queries (%.1f per gated wave)",
		r.took.Round(time.Millisecond), gates, values, good, float64(good)/2)

	// Errors: the first wave fails and is rolled back in place.
	rec, err := podwatch.Start(ctx, c.cp.Client, appsNS, w.selector())
	if err != nil {
		t.Fatal(err)
	}
	before := c.pods(appsNS, w)
	queries, since = prom.InstantQueries(c.t), time.Now()
	bad := c.n.Image("testapp:errors")
	c.setImage(appsNS, w, bad)
	c.waitState(w.name, "rolled back and Complete", 2*time.Minute, func(st *live.RolloutState) bool {
		s, err := c.cp.Client.AppsV1().StatefulSets(appsNS).Get(ctx, w.name, metav1.GetOptions{})
		return err == nil && s.Spec.Template.Spec.Containers[0].Image == c.n.Image("testapp:2.0") && st.Phase == live.RolloutComplete && st.Generation == s.Generation
	})
	after := c.waitPods(appsNS, w, "all Ready on testapp:2.0 after the rollback", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == w.replicas && all(pods, c.runs("2.0"))
	})
	c.caughtUp(rec.Recording, after)
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	served := prom.InstantQueries(c.t) - queries
	log := c.controllerLog()
	gates, values = harness.GateLog(log, w.name, since)
	if len(gates) < 2 || gates[0] != "soak:1" || !slices.Contains(gates, "fail:1") || slices.ContainsFunc(gates, func(g string) bool { return strings.HasPrefix(g, "pass") || strings.HasSuffix(g, ":2") }) {
		t.Errorf("errors: the controller's gates %v, want wave 1 soaked and failed, no pass, no wave 2", gates)
	}
	var failedAt, rolledBackAt, completeAt time.Time
	var verdict string
	for _, l := range log {
		wl, _ := l["workload"].(string)
		if !strings.HasSuffix(wl, "/"+w.name) || harness.LogTime(l).Before(since) {
			continue
		}
		state, _ := l["state"].(string)
		switch {
		case failedAt.IsZero() && l["msg"] == "analysis" && l["verdict"] == "fail":
			failedAt, verdict = harness.LogTime(l), fmt.Sprint(l["message"])
		case !failedAt.IsZero() && rolledBackAt.IsZero() && l["msg"] == "rollback":
			rolledBackAt = harness.LogTime(l)
		case !failedAt.IsZero() && completeAt.IsZero() && l["msg"] == "rollout" && strings.HasPrefix(state, "Complete"):
			completeAt = harness.LogTime(l)
		}
	}
	if failedAt.IsZero() || rolledBackAt.IsZero() || completeAt.IsZero() {
		t.Fatalf("errors: in the controller's log, failing verdict at %v, rollback at %v, Complete at %v: want all three", failedAt, rolledBackAt, completeAt)
	}
	query := fmt.Sprintf(`sum(rate(http_requests_total{namespace="%s",pod=~"%s-2",code=~"5.."}[10s]))`, appsNS, w.name)
	if !strings.Contains(verdict, "error-rate = ") || !strings.Contains(verdict, "above 0.01 (query "+query) {
		t.Errorf("errors: verdict %q, want the error rate's value and its query over the first wave's pod (%s)", verdict, query)
	}
	var ranBad []string
	for _, p := range before {
		pod, _ := rec.Pod(p.Name)
		for _, s := range pod.Steps() {
			if ct, ok := s.Container("app"); ok && ct.SpecImage == bad {
				ranBad = append(ranBad, p.Name)
				break
			}
		}
	}
	if want := []string{w.name + "-2"}; !slices.Equal(ranBad, want) {
		t.Errorf("errors: pods that were given testapp:errors: %v, want %v (the first wave) only", ranBad, want)
	}
	names := make([]string, 0, len(before))
	for i, p := range after {
		names = append(names, p.Name)
		if p.UID != before[i].UID || !rec.UIDKept(p.Name) {
			t.Errorf("errors: pod %s: UID %s after the rollback, %s before: not in place", p.Name, p.UID, before[i].UID)
		}
	}
	if u := rec.MaxUnready(names...); u.Count > w.budget {
		t.Errorf("errors: %d pods unready at once (%v), budget %d", u.Count, u.Pods, w.budget)
	}
	if d, err := rec.RestartDelta(w.name+"-2", "app"); err != nil || d != 2 {
		t.Errorf("errors: pod %s-2 restarted %d times (%v), want twice (to testapp:errors and back)", w.name, d, err)
	}
	events, err := c.cp.Client.CoreV1().Events(appsNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + w.name + ",reason=AnalysisFailed,type=Warning"})
	if err != nil || len(events.Items) != 1 {
		t.Errorf("errors: Warning Events AnalysisFailed: %v (%v), want 1", events, err)
	}
	tr.stop()
	t.Logf("errors (testapp:errors): gates %v; measured %v; verdict %q", gates, values, verdict)
	t.Logf("errors: from the failing verdict to the rollback's completion %v (the template rolled back %v after the verdict; controller log times); Prometheus served %d queries for 1 gated wave",
		completeAt.Sub(failedAt).Round(10*time.Millisecond), rolledBackAt.Sub(failedAt).Round(10*time.Millisecond), served)
	t.Logf("traffic from the host: %d answered 200, %d answered 500, %d refused (containers restarting)", tr.ok.Load(), tr.failed.Load(), tr.refused.Load())
	if tr.failed.Load() == 0 {
		t.Error("no request answered 500: testapp:errors served none of the traffic")
	}
}
