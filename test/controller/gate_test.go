package controller

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"

	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// startGate runs rollplan gate for the test's namespace, as test/e2e
// does: the gate with the built-in strategy behind a TLS address, its
// reservations in ns-system, and deploy/'s webhook configuration pointed
// at it and at the test's namespace only, its Prometheus metrics on a
// loopback address (e.gateMetrics). It returns the gate's log.
func (e *env) startGate() *harness.SyncBuffer {
	e.t.Helper()
	eng, err := rego.Load(e.ctx, nil, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	logBuf := &harness.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, nil))
	ctx, cancel := context.WithCancel(e.ctx)
	f := informers.NewSharedInformerFactory(e.client, 0)
	src := capture.NewListerSource(f, f)
	f.Start(ctx.Done())
	if err := src.WaitForSync(ctx); err != nil {
		e.t.Fatalf("gate: %v", err)
	}
	opts := plan.DefaultOptions
	opts.Upstream = engines.Upstream()
	reg := prometheus.NewRegistry()
	g, err := gate.New(gate.Options{Engine: eng, Cache: src, Namespace: e.sysNS,
		Store: &gate.ConfigMapStore{Client: e.client, Namespace: e.sysNS}, Log: log, PlanOptions: opts, Metrics: gate.NewMetrics(reg)})
	if err != nil {
		e.t.Fatal(err)
	}
	metrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	e.t.Cleanup(metrics.Close)
	e.gateMetrics = strings.TrimPrefix(metrics.URL, "http://")
	url, ca, done := harness.ServeGate(ctx, e.t, g, g, log)
	vwc := harness.WebhookConfiguration(e.t, ca, url, e.ns)
	if _, err := e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, vwc, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("register the webhook: %v", err)
	}
	e.t.Cleanup(func() {
		_ = e.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		cancel()
		<-done
		f.Shutdown()
		if e.t.Failed() {
			e.t.Logf("gate log:\n%s", logBuf.String())
		}
	})
	// The API server reads new webhook configurations from its informer:
	// wait until a dry-run create reaches the gate.
	probe := statefulSet(e.ns, "gate-probe", 0, "1")
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _ = e.client.AppsV1().StatefulSets(e.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return strings.Contains(logBuf.String(), `"operation":"statefulsets CREATE"`), nil
	})
	if err != nil {
		e.t.Fatalf("the API server never called the gate: %v", err)
	}
	return logBuf
}

// TestGateBesideController: the gate judges every disruption of the
// namespace while the controller rolls a StatefulSet in place and another
// actor (a drain-like loop of the test) keeps evicting its Ready pods. The
// gate refuses the evictions that would pass the budget, the controller
// meets the pods the evictions took in its budget, the rollout completes,
// and the availability watcher never sees more than the budget (2)
// unavailable.
func TestGateBesideController(t *testing.T) {
	e := newEnv(t, "gate", 3, 3*time.Minute)
	gateLog := e.startGate()
	leases := e.watchLeases()
	replicas := []*replica{e.startController("ctrl-a"), e.startController("ctrl-b")}
	e.waitLeader(leases, replicas, "", 15*time.Second)

	const image = "example.com/app:v2"
	sts := wl("StatefulSet", "guarded", 8, 2, true)
	e.create(statefulSet(e.ns, sts.Name, 8, "2"))
	e.waitRolledOut([]workload{sts}, 90*time.Second)
	// Pods come back slowly, so evictions and in-place updates overlap.
	e.kubelet.SetImage("example.com/app:v1", kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: time.Second, TerminationDelay: 200 * time.Millisecond})
	e.kubelet.SetImage(image, kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: time.Second, TerminationDelay: 200 * time.Millisecond})
	w := e.watchPods()
	w.follow(sts)
	e.setTemplate("StatefulSet", sts.Name, setImage(image))

	var allowed, refused atomic.Int32
	ctx, stop := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
		for ctx.Err() == nil {
			pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + sts.Name})
			if err == nil && len(pods.Items) > 0 {
				p := pods.Items[rng.IntN(len(pods.Items))]
				if p.DeletionTimestamp == nil {
					err := e.client.PolicyV1().Evictions(e.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: p.Name}})
					switch {
					case err == nil:
						allowed.Add(1)
					case apierrors.IsTooManyRequests(err):
						refused.Add(1)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()
	took := e.waitRolledOut([]workload{sts}, 2*time.Minute)
	stop()
	wg.Wait()
	e.logf("rolled out in %.1fs beside the gate; the other actor's evictions: %d allowed, %d refused", took.Seconds(), allowed.Load(), refused.Load())
	if allowed.Load() == 0 || refused.Load() == 0 {
		t.Errorf("evictions: %d allowed, %d refused: want the gate to admit some and refuse those over the budget", allowed.Load(), refused.Load())
	}
	if !strings.Contains(gateLog.String(), `"operation":"pods UPDATE"`) {
		t.Errorf("the gate judged none of the controller's in-place updates")
	}
	for _, p := range e.pods("app=" + sts.Name) {
		if p.Spec.Containers[0].Image != image || p.Status.ContainerStatuses[0].Image != image {
			t.Errorf("pod %s: spec %s, running %s; want %s", p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses[0].Image, image)
		}
	}
	w.mu.Lock()
	worst, at := w.track[sts.Name].worst, w.track[sts.Name].at
	w.mu.Unlock()
	e.logf("statefulset/%s: at most %d pods unavailable at once (budget %d)", sts.Name, worst, sts.Budget)
	if worst > sts.Budget {
		t.Errorf("statefulset/%s: at some point %d pods were unavailable, budget %d:\n%s", sts.Name, worst, sts.Budget, at)
	}
}
