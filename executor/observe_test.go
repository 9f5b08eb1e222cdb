package executor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"

	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
)

// observedExecutor is an executor with a fake event recorder and metrics on a
// registry of the test's.
func observedExecutor(t *testing.T, cs *testClient, dryRun bool) (*Executor, *events.FakeRecorder, *prometheus.Registry) {
	t.Helper()
	rec := events.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	var log bytes.Buffer
	x, err := New(cs, Options{
		Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
		Engine: native.New(), DryRun: dryRun, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond,
		Events: rec, Metrics: NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	cs.install(x)
	return x, rec, reg
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A step that updates two pods in place records one Event per action and
// counts the actions, the step and the pods.
func TestStepEventsAndMetrics(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
	x, rec, reg := observedExecutor(t, c.client(&recorder{}, nil), false)
	if _, err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := drain(rec)
	if len(got) != 2 {
		t.Fatalf("events %q, want 2", got)
	}
	for i, pod := range []string{"web-3", "web-2"} {
		want := "Normal InPlaceUpdate updated pod " + pod + " in place to revision " + newRev
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("event %d: %q, want prefix %q", i, got[i], want)
		}
	}
	m := x.Metrics()
	if n := testutil.ToFloat64(m.Actions.WithLabelValues("StatefulSet", "InPlaceUpdate", outcomeDone)); n != 2 {
		t.Errorf("actions done = %v, want 2", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP rollplan_executor_steps_total Reconcile steps of the executor.
# TYPE rollplan_executor_steps_total counter
rollplan_executor_steps_total 1
# HELP rollplan_executor_pods The workload's pods at the last step, by state (updated, available, in_flight, held).
# TYPE rollplan_executor_pods gauge
rollplan_executor_pods{state="available"} 4
rollplan_executor_pods{state="held"} 0
rollplan_executor_pods{state="in_flight"} 0
rollplan_executor_pods{state="updated"} 0
`), "rollplan_executor_steps_total", "rollplan_executor_pods"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.StepDuration); n != 1 {
		t.Errorf("step duration series = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(m.BudgetLimit); n == 0 {
		t.Error("no budget limit gauge")
	}
}

// A dry run records no Event and counts the actions as dry_run; a PDB
// refusing the eviction counts skipped_pdb.
func TestDryRunAndPDBMetrics(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
	x, rec, _ := observedExecutor(t, c.client(&recorder{}, nil), true)
	if _, err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 0 {
		t.Errorf("a dry run recorded events %q", got)
	}
	if n := testutil.ToFloat64(x.Metrics().Actions.WithLabelValues("StatefulSet", "Recreate", outcomeDryRun)); n != 2 {
		t.Errorf("dry_run = %v, want 2", n)
	}

	tooMany := func(string) error { return apierrors.NewTooManyRequests("disruption budget", 10) }
	c = newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
	x, rec, _ = observedExecutor(t, c.client(&recorder{}, tooMany), false)
	if _, err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec); len(got) != 0 {
		t.Errorf("refused evictions recorded events %q", got)
	}
	if n := testutil.ToFloat64(x.Metrics().Actions.WithLabelValues("StatefulSet", "Recreate", outcomeSkippedPDB)); n != 2 {
		t.Errorf("skipped_pdb = %v, want 2", n)
	}
}

// A halt records one warning Event with the reasons.
func TestHaltEvent(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
	c.set.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
	x, rec, _ := observedExecutor(t, c.client(&recorder{}, nil), false)
	if _, err := x.Run(context.Background(), false); !isHalt(err) {
		t.Fatalf("err %v, want a halt", err)
	}
	got := drain(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning RolloutHalted rollout halted by policy: ") {
		t.Errorf("events %q, want one RolloutHalted warning", got)
	}
}

// A rolled-out StatefulSet: one RolloutComplete Event.
func TestCompleteEvent(t *testing.T) {
	c := newCluster(2, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
	for i := range c.pods {
		c.pods[i] = pod(c.pods[i].Name, "example.com/app:v2", newRev, true)
	}
	c.set.Status.CurrentRevision, c.set.Status.UpdatedReplicas = newRev, 2
	x, rec, _ := observedExecutor(t, c.client(&recorder{}, nil), false)
	step, err := x.Step(context.Background())
	if err != nil || !step.Done {
		t.Fatalf("step %+v, err %v: want done", step, err)
	}
	got := drain(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal RolloutComplete rollout complete: 2 pod(s) at revision "+newRev) {
		t.Errorf("events %q, want one RolloutComplete", got)
	}
	if step.Status == nil || step.Status.State != StatusRolledOut {
		t.Errorf("step status %+v, want RolledOut", step.Status)
	}
}
