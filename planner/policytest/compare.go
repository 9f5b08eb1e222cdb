package policytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/plan"
)

// compareDecisions returns one message per expected field that differs.
func compareDecisions(want map[string]WorkloadDecisions, res *plan.Result) []string {
	var diffs []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		wd := want[key]
		kind, ns, name, _ := ParseWorkload(key) // validated when decoded
		var det *plan.Detail
		var present []string
		for _, d := range res.Details {
			w := d.Facts.Workload
			present = append(present, w.Kind+"/"+w.Namespace+"/"+w.Name)
			if w.Kind == kind && w.Namespace == ns && w.Name == name {
				det = d
			}
		}
		if det == nil {
			diffs = append(diffs, fmt.Sprintf("decisions[%s]: no such workload in the plan (it has: %s)", key, strings.Join(present, ", ")))
			continue
		}
		diffs = append(diffs, compareWorkload(key, wd, det)...)
		for _, wp := range res.Plan.Workloads {
			if wp.Kind == kind && wp.Namespace == ns && wp.Name == name {
				diffs = append(diffs, compareGates(key, wd.Gates, &wp)...)
			}
		}
	}
	return diffs
}

func compareWorkload(key string, want WorkloadDecisions, det *plan.Detail) []string {
	var diffs []string
	field := func(f string, want, got any) {
		if w, g := canonical(want), canonical(got); w != g {
			diffs = append(diffs, fmt.Sprintf("decisions[%s].%s:\n  want: %s\n  got:  %s", key, f, w, g))
		}
	}
	list := func(f string, want, got []string) {
		if reflect.DeepEqual(nonNil(want), nonNil(got)) {
			return
		}
		if w, g := canonical(nonNil(want)), canonical(nonNil(got)); len(w)+len(g) <= 120 {
			diffs = append(diffs, fmt.Sprintf("decisions[%s].%s:\n  want: %s\n  got:  %s", key, f, w, g))
			return
		}
		diffs = append(diffs, fmt.Sprintf("decisions[%s].%s (- want, + got):\n%s", key, f, listDiff(want, got)))
	}
	for _, pod := range slices.Sorted(maps.Keys(want.Pods)) {
		wp := want.Pods[pod]
		idx := -1
		for i, p := range det.Facts.Pods {
			if p.Name == pod {
				idx = i
			}
		}
		pf := "pods[" + pod + "]"
		if idx < 0 {
			var names []string
			for _, p := range det.Facts.Pods {
				names = append(names, p.Name)
			}
			diffs = append(diffs, fmt.Sprintf("decisions[%s].%s: no such pod in the workload (it has: %s)", key, pf, strings.Join(names, ", ")))
			continue
		}
		if det.Facts.Pods[idx].Updated {
			diffs = append(diffs, fmt.Sprintf("decisions[%s].%s: the pod already runs the update revision; the policy decides nothing for it", key, pf))
			continue
		}
		got := det.Decisions.Pods[idx]
		scope := ScopeIn
		if !got.InScope {
			scope = ScopeHeld
		}
		if wp.Scope != "" {
			field(pf+".scope", wp.Scope, scope)
		}
		if wp.HeldReason != nil {
			field(pf+".heldReason", *wp.HeldReason, got.HeldReason)
		}
		if wp.Action != "" {
			field(pf+".action", wp.Action, got.Action)
		}
		if wp.Reasons != nil {
			list(pf+".reasons", *wp.Reasons, got.Reasons)
		}
		if wp.Order != nil {
			field(pf+".order", *wp.Order, got.Order)
		}
	}
	if want.Budgets != nil {
		list("budgets", budgetLines(*want.Budgets), budgetLines(det.Decisions.Budgets))
	}
	if want.Pacing != "" {
		field("pacing", want.Pacing, det.Decisions.Pacing)
	}
	if want.NodePreparation != "" {
		field("nodePreparation", want.NodePreparation, det.Decisions.NodePreparation)
	}
	if a := want.Analysis; a != nil {
		got := det.Decisions.Analysis
		if a.Declared != nil {
			field("analysis.declared", *a.Declared, got != nil)
		}
		if got == nil {
			got = &engine.Analysis{}
		}
		if a.Soak != "" {
			field("analysis.soak", a.Soak, got.Soak)
		}
		if a.OnFail != "" {
			field("analysis.onFail", a.OnFail, got.OnFail)
		}
		if a.MaxInconclusive != nil {
			field("analysis.maxInconclusive", *a.MaxInconclusive, got.MaxInconclusive)
		}
		if a.Measurements != nil {
			names := []string{}
			for _, m := range got.Measurements {
				names = append(names, m.Name)
			}
			list("analysis.measurements", a.Measurements, names)
		}
	}
	if want.Halt != nil {
		list("halt", *want.Halt, det.Decisions.Halt)
	}
	if want.Deny != nil {
		list("deny", *want.Deny, det.Decisions.Deny)
	}
	return diffs
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// canonical is a value's compact JSON after a round trip, so that numbers
// compare by value (1 == 1.0) whatever Go type holds them.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	var x any
	if json.Unmarshal(b, &x) != nil {
		return string(b)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func budgetLines(bs []engine.Budget) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = canonical(b)
	}
	return out
}

