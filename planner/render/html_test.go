package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/plan"
)

func intp(v int) *int { return &v }

// htmlPlan is a plan of one StatefulSet with pods pods in waves of 5,
// and one held pod.
func htmlPlan(pods int) *plan.Plan {
	wp := plan.WorkloadPlan{Kind: "StatefulSet", Namespace: "prod", Name: "web", FromRevision: "web-1", ToRevision: "web-2",
		Pacing: "rolling", EstimatedDuration: "0s", Halted: []string{},
		Budgets: []plan.Budget{{Name: "maxUnavailable", Limit: 5, Type: "unavailable", Source: "spec"}},
		Held:    []plan.Held{{Pod: "web-held", Reason: "policy holds it"}}}
	for i := 0; i < pods; i++ {
		if i%5 == 0 {
			wp.Waves = append(wp.Waves, plan.Wave{Index: len(wp.Waves) + 1, Start: fmt.Sprintf("%dm", len(wp.Waves)),
				Budgets: []plan.WaveBudget{{Name: "maxUnavailable", Limit: 5, InUse: min(5, pods-i)}},
				Binding: &plan.Binding{Budget: "maxUnavailable", Reason: "maxUnavailable 5/5"}})
		}
		w := &wp.Waves[len(wp.Waves)-1]
		w.Actions = append(w.Actions, plan.Action{Type: plan.ActionInPlace, Pod: fmt.Sprintf("web-%d", i), Node: fmt.Sprintf("node-%d", i%40), Reasons: []string{"image changed"}})
	}
	wp.EstimatedDuration = fmt.Sprintf("%dm", len(wp.Waves))
	wp.Summary = plan.Summary{Pods: pods + 1, ToUpdate: pods, InPlace: pods, Held: 1, Waves: len(wp.Waves)}
	return &plan.Plan{APIVersion: plan.APIVersion, Kind: plan.Kind, Workloads: []plan.WorkloadPlan{wp}}
}

