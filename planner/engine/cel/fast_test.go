package cel

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/internal/parity"
	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/policies"
)

// fastPolicies exercise the translator: every construct it knows, and the
// evaluation errors it must leave to cel-go (overflow, a missing label, an
// index out of range), which must then read as cel-go's.
var fastPolicies = []struct{ name, spec string }{
	{"arithmetic and strings", `  variables:
  - name: big
    expression: "9223372036854775807"
  - name: word
    expression: "'ab'"
  scope:
    expression: "pod.restarts * 2 + pod.ordinal - 1 >= 0 && pod.name.startsWith(workload.name) && !pod.name.endsWith('x') && size(pod.name) % 3 != 7"
    messageExpression: "'held ' + pod.name"
  order:
  - when: "pod.phase in ['Running', 'Pending'] && pod.index / 2 < 1000 && pod.node + variables.word != ''"
    keys: ["pod.zone", "-pod.ordinal", "pod.ready", "string(pod.colocated) + pod.uid", "variables.big - pod.restarts"]
  - keys: ["pod.name", "size(pod.changes)", "size(pod.labels)", "pod.revision < pod.name", "pod.available == pod.ready"]
  halt:
  - expression: "pod.restarts > 2 || variables.big + pod.restarts < 0"
    messageExpression: "'overflow ' + pod.name"
`},
	{"errors absorbed or reported", `  scope:
    expression: "pod.labels['app'] != 'none' || pod.restarts / (pod.restarts - pod.restarts) > 0"
    messageExpression: "'held'"
  order:
  - keys: ["pod.labels['missing-label']"]
`},
	{"defaults.order out of range", `  order:
  - keys: ["defaults.order[7]", "defaults.order.slice(2, 40)"]
`},
	{"defaults.order in pieces", `  order:
  - when: "'role' in pod.labels && pod.labels['role'] == 'leader'"
    keys: ["1", "defaults.order.slice(1, size(defaults.order))", "defaults.order[0]"]
  - keys: ["0", "defaults.order"]
`},
	{"defaults.order read by scope and halt, ordered by the default", `  scope:
    expression: "size(defaults.order) > 1 && size(defaults.order.slice(1, 2)) == 1"
    messageExpression: "'short key'"
  halt:
  - expression: "pod.restarts > 5 && size(defaults.order) > 0"
    messageExpression: "'halt ' + pod.name"
`},
	{"a comprehension and a double", `  eligibility:
    expression: "pod.changes.all(c, c.inPlace) && pod.readySeconds >= 0"
  order:
  - keys: ["double(pod.restarts) / 3.0", "pod.restarts > 1 ? pod.pdbs.size() : 0"]
  halt:
  - expression: "pod.restarts > 0 && pod.changes.exists(c, c.class == 'env')"
    messageExpression: "'env ' + pod.name"
`},
	{"comprehensions: shadowing, nesting, other ranges", `  variables:
  - name: inPlace
    expression: "pod.ready"
  scope:
    expression: "pod.changes.all(pod, pod.inPlace || pod.class == 'env') || pod.changes.exists(c, pod.changes.all(d, d.path != c.path))"
    messageExpression: "'held'"
  eligibility:
    expression: "pod.changes.exists(variables, variables.inPlace) && pod.changes.all(c, c.detail == '' && variables.inPlace)"
  halt:
  - expression: "pod.ready && pod.pdbs.exists(p, p == 'pdb-a')"
    messageExpression: "'pdb'"
  - expression: "pod.changes.exists_one(c, c.inPlace)"
    messageExpression: "'one'"
`},
	{"int overflow in a key", `  order:
  - keys: ["-(pod.deletionCost - 9223372036854775807 - 1)", "pod.ordinal * 4611686018427387904"]
`},
}

