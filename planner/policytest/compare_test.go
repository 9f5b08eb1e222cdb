package policytest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/plan"
)

// An expected plan whose waves carry no budgets (a suite written before
// the plan had them) compares without a wave's budgets and binding; one
// whose waves carry them compares them.
func TestComparePlanNewWaveFields(t *testing.T) {
	got := []plan.WorkloadPlan{{
		Kind: "StatefulSet", Namespace: "default", Name: "web", Budgets: []plan.Budget{}, Held: []plan.Held{}, Halted: []string{},
		Waves: []plan.Wave{{
			Index: 1, Start: "0s",
			Actions: []plan.Action{{Type: plan.ActionRecreate, Pod: "web-1", Reasons: []string{"image"}}},
			Budgets: []plan.WaveBudget{{Name: "maxUnavailable", Limit: 1, InUse: 1}},
			Binding: &plan.Binding{Budget: "maxUnavailable", Reason: "maxUnavailable 1/1"},
		}},
	}}
	js, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var full []map[string]any
	if err := json.Unmarshal(js, &full); err != nil {
		t.Fatal(err)
	}
	wave := func(w []map[string]any) map[string]any { return w[0]["waves"].([]any)[0].(map[string]any) }
	for _, c := range []struct {
		name   string
		change func(w []map[string]any)
		want   string // a line of the diff; "" for none
	}{
		{"the same", func([]map[string]any) {}, ""},
		{"written without budgets and binding", func(w []map[string]any) { delete(wave(w), "budgets"); delete(wave(w), "binding") }, ""},
		{"budgets compared when given", func(w []map[string]any) {
			wave(w)["budgets"].([]any)[0].(map[string]any)["inUse"] = 0
		}, "-           inUse: 0"},
		{"binding compared with budgets", func(w []map[string]any) { delete(wave(w), "binding") }, "+         budget: maxUnavailable"},
		{"other fields still compared", func(w []map[string]any) {
			delete(wave(w), "budgets")
			wave(w)["start"] = "1m"
		}, "-       start: 1m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want []map[string]any
			_ = json.Unmarshal(js, &want)
			c.change(want)
			wjs, _ := json.Marshal(want)
			d, err := comparePlan(wjs, got)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == "" && d != "":
				t.Errorf("differs:\n%s", d)
			case c.want != "" && !strings.Contains(d, c.want):
				t.Errorf("diff lacks %q:\n%s", c.want, d)
			}
		})
	}
}
