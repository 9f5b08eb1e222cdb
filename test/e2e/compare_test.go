package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// compare turns on TestNativeVersusRollplan50, a benchmark of a couple of
// minutes kept out of `make test`.
var compare = flag.Bool("e2e.compare", false, "run TestNativeVersusRollplan50 (native StatefulSet controller against rollplan apply, 50 pods)")

// Kubelet behaviour of the comparison: a short but not free start. The
// test kubelet writes timestamps truncated to the second (as the API
// does) and counts the delays from them, so a new pod's StartDelay and
// ReadyDelay are shortened by up to a second, while an in-place restart
// waits its StartDelay in full: delays under a second make the recreated
// pods of the native path nearly free. The default of 1s keeps both paths
// paying for a start.
var (
	cmpStart     = flag.Duration("e2e.compare.start", time.Second, "TestNativeVersusRollplan50: the kubelet's StartDelay")
	cmpReady     = flag.Duration("e2e.compare.ready", time.Second, "TestNativeVersusRollplan50: the kubelet's ReadyDelay")
	cmpTerminate = 200 * time.Millisecond
)

// writeCounter counts the write requests (POST, PUT, PATCH, DELETE) a
// client sends, wrapping its rest.Config's transport.
type writeCounter struct {
	mu    sync.Mutex
	byKey map[string]int // "VERB path-shape"
	total int
	reads int
}

func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			c.total++
			c.byKey[r.Method+" "+resourceOf(r.URL.Path)]++
		default:
			c.reads++
		}
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *writeCounter) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d writes %v, %d reads", c.total, c.byKey, c.reads)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf shortens /api/v1/namespaces/NS/pods/NAME/eviction to
// pods/eviction.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return path
}

// apiserverWrites reads apiserver_request_total from the apiserver's
// /metrics and sums the write verbs, in total and by resource.
func apiserverWrites(ctx context.Context, t *testing.T, client kubernetes.Interface) (int, map[string]int) {
	t.Helper()
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	total, by := 0, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int(v)
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		by[key] += int(v)
	}
	return total, by
}

func diffCounts(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// cmpResult is one row of the comparison.
type cmpResult struct {
	method       string
	wall         time.Duration // template change to the status complete
	runDone      time.Duration // rollplan: template change to Run returning done
	apiWrites    int
	apiByKind    map[string]int
	ownWrites    int // writes by rollplan's own client
	ownDetail    string
	recreated    int
	inPlace      int
	worstUnavail int
}

// waitComplete waits until the StatefulSet's status reports the rollout
// complete: every replica updated and ready, currentRevision ==
// updateRevision, the spec observed.
func (e *env) waitComplete(name string, replicas int32, timeout time.Duration) *appsv1.StatefulSet {
	e.t.Helper()
	var set *appsv1.StatefulSet
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		set = s
		st := s.Status
		return st.ObservedGeneration == s.Generation && st.Replicas == replicas && st.UpdatedReplicas == replicas &&
			st.ReadyReplicas == replicas && st.CurrentRevision == st.UpdateRevision, nil
	})
	if err != nil {
		e.t.Fatalf("StatefulSet %s did not complete its rollout: %v (status %+v)", name, err, set.Status)
	}
	return set
}

