package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/rollplan/rollplan/analysis"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
)

// analysisEngine is the default strategy with an analysis: soak 1m, one
// measurement "errors" taken twice 30s apart; the verdict fails a value
// above 0.5, is inconclusive on an error, passes otherwise.
type analysisEngine struct {
	engine.Engine
	onFail string
}

func (a analysisEngine) Decide(ctx context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	d, err := a.Engine.Decide(ctx, r)
	if err != nil {
		return nil, err
	}
	d.Analysis = &engine.Analysis{Soak: "1m", MaxInconclusive: 1, OnFail: a.onFail, Measurements: []engine.Measurement{{
		Name: "errors", Provider: "prometheus", Query: `errors{pod=~"{{.PodRegex}}"}`, Interval: "30s", Count: 2,
	}}}
	if r.Analysis.Wave == 0 {
		return d, nil
	}
	d.Verdict = &engine.Verdict{Verdict: engine.VerdictPass, Message: "errors at most 0.5"}
	for _, m := range r.Analysis.Measurements {
		for _, res := range m.Results {
			switch {
			case res.Error != "":
				d.Verdict = &engine.Verdict{Verdict: engine.VerdictInconclusive, Message: res.Error}
				return d, nil
			case res.Value > 0.5:
				d.Verdict = &engine.Verdict{Verdict: engine.VerdictFail, Message: "errors above 0.5 (query " + m.Query + ")"}
			}
		}
	}
	return d, nil
}

// fakeProvider answers each measurement with the next of values (an
// error when NaN... see errs), recording the queries it was handed.
type fakeProvider struct {
	mu      sync.Mutex
	values  []float64
	fail    bool
	queries []string
}

func (p *fakeProvider) Measure(_ context.Context, m analysis.Measurement, t analysis.Target, now time.Time) analysis.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, _ := analysis.RenderQuery(m, t)
	p.queries = append(p.queries, q)
	if p.fail {
		return analysis.Result{Name: m.Name, Query: q, Taken: now, Error: "measurement \"errors\": prometheus http://prom:9090: query " + q + ": connection refused"}
	}
	v := p.values[0]
	if len(p.values) > 1 {
		p.values = p.values[1:]
	}
	return analysis.Result{Name: m.Name, Query: q, Value: v, Taken: now}
}

