package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/plan"
)

// bigDaemonSet is the plan of a 5,000-pod DaemonSet rolled 500 pods a wave
// (maxUnavailable 10%), with 20 held and 30 blocked pods and 15 halts.
func bigDaemonSet() *plan.Plan {
	wp := plan.WorkloadPlan{Kind: "DaemonSet", Namespace: "kube-system", Name: "agent", FromRevision: "agent-1", ToRevision: "agent-2"}
	wp.Summary = plan.Summary{Pods: 5000, ToUpdate: 5000, Recreate: 4950, Blocked: 30, Held: 20, Waves: 10}
	for w := range 10 {
		wave := plan.Wave{Index: w, Start: fmt.Sprintf("%ds", w*60), Budgets: []plan.WaveBudget{{Name: "maxUnavailable", Limit: 500, InUse: 500}}}
		if w < 9 {
			wave.Binding = &plan.Binding{Budget: "maxUnavailable", Reason: "maxUnavailable 500/500: 500 pod(s) unavailable, and the next would make 501"}
		}
		for i := range 500 {
			wave.Actions = append(wave.Actions, plan.Action{Type: plan.ActionRecreate, Pod: fmt.Sprintf("agent-%05d", w*500+i)})
		}
		wp.Waves = append(wp.Waves, wave)
	}
	for i := range 20 {
		wp.Held = append(wp.Held, plan.Held{Pod: fmt.Sprintf("held-%02d", i), Reason: "node cordoned"})
	}
	for i := range 30 {
		wp.Blocked = append(wp.Blocked, plan.Held{Pod: fmt.Sprintf("blocked-%02d", i), Reason: "InPlaceOnly"})
	}
	for i := range 15 {
		wp.Halted = append(wp.Halted, fmt.Sprintf("pod agent-%05d is crash-looping since the update (4 restarts)", i))
	}
	return &plan.Plan{Workloads: []plan.WorkloadPlan{wp}}
}

// The table names the first pods of a long list and counts the rest, so a
// 5,000-pod DaemonSet reads at a glance; -o wide names every pod.
func TestTableLongLists(t *testing.T) {
	render := func(tb Table) string {
		var b bytes.Buffer
		if err := tb.Render(&b, bigDaemonSet()); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	narrow := render(Table{})
	for _, line := range strings.Split(narrow, "\n") {
		if len(line) > 300 {
			t.Errorf("table line of %d characters: %.120s...", len(line), line)
		}
	}
	for _, want := range []string{
		"  WAVE  START  BOUND BY                ACTIONS\n",
		"  0     0s     maxUnavailable 500/500  Recreate agent-00000 agent-00001 agent-00002 agent-00003 agent-00004 agent-00005 agent-00006 agent-00007 (+492 more)\n",
		"  9     540s   -                       Recreate agent-04500 ",
		"  held: held-00 (node cordoned), held-01 (node cordoned), held-02 (node cordoned), held-03 (node cordoned), held-04 (node cordoned), held-05 (node cordoned), held-06 (node cordoned), held-07 (node cordoned), (+12 more)\n",
		"  blocked: blocked-00, blocked-01, blocked-02, blocked-03, blocked-04, blocked-05, blocked-06, blocked-07, (+22 more) (InPlaceOnly)\n",
		"    - pod agent-00007 is crash-looping since the update (4 restarts)\n    - (+7 more)\n",
	} {
		if !strings.Contains(narrow, want) {
			t.Errorf("table lacks %q:\n%s", want, narrow)
		}
	}
	wide := render(Table{Wide: true})
	for _, want := range []string{"agent-04999\n", "held-19 (node cordoned)\n", "blocked-29 (InPlaceOnly)", "pod agent-00014 is crash-looping"} {
		if !strings.Contains(wide, want) {
			t.Errorf("-o wide lacks %q", want)
		}
	}
	if strings.Contains(wide, "more)") {
		t.Error("-o wide counts pods instead of naming them")
	}
	// A list at the cap prints whole in both.
	short := bigDaemonSet()
	short.Workloads[0].Held = short.Workloads[0].Held[:namedMax]
	var b bytes.Buffer
	if err := (Table{}).Render(&b, short); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "held-11 (node cordoned)\n") {
		t.Errorf("a list of %d held pods is cut:\n%s", namedMax, b.String())
	}
}
