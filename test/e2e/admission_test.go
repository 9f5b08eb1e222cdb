package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// admission is rollplan gate for one test: two gate replicas (each with
// its own informer cache, sharing the ConfigMap reservations of their own
// namespace) behind one TLS address, served by gate.Server, and the
// webhook configuration rendered from deploy/ with its clientConfig
// pointed at that address and its namespaceSelector at the test's
// namespace (the other tests keep their own).
type admission struct {
	gates     []*gate.Gate
	namespace string
	log       *harness.SyncBuffer
}

func (e *env) startGate(policies []string) *admission {
	e.t.Helper()
	eng, err := rego.Load(e.ctx, policies, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	a := &admission{namespace: e.ns + "-gate", log: &harness.SyncBuffer{}}
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.namespace}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	log := slog.New(slog.NewJSONHandler(a.log, nil))
	for replica := range 2 {
		f := informers.NewSharedInformerFactory(e.client, 0)
		src := capture.NewListerSource(f, f)
		f.Start(ctx.Done())
		if err := src.WaitForSync(ctx); err != nil {
			e.t.Fatalf("gate: %v", err)
		}
		g, err := gate.New(gate.Options{Engine: eng, Cache: src, Namespace: a.namespace,
			Store: &gate.ConfigMapStore{Client: e.client, Namespace: a.namespace}, Log: log.With("replica", replica), PlanOptions: upstreamOptions()})
		if err != nil {
			e.t.Fatal(err)
		}
		a.gates = append(a.gates, g)
	}
	var next atomic.Uint64
	roundRobin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.gates[next.Add(1)%uint64(len(a.gates))].ServeHTTP(w, r)
	})

	url, ca, done := harness.ServeGate(ctx, e.t, a.gates[0], roundRobin, log)

	vwc := harness.WebhookConfiguration(e.t, ca, url, e.ns)
	if _, err := e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, vwc, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("register the webhook: %v", err)
	}
	e.t.Cleanup(func() {
		_ = e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("gate server shut down with %v", err)
		}
		if e.t.Failed() {
			e.t.Logf("gate log:\n%s", a.log.String())
		}
	})
	e.waitGateCalled(a)
	return a
}

// waitGateCalled waits until the API server calls the webhook (it reads
// new configurations from its informer): a dry-run create of a
// StatefulSet reaches the gate.
func (e *env) waitGateCalled(a *admission) {
	e.t.Helper()
	probe := statefulSet(e.ns, "gate-probe", 0, "1")
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _ = e.client.AppsV1().StatefulSets(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return strings.Contains(a.log.String(), `"operation":"statefulsets CREATE"`), nil
	})
	if err != nil {
		e.t.Fatalf("the API server never called the gate: %v", err)
	}
}

// decisions counts the gate's decision log lines with the given decision
// and operation, per replica.
func (a *admission) decisions(decision, operation string) map[int]int {
	out := map[int]int{}
	for _, line := range strings.Split(a.log.String(), "\n") {
		var l struct {
			Operation, Decision string
			Replica             int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Decision == decision && l.Operation == operation {
			out[l.Replica]++
		}
	}
	return out
}

func evictPod(ctx context.Context, e *env, name string) error {
	return e.client.PolicyV1().Evictions(e.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})
}

// TestGateDrain: drain-style evictions of a StatefulSet's pods stop at its
// budget (2) with the gate's message, and go on as the evicted pods come
// back; availability never drops below replicas - 2.
func TestGateDrain(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate(nil)
	_, w := e.rolloutStatefulSet("db", 6, "2")
	// Replacements take 3 s to become Ready: however slowly the evictions
	// go (CI runs other suites beside this one), the third one meets a
	// full budget.
	e.kubelet.SetImage("example.com/app:v1", kubelet.Behavior{ReadyDelay: 3 * time.Second})
	pending := []string{"db-0", "db-1", "db-2", "db-3", "db-4", "db-5"}
	refusals := 0
	var firstRefusal string
	deadline := time.Now().Add(90 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		name := pending[0]
		err := evictPod(e.ctx, e, name)
		switch {
		case err == nil:
			pending = pending[1:]
		case apierrors.IsTooManyRequests(err):
			refusals++
			if firstRefusal == "" {
				firstRefusal = err.Error()
			}
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("evict %s: %v", name, err)
		}
	}
	if len(pending) > 0 {
		t.Fatalf("drain stuck with %v left after %d refusals; gate log:\n%s", pending, refusals, a.log.String())
	}
	if refusals == 0 {
		t.Errorf("six evictions in a row against max-unavailable 2 were never refused")
	}
	for _, want := range []string{"rollplan gate", "StatefulSet " + e.ns + "/db", "budget maxUnavailable allows 2"} {
		if !strings.Contains(firstRefusal, want) {
			t.Errorf("refusal %q does not say %q", firstRefusal, want)
		}
	}
	e.waitSettled("db", 6)
	w.result(t, 2)
	t.Logf("drained 6 pods with %d refusals; first: %s", refusals, firstRefusal)
}

