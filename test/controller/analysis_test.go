package controller

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rolloutv1 "github.com/rollplan/rollplan/api/v1alpha1"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/prometheus"
)

// analysisPolicy gates every wave: soak 2s, then the wave's highest error
// ratio, twice 1s apart, from the provider options named; above 0.5
// fails and rolls back, unreadable is inconclusive (measured once more).
func analysisPolicy(t *testing.T, options string) string {
	t.Helper()
	dir := t.TempDir()
	rego := `package rollplan.strategy

import data.rollplan.defaults

analysis := {
	"soak": "2s",
	"maxInconclusive": 1,
	"onFail": "rollback",
	"measurements": [{
		"name": "errors",
		"provider": "prometheus",
		"query": ` + "`" + `max(rollplan_test_pod_errors{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"})` + "`" + `,
		"interval": "1s",
		"count": 2,
		"options": "` + options + `",
	}],
}

analysis_verdict := {"verdict": "inconclusive", "message": concat("; ", defaults.analysis_unreadable)} if {
	count(defaults.analysis_unreadable) > 0
} else := {"verdict": "fail", "message": concat("; ", failures)} if {
	count(failures) > 0
} else := {"verdict": "pass", "message": "errors at most 0.5"}

failures := [msg |
	some m in input.analysis.measurements
	some r in m.results
	r.value > 0.5
	msg := sprintf("errors = %v, above 0.5 (query %s)", [r.value, m.query])
]
`
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exporter serves one series per pod of the namespace: its error ratio,
// 1 when its spec runs an image tagged "bad", else 0.
func (e *env) exporter() string {
	e.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pods, err := e.client.CoreV1().Pods(e.ns).List(r.Context(), metav1.ListOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "# TYPE rollplan_test_pod_errors gauge")
		for _, p := range pods.Items {
			v := 0
			if strings.HasSuffix(p.Spec.Containers[0].Image, ":bad") {
				v = 1
			}
			fmt.Fprintf(w, "rollplan_test_pod_errors{namespace=%q,pod=%q} %d\n", p.Namespace, p.Name, v)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// TestAnalysisGates: a controller with --analysis-config and a real
// Prometheus scraping an exporter of each pod's error ratio.
//
//   - good: a good image rolls wave by wave (three waves of two), each
//     gate soaked and measured in the controller's log, and completes.
//   - bad: an image tagged bad fails the first gate; the controller rolls
//     the template back and the two updated pods return in place, never
//     more than the budget unavailable; the later pods never see it. The
//     same for a DaemonSet (one pod per node, budget 1) and a managed
//     Deployment updated in place (budget 2); the Rollout of each says
//     RolledBack.
//   - down: its policy's Prometheus is stopped: inconclusive, measured
//     once more, then halted (never a pass), the reason naming the query;
//     rollplan status shows the gate, rollplan abort (and resume) rolls it
//     back.
func TestAnalysisGates(t *testing.T) {
	e := newEnv(t, "analysis", 3, 3*time.Minute)
	addr := e.exporter()
	targets := []prometheus.Target{{Addr: addr, Labels: map[string]string{"job": "pods"}}}
	prom := prometheus.Start(t, prometheus.Config{Targets: targets})
	stopped := prometheus.Start(t, prometheus.Config{Targets: targets})
	cfg := filepath.Join(t.TempDir(), "analysis.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "providers:\n  prometheus:\n    address: %s\n  down:\n    type: prometheus\n    address: %s\n    timeout: 2s\n", prom.URL, stopped.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	rollouts := e.installRolloutCRD()
	ctrl := e.startController("ctrl-a", "--policy", analysisPolicy(t, "prometheus"), "--named-policy", "down="+analysisPolicy(t, "down"), "--analysis-config", cfg)

	good, bad, down := wl("StatefulSet", "good", 6, 2, true), wl("StatefulSet", "bad", 4, 2, true), wl("StatefulSet", "down", 4, 2, true)
	e.create(statefulSet(e.ns, good.Name, 6, "2"))
	e.create(statefulSet(e.ns, bad.Name, 4, "2"))
	d := statefulSet(e.ns, down.Name, 4, "2")
	d.Annotations[facts.AnnPolicy] = "down"
	e.create(d)
	// A bad version of a DaemonSet (one pod per node, budget 1) and of a
	// managed Deployment (in place, budget 2) too: the gate holds every
	// kind rollplan drives wave by wave.
	badDS, badDeploy := wl("DaemonSet", "bad-ds", e.nodes, 1, true), wl("Deployment", "bad-deploy", 4, 2, true)
	e.create(daemonSet(e.ns, badDS.Name, "1"))
	e.create(deployment(e.ns, badDeploy.Name, 4, "2"))
	e.waitRolledOut([]workload{good, bad, down, badDS, badDeploy}, 60*time.Second)
	before := map[string]map[string]string{}
	w := e.watchPods()
	for _, x := range []workload{good, bad, badDS, badDeploy} {
		before[x.Name] = e.uids(x.Name)
		w.follow(x)
	}
	if _, err := prom.Wait(`count(rollplan_test_pod_errors)`, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	queriesBefore := prom.InstantQueries(t)
	stopped.Stop()

	since := time.Now()
	const v2, badImage = "example.com/app:v2", "example.com/app:bad"
	e.setTemplate("StatefulSet", good.Name, setImage(v2))
	e.setTemplate("StatefulSet", bad.Name, setImage(badImage))
	e.setTemplate("StatefulSet", down.Name, setImage(v2))
	e.setTemplate("DaemonSet", badDS.Name, setImage(badImage))
	e.setTemplate("Deployment", badDeploy.Name, setImage(badImage))

	t.Run("good: every gate soaks, measures and passes", func(t *testing.T) {
		took := e.waitRolledOut([]workload{good}, 60*time.Second)
		e.checkPods(good, before[good.Name], v2, "a")
		w.check(e, good.Name, since, 1)
		verdicts := analysisLog(ctrl.log.String(), good.Name)
		if strings.Join(verdicts, " ") != "soak:1 pass:1 soak:2 pass:2" {
			t.Errorf("good: the controller's analysis log %v, want a soak and a pass for waves 1 and 2", verdicts)
		}
		e.logf("good rolled out in %s through 2 gates: %v", took.Round(100*time.Millisecond), verdicts)
		// The Rollout carries the last gate's verdict: wave 2 passed.
		e.waitRollout(rollouts, "statefulset-"+good.Name, "Ready with wave 2's gate passed", 20*time.Second, func(u *unstructured.Unstructured) bool {
			st, reason, msg := analysisCondition(u)
			return condition(u, "Ready") == "True" && st == "True" && reason == "Passed" && strings.Contains(msg, "wave 2 (try 1): pass: errors at most 0.5")
		})
	})
	t.Run("bad: the first gate fails and the rollout rolls back in place", func(t *testing.T) {
		e.waitState("StatefulSet", bad.Name, "rolled back and Complete", 60*time.Second, func(s *live.RolloutState, m metav1.Object) bool {
			_, tmpl, err := e.object("StatefulSet", bad.Name)
			return err == nil && tmpl.Spec.Containers[0].Image == "example.com/app:v1" && s.Phase == live.RolloutComplete && s.Generation == m.GetGeneration()
		})
		e.waitRolledOut([]workload{bad}, 60*time.Second)
		done := time.Now()
		e.checkPods(bad, before[bad.Name], "example.com/app:v1", "a")
		w.check(e, bad.Name, since, 2)
		if got := w.changedTo(bad.Name, badImage); len(got) != 2 || got["bad-3"].IsZero() || got["bad-2"].IsZero() {
			t.Errorf("bad: pods that ran the bad image: %v, want bad-3 and bad-2 (the first wave) only", got)
		}
		verdicts := analysisLog(ctrl.log.String(), bad.Name)
		if len(verdicts) < 2 || verdicts[1] != "fail:1" || strings.Contains(strings.Join(verdicts, " "), "pass") {
			t.Errorf("bad: the controller's analysis log %v, want wave 1 failed and no pass", verdicts)
		}
		// The Rollout: rolled out (to the old revision), and why.
		e.waitRollout(rollouts, "statefulset-"+bad.Name, "Ready with the gate rolled back", 20*time.Second, func(u *unstructured.Unstructured) bool {
			st, reason, msg := analysisCondition(u)
			return condition(u, "Ready") == "True" && st == "False" && reason == "RolledBack" && strings.Contains(msg, "errors = 1, above 0.5 (query max(rollplan_test_pod_errors{")
		})
		if n := e.eventCount("StatefulSet", bad.Name, "AnalysisFailed", "Warning"); n != 1 {
			t.Errorf("bad: %d Warning events AnalysisFailed, want 1", n)
		}
		// The controller's own times: its failing verdict, then the first
		// Complete it records after it.
		failedAt := logTime(ctrl.log.String(), bad.Name, "analysis", "fail")
		completeAt := done
		for _, l := range harness.LogLines(ctrl.log.String()) {
			wl, _ := l["workload"].(string)
			state, _ := l["state"].(string)
			at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
			if strings.HasSuffix(wl, "/"+bad.Name) && l["msg"] == "rollout" && strings.HasPrefix(state, "Complete") && at.After(failedAt) {
				completeAt = at
				break
			}
		}
		if failedAt.IsZero() {
			t.Fatal("bad: no failing verdict in the controller's log")
		}
		e.logf("bad: from the failing verdict to the rollback's completion: %s (the controller's log times)", completeAt.Sub(failedAt).Round(10*time.Millisecond))
		// rollplan status: rolled out, but back: exit 3 for a pipeline.
		if out, errOut, code := e.cli("status", "statefulset/"+bad.Name); code != 3 || !strings.Contains(out, "rolled back to ") || !strings.Contains(errOut, "failed") {
			t.Errorf("bad: rollplan status after the rollback exit %d, want 3 and 'rolled back to':\n%s%s", code, out, errOut)
		}
		// The same bad template applied again (a GitOps tool putting it
		// back) is refused, not rolled a wave at a time again.
		e.setTemplate("StatefulSet", bad.Name, setImage(badImage))
		st := e.waitState("StatefulSet", bad.Name, "Halted: the failed revision refused", 30*time.Second, func(s *live.RolloutState, m metav1.Object) bool {
			return s.Phase == live.RolloutHalted && s.Generation == m.GetGeneration()
		})
		if msg := strings.Join(st.Reasons, "; "); !strings.Contains(msg, "failed its analysis and was rolled back") {
			t.Errorf("bad: applied again, halted with %q, want the failed revision named", msg)
		}
		if n := e.updatedPods(bad.Name, badImage); n != 0 {
			t.Errorf("bad: applied again, %d pods run the bad image, want none", n)
		}
	})
	for _, x := range []workload{badDS, badDeploy} {
		t.Run(x.Kind+": the first gate fails and the rollout rolls back in place", func(t *testing.T) {
			// (A Deployment's generation moves with the state's own
			// annotation writes: the template and the phase say it.)
			e.waitState(x.Kind, x.Name, "rolled back and Complete", 60*time.Second, func(s *live.RolloutState, m metav1.Object) bool {
				_, tmpl, err := e.object(x.Kind, x.Name)
				return err == nil && tmpl.Spec.Containers[0].Image == "example.com/app:v1" && s.Phase == live.RolloutComplete &&
					(x.Kind == "Deployment" || s.Generation == m.GetGeneration())
			})
			e.waitRolledOut([]workload{x}, 60*time.Second)
			e.checkPods(x, before[x.Name], "example.com/app:v1", "a")
			w.check(e, x.Name, since, 2)
			// The first wave only (the budget's worth of pods) ever ran it.
			if got := w.changedTo(x.Name, badImage); len(got) != x.Budget {
				t.Errorf("%s: pods that ran the bad image: %v, want the first wave's %d only", x.ref(), got, x.Budget)
			}
			if v := analysisLog(ctrl.log.String(), x.Name); strings.Join(v, " ") != "soak:1 fail:1" {
				t.Errorf("%s: the controller's analysis log %v, want wave 1 soaked and failed, nothing else", x.ref(), v)
			}
			if n := e.eventCount(x.Kind, x.Name, "AnalysisFailed", "Warning"); n != 1 {
				t.Errorf("%s: %d Warning events AnalysisFailed, want 1", x.ref(), n)
			}
			e.waitRollout(rollouts, rolloutName(x), "Ready with the gate rolled back", 20*time.Second, func(u *unstructured.Unstructured) bool {
				st, reason, _ := analysisCondition(u)
				return condition(u, "Ready") == "True" && st == "False" && reason == "RolledBack"
			})
		})
	}
	t.Run("down: Prometheus stopped: inconclusive twice, halted; status shows it; abort rolls back", func(t *testing.T) {
		st := e.waitState("StatefulSet", down.Name, "Halted", 60*time.Second, func(s *live.RolloutState, _ metav1.Object) bool { return s.Phase == live.RolloutHalted })
		msg := strings.Join(st.Reasons, "; ") + st.Message
		if !strings.Contains(msg, "inconclusive after 2 tries") || !strings.Contains(msg, `query max(rollplan_test_pod_errors{namespace="`+e.ns+`",pod=~"down-2|down-3"})`) {
			t.Errorf("down: halted with %q, want the inconclusive tries and the query named", msg)
		}
		// Two tries, two verdicts: a step retried after the halt (its
		// record failed to write) neither measures nor judges again.
		if v := analysisLog(ctrl.log.String(), down.Name); strings.Join(v, " ") != "soak:1 inconclusive:1 inconclusive:1" {
			t.Errorf("down: analysis log %v, want a soak, then two inconclusive verdicts for wave 1, and never a pass", v)
		}
		u := e.waitRollout(rollouts, "statefulset-"+down.Name, "Stalled with the gate halted", 20*time.Second, func(u *unstructured.Unstructured) bool {
			st, reason, _ := analysisCondition(u)
			return condition(u, "Stalled") == "True" && st == "False" && reason == "Halted"
		})
		if _, _, msg := analysisCondition(u); !strings.Contains(msg, "inconclusive after 2 tries") || !strings.Contains(msg, "errors = error, (2 of 2 without a value") {
			t.Errorf("down: the Rollout's AnalysisPassed message %q, want the tries and the missing values", msg)
		}
		if n := e.updatedPods(down.Name, v2); n != 2 {
			t.Errorf("down: %d pods at %s, want the first wave's 2 only", n, v2)
		}
		// status shows the gate's values; abort (then resume: a halt holds
		// until then) rolls it back.
		out, errOut, code := e.cli("status", "statefulset/"+down.Name)
		if code != 3 || !strings.Contains(out, "Analysis:") || !strings.Contains(out, "halted: analysis after wave 1 inconclusive after 2 tries") || !strings.Contains(out, "errors = error, (2 of 2 without a value") {
			t.Errorf("down: rollplan status exit %d, want 3 and the gate's verdict and errors:\n%s%s", code, out, errOut)
		}
		e.logf("down: %s", e.mustCLI("abort", "statefulset/"+down.Name))
		e.mustCLI("resume", "statefulset/"+down.Name)
		e.waitState("StatefulSet", down.Name, "rolled back and Complete", 60*time.Second, func(s *live.RolloutState, m metav1.Object) bool {
			_, tmpl, err := e.object("StatefulSet", down.Name)
			return err == nil && tmpl.Spec.Containers[0].Image == "example.com/app:v1" && s.Phase == live.RolloutComplete && s.Generation == m.GetGeneration()
		})
		e.waitRolledOut([]workload{down}, 60*time.Second)
		if n := e.updatedPods(down.Name, "example.com/app:v1"); n != 4 {
			t.Errorf("down: after abort %d pods at v1, want 4", n)
		}
		if out, _, _ := e.cli("abort", "statefulset/"+down.Name); true {
			_, errOut, code := e.cli("abort", "statefulset/"+down.Name)
			if code == 0 || !strings.Contains(errOut, "already rolled back") {
				t.Errorf("down: a second abort exit %d: %s%s", code, out, errOut)
			}
		}
	})
	served := prom.InstantQueries(t) - queriesBefore
	// good: 2 gates, bad, bad-ds, bad-deploy: 1 each; each one
	// measurement taken twice (count 2).
	e.logf("Prometheus served %d instant queries for 5 gated waves, each one measurement taken twice (%.1f per wave)", served, float64(served)/5)
	if served != 10 {
		t.Errorf("Prometheus served %d queries, want 10 (5 gates x count 2): a gate measures each try once", served)
	}
}

// rolloutName is the name of a workload's Rollout.
func rolloutName(w workload) string { return strings.ToLower(w.Kind) + "-" + w.Name }

// analysisCondition: the Rollout's AnalysisPassed condition's status,
// reason and message ("" if absent).
func analysisCondition(u *unstructured.Unstructured) (string, string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == rolloutv1.ConditionAnalysisPassed {
			st, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return st, reason, msg
		}
	}
	return "", "", ""
}

// analysisLog: the controller's soak and analysis lines for a workload,
// as "soak:WAVE" and "VERDICT:WAVE".
func analysisLog(log, name string) []string {
	gates, _ := harness.GateLog(harness.LogLines(log), name, time.Time{})
	return gates
}

// logTime: the time of the first log line msg of the workload with that
// verdict.
func logTime(log, name, msg, verdict string) time.Time {
	for _, l := range harness.LogLines(log) {
		wl, _ := l["workload"].(string)
		if strings.HasSuffix(wl, "/"+name) && l["msg"] == msg && l["verdict"] == verdict {
			ts, _ := l["time"].(string)
			at, _ := time.Parse(time.RFC3339Nano, ts)
			return at
		}
	}
	return time.Time{}
}