// parityEngines: the engine with the fast path and without, for the same
// policies.
func parityEngines(t *testing.T, ps []*RolloutPolicy) (fast, slow *Engine) {
	t.Helper()
	fast, err := New(ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	slow, err = New(ps, Options{celOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return fast, slow
}

// sameAnswer: equal Decisions (reflect.DeepEqual) or equal errors.
func sameAnswer(t *testing.T, what string, fast, slow *Engine, r *facts.Rollout) {
	t.Helper()
	want, werr := slow.Decide(context.Background(), r)
	got, gerr := fast.Decide(context.Background(), r)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("%s: %s %s/%s: error\n%v\nwant (cel-go)\n%v", what, r.Workload.Kind, r.Workload.Namespace, r.Workload.Name, gerr, werr)
	}
	if !reflect.DeepEqual(want, got) {
		d := "decisions differ outside pods and budgets"
		if want != nil && got != nil {
			d = diffDecisions(r, want, got)
		}
		t.Fatalf("%s: %s %s/%s: the fast path and cel-go disagree (rego: cel-go, cel: fast):\n%s", what, r.Workload.Kind, r.Workload.Namespace, r.Workload.Name, d)
	}
}

// parityRollouts: every golden scenario's rollouts, synthetic snapshots and
// the random rollouts of the parity property tests.
func parityRollouts(t *testing.T) map[string][]*facts.Rollout {
	t.Helper()
	scenarios, err := scenario.All("../../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*facts.Rollout{}
	for _, sc := range scenarios {
		out["scenario "+sc.Name] = sc.Rollouts
	}
	for _, n := range []int{1000, 5000} {
		rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("synth-%d", n)] = rs
	}
	out["edges"] = edgeRollouts()
	n := 300
	if testing.Short() {
		n = 30
	}
	for i := range n {
		c := parity.Generate(rand.New(rand.NewSource(int64(i))))
		rs, err := facts.Build(c.Snap, c.FactsOptions())
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("random seed %d", i)] = rs
	}
	return out
}

// edgeRollouts hold values facts.Build does not make but the translator
// must treat as cel-go does: the int64 extremes (overflow), no labels,
// strings past fastMaxStr, a pod without a revision.
func edgeRollouts() []*facts.Rollout {
	long := strings.Repeat("x", fastMaxStr+1)
	var out []*facts.Rollout
	for _, kind := range []string{"StatefulSet", "Deployment", "DaemonSet"} {
		r := rollout()
		r.Workload.Kind = kind
		r.Pods[0].DeletionCost, r.Pods[0].Ordinal, r.Pods[0].Restarts = math.MinInt64, math.MinInt64, math.MaxInt64
		r.Pods[1].Labels, r.Pods[1].Name, r.Pods[1].Zone, r.Pods[1].Revision = nil, long, long, ""
		r.Pods[1].Colocated, r.Pods[1].Index, r.Pods[1].ReadyBucket = math.MaxInt64, math.MinInt64, math.MinInt64
		r.Pods = append(r.Pods, facts.Pod{Name: "db-3", UID: "u3", Ordinal: 3, Index: 3, Revision: "r1", Phase: "Running", Restarts: -1,
			Labels: map[string]string{"role": "leader", "app": "none"}, Changes: []facts.Change{{Path: "spec.containers[db].env", Class: "env"}}})
		out = append(out, r)
	}
	return out
}

// TestFastParity: the fast path answers exactly as cel-go alone, errors
// included, for the default strategy, every shipped CEL policy and the
// translator's own cases, on every rollout parityRollouts has.
func TestFastParity(t *testing.T) {
	sets := map[string][]*RolloutPolicy{"default strategy": nil}
	files, err := filepath.Glob("../../../policies/examples/*/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../../testdata/policies/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, more...) {
		ps, err := Load([]string{f})
		if err != nil {
			t.Fatal(err)
		}
		sets[f] = ps
	}
	if len(sets) < 4 {
		t.Fatalf("found %d policy sets, want the default strategy and the examples", len(sets))
	}
	for _, p := range fastPolicies {
		sets[p.name] = policy(t, p.spec)
	}
	rollouts := parityRollouts(t)
	for name, ps := range sets {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			fast, slow := parityEngines(t, ps)
			for what, rs := range rollouts {
				for _, r := range rs {
					sameAnswer(t, what, fast, slow, r)
				}
			}
		})
	}
}