// TestGateRacingEvictions: 50 concurrent evictions against a budget of 2,
// through two gate replicas, admit exactly 2.
func TestGateRacingEvictions(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate(nil)
	_, _ = e.rolloutStatefulSet("kv", 50, "2")
	// Replacements stay unready throughout (a minute to Ready; NeverReady
	// would also turn the running pods unready): "exactly 2" must not
	// depend on how fast 50 evictions get through on a loaded machine.
	e.kubelet.SetImage("example.com/app:v1", kubelet.Behavior{ReadyDelay: time.Minute})
	var admitted, refused atomic.Int64
	var other sync.Map
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			err := evictPod(e.ctx, e, fmt.Sprintf("kv-%d", i))
			switch {
			case err == nil:
				admitted.Add(1)
			case apierrors.IsTooManyRequests(err):
				refused.Add(1)
				// The API server passes the webhook's status through, cause and all.
				if !live.GateDenied(err) {
					other.Store(i, fmt.Errorf("refused without the gate's cause %s: %w", live.GateDenialCause, err))
				}
			default:
				other.Store(i, err)
			}
		})
	}
	wg.Wait()
	other.Range(func(k, v any) bool { t.Errorf("eviction kv-%d: %v", k, v); return true })
	if admitted.Load() != 2 {
		t.Errorf("admitted %d of 50 racing evictions against max-unavailable 2, want exactly 2 (refused %d)\ngate log:\n%s", admitted.Load(), refused.Load(), a.log.String())
	}
	// The race spanned both replicas: each answered some of the 50.
	answered := a.decisions("deny", "pods/eviction CREATE")
	for r, n := range a.decisions("allow", "pods/eviction CREATE") {
		answered[r] += n
	}
	if answered[0] == 0 || answered[1] == 0 {
		t.Errorf("evictions answered per replica: %v, want both replicas in the race", answered)
	}
}

// TestGateGuardAndWarning: a guard rule of the policy denies a workload
// update, and kubectl prints the plan warning of an allowed one.
func TestGateGuardAndWarning(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate([]string{"../../policies/examples/guard-critical"})
	set := statefulSet(e.ns, "pay", 4, "1")
	set.Labels = map[string]string{"tier": "critical"}
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled("pay", 4)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, "pay", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Annotations[facts.AnnMaxUnavailable] = "50%"
		_, err = e.client.AppsV1().StatefulSets(e.ns).Update(e.ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "tier=critical allows at most 25%") {
		t.Fatalf("max-unavailable 50%% on a tier=critical StatefulSet: %v, want the guard rule's denial", err)
	}

	cp := harness.Cluster(t)
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl: %v (run make cluster-bin)", err)
	}
	cmd := exec.CommandContext(e.ctx, kubectl, "--kubeconfig", cp.Kubeconfig, "-n", e.ns,
		"set", "image", "statefulset/pay", "app=example.com/app:v2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl set image: %v\n%s", err, out)
	}
	if want := "Warning: rollplan: will update 4 pods in 4 waves: 4 in place"; !strings.Contains(string(out), want) {
		t.Errorf("kubectl printed\n%s\nwant it to print %q", out, want)
	}
	// rollplan's own writes get the gate's warning too: pause and resume
	// print it as the gate's, not as if the plan were theirs.
	for _, verb := range []string{"pause", "resume"} {
		out := e.cli(0, verb, "statefulset/pay")
		if want := "warning: from admission webhook rollplan gate: will update 4 pods in 4 waves: 4 in place"; !strings.Contains(out, want) || strings.Contains(out, "warning: rollplan:") {
			t.Errorf("rollplan %s printed\n%s\nwant the gate's warning as the gate's: %q", verb, out, want)
		}
	}

	// The webhook's matchConditions keep updates that change neither the
	// spec nor the labels and annotations from the gate: a no-op update
	// does not reach it, the label change sent after it does. The no-op is
	// sent as its own user, so the gate's log tells it apart: counting
	// calls would not, as the API server calls the webhook again when its
	// write loses a race with the controller's status update.
	const noopUser = "rollplan-e2e-noop"
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: noopUser, Groups: []string{"system:masters"}}
	noopClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	updates := func() int { return strings.Count(a.log.String(), `"operation":"statefulsets UPDATE"`) }
	before := updates()
	update := func(client kubernetes.Interface, change func(*appsv1.StatefulSet)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := client.AppsV1().StatefulSets(e.ns).Get(e.ctx, "pay", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(s)
			_, err = client.AppsV1().StatefulSets(e.ns).Update(e.ctx, s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	update(noopClient, func(*appsv1.StatefulSet) {})
	update(e.client, func(s *appsv1.StatefulSet) { s.Labels["team"] = "payments" })
	for deadline := time.Now().Add(5 * time.Second); updates() == before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the label change never reached the gate\n%s", a.log.String())
		}
	}
	if strings.Contains(a.log.String(), `"user":"`+noopUser+`"`) {
		t.Errorf("the no-op update reached the gate; the webhook's matchConditions should keep it out\n%s", a.log.String())
	}
}

