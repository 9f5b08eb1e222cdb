package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/plan"
)

// bigPlan is a DaemonSet of pods pods rolled waves waves, pods spread
// evenly, with one pod held per wave.
func bigPlan(pods, waves int) *plan.Plan {
	wp := plan.WorkloadPlan{Kind: "DaemonSet", Namespace: "kube-system", Name: "agent", FromRevision: "agent-1", ToRevision: "agent-2",
		Pacing: "rolling", PodUpdatePolicy: "Recreate", EstimatedDuration: "4h10m",
		Budgets: []plan.Budget{{Name: "maxUnavailable", Limit: pods / waves, Type: "unavailable", Source: "spec.updateStrategy.rollingUpdate.maxUnavailable=2%"}}}
	n := 0
	for w := 1; w <= waves; w++ {
		wave := plan.Wave{Index: w, Start: fmt.Sprintf("%dm", w*5)}
		for i := 0; i < pods/waves; i++ {
			wave.Actions = append(wave.Actions, plan.Action{Type: plan.ActionRecreate, Pod: fmt.Sprintf("agent-%05d", n), Reasons: []string{"spec.containers[agent].env changed"}})
			n++
		}
		wp.Waves = append(wp.Waves, wave)
		wp.Held = append(wp.Held, plan.Held{Pod: fmt.Sprintf("held-%d", w), Reason: "node cordoned"})
	}
	wp.Summary = plan.Summary{Pods: n + waves, ToUpdate: n, Recreate: n, Held: waves, Waves: waves}
	return &plan.Plan{APIVersion: plan.APIVersion, Kind: plan.Kind, Workloads: []plan.WorkloadPlan{wp}}
}

// At 5,000 pods in 50 waves the comment stays short: a wave row names
// namedShown pods and counts the rest, and the table shows namedShown
// waves, one row counting the others, and the last.
func TestMarkdownStaysShortAtScale(t *testing.T) {
	var out bytes.Buffer
	if err := (Markdown{}).Render(&out, bigPlan(5000, 50)); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	if len(md) > 8000 {
		t.Errorf("markdown of 5,000 pods is %d bytes, want at most 8000:\n%s", len(md), md)
	}
	rows := 0
	for _, l := range strings.Split(md, "\n") {
		if len(l) > 400 {
			t.Errorf("line of %d characters: %.120s...", len(l), l)
		}
		if strings.HasPrefix(l, "| ") && strings.Contains(l, "Recreate") || strings.HasPrefix(l, "| … |") {
			rows++
		}
	}
	if want := namedShown + 2; rows != want {
		t.Errorf("%d wave rows, want %d (first %d, one counting row, the last):\n%s", rows, want, namedShown, md)
	}
	for _, want := range []string{
		"| … | 45m–245m | | 41 more waves",
		"| 50 | 250m | - | Recreate agent-04900",
		"(+92 more)",
		"**Held:** held-1 (node cordoned),",
		"- 5000 × Recreate: spec.containers\\[agent\\].env changed",
		"> [!NOTE]",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// Denied, halted, stalled and failed workloads come first, in the callout,
// whatever their order in the plan; a plan without them says all is well.
func TestMarkdownAttention(t *testing.T) {
	p := &plan.Plan{Workloads: []plan.WorkloadPlan{
		{Kind: "Deployment", Namespace: "a", Name: "ok", FromRevision: "ok-1", ToRevision: "ok-2"},
		{Kind: "StatefulSet", Namespace: "a", Name: "db", Denied: []string{"tier=critical allows at most 25% <unavailable>"}, Halted: []string{"change freeze"}},
		{Kind: "DaemonSet", Namespace: "b", Name: "agent", Stalled: &plan.Stall{After: "5m", Reason: "maxUnavailable 0"}},
		{Kind: "Deployment", Namespace: "b", Name: "bad", Error: "spec.strategy.type \"Blue\": want RollingUpdate or Recreate"},
	}}
	var out bytes.Buffer
	if err := (Markdown{}).Render(&out, p); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	callout := md[:strings.Index(md, "### ")]
	for _, want := range []string{
		"> [!CAUTION]\n> **1 denied, 1 halted, 1 stalled, 1 not planned**",
		"> - **Denied** `StatefulSet a/db`: tier=critical allows at most 25% &lt;unavailable>",
		"> - **Halted** `StatefulSet a/db`: change freeze",
		"> - **Stalled** `DaemonSet b/agent` after 5m: maxUnavailable 0",
		"> - **Not planned** `Deployment b/bad`:",
	} {
		if !strings.Contains(callout, want) {
			t.Errorf("the callout lacks %q:\n%s", want, callout)
		}
	}
	if !strings.Contains(md, "### Deployment `a/ok`: `ok-1` → `ok-2`") || !strings.Contains(md, "### Deployment `b/bad`: not planned") {
		t.Errorf("workload headings missing:\n%s", md)
	}
	out.Reset()
	if err := (Markdown{}).Render(&out, &plan.Plan{Metadata: plan.Metadata{Warnings: []string{"Deployment a/new is not in the snapshot"}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## rollplan plan: 0 workloads", "nothing rolls out", "### Warnings about the input\n\n- Deployment a/new is not in the snapshot"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("an empty plan's markdown lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "[!") {
		t.Errorf("an empty plan has a callout:\n%s", out.String())
	}
}