// comparePlan compares the expected workloads (JSON) with the plan's and
// returns a line diff of their YAML when they differ.
func comparePlan(want json.RawMessage, got []plan.WorkloadPlan) (string, error) {
	var w any
	if err := json.Unmarshal(want, &w); err != nil {
		return "", fmt.Errorf("expect.plan.workloads: %w", err)
	}
	gotJS, err := json.Marshal(got)
	if err != nil {
		return "", err
	}
	var g any
	if err := json.Unmarshal(gotJS, &g); err != nil {
		return "", err
	}
	g = withoutNewWaveFields(w, g)
	if gotJS, err = json.Marshal(g); err != nil {
		return "", err
	}
	if reflect.DeepEqual(w, g) {
		return "", nil
	}
	typ := reflect.TypeFor[[]plan.WorkloadPlan]()
	wy, err := schemaYAML(want, typ)
	if err != nil {
		return "", err
	}
	gy, err := schemaYAML(gotJS, typ)
	if err != nil {
		return "", err
	}
	d := lineDiff(strings.Split(strings.TrimRight(wy, "\n"), "\n"), strings.Split(strings.TrimRight(gy, "\n"), "\n"))
	if d == "" {
		d = "  (the YAML is the same but the values differ in type, e.g. a number written as a string)"
	}
	return d, nil
}

// schemaYAML prints JSON as `rollplan plan -o yaml` prints a plan: block
// style, fields in the order of the Go type, so that expected and actual
// workloads line up whatever order the test file wrote the fields in.
func schemaYAML(js []byte, t reflect.Type) (string, error) {
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(js, &n); err != nil {
		return "", err
	}
	if n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 {
		orderFields(n.Content[0], t)
	}
	plainStyle(&n)
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func orderFields(n *yamlv3.Node, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yamlv3.SequenceNode && t.Kind() == reflect.Slice:
		for _, c := range n.Content {
			orderFields(c, t.Elem())
		}
	case n.Kind == yamlv3.MappingNode && t.Kind() == reflect.Struct:
		rank := map[string]int{}
		types := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				rank[name] = i
				types[name] = f.Type
			}
		}
		type pair struct{ k, v *yamlv3.Node }
		pairs := make([]pair, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			pairs = append(pairs, pair{n.Content[i], n.Content[i+1]})
		}
		sort.SliceStable(pairs, func(i, j int) bool {
			ri, oki := rank[pairs[i].k.Value]
			rj, okj := rank[pairs[j].k.Value]
			switch {
			case oki && okj:
				return ri < rj
			case oki != okj:
				return oki
			}
			return pairs[i].k.Value < pairs[j].k.Value
		})
		n.Content = n.Content[:0]
		for _, p := range pairs {
			if ft, ok := types[p.k.Value]; ok {
				orderFields(p.v, ft)
			}
			n.Content = append(n.Content, p.k, p.v)
		}
	}
}

// plainStyle drops JSON's flow style and quoting (as render.YAML does).
func plainStyle(n *yamlv3.Node) {
	n.Style &^= yamlv3.FlowStyle | yamlv3.DoubleQuotedStyle
	for _, c := range n.Content {
		plainStyle(c)
	}
}

// withoutNewWaveFields drops a wave's budgets and binding from got where
// the expected wave has no budgets: suites written before the plan
// carried them still pass (the Plan is changed by adding fields; a suite
// that writes them compares them).
func withoutNewWaveFields(want, got any) any {
	ws, ok1 := want.([]any)
	gs, ok2 := got.([]any)
	if !ok1 || !ok2 {
		return got
	}
	for i := range min(len(ws), len(gs)) {
		ww, ok1 := ws[i].(map[string]any)
		gw, ok2 := gs[i].(map[string]any)
		if !ok1 || !ok2 {
			continue
		}
		wwaves, ok1 := ww["waves"].([]any)
		gwaves, ok2 := gw["waves"].([]any)
		if !ok1 || !ok2 {
			continue
		}
		for j := range min(len(wwaves), len(gwaves)) {
			wv, ok1 := wwaves[j].(map[string]any)
			gv, ok2 := gwaves[j].(map[string]any)
			if _, has := wv["budgets"]; ok1 && ok2 && !has {
				delete(gv, "budgets")
				delete(gv, "binding")
			}
		}
	}
	return got
}

// compareGates compares the gates of the plan's waves with the expected
// ones, by wave number.
func compareGates(key string, want map[string]GateExpect, wp *plan.WorkloadPlan) []string {
	var diffs []string
	waves := slices.Collect(maps.Keys(want))
	sort.Slice(waves, func(i, j int) bool { // numbers, validated when decoded
		a, _ := strconv.Atoi(waves[i])
		b, _ := strconv.Atoi(waves[j])
		return a < b
	})
	for _, wave := range waves {
		w := want[wave]
		f := fmt.Sprintf("decisions[%s].gates[%s]", key, wave)
		var g *plan.Gate
		for i := range wp.Waves {
			if fmt.Sprint(wp.Waves[i].Index) == wave {
				g = wp.Waves[i].Gate
			}
		}
		if g == nil {
			diffs = append(diffs, fmt.Sprintf("%s: no gate after wave %s (the plan has %d wave(s); the last has none, and only an analysis the rollout waits for gives one)", f, wave, len(wp.Waves)))
			continue
		}
		if w.Status != "" && w.Status != g.Status {
			diffs = append(diffs, fmt.Sprintf("%s.status:\n  want: %s\n  got:  %s (%s)", f, w.Status, g.Status, g.Message))
		}
		if w.Message != nil && *w.Message != g.Message {
			diffs = append(diffs, fmt.Sprintf("%s.message:\n  want: %s\n  got:  %s", f, *w.Message, g.Message))
		}
	}
	return diffs
}