func renderHTML(t *testing.T, p *plan.Plan) string {
	t.Helper()
	var b bytes.Buffer
	if err := (HTML{}).Render(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Without details, the page draws what the plan names: a row per pod
// under the node its action names, the held pod, a bar per wave.
func TestHTMLPlanOnly(t *testing.T) {
	out := renderHTML(t, htmlPlan(12))
	for what, want := range map[string]int{
		`class="row pod-row"`:                              13,
		`<g class="wave-bar"`:                              3,
		`class="row budget"`:                               1,
		`class="bind-mark" style=`:                         3,
		`3 · maxUnavailable</text>`:                        1,
		`id="pod/prod/web-11"`:                             1,
		`id="wave/StatefulSet/prod/web/3"`:                 1,
		`role="button" tabindex="0" aria-expanded="false"`: 0,
		`class="bar act-held" style=`:                      1,
		`class="bar act-inplace" style=`:                   12,
	} {
		if got := strings.Count(out, what); got != want {
			t.Errorf("%s: %d times, want %d", what, got, want)
		}
	}
}

// A budget's line steps through each wave's use: 5, 5, then 2 of 12
// pods in waves of 5, with the limit above it.
func TestHTMLBudgetLine(t *testing.T) {
	out := renderHTML(t, htmlPlan(12))
	// y = 54 - v/(5*1.2)*48: 0 → 54, 5 → 14, 2 → 38.
	if want := `d="M0 54 H0 V14 H333.3 H333.3 V14 H666.7 H666.7 V38 H1000"`; !strings.Contains(out, want) {
		t.Errorf("budget line lacks %s", want)
	}
	if want := `class="limit-line" x1="0" x2="1000" y1="14" y2="14"`; !strings.Contains(out, want) {
		t.Errorf("limit line lacks %s", want)
	}
}

// A workload over collapseRows pods folds its zones (and, the zone being
// that big, its nodes) into summary rows; the rows are all there.
func TestHTMLCollapses(t *testing.T) {
	out := renderHTML(t, htmlPlan(collapseRows+5))
	if got, want := strings.Count(out, `class="row pod-row"`), collapseRows+6; got != want {
		t.Errorf("%d pod rows, want %d", got, want)
	}
	zones := strings.Count(out, `class="row group-row zone-row" role="button" tabindex="0" aria-expanded="false"`)
	nodes := strings.Count(out, `class="row group-row node-row" role="button" tabindex="0" aria-expanded="false"`)
	if zones != 1 || nodes != 41 {
		t.Errorf("%d zones and %d nodes collapsed, want 1 zone (unknown) and 41 nodes (the held pod's unknown)", zones, nodes)
	}
	if small := renderHTML(t, htmlPlan(collapseRows-5)); strings.Contains(small, `role="button" tabindex="0" aria-expanded="false"`) {
		t.Error("a workload under the threshold is collapsed")
	}
}

// Names and reasons are text, never markup, in the rows and in the
// explain data the script reads.
func TestHTMLEscapes(t *testing.T) {
	p := htmlPlan(1)
	wp := &p.Workloads[0]
	wp.Name = `<img src=x onerror=alert(1)>`
	wp.Waves[0].Actions[0].Pod = `web-</script><script>alert(2)</script>`
	wp.Halted = []string{`<b>evil</b>`}
	out := renderHTML(t, p)
	for _, bad := range []string{"<img", "</script><script>alert(2)", "<b>evil"} {
		if strings.Contains(out, bad) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
	if got := strings.Count(out, "<script"); got != 2 {
		t.Errorf("%d script elements, want the explain data and the page script", got)
	}
}

// The same plan gives the same bytes.
func TestHTMLDeterministic(t *testing.T) {
	p := htmlPlan(60)
	p.Metadata.FeatureGates = map[string]bool{"B": true, "A": false, "C": true}
	if a, b := renderHTML(t, p), renderHTML(t, p); a != b {
		t.Error("two renders of one plan differ")
	}
}

// A Deployment's ScaleReplicaSet waves list the ReplicaSet steps and the
// pods a scale-down removes, which get rows of their own.
func TestHTMLReplicaSetSteps(t *testing.T) {
	wp := plan.WorkloadPlan{Kind: "Deployment", Namespace: "d", Name: "api", EstimatedDuration: "1m", Halted: []string{},
		Waves: []plan.Wave{{Index: 1, Start: "0s", Actions: []plan.Action{
			{Type: plan.ActionScaleRS, ReplicaSet: "api-new", From: intp(0), To: intp(1), Reasons: []string{"surge"}},
			{Type: plan.ActionScaleRS, ReplicaSet: "api-old", From: intp(2), To: intp(0), Pods: []string{"api-old-a", "api-old-b"}, Reasons: []string{"down"}},
		}}}}
	out := renderHTML(t, &plan.Plan{Workloads: []plan.WorkloadPlan{wp}})
	for _, want := range []string{`<tr class="rs-step">`, `2 → 0`, `<a href="#pod/d/api-old-a">api-old-a</a>`, `id="pod/d/api-old-b"`, `Recreate (scale-down)`} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if got := strings.Count(out, `<tr class="rs-step">`); got != 2 {
		t.Errorf("%d ReplicaSet steps, want 2", got)
	}
	if got := strings.Count(out, `class="row rs-lane"`); got != 2 {
		t.Errorf("%d ReplicaSet lanes, want 2", got)
	}
	if !strings.Contains(out, `>2→0</span>`) || !strings.Contains(out, `>0→1</span>`) {
		t.Error("the ReplicaSet lanes do not label their steps from → to")
	}
}

// A halted rollout has one halt mark and a banner per reason; a stalled
// one a stall mark where it stops.
func TestHTMLHaltAndStallMarks(t *testing.T) {
	p := htmlPlan(0)
	p.Workloads[0].Halted = []string{"first reason", "second reason"}
	out := renderHTML(t, p)
	if got := strings.Count(out, `<g class="marker marker-halt">`); got != 1 {
		t.Errorf("%d halt marks, want 1", got)
	}
	if got := strings.Count(out, `<p class="banner halt" role="alert">halted: `); got != 2 {
		t.Errorf("%d halt banners, want 2", got)
	}
	p = htmlPlan(10)
	p.Workloads[0].Stalled = &plan.Stall{After: "1m", Reason: "budget full"}
	out = renderHTML(t, p)
	// 2 waves of 1m: the stall at 1m is half way.
	if !strings.Contains(out, `<g class="marker marker-stall"><title>stalled after 1m: budget full</title><line x1="50%"`) {
		t.Error("no stall mark half way along the timeline")
	}
}

// The time axis of a rollout longer than time.Duration holds (two billion
// StatefulSet replicas created one a minute) has a handful of ticks, not
// one a day for three thousand years.
func TestTicksOfAHugeRollout(t *testing.T) {
	for _, total := range []float64{1, 90, 86400 * 10, 1.2e11} {
		ts := ticks(total)
		if len(ts) < 2 || len(ts) > 8 {
			t.Errorf("ticks(%v): %d ticks, want 2 to 8", total, len(ts))
		}
	}
	if got := formatSeconds(1.2e11); got != "33333333h" {
		t.Errorf("formatSeconds(1.2e11) = %q", got)
	}
}
