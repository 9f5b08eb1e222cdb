package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/executor"
)

// apply records Events (events.k8s.io/v1) on the workload for the actions
// it carries out; a dry run records none.
func TestApplyEvents(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, dry := range []bool{false, true} {
		fakeApply(t, march, "sts-inplace-image-only")
		cl, err := connectCluster(&kubeFlags{})
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"apply", "sts/web", "--once"}
		if dry {
			args = append(args, "--dry-run=server")
		}
		if _, stderr, err := run(t, args...); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		evs, err := cl.client.EventsV1().Events(cl.namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dry {
			if len(evs.Items) != 0 {
				t.Errorf("dry run recorded %d events", len(evs.Items))
			}
			continue
		}
		if len(evs.Items) == 0 {
			t.Fatal("no events recorded")
		}
		for _, ev := range evs.Items {
			if ev.Reason != executor.ReasonInPlaceUpdate || ev.ReportingController != executor.ReportingController ||
				ev.Regarding.Kind != "StatefulSet" || ev.Regarding.Name != "web" || ev.Related == nil ||
				!strings.Contains(ev.Note, ev.Related.Name) {
				t.Errorf("event %s: reason %q controller %q regarding %v related %v note %q", ev.Name, ev.Reason, ev.ReportingController, ev.Regarding, ev.Related, ev.Note)
			}
		}
	}
}

// --metrics-bind-address serves the registry at /metrics; "" and "0" turn
// metrics off (controller-runtime's reading of "0"), ":0" is a free port.
func TestServeMetrics(t *testing.T) {
	cases := []struct {
		addr  string
		serve bool
	}{
		{addr: "", serve: false},
		{addr: "0", serve: false},
		{addr: "127.0.0.1:0", serve: true},
		{addr: ":0", serve: true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q", c.addr), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := executor.NewMetrics(reg)
			m.Steps.Inc()
			var log bytes.Buffer
			stop, err := serveMetrics(c.addr, reg, slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if got := metricsOff(c.addr); got == c.serve {
				t.Errorf("metricsOff(%q) = %v, want %v", c.addr, got, !c.serve)
			}
			url := regexp.MustCompile(`http://\S+/metrics`).FindString(log.String())
			if !c.serve {
				if log.Len() != 0 {
					t.Errorf("metrics off, but serveMetrics logged %q", log.String())
				}
				return
			}
			if url == "" {
				t.Fatalf("no metrics address logged: %q", log.String())
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), "rollplan_executor_steps_total 1") {
				t.Errorf("/metrics lacks the steps counter:\n%s", body)
			}
		})
	}
}

// The progress line names waves, pods and budgets, and a log line written
// through it clears the line first.
func TestProgressLine(t *testing.T) {
	st := &executor.RolloutStatus{Verdict: "in progress: wave 2 of 4",
		Workload: executor.StatusWorkload{Namespace: "prod", Name: "web"},
		Pods:     executor.StatusPods{Desired: 8, Updated: 4, Available: 6, InFlight: 2},
		Waves:    executor.StatusWaves{Done: 1, Total: 4},
		Budgets:  []executor.StatusBudget{{Name: "maxUnavailable", InUse: 2, Limit: 2}}}
	var out bytes.Buffer
	p := &progress{w: &out}
	p.step(&executor.StepResult{Status: st})
	want := "prod/web: waves 1/4, pods 4/8 updated, 6 available, 2 in flight, maxUnavailable 2/2 — in progress: wave 2 of 4"
	if out.String() != want {
		t.Errorf("line %q, want %q", out.String(), want)
	}
	_, _ = p.Write([]byte("log\n"))
	p.done()
	if got := out.String(); got != want+"\r\033[Klog\n" {
		t.Errorf("output %q", got)
	}
	if isTerminal(&out) {
		t.Error("a buffer is not a terminal")
	}
}