// The fast path covers what the shipped policies evaluate per pod; what it
// leaves to cel-go is a note.
func TestFastCoverage(t *testing.T) {
	e := celEngine(t)
	c := e.defaults
	for _, p := range []*program{c.scope, c.inPlace, c.orderAll, c.halt[0].when, c.halt[1].when, c.halt[2].when} {
		switch {
		case p.fast == nil:
			t.Errorf("default strategy: %s is not translated", p.field)
		case len(p.fast.bails) > 0:
			t.Errorf("default strategy: %s leaves %v to cel-go", p.field, p.fast.bails)
		}
	}
	tests := []struct {
		name, spec string
		notes      []string
	}{
		{"translated", fastPolicies[3].spec, nil},
		{"a comprehension and a double", fastPolicies[5].spec, []string{
			"policy p.yaml (RolloutPolicy p): spec.order is evaluated by cel-go for the pods where it reaches an order key of type double",
		}},
		{"comprehensions the fast path leaves", fastPolicies[6].spec, []string{
			"policy p.yaml (RolloutPolicy p): spec.scope.expression is evaluated by cel-go for the pods where it reaches a comprehension",
			"policy p.yaml (RolloutPolicy p): spec.halt[0].expression is evaluated by cel-go for the pods where it reaches a comprehension over anything but pod.changes",
			"policy p.yaml (RolloutPolicy p): spec.halt[1].expression is evaluated by cel-go for every pod: the fast path does not translate a comprehension",
		}},
		{"a dyn scope", "  params: {on: true}\n  scope:\n    expression: params.on\n    messageExpression: \"'x'\"\n", nil},
		{"a per-pod dyn scope", "  params: {on: true}\n  scope:\n    expression: params.on && pod.ready\n    messageExpression: \"'x'\"\n", []string{
			"policy p.yaml (RolloutPolicy p): spec.scope.expression is evaluated by cel-go for the pods where it reaches a value that is not a bool",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Notes(); !reflect.DeepEqual(got, tt.notes) {
				t.Errorf("notes\n%q\nwant\n%q", got, tt.notes)
			}
		})
	}
}

// TestFastFields: the field tables read what cel-go reads: every bool, int,
// string and map field of facts.Pod, Workload and Strategy by its JSON name.
func TestFastFields(t *testing.T) {
	var p facts.Pod
	w := &Workload{}
	fill := func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(i%2 == 0)
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(1000 + i))
			case reflect.String:
				f.SetString(fmt.Sprintf("s%d", i))
			case reflect.Map:
				f.Set(reflect.ValueOf(map[string]string{fmt.Sprint(i): "v"}))
			}
		}
	}
	fill(reflect.ValueOf(&p).Elem())
	fill(reflect.ValueOf(w).Elem())
	fill(reflect.ValueOf(&w.Strategy).Elem())
	var c facts.Change
	fill(reflect.ValueOf(&c).Elem())
	a := &activation{pod: &p, b: &bindings{workload: w}, change: &c}
	for owner, v := range map[string]reflect.Value{"pod": reflect.ValueOf(p), "workload": reflect.ValueOf(*w), "strategy": reflect.ValueOf(w.Strategy), "change": reflect.ValueOf(c)} {
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			f := v.Field(i)
			var got any
			var ok bool
			switch f.Kind() {
			case reflect.Bool:
				if g := boolFields[owner][name]; g != nil {
					got, ok = g(a)
				}
			case reflect.Int, reflect.Int64:
				if g := intFields[owner][name]; g != nil {
					var n int64
					n, ok = g(a)
					got = reflect.ValueOf(n).Convert(f.Type()).Interface()
				}
			case reflect.String:
				if g := strFields[owner][name]; g != nil {
					got, ok = g(a)
				}
			case reflect.Map:
				if g := mapFields[owner][name]; g != nil {
					got, ok = g(a)
				}
			default:
				continue
			}
			if !ok || !reflect.DeepEqual(got, f.Interface()) {
				t.Errorf("%s.%s: fast path reads %v (%t), want %v", owner, name, got, ok, f.Interface())
			}
		}
	}
}

// FuzzFastParity: mutated policies answer the same with and without the
// fast path, errors included.
//
//	go test ./planner/engine/cel -run '^$' -fuzz FuzzFastParity -fuzztime 2m
func FuzzFastParity(f *testing.F) {
	f.Add([]byte(policies.CELDefaults))
	seeds, _ := filepath.Glob("../../../policies/examples/*/policy.yaml")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, p := range fastPolicies {
		f.Add([]byte("apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: p\nspec:\n" + p.spec))
	}
	rollouts, err := scenario.Rollouts("../../../testdata/scenarios", "sts-inplace-image-only", "ds-maxsurge", "deploy-rolling-10-25pct", "example-one-zone-at-a-time")
	if err != nil {
		f.Fatal(err)
	}
	rollouts = append(rollouts, edgeRollouts()...)
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		fast, ferr := New(ps, Options{})
		slow, serr := New(ps, Options{celOnly: true})
		if fmt.Sprint(ferr) != fmt.Sprint(serr) {
			t.Fatalf("compile error %v, without the fast path %v", ferr, serr)
		}
		if ferr != nil {
			return
		}
		for _, r := range rollouts {
			sameAnswer(t, "fuzz", fast, slow, r)
		}
	})
}