// testClock is the executor's clock, moved on by the test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// finishInPlace plays the kubelet: the pods run their spec's image, Ready
// since an hour ago.
func finishInPlace(t *testing.T, cs *testClient, names ...string) {
	t.Helper()
	for _, n := range names {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		img := p.Spec.Containers[0].Image
		p.Status.ContainerStatuses[0].Image, p.Status.ContainerStatuses[0].ImageID = img, "id-"+img
		p.Status.ContainerStatuses[0].Ready = true
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnalysisGate rolls a 4-pod StatefulSet (two waves of two, in place)
// through the gate after wave 1, one step at a time, each step by a new
// executor (a restart: only the workload's annotation carries the gate).
func TestAnalysisGate(t *testing.T) {
	tests := []struct {
		name   string
		onFail string
		values []float64
		fail   bool
		// after the measurements of the first try (and, for
		// inconclusive, a second one an interval later):
		wantErr      string // "" : no error
		wantPatched  string // pods patched after the gate, beyond web-3 and web-2
		wantTemplate string // the StatefulSet's image after it all
		wantEvents   []string
		wantMetric   map[string]float64
		wantTries    int
	}{
		{
			name: "pass: the next wave starts", onFail: engine.AnalysisHalt, values: []float64{0.1, 0.2},
			wantPatched: "web-1,web-0", wantTemplate: "example.com/app:v2",
			wantEvents: []string{"Normal AnalysisPassed"}, wantMetric: map[string]float64{"pass": 1}, wantTries: 1,
		},
		{
			name: "fail, onFail halt: halted, no later wave", onFail: engine.AnalysisHalt, values: []float64{0.1, 0.9},
			wantErr: `rollout halted by policy: analysis after wave 1 failed: errors above 0.5 (query errors{pod=~"web-2|web-3"})`, wantTemplate: "example.com/app:v2",
			wantEvents: []string{"Warning AnalysisFailed", "Warning RolloutHalted"}, wantMetric: map[string]float64{"fail": 1}, wantTries: 1,
		},
		{
			name: "fail, onFail rollback: the template goes back to the revision rolled from", onFail: engine.AnalysisRollback, values: []float64{0.9},
			wantTemplate: "example.com/app:v1", wantPatched: "web-3,web-2", // back in place, no gate
			wantEvents: []string{"Warning AnalysisFailed", "Warning RolloutRolledBack"}, wantMetric: map[string]float64{"fail": 1}, wantTries: 1,
		},
		{
			name: "inconclusive: measured again an interval later, then halted (maxInconclusive 1)", onFail: engine.AnalysisRollback, fail: true,
			wantErr: "analysis after wave 1 inconclusive after 2 tries (maxInconclusive 1)", wantTemplate: "example.com/app:v2",
			wantEvents: []string{"Warning AnalysisInconclusive", "Warning AnalysisInconclusive", "Warning RolloutHalted"}, wantMetric: map[string]float64{"inconclusive": 2}, wantTries: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			rec := &recorder{}
			cs := c.client(rec, nil)
			clk := &testClock{t: now}
			prov := &fakeProvider{values: tt.values, fail: tt.fail}
			evs := events.NewFakeRecorder(100)
			metrics := NewMetrics(prometheus.NewRegistry())
			var log bytes.Buffer
			step := func() (*StepResult, error) {
				t.Helper()
				x, err := New(cs, Options{
					Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
					Engine: analysisEngine{native.New(), tt.onFail}, Now: clk.Now, Events: evs, Metrics: metrics,
					Providers: analysis.NewResolver(map[string]analysis.Provider{"prometheus": prov}, map[string]string{"prometheus": "prometheus"}),
					RollBack:  history.RollBackTo,
					Log:       slog.New(slog.NewTextHandler(&log, nil)),
				})
				if err != nil {
					t.Fatal(err)
				}
				cs.install(x)
				return x.Step(context.Background())
			}
			// Wave 1 starts: the gate is recorded before its actions.
			if _, err := step(); err != nil {
				t.Fatalf("step 1: %v\n%s", err, log.String())
			}
			if got := strings.Join(rec.patches, ","); got != "web-3,web-2" {
				t.Fatalf("wave 1 patched %s, want web-3,web-2", got)
			}
			st := readState(t, cs)
			if st == nil || st.Wave != 1 || strings.Join(st.Pods, ",") != "web-2,web-3" || st.Gate == nil || st.Gate.Measurements[0].Query != `errors{pod=~"web-2|web-3"}` {
				t.Fatalf("state after wave 1 started: %+v", st)
			}
			// In progress: nothing else is touched.
			if _, err := step(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.patches, ","); got != "web-3,web-2" {
				t.Fatalf("while wave 1 runs, patched %s", got)
			}
			finishInPlace(t, cs, "web-3", "web-2")
			// Available: the soak starts; no measurement until it ends.
			res, err := step()
			if err != nil || len(prov.queries) != 0 || !strings.Contains(res.Note, "soaking") || res.NextAvailable != time.Minute {
				t.Fatalf("at availability: err %v, %d queries, note %q, wake in %s", err, len(prov.queries), res.Note, res.NextAvailable)
			}
			clk.add(59 * time.Second)
			if _, err := step(); err != nil || len(prov.queries) != 0 {
				t.Fatalf("in the soak: err %v, %d queries", err, len(prov.queries))
			}
			clk.add(time.Second)
			// A try: the first value at the soak's end, the second an
			// interval later. Each step takes what is due and returns,
			// waking when the next value is (no step waits one out).
			try := func(n int) error {
				t.Helper()
				res, err := step()
				if err != nil || len(prov.queries) != 2*n-1 || res.NextAvailable != 30*time.Second || !strings.Contains(res.Note, "1 of 2 values taken") {
					t.Fatalf("try %d, first value: err %v, %d queries, wake in %s, note %q; want %d queries, 30s", n, err, len(prov.queries), res.NextAvailable, res.Note, 2*n-1)
				}
				if st := readState(t, cs); AnalysisRecord(st).State != plan.AnalysisMeasuring || len(st.Results["errors"]) != 1 {
					t.Fatalf("try %d: after the first value the gate is %+v, want Measuring with 1 value recorded", n, AnalysisRecord(st))
				}
				if _, err := step(); err != nil || len(prov.queries) != 2*n-1 {
					t.Fatalf("try %d, before the interval: err %v, %d queries, want %d", n, err, len(prov.queries), 2*n-1)
				}
				clk.add(30 * time.Second)
				_, err = step()
				return err
			}
			err = try(1)
			if tt.wantTries == 2 {
				if err != nil {
					t.Fatalf("first inconclusive try: %v", err)
				}
				if _, err := step(); err != nil || len(prov.queries) != 2 {
					t.Fatalf("before the retry interval: err %v, %d queries, want 2", err, len(prov.queries))
				}
				clk.add(30 * time.Second)
				err = try(2)
			}
			if tt.wantErr != "" {
				var h *HaltedError
				if !errors.As(err, &h) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want a halt saying %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("measuring: %v\n%s", err, log.String())
			}
			if got := len(prov.queries); got != 2*tt.wantTries {
				t.Errorf("%d queries, want %d (count 2 per try)", got, 2*tt.wantTries)
			}
			for _, q := range prov.queries {
				if q != `errors{pod=~"web-2|web-3"}` {
					t.Errorf("provider handed %q, not the plan's rendered query", q)
				}
			}
			if tt.wantErr == "" {
				if tt.onFail == engine.AnalysisRollback {
					// The StatefulSet controller takes the old revision as
					// its update revision again.
					set, _ := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
					set.Status.UpdateRevision = oldRev
					if _, err := cs.AppsV1().StatefulSets(ns).UpdateStatus(context.Background(), set, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := step(); err != nil {
					t.Fatalf("after the verdict: %v", err)
				}
			}
			if got := strings.TrimPrefix(strings.Join(rec.patches, ","), "web-3,web-2"); strings.TrimPrefix(got, ",") != tt.wantPatched {
				t.Errorf("after the gate patched %q, want %q", got, tt.wantPatched)
			}
			set, _ := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
			if img := set.Spec.Template.Spec.Containers[0].Image; img != tt.wantTemplate {
				t.Errorf("template image %s, want %s", img, tt.wantTemplate)
			}
			if tt.onFail == engine.AnalysisRollback && tt.wantTries == 1 {
				if st := readState(t, cs); st == nil || !st.RolledBack || st.Revision != oldRev {
					t.Errorf("after the rollback the state is %+v, want rolledBack to %s", st, oldRev)
				}
			}
			var got []string
			for len(evs.Events) > 0 {
				e := <-evs.Events
				if strings.Contains(e, "Analysis") || strings.Contains(e, "Halted") || strings.Contains(e, "RolledBack") {
					f := strings.Fields(e)
					got = append(got, f[0]+" "+f[1])
				}
			}
			if strings.Join(got, "; ") != strings.Join(tt.wantEvents, "; ") {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
			for r, want := range tt.wantMetric {
				if v := testutil.ToFloat64(metrics.AnalysisMeasurements.WithLabelValues(r)); v != want {
					t.Errorf("rollplan_analysis_measurements_total{result=%q} %v, want %v", r, v, want)
				}
			}
			// Every query counts as a value taken, or an error.
			result := "value"
			if tt.fail {
				result = "error"
			}
			if v := testutil.ToFloat64(metrics.AnalysisValues.WithLabelValues("errors", "prometheus", result)); int(v) != len(prov.queries) {
				t.Errorf("rollplan_analysis_values_total{measurement=\"errors\",result=%q} %v, want %d (one per query)", result, v, len(prov.queries))
			}
			if tt.onFail == engine.AnalysisRollback && tt.wantTries == 1 {
				// The template goes back to the revision that failed (a
				// GitOps tool applying it again): refused, not rolled a
				// wave at a time again, until rollplan resume.
				set, _ := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
				set.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2"
				if set, err = cs.AppsV1().StatefulSets(ns).Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				set.Status.UpdateRevision = newRev
				if _, err := cs.AppsV1().StatefulSets(ns).UpdateStatus(context.Background(), set, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				var h *HaltedError
				if _, err := step(); !errors.As(err, &h) || !strings.Contains(err.Error(), "revision web-new failed its analysis and was rolled back to web-old") {
					t.Errorf("the failed revision applied again: err %v, want a halt saying it failed and was rolled back", err)
				}
				target := live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}
				if ok, err := ResumeAnalysis(context.Background(), cs, target, clk.Now()); !ok || err != nil {
					t.Fatalf("ResumeAnalysis after a rollback: %v, %v; want the revision let go", ok, err)
				}
				if _, err := step(); err != nil {
					t.Errorf("after resume the failed revision rolls again: err %v", err)
				}
				if st := readState(t, cs); st.Revision != newRev || st.RolledBack || st.Wave != 1 {
					t.Errorf("after resume the gate is %+v, want a new gate for wave 1 of %s", st, newRev)
				}
			}
			if tt.wantErr == "" {
				return
			}
			// The halt stands: a step retried after it (the controller's
			// record of it failed to write) neither measures nor judges.
			n := len(prov.queries)
			if _, err := step(); err == nil || !strings.Contains(err.Error(), tt.wantErr) || len(prov.queries) != n {
				t.Errorf("a step after the halt: err %v, %d new queries; want the same halt and none", err, len(prov.queries)-n)
			}
			if st := readState(t, cs); AnalysisRecord(st).State != plan.AnalysisHalted {
				t.Errorf("after the halt the gate's record is %+v, want Halted", AnalysisRecord(st))
			}
			// rollplan resume clears it: the wave is measured again, from
			// a first try.
			target := live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}
			if ok, err := ResumeAnalysis(context.Background(), cs, target, clk.Now()); !ok || err != nil {
				t.Fatalf("ResumeAnalysis: %v, %v; want the halt cleared", ok, err)
			}
			if st := readState(t, cs); st.Halted != "" || st.Attempt != 1 || st.Verdict != "" {
				t.Errorf("after resume the gate is %+v, want no halt, try 1, no verdict", st)
			}
			if res, err := step(); len(prov.queries) != n+1 || res == nil || !strings.Contains(res.Note, "wave 1 (try 1): 1 of 2 values taken") {
				t.Errorf("the step after resume: err %v, %d new queries, want the first value of a first try", err, len(prov.queries)-n)
			}
		})
	}
}

func readState(t *testing.T, cs *testClient) *AnalysisState {
	t.Helper()
	set, err := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseAnalysisState(set.Annotations[facts.AnnAnalysis])
	if err != nil {
		t.Fatal(err)
	}
	if set.Annotations[facts.AnnManaged] != "true" {
		t.Fatal("writing the state dropped the workload's other annotations")
	}
	return st
}

// rollplan promote and abort write the state; the next step acts on it:
// promote starts the next wave unmeasured, abort rolls back. status shows
// where the gate is.
func TestAnalysisPromoteAbort(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			rec := &recorder{}
			cs := c.client(rec, nil)
			clk := &testClock{t: now}
			prov := &fakeProvider{values: []float64{0}}
			evs := events.NewFakeRecorder(100)
			var log bytes.Buffer
			step := func() *StepResult {
				t.Helper()
				x, err := New(cs, Options{
					Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
					Engine: analysisEngine{native.New(), engine.AnalysisHalt}, Now: clk.Now, Events: evs,
					Providers: analysis.NewResolver(map[string]analysis.Provider{"prometheus": prov}, map[string]string{"prometheus": "prometheus"}),
					RollBack:  history.RollBackTo,
					Log:       slog.New(slog.NewTextHandler(&log, nil)),
				})
				if err != nil {
					t.Fatal(err)
				}
				cs.install(x)
				res, err := x.Step(context.Background())
				if err != nil {
					t.Fatalf("step: %v\n%s", err, log.String())
				}
				return res
			}
			step()
			if got := step().Status.Analysis.Summary(); got != "wave 1 (web-2, web-3) in progress, then soak 1m" {
				t.Errorf("status while wave 1 runs: %q", got)
			}
			finishInPlace(t, cs, "web-3", "web-2")
			step() // records the availability; status reads it from the next read on
			if got := step().Status.Analysis.Summary(); !strings.HasPrefix(got, "wave 1 available at 2026-03-01T12:00:00Z, measured from 2026-03-01T12:01:00Z") {
				t.Errorf("status in the soak: %q", got)
			}
			st := readState(t, cs)
			if abort {
				st.Aborted = true
			} else {
				st.Promoted = true
			}
			if err := WriteAnalysisState(context.Background(), cs.AppsV1(), "StatefulSet", ns, "web", st); err != nil {
				t.Fatal(err)
			}
			res := step()
			set, _ := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
			img := set.Spec.Template.Spec.Containers[0].Image
			if len(prov.queries) != 0 {
				t.Errorf("measured %d times: a promoted or aborted gate is not measured", len(prov.queries))
			}
			if abort {
				if img != "example.com/app:v1" || !readState(t, cs).RolledBack || !strings.Contains(res.Note, "aborted by hand (rollplan abort): rolling back to web-old") {
					t.Errorf("abort: template %s, state %+v, note %q", img, readState(t, cs), res.Note)
				}
				return
			}
			if got := strings.Join(rec.patches, ","); got != "web-3,web-2,web-1,web-0" || img != "example.com/app:v2" {
				t.Errorf("promote: patched %s, template %s; want the next wave started", got, img)
			}
		})
	}
}