// TestGateWithExecutor: rollplan apply and the gate, same policy, same
// budgets: the executor's in-place updates all pass the gate, it never
// meets a denial, and the budget holds.
func TestGateWithExecutor(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate(nil)
	before, w := e.rolloutStatefulSet("web", 10, "2")
	e.kubelet.SetImage("example.com/app:v2", kubelet.Behavior{ReadyDelay: 300 * time.Millisecond})
	e.setTemplate("web", func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
	var log bytes.Buffer
	run(t, e.newExecutor("web", &log, false), e.ctx, &log)
	if d := a.decisions("deny", "pods UPDATE"); len(d) > 0 {
		t.Errorf("the gate denied the executor's updates: %v\n%s", d, a.log.String())
	}
	if strings.Contains(log.String(), "denied by the rollplan gate") {
		t.Errorf("the executor met a gate denial:\n%s", log.String())
	}
	allowed := 0
	for _, n := range a.decisions("allow", "pods UPDATE") {
		allowed += n
	}
	if allowed == 0 {
		t.Errorf("the gate judged none of the executor's in-place updates (log:\n%s)", a.log.String())
	}
	for _, p := range e.pods("app=web") {
		if before[p.Name] != p.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
	}
	w.result(t, 2)
}

// TestGateDaemonSetCordonedNode: apply was stopped right after cordoning a
// node for its DaemonSet. A drain's eviction of another daemon pod is
// refused: the gate counts the cordoned node's pod as being updated, as
// apply does. apply then resumes, updates that pod first and finishes with
// the gate judging each of its evictions, without meeting a denial.
func TestGateDaemonSetCordonedNode(t *testing.T) {
	e := newEnv(t, 3)
	a := e.startGate(nil)
	const name, nodes = "agent", 3
	ds := daemonSet(e.ns, name, "example.com/agent:v1")
	ds.Annotations[facts.AnnMaxUnavailable] = "1"
	if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet(name, nodes, false)
	e.kubelet.SetImage("example.com/agent:v2", kubelet.Behavior{StartDelay: 100 * time.Millisecond, ReadyDelay: 300 * time.Millisecond})
	e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Env[0].Value = "b" // recreated: the gate judges each delete
		s.Containers[0].Image = "example.com/agent:v2"
	})
	cordoned := fmt.Sprintf("%s-node-0", e.ns)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"unschedulable":true}}`, facts.AnnCordonedBy, e.ns+"/"+name)
	if _, err := e.client.CoreV1().Nodes().Patch(e.ctx, cordoned, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var onCordoned, other string
	for _, p := range e.pods("app=" + name) {
		if p.Spec.NodeName == cordoned {
			onCordoned = p.Name
		} else if other == "" {
			other = p.Name
		}
	}
	// The gate sees the cordon through its Node informer: retry until it
	// answers from it (a refusal), within a few seconds.
	var refusal error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		refusal = e.client.PolicyV1().Evictions(e.ns).Evict(e.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: other},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		if refusal != nil || time.Now().After(deadline) {
			break
		}
	}
	if !apierrors.IsTooManyRequests(refusal) || !strings.Contains(refusal.Error(), onCordoned+" (being updated: node "+cordoned+" cordoned by rollplan for it)") {
		t.Fatalf("eviction of %s with %s's node cordoned by rollplan: %v, want a refusal naming %s as being updated", other, onCordoned, refusal, onCordoned)
	}
	// apply replaces daemon pods through the Eviction API.
	const evictions = "pods/eviction CREATE"
	count := func(decision string) int {
		n := 0
		for _, c := range a.decisions(decision, evictions) {
			n += c
		}
		return n
	}
	allowed0, denied0 := count("allow"), count("deny")
	var log bytes.Buffer
	sum := run(t, e.executorFor("DaemonSet", name, []string{cordonNodesPolicy}, &log, false), e.ctx, &log)
	if sum.Actions["Recreate"] != nodes {
		t.Errorf("actions %v, want %d Recreate", sum.Actions, nodes)
	}
	if d := count("deny") - denied0; d > 0 {
		t.Errorf("the gate denied %d of apply's evictions\n%s", d, a.log.String())
	}
	if strings.Contains(log.String(), "denied by the rollplan gate") {
		t.Errorf("apply met a gate denial:\n%s", log.String())
	}
	if n := count("allow") - allowed0; n < nodes {
		t.Errorf("the gate admitted %d of apply's %d evictions: it did not judge them", n, nodes)
	}
	e.waitDaemonSet(name, nodes, true)
	if n, err := e.client.CoreV1().Nodes().Get(e.ctx, cordoned, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable || n.Annotations[facts.AnnCordonedBy] != "" {
		t.Errorf("node %s after the rollout: %v, want uncordoned without the annotation (%v)", cordoned, n, err)
	}
}

// TestGateReadyWhenStoreUsable runs `rollplan gate -n` a namespace that
// does not exist: /readyz answers 503 with the reason, logged once, while
// /healthz answers 200; once the namespace is created, /readyz turns 200
// by itself.
func TestGateReadyWhenStoreUsable(t *testing.T) {
	cp := harness.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("e2e-gate-store-%d", time.Now().UnixNano()%1_000_000_000)
	_, certFile, keyFile := harness.ServingCert(t)
	health := harness.FreeAddr(t)
	log := &harness.SyncBuffer{}
	cmd := exec.Command(harness.RollplanBinary(t), "gate", "--kubeconfig", cp.Kubeconfig, "-n", ns,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--bind-address", "127.0.0.1:0",
		"--health-probe-bind-address", health, "--metrics-bind-address", "", "--shutdown-delay", "0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("rollplan gate after SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("rollplan gate did not exit within 30s of SIGTERM")
		}
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		if t.Failed() {
			t.Logf("gate log:\n%s", log.String())
		}
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	waitReadyz := func(code int, body string) {
		t.Helper()
		var c int
		var got string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			c, got = get("/readyz")
			return c == code && got == body, nil
		})
		if err != nil {
			t.Fatalf("/readyz: %d %q, want %d %q", c, got, code, body)
		}
	}
	reason := fmt.Sprintf("reservation store: namespace %s not found: create it (kubectl create namespace %s) or run the gate with -n NAMESPACE", ns, ns)
	waitReadyz(http.StatusServiceUnavailable, "not ready: "+reason)
	if c, _ := get("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz while not ready: %d, want 200 (the process is alive)", c)
	}
	time.Sleep(6 * time.Second) // at least one more check: still logged once
	if c, body := get("/readyz"); c != http.StatusServiceUnavailable || body != "not ready: "+reason {
		t.Errorf("/readyz: %d %q, want 503 with the reason", c, body)
	}

	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyz(http.StatusOK, "ok")
	if n := strings.Count(log.String(), reason); n != 1 {
		t.Errorf("the reason is logged %d times, want once", n)
	}
	if !strings.Contains(log.String(), `"msg":"ready"`) {
		t.Error("becoming ready is not logged")
	}
}
