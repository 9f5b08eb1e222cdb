package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/deploy/monitoring"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
	promtest "github.com/rollplan/rollplan/test/prometheus"
)

// alertCase is how TestAlertsOnRealMetrics provokes one alert of
// deploy/monitoring and what it expects of it.
type alertCase struct {
	// lower: the threshold of the expression as the test evaluates it
	// (old → new, old exactly once in the expression), where the real one
	// takes longer than a test or more load than a test machine gives.
	lower [2]string
	// realWhenHealthy: the healthy run is checked at the real threshold
	// (the lowered one holds on any run).
	realWhenHealthy bool
	// want: labels every firing series has.
	want map[string]string
}

// The alerts' namespace label for the test's install, and for a second
// install whose controller never leads.
const (
	installNS = "rollplan-system"
	orphanNS  = "second-install"
)

var alertCases = map[string]alertCase{
	// A never-Ready image with a 2s progress deadline: the default policy
	// halts it.
	"RollplanRolloutHalted": {want: map[string]string{"namespace": installNS, "job": "rollplan-controller", "kind": "StatefulSet", "workload": "halts"}},
	// The same image with the default deadline (600s): in progress, the
	// pod in flight never Ready, nothing moves. 15 minutes is lowered to 5s.
	"RollplanRolloutStalled": {lower: [2]string{") > 900\n", ") > 5\n"}, want: map[string]string{"namespace": installNS, "job": "rollplan-controller", "kind": "StatefulSet", "workload": "stalls"}},
	// A second install's controller whose Lease another holder keeps.
	"RollplanControllerNoLeader": {want: map[string]string{"namespace": orphanNS, "job": "rollplan-controller"}},
	// Evictions beyond the stalled rollout's budget, as fast as the
	// gate answers: the real threshold (0.2/s over 5m) is met.
	"RollplanGateDenyingHighRate": {want: map[string]string{"namespace": installNS, "job": "rollplan-gate"}},
	// The gate answers in milliseconds here: 1s at p99 is lowered to
	// 0.1ms, so the test shows the expression reads the gate's histogram
	// and computes a quantile, not that the gate can be slow.
	"RollplanGateLatencyHigh": {lower: [2]string{") > 1\n", ") > 0.0001\n"}, realWhenHealthy: true, want: map[string]string{"namespace": installNS, "job": "rollplan-gate"}},
	// A gated rollout whose Prometheus is down: every query an error.
	"RollplanAnalysisQueriesFailing": {want: map[string]string{"namespace": installNS, "job": "rollplan-controller", "provider": "prometheus"}},
}