// Without providers (no --analysis-config) a gate is never passed: every
// measurement is an error naming the flag, the verdict inconclusive; and
// without a RollBacker a failure that would roll back halts instead.
func TestAnalysisUnconfigured(t *testing.T) {
	tests := []struct {
		name      string
		providers bool
		wantErr   string
	}{
		{name: "no providers: inconclusive, then halted", wantErr: "no analysis config (--analysis-config FILE)"},
		{name: "no rollback configured: halted", providers: true, wantErr: "no rollback is configured (Options.RollBack): halted instead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			cs := c.client(&recorder{}, nil)
			clk := &testClock{t: now}
			var log bytes.Buffer
			o := Options{
				Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
				Engine: analysisEngine{native.New(), engine.AnalysisRollback}, Now: clk.Now,
				Log: slog.New(slog.NewTextHandler(&log, nil)),
			}
			if tt.providers {
				o.Providers = analysis.NewResolver(map[string]analysis.Provider{"prometheus": &fakeProvider{values: []float64{0.9}}}, map[string]string{"prometheus": "prometheus"})
			}
			x, err := New(cs, o)
			if err != nil {
				t.Fatal(err)
			}
			cs.install(x)
			var last error
			for i := range 8 {
				if i == 2 {
					finishInPlace(t, cs, "web-3", "web-2")
				}
				if _, last = x.Step(context.Background()); last != nil {
					break
				}
				clk.add(time.Minute)
			}
			var h *HaltedError
			if !errors.As(last, &h) || !strings.Contains(last.Error(), tt.wantErr) {
				t.Fatalf("err %v, want a halt saying %q\n%s", last, tt.wantErr, log.String())
			}
			if st := readState(t, cs); st.Verdict == engine.VerdictPass || st.RolledBack {
				t.Errorf("state %+v: passed or rolled back", st)
			}
		})
	}
}
