package rego

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/parity"
	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/facts"
)

// pair is one bundle compiled twice: on the VM, and interpreted alone.
type pair struct {
	name              string
	compiled, interp  *Engine
	vmRuns, fallbacks int
}

// bundlePairs: the default strategy, every example policy and every test
// policy of testdata/policies.
func bundlePairs(t *testing.T) []*pair {
	t.Helper()
	dirs, err := filepath.Glob("../../../policies/examples/*")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../../testdata/policies/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []*pair
	for _, d := range append([]string{""}, append(dirs, more...)...) {
		var paths []string
		name := "default"
		if d != "" {
			paths, name = []string{d}, filepath.Base(d)
		}
		b, err := LoadBundle(paths)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, newPair(t, name, b))
	}
	return out
}

func newPair(t *testing.T, name string, b *Bundle) *pair {
	t.Helper()
	c, err := New(context.Background(), b, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c.compiled == nil || c.compiledBudgets == nil {
		t.Fatalf("%s: not compiled: %v", name, c.Notes())
	}
	i := *c
	i.interpret = true
	return &pair{name: name, compiled: c, interp: &i}
}

// check compares the two paths on r: Decide and DecideBudgets give equal
// answers or equal errors; the VM's own answer, when it gives one, is the
// interpreter's.
func (p *pair) check(t *testing.T, r *facts.Rollout) {
	t.Helper()
	ctx := context.Background()
	want, werr := p.interp.Decide(ctx, r)
	got, gerr := p.compiled.Decide(ctx, r)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: %s: Decide differs:\ninterpreted: %v %+v\ncompiled:    %v %+v", p.name, workloadID(r), werr, want, gerr, got)
	}
	vm, verr := p.compiled.decideCompiled(ctx, r)
	switch {
	case verr == nil:
		p.vmRuns++
		if werr != nil || !reflect.DeepEqual(want, vm) {
			t.Fatalf("%s: %s: the VM answers %+v, the interpreter %v %+v", p.name, workloadID(r), vm, werr, want)
		}
	case errors.Is(verr, errFallback):
		p.fallbacks++
		if werr == nil {
			t.Errorf("%s: %s: the VM fell back where the interpreter answers", p.name, workloadID(r))
		}
	default:
		t.Fatalf("%s: %s: VM: %v", p.name, workloadID(r), verr)
	}
	wb, wberr := p.interp.DecideBudgets(ctx, r)
	gb, gberr := p.compiled.DecideBudgets(ctx, r)
	if fmt.Sprint(wberr) != fmt.Sprint(gberr) || !reflect.DeepEqual(wb, gb) {
		t.Fatalf("%s: %s: DecideBudgets differs:\ninterpreted: %v %+v\ncompiled:    %v %+v", p.name, workloadID(r), wberr, wb, gberr, gb)
	}
}

func TestCompiledParityScenarios(t *testing.T) {
	scenarios, err := scenario.All("../../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bundlePairs(t) {
		t.Run(p.name, func(t *testing.T) {
			for _, sc := range scenarios {
				for _, r := range sc.Rollouts {
					for _, v := range parity.Variants(r) {
						p.check(t, v)
					}
				}
			}
			t.Logf("%d scenarios: %d answered on the VM, %d fell back", len(scenarios), p.vmRuns, p.fallbacks)
		})
	}
}

func TestCompiledParitySynth(t *testing.T) {
	rs, err := facts.Build(synth.Snapshot(3000), facts.Options{Now: synth.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bundlePairs(t) {
		t.Run(p.name, func(t *testing.T) {
			for _, r := range rs {
				p.check(t, r)
			}
			if p.fallbacks > 0 {
				t.Errorf("%d rollouts fell back", p.fallbacks)
			}
		})
	}
}

// TestCompiledParityRandom: the random cases of internal/parity.
func TestCompiledParityRandom(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	pairs := bundlePairs(t)
	rng := rand.New(rand.NewSource(20261127))
	for i := 0; i < n; i++ {
		c := parity.Generate(rng)
		rs, err := facts.Build(c.Snap, c.FactsOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			for _, p := range pairs {
				p.check(t, r)
			}
		}
	}
	for _, p := range pairs {
		t.Logf("%s: %d answered on the VM, %d fell back", p.name, p.vmRuns, p.fallbacks)
	}
}

// TestCompiledNotes: a bundle with a builtin the VM does not run is
// interpreted, says which rule and where, and still answers.
func TestCompiledNotes(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"rand", "order(pod) := [pod.name] if {\n\trand.intn(pod.name, 1) == 0\n}", "the policy is interpreted, not compiled (same answers, slower), because of rule data.rollplan.strategy.order (user/strategy.rego:4): builtin rand.intn is not a pure function of its arguments"},
		{"clock", "halt := [\"late\"] if {\n\ttime.now_ns() > 0\n}", "the policy is interpreted, not compiled (same answers, slower), because of rule data.rollplan.strategy.halt (user/strategy.rego:4): builtin time.now_ns is not a pure function of its arguments"},
	}
	r := stsRollout()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(c.body))
			notes := e.Notes()
			if len(notes) == 0 || !strings.Contains(notes[0], c.want) {
				t.Fatalf("notes %q, want one containing %q", notes, c.want)
			}
			if e.compiled != nil {
				t.Fatal("compiled despite the note")
			}
			if _, err := e.Decide(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		})
	}
	if notes := newEngine(t, nil).Notes(); len(notes) != 0 {
		t.Errorf("the default strategy has notes: %q", notes)
	}
}