// TestAlertsOnRealMetrics evaluates deploy/monitoring's alerts and
// dashboard on the metrics of a real run: Prometheus (Debian's binary)
// scrapes the controller processes and the gate every second while they
// drive rollouts on the control plane. In a healthy run (every rollout
// complete, a leader) no alert's expression returns anything; then each
// alert's situation is made real (a halted rollout, a stalled one, a
// burst of denied evictions, a second install without a leader) and each
// expression returns the series it should, and each alert is pending or
// firing in Prometheus, which loaded the rules (at the thresholds
// alertCases lowers; for: durations as they are, so pending is what a test
// can wait for). Every dashboard query returns data by then.
func TestAlertsOnRealMetrics(t *testing.T) {
	promtest.Binary(t, "prometheus")
	e := newEnv(t, "alerts", 3, 3*time.Minute)
	alerts, err := monitoring.Alerts(monitoring.Rules)
	if err != nil {
		t.Fatal(err)
	}
	// The expressions as the test evaluates them: firing, healthy.
	firing, healthy := map[string]string{}, map[string]string{}
	for _, a := range alerts {
		c, ok := alertCases[a.Name]
		if !ok {
			t.Fatalf("alert %s: no case in alertCases: say how the test provokes it", a.Name)
		}
		firing[a.Name], healthy[a.Name] = a.Expr, a.Expr
		if c.lower[0] != "" {
			if n := strings.Count(a.Expr, c.lower[0]); n != 1 {
				t.Fatalf("alert %s: %q %d times in its expression, want once:\n%s", a.Name, c.lower[0], n, a.Expr)
			}
			firing[a.Name] = strings.Replace(a.Expr, c.lower[0], c.lower[1], 1)
			if !c.realWhenHealthy {
				healthy[a.Name] = firing[a.Name]
			}
		}
	}
	if len(alerts) != len(alertCases) {
		t.Fatalf("%d alerts in the rule file, %d cases: a case for an alert that is gone", len(alerts), len(alertCases))
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, rules, alerts, firing)

	e.startGate()
	ctrlAddr, orphanAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	// The gated rollout's Prometheus: a port nothing listens on.
	analysisConfig := filepath.Join(t.TempDir(), "analysis.yaml")
	if err := os.WriteFile(analysisConfig, fmt.Appendf(nil, "providers:\n  prometheus:\n    address: http://%s\n    timeout: 2s\n", harness.FreeAddr(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startController("ctrl-a", "--metrics-bind-address", ctrlAddr, "--named-policy", "gated="+analysisPolicy(t, "prometheus"), "--analysis-config", analysisConfig)
	prom := promtest.Start(t, promtest.Config{
		Targets: []promtest.Target{
			{Addr: ctrlAddr, Labels: map[string]string{"job": "rollplan-controller", "namespace": installNS}},
			{Addr: e.gateMetrics, Labels: map[string]string{"job": "rollplan-gate", "namespace": installNS}},
			// Down until the test starts it.
			{Addr: orphanAddr, Labels: map[string]string{"job": "rollplan-controller", "namespace": orphanNS}},
		},
		RuleFiles: []string{rules},
	})

	const broken = "example.com/app:never-ready"
	e.kubelet.SetImage(broken, kubelet.Behavior{StartDelay: 200 * time.Millisecond, NeverReady: true})
	halts := statefulSet(e.ns, "halts", 3, "1")
	halts.Annotations[facts.AnnProgressDeadline] = "2"
	e.create(halts)
	e.create(statefulSet(e.ns, "stalls", 4, "1"))
	gated := statefulSet(e.ns, "gated", 2, "1")
	gated.Annotations[facts.AnnPolicy] = "gated"
	e.create(gated)
	e.waitRolledOut([]workload{wl("StatefulSet", "halts", 3, 1, true), wl("StatefulSet", "stalls", 4, 1, true), wl("StatefulSet", "gated", 2, 1, true)}, 90*time.Second)

	// Healthy: the rollouts complete in Prometheus, a leader; no alert.
	if _, err := prom.Wait(`count(rollplan_controller_rollout_phase{phase="complete"}) == 3 and on() max(rollplan_controller_leader) == 1`, 30*time.Second); err != nil {
		t.Fatalf("prometheus never saw the healthy run: %v", err)
	}
	if _, err := prom.Wait(`sum(rollplan_gate_requests_total{job="rollplan-gate"}) > 0`, 10*time.Second); err != nil {
		t.Fatalf("prometheus never saw a gate request: %v", err)
	}
	e.logf("healthy run scraped")
	for _, a := range alerts {
		v, err := prom.Query(healthy[a.Name])
		if err != nil {
			t.Errorf("alert %s: %v", a.Name, err)
		} else if len(v) > 0 {
			t.Errorf("alert %s fires on a healthy run: %v\n%s", a.Name, v, healthy[a.Name])
		}
	}

	// Halted and stalled.
	e.setTemplate("StatefulSet", "halts", setImage(broken))
	e.setTemplate("StatefulSet", "stalls", setImage(broken))
	// Its first wave's gate measures, gets errors, is inconclusive.
	e.setTemplate("StatefulSet", "gated", setImage("example.com/app:v2"))
	e.waitState("StatefulSet", "halts", "Halted", 30*time.Second, func(s *live.RolloutState, _ metav1.Object) bool { return s.Phase == live.RolloutHalted })
	e.waitState("StatefulSet", "stalls", "in progress with a pod in flight", 30*time.Second, func(s *live.RolloutState, _ metav1.Object) bool {
		return s.Phase == live.RolloutInProgress && s.InFlight == 1
	})
	e.logf("statefulset/halts halted, statefulset/stalls in progress with its first pod never Ready")

	// Denials: the stalled rollout's budget (1) is taken by its pod in
	// flight, so the gate refuses every eviction of the others.
	var denied, allowed atomic.Int32
	ctx, stop := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=stalls"})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if p.Spec.Containers[0].Image == broken || ctx.Err() != nil {
					continue
				}
				err := e.client.PolicyV1().Evictions(e.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: p.Name}})
				switch {
				case err == nil:
					allowed.Add(1)
				case apierrors.IsTooManyRequests(err):
					denied.Add(1)
				}
				// About 50 a second: what the real threshold (0.2/s
				// over 5 minutes) needs within seconds, no more.
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()

	// A second install whose controller never leads: another holder keeps
	// its leader-election Lease.
	orphanLease := "rollplan-controller-orphan"
	wg.Add(1)
	go func() {
		defer wg.Done()
		holdLease(ctx, e, orphanLease, "elsewhere")
	}()
	if err := waitLease(e, orphanLease, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	e.startController("orphan", "--metrics-bind-address", orphanAddr, "--leader-elect-resource-name", orphanLease)
	e.logf("second install's controller started, standing by")

	for _, a := range alerts {
		c := alertCases[a.Name]
		v, err := prom.Wait(firing[a.Name], 60*time.Second)
		if err != nil {
			t.Errorf("alert %s never fired: %v\n%s", a.Name, err, firing[a.Name])
			continue
		}
		// Every series names what the alert groups by; one is the
		// situation the test made (others may be real too: the gated
		// rollout that halts and does not move is halted and stalled).
		matched := false
		for _, s := range v {
			all := true
			for k, want := range c.want {
				if s.Labels[k] == "" {
					t.Errorf("alert %s: %v: no label %s", a.Name, s, k)
				}
				all = all && s.Labels[k] == want
			}
			matched = matched || all
		}
		if !matched {
			t.Errorf("alert %s: no series with %v among %v", a.Name, c.want, v)
		}
		e.logf("alert %s: %v", a.Name, v)
	}
	stop()
	wg.Wait()
	e.logf("evictions: %d denied, %d allowed", denied.Load(), allowed.Load())
	if allowed.Load() > 0 {
		t.Errorf("%d evictions allowed beyond the stalled rollout's budget", allowed.Load())
	}

	// Prometheus evaluated the rules it loaded: each is pending (its for:
	// not yet passed) or firing.
	active := map[string]string{}
	deadline := time.Now().Add(20 * time.Second)
	for len(active) < len(alerts) && time.Now().Before(deadline) {
		as, err := prom.Alerts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			active[a.Labels["alertname"]] = a.State
		}
		time.Sleep(promtest.Interval)
	}
	for _, a := range alerts {
		if s := active[a.Name]; s != "pending" && s != "firing" {
			t.Errorf("alert %s: not active in Prometheus (state %q)", a.Name, s)
		}
	}
	loaded, err := prom.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range loaded {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
	}

	// Every query of the dashboard shows data.
	qs, err := monitoring.DashboardQueries(monitoring.Dashboard, map[string]string{"namespace": ".*", "__rate_interval": "1m", "datasource": "prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		v, err := prom.Query(q.Expr)
		switch {
		case err != nil:
			t.Errorf("dashboard %s: %v", q.Where, err)
		case len(v) == 0:
			t.Errorf("dashboard %s: no data: %s", q.Where, q.Expr)
		}
	}
}

// writeRules writes the alerts as a rule file with their expressions
// replaced by exprs.
func writeRules(t *testing.T, path string, alerts []monitoring.Alert, exprs map[string]string) {
	t.Helper()
	var rules []map[string]any
	for _, a := range alerts {
		r := map[string]any{"alert": a.Name, "expr": exprs[a.Name], "labels": a.Labels, "annotations": a.Annotations}
		if a.For != "" {
			r["for"] = a.For
		}
		rules = append(rules, r)
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "rollplan", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// holdLease keeps the Lease name in ns-system held by holder, renewing it
// every 500ms until ctx ends.
func holdLease(ctx context.Context, e *env, name, holder string) {
	leases := e.client.CoordinationV1().Leases(e.sysNS)
	for ctx.Err() == nil {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.sysNS},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](60), AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitLease waits until the Lease name in ns-system is held by holder.
func waitLease(e *env, name, holder string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := e.client.CoordinationV1().Leases(e.sysNS).Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == holder {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Lease %s/%s not held by %s after 10s (%v)", e.sysNS, name, holder, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