// TestBudgetCache: budgets are cached per distinct input the policy's
// per-workload expressions read, and only per such input.
func TestBudgetCache(t *testing.T) {
	deps := []struct {
		name, spec string
		want       wlDeps
	}{
		{"fields and names", "  budgets:\n  - name: b\n    when: \"workload.strategy.type == 'x' && featureGates['g'] && size(workload.labels) > 0\"\n    maxUnavailable: \"pods\"\n",
			wlDeps{names: []string{"featureGates", "pods"}, workload: []string{"labels", "strategy.type"}}},
		{"through a variable", "  variables:\n  - name: k\n    expression: workload.kind\n  budgets:\n  - name: b\n    maxUnavailable: \"variables.k == 'x' ? 1 : 2\"\n",
			wlDeps{workload: []string{"kind"}}},
		{"the workload as a value", "  budgets:\n  - name: b\n    maxUnavailable: \"[workload].size()\"\n", wlDeps{wholeWorkload: true}},
		{"the strategy as a value", "  budgets:\n  - name: b\n    maxUnavailable: \"[workload.strategy].size() + workload.replicas\"\n", wlDeps{workload: []string{"replicas"}, wholeWorkload: true}},
		{"a comprehension variable named workload", "  budgets:\n  - forEach: pdbs\n    nameExpression: \"'x'\"\n    maxUnavailable: \"pdbs.filter(workload, workload.name != '').size()\"\n",
			wlDeps{names: []string{"pdbs"}, workload: []string{"name"}, wholeWorkload: true}},
		{"a comprehension variable named as an input", "  budgets:\n  - name: b\n    maxUnavailable: \"nodes.filter(pdbs, pdbs.name != '').size()\"\n",
			wlDeps{names: []string{"nodes", "pdbs"}}},
	}
	for _, tt := range deps {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := *e.policies[0].wl; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("dependencies %+v, want %+v", got, tt.want)
			}
		})
	}

	e := celEngine(t)
	for _, f := range []string{"kind", "managed", "replicas", "strategy.type", "strategy.maxSurge", "strategy.maxUnavailable"} {
		if !slices.Contains(e.defaults.wl.workload, f) {
			t.Errorf("default strategy: dependencies %v lack workload.%s", e.defaults.wl.workload, f)
		}
	}
	if e.defaults.wl.wholeWorkload || slices.Contains(e.defaults.wl.workload, "name") {
		t.Errorf("default strategy: dependencies %+v: its budgets do not read the workload's name", e.defaults.wl)
	}
	decide := func(r *facts.Rollout) []engine.Budget {
		t.Helper()
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return d.Budgets
	}
	a := decide(rollout())
	other := rollout()
	other.Workload.Name = "db2"
	b := decide(other) // same inputs: from the cache
	*a[0].MaxUnavailable = 99
	if !reflect.DeepEqual(b, decide(rollout())) || *b[0].MaxUnavailable == 99 {
		t.Fatalf("cached budgets share their limits: %s", budgetsString(b))
	}
	other.Workload.Strategy.MaxUnavailable = "100%"
	other.FeatureGates = map[string]bool{"MaxUnavailableStatefulSet": true}
	if c := decide(other); *c[0].MaxUnavailable != 3 {
		t.Fatalf("maxUnavailable 100%% of 3: got %s", budgetsString(c))
	}
}

// TestFastConcurrent: one engine decides workloads from several goroutines
// (as plan.Build may): the closures keep no state, the budget cache locks.
// Meant for -race as much as for the answers.
func TestFastConcurrent(t *testing.T) {
	rs, err := facts.Build(synth.Snapshot(3000), facts.Options{Now: synth.Now})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Load([]string{"../../../policies/examples/one-zone-at-a-time/policy.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := parityEngines(t, ps)
	want := make([]*engine.Decisions, len(rs))
	for i, r := range rs {
		if want[i], err = slow.Decide(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for j := range rs {
				i := (j + g*len(rs)/4) % len(rs)
				got, err := fast.Decide(context.Background(), rs[i])
				if err == nil && !reflect.DeepEqual(got, want[i]) {
					err = fmt.Errorf("%s/%s: decisions differ from cel-go's", rs[i].Workload.Namespace, rs[i].Workload.Name)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