// rollout50 creates a 50-pod StatefulSet (native: RollingUpdate, not
// managed; otherwise managed OnDelete with maxUnavailable), waits for it,
// changes the image v1 → v2 and measures until the rollout is complete.
func rollout50(t *testing.T, native bool, maxUnavailable string) cmpResult {
	const name, replicas = "cmp", 50
	e := newEnv(t, 5)
	// Both images: a short but not free start.
	e.kubelet.SetImage("example.com/app:v2", kubelet.Behavior{StartDelay: *cmpStart, ReadyDelay: *cmpReady, TerminationDelay: cmpTerminate})
	e.kubelet.SetImage("example.com/app:v1", kubelet.Behavior{StartDelay: *cmpStart, ReadyDelay: *cmpReady, TerminationDelay: cmpTerminate})
	set := statefulSet(e.ns, name, replicas, maxUnavailable)
	res := cmpResult{method: "rollplan apply, max-unavailable " + maxUnavailable}
	if native {
		res.method = "native RollingUpdate"
		set.Annotations = nil
		set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	}
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	before := uids(e.pods("app=" + name))
	w := e.watch("app="+name, replicas)

	// rollplan's client, counted as the CLI builds it (QPS 20, burst 50).
	own := &writeCounter{byKey: map[string]int{}}
	var x *executor.Executor
	var log bytes.Buffer
	if !native {
		cfg := rest.CopyConfig(harness.Cluster(t).Config)
		cfg.QPS, cfg.Burst = 20, 50
		cfg.WrapTransport = own.wrap
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := rego.Load(e.ctx, nil, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		x, err = executor.New(client, executor.Options{
			Target: live.Target{Namespace: e.ns, Kind: "StatefulSet", Name: name},
			Engine: eng, Poll: 200 * time.Millisecond, MaxPoll: time.Second, PlanOptions: upstreamOptions(),
			Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	apiBefore, byBefore := apiserverWrites(e.ctx, t, e.client)
	start := time.Now()
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	if !native {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
		sum, err := x.Run(ctx, false)
		cancel()
		if err != nil {
			var h *executor.HaltedError
			if errors.As(err, &h) {
				t.Fatalf("halted: %v\n%s", h.Reasons, log.String())
			}
			t.Fatalf("run: %v\n%s", err, log.String())
		}
		if sum.Last == nil || !sum.Last.Done {
			t.Fatalf("Run returned without done: %+v\n%s", sum, log.String())
		}
		res.runDone = time.Since(start)
		t.Logf("executor: %d steps, actions %v", sum.Steps, sum.Actions)
	}
	set = e.waitComplete(name, replicas, 3*time.Minute)
	res.wall = time.Since(start)
	apiAfter, byAfter := apiserverWrites(e.ctx, t, e.client)
	res.apiWrites = apiAfter - apiBefore
	res.apiByKind = diffCounts(byAfter, byBefore)
	res.ownWrites = own.total
	res.ownDetail = own.summary()

	pods := e.pods("app=" + name)
	if len(pods) != replicas {
		t.Fatalf("%d pods after the rollout, want %d", len(pods), replicas)
	}
	for _, p := range pods {
		if before[p.Name] == p.UID {
			res.inPlace++
		} else {
			res.recreated++
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].Image != "example.com/app:v2" {
			t.Errorf("pod %s: status %+v, want v2 running", p.Name, cs)
		}
	}
	w.mu.Lock()
	res.worstUnavail = w.worst
	w.mu.Unlock()
	budget := 1
	if !native {
		budget, _ = strconv.Atoi(maxUnavailable)
	}
	w.result(t, budget)
	t.Logf("%s: status %+v", res.method, set.Status)
	return res
}

// TestNativeVersusRollplan50 (issue 5, item 9): on one control plane, a
// 50-replica StatefulSet rolled v1 → v2 by the native controller
// (RollingUpdate, pods recreated one at a time) and by rollplan apply
// (OnDelete, managed, InPlaceIfPossible, max-unavailable 1 and 5). Wall
// time from the template change to the rollout complete, API writes (the
// apiserver's count, all clients; and rollplan's own client), pods
// recreated versus updated in place. Runs only with -e2e.compare.
func TestNativeVersusRollplan50(t *testing.T) {
	if !*compare {
		t.Skip("benchmark: run with -e2e.compare")
	}
	cp := harness.Cluster(t)
	// Background writes of an idle control plane (leases, events of
	// other tests), to read the apiserver's counts against.
	idle0, _ := apiserverWrites(context.Background(), t, cp.Client)
	time.Sleep(10 * time.Second)
	idle1, _ := apiserverWrites(context.Background(), t, cp.Client)
	idleRate := float64(idle1-idle0) / 10

	var rows []cmpResult
	for _, c := range []struct {
		name   string
		native bool
		mu     string
	}{{"native", true, ""}, {"rollplan-mu1", false, "1"}, {"rollplan-mu5", false, "5"}} {
		t.Run(c.name, func(t *testing.T) { rows = append(rows, rollout50(t, c.native, c.mu)) })
	}
	if len(rows) != 3 {
		t.Fatalf("%d of 3 rollouts measured", len(rows))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "50-pod StatefulSet, image v1 -> v2; kubelet start %v, ready %v, termination %v; idle apiserver writes %.1f/s\n", *cmpStart, *cmpReady, cmpTerminate, idleRate)
	fmt.Fprintf(&b, "%-32s %10s %10s %12s %14s %10s %9s %11s\n", "method", "wall", "run done", "api writes", "rollplan writes", "recreated", "in place", "max unavail")
	for _, r := range rows {
		run := "-"
		if r.runDone > 0 {
			run = r.runDone.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-32s %10s %10s %12d %14d %10d %9d %11d\n", r.method, r.wall.Round(10*time.Millisecond), run, r.apiWrites, r.ownWrites, r.recreated, r.inPlace, r.worstUnavail)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "%s: apiserver writes by resource: %s\n", r.method, formatCounts(r.apiByKind))
		if r.ownWrites > 0 {
			fmt.Fprintf(&b, "%s: rollplan client: %s\n", r.method, r.ownDetail)
		}
	}
	t.Log("\n" + b.String())

	if rows[0].recreated != 50 || rows[0].inPlace != 0 {
		t.Errorf("native: %d recreated, %d in place; want all 50 recreated", rows[0].recreated, rows[0].inPlace)
	}
	for _, r := range rows[1:] {
		if r.inPlace != 50 || r.recreated != 0 {
			t.Errorf("%s: %d recreated, %d in place; want all 50 in place", r.method, r.recreated, r.inPlace)
		}
		if r.ownWrites == 0 {
			t.Errorf("%s: rollplan's client counted no write", r.method)
		}
	}
}
