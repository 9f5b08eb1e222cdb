package parity

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
)

var (
	flagCases  = flag.Int("parity.cases", 1000, "number of generated cases TestRandomParityAndInvariants runs")
	flagSeed   = flag.Int64("parity.seed", 20260301, "seed of the generated cases (case i uses seed*1000003+i)")
	flagCase   = flag.Int("parity.case", -1, "run only this case index (with -parity.seed)")
	flagStrict = flag.Bool("parity.strict", false, "count violations of known planner issues (known_test.go) as failures")
)

func caseSeed(seed int64, i int) int64 { return seed*1000003 + int64(i) }

// outcome is what every engine made of one case.
type outcome struct {
	err        error // facts.Build or plan.Build failed
	results    []*plan.Result
	renders    [][]byte // workloads YAML, metadata cleared
	parity     string   // the first engine pair whose plans differ, "" if none
	diff       string
	violations []string // "<engine>: <violation>"
	rules      map[string]bool
	known      map[string]string // known planner issue → an example violation (not failures unless -parity.strict)
}

// signature classifies a failure; "" when the case passes.
func (o *outcome) signature() string {
	switch {
	case o.err != nil:
		return "error"
	case o.parity != "":
		return "parity " + o.parity
	case len(o.violations) > 0:
		rules := make([]string, 0, len(o.rules))
		for r := range o.rules {
			rules = append(rules, r)
		}
		sort.Strings(rules)
		return "invariants " + strings.Join(rules, ",")
	}
	return ""
}

// reproduces: the candidate fails the same way (same error class, same
// engine pair differing, or at least one of the original rules broken).
func (o *outcome) reproduces(orig *outcome) bool {
	switch {
	case orig.err != nil:
		return o.err != nil
	case orig.parity != "":
		return o.err == nil && o.parity == orig.parity
	}
	if o.err != nil {
		return false
	}
	for r := range o.rules {
		if orig.rules[r] {
			return true
		}
	}
	return false
}

func renderWorkloads(p *plan.Plan) ([]byte, error) {
	cp := *p
	cp.Metadata = plan.Metadata{}
	var b bytes.Buffer
	if err := (render.YAML{}).Render(&b, &cp); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// evaluate plans the case with every engine, compares the plans and checks
// the invariants of each. The facts are built once and shared, so the plans
// differ only if the engines do; building them twice checks that the facts
// are deterministic, and comparing them after each engine checks that no
// engine (nor the packer) changes its input.
func evaluate(engs []engine.Engine, c *Case) *outcome {
	o := &outcome{rules: map[string]bool{}}
	rollouts, err := facts.Build(c.Snap, c.FactsOptions())
	if err != nil {
		o.err = fmt.Errorf("facts: %w", err)
		return o
	}
	before, err := json.Marshal(rollouts)
	if err != nil {
		o.err = fmt.Errorf("marshal the facts: %w", err)
		return o
	}
	if again, err := facts.Build(c.Snap, c.FactsOptions()); err == nil {
		if b, _ := json.Marshal(again); !bytes.Equal(before, b) {
			o.parity = "facts/facts"
			o.diff = "facts.Build is not deterministic:\n" + lineDiff(indentJSON(before), indentJSON(b), "build 1", "build 2")
			return o
		}
	}
	for _, eng := range engs {
		res, err := plan.Build(context.Background(), rollouts, eng, plan.Metadata{}, upstreamOptions)
		if err != nil {
			o.err = fmt.Errorf("plan with %s: %w", eng.Name(), err)
			return o
		}
		if after, _ := json.Marshal(rollouts); !bytes.Equal(before, after) {
			o.parity = "facts/" + eng.Name()
			o.diff = "planning with " + eng.Name() + " changed its input facts:\n" + lineDiff(indentJSON(before), indentJSON(after), "before", "after")
			return o
		}
		y, err := renderWorkloads(res.Plan)
		if err != nil {
			o.err = fmt.Errorf("render the %s plan: %w", eng.Name(), err)
			return o
		}
		o.results = append(o.results, res)
		o.renders = append(o.renders, y)
		for wi := range res.Plan.Workloads {
			for _, v := range CheckWorkload(&res.Plan.Workloads[wi], res.Details[wi], plan.DefaultOptions) {
				if id := matchKnownIssue(v, res.Details[wi]); id != "" && !*flagStrict {
					o.noteKnown(id, eng.Name()+": "+v.String())
					continue
				}
				o.violations = append(o.violations, eng.Name()+": "+v.String())
				o.rules[v.Rule] = true
			}
		}
	}
	for i := 1; i < len(engs) && o.parity == ""; i++ {
		if !bytes.Equal(o.renders[0], o.renders[i]) {
			o.parity = engs[0].Name() + "/" + engs[i].Name()
			o.diff = lineDiff(string(o.renders[0]), string(o.renders[i]), engs[0].Name(), engs[i].Name())
		}
	}
	return o
}

func (o *outcome) noteKnown(id, example string) {
	if o.known == nil {
		o.known = map[string]string{}
	}
	if _, ok := o.known[id]; !ok {
		o.known[id] = example
	}
}

func indentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// TestRandomParityAndInvariants: for -parity.cases generated snapshots,
// every engine plans the same workloads (byte-identical YAML, metadata
// aside) and every plan keeps the invariants. A failure is shrunk to a
// minimal snapshot, printed (and written to a file) with the flags that
// reproduce it.
func TestRandomParityAndInvariants(t *testing.T) {
	engs := engines(t)
	first, last := 0, *flagCases
	if *flagCase >= 0 {
		first, last = *flagCase, *flagCase+1
	}
	kinds := map[string]int{}
	known := map[string]int{}
	knownExample := map[string]string{}
	waves, stalled := 0, 0
	for i := first; i < last; i++ {
		seed := caseSeed(*flagSeed, i)
		c := Generate(rand.New(rand.NewSource(seed)))
		o := evaluate(engs, c)
		if o.signature() != "" {
			fail(t, engs, c, i, o)
		}
		for id, v := range o.known {
			if known[id] == 0 {
				knownExample[id] = fmt.Sprintf("case %d: %s", i, v)
			}
			known[id]++
		}
		for _, wp := range o.results[0].Plan.Workloads {
			kinds[wp.Kind]++
			if len(wp.Waves) > 0 {
				waves++
			}
			for _, n := range wp.Notes {
				if strings.Contains(n, "stalls") || strings.Contains(n, "does not complete") {
					stalled++
				}
			}
		}
	}
	t.Logf("%d cases (seed %d, engines %s): workloads %v, %d with waves, %d stalled or incomplete", last-first, *flagSeed, engineNames(engs), kinds, waves, stalled)
	for _, k := range knownIssues {
		if known[k.id] > 0 {
			t.Logf("known planner issue %s (not counted; -parity.strict to fail on it) in %d case(s), e.g. %s", k.id, known[k.id], knownExample[k.id])
		}
	}
}

func engineNames(engs []engine.Engine) string {
	var names []string
	for _, e := range engs {
		names = append(names, e.Name())
	}
	return strings.Join(names, ", ")
}

// fail shrinks the failing case and reports it.
func fail(t *testing.T, engs []engine.Engine, c *Case, i int, o *outcome) {
	t.Helper()
	sig := o.signature()
	t.Logf("case %d (-parity.seed %d -parity.case %d) fails: %s\n  %s", i, *flagSeed, i, sig, c.Describe())
	small := Shrink(c, func(cand *Case) bool { return evaluate(engs, cand).reproduces(o) })
	so := evaluate(engs, small)
	repro, err := Repro(small)
	if err != nil {
		t.Fatalf("render the reproduction: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "case %d fails (%s); shrunk to %s\n", i, sig, small.Describe())
	fmt.Fprintf(&b, "reproduce: rollplan plan -f repro.yaml %s\n", strings.Join(small.Args(), " "))
	if so.err != nil {
		fmt.Fprintf(&b, "error: %v\n", so.err)
	}
	if so.parity != "" {
		fmt.Fprintf(&b, "plans differ (%s):\n%s\n", so.parity, so.diff)
	}
	if len(so.violations) > 0 {
		fmt.Fprintf(&b, "violations:\n  %s\n", strings.Join(so.violations, "\n  "))
	}
	if so.err == nil {
		fmt.Fprintf(&b, "plan (%s):\n%s\n", engs[0].Name(), so.renders[0])
	}
	if len(o.violations) > 0 {
		fmt.Fprintf(&b, "violations before shrinking:\n  %s\n", strings.Join(o.violations, "\n  "))
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("rollplan-parity-%d-%d.yaml", *flagSeed, i))
	if err := os.WriteFile(path, []byte(repro), 0o644); err == nil {
		gates := " -parity.version " + small.Version.Or(kubeversion.Newest).String()
		if on, ok := small.Gates[GateMaxUnavailableStatefulSet]; ok {
			gates += fmt.Sprintf(" -parity.gates %s=%t", GateMaxUnavailableStatefulSet, on)
		}
		fmt.Fprintf(&b, "minimal snapshot written to %s\ncheck it again: go test ./internal/parity -run TestReplayFile -v -parity.file %s%s\n", path, path, gates)
	}
	fmt.Fprintf(&b, "minimal snapshot:\n%s", repro)
	t.Fatal(b.String())
}

// lineDiff is a small LCS line diff ("-" first, "+" second).
func lineDiff(a, b, nameA, nameB string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+%d: %s\n", j+1, y[j])
			j++
		default:
			fmt.Fprintf(&sb, "-%d: %s\n", i+1, x[i])
			i++
		}
	}
	return sb.String()
}

// TestReproRoundTrip: the YAML a failure prints plans exactly like the
// generated snapshot, so `rollplan plan -f repro.yaml` reproduces it.
func TestReproRoundTrip(t *testing.T) {
	engs := engines(t)[:1]
	for i := 0; i < 40; i++ {
		c := Generate(rand.New(rand.NewSource(caseSeed(*flagSeed, i))))
		y, err := RenderYAML(c.Snap)
		if err != nil {
			t.Fatal(err)
		}
		s, err := DecodeYAML(y)
		if err != nil {
			t.Fatalf("case %d: the rendered YAML does not load: %v", i, err)
		}
		a, b := evaluate(engs, c), evaluate(engs, &Case{Snap: s, Now: c.Now, Version: c.Version, Gates: c.Gates})
		if a.err != nil || b.err != nil {
			t.Fatalf("case %d: %v / %v", i, a.err, b.err)
		}
		if !bytes.Equal(a.renders[0], b.renders[0]) {
			t.Fatalf("case %d: the plan of the rendered YAML differs:\n%s", i, lineDiff(string(a.renders[0]), string(b.renders[0]), "generated", "from YAML"))
		}
	}
}

// TestGeneratorCoverage: the generator reaches the states the invariants
// are about (so a passing run means something).
func TestGeneratorCoverage(t *testing.T) {
	engs := engines(t)[:1]
	seen := map[string]int{}
	for i := 0; i < 300; i++ {
		c := Generate(rand.New(rand.NewSource(caseSeed(*flagSeed, i))))
		o := evaluate(engs, c)
		if o.err != nil {
			t.Fatalf("case %d: %v", i, o.err)
		}
		for wi, wp := range o.results[0].Plan.Workloads {
			det := o.results[0].Details[wi]
			w := det.Facts.Workload
			seen[w.Kind+"/"+w.Strategy.Type]++
			if w.Managed {
				seen["managed"]++
			}
			if len(wp.Held) > 0 {
				seen["held"]++
			}
			if len(wp.Halted) > 0 {
				seen["halted"]++
			}
			if w.Kind == "StatefulSet" && w.PodManagementPolicy == "Parallel" {
				seen["sts-parallel"]++
			}
			if len(det.Facts.PDBs) > 0 {
				seen["pdb"]++
			}
			if len(det.Facts.ReplicaSets) > 2 {
				seen["rollover"]++
			}
			for _, p := range det.Facts.Pods {
				for _, ch := range p.Changes {
					seen["change/"+ch.Class]++
				}
				if p.Terminating {
					seen["terminating"]++
				}
				if !p.Scheduled {
					seen["unscheduled"]++
				}
			}
			for _, n := range det.Facts.Nodes {
				if !n.ShouldRun {
					seen["node-should-not-run"]++
				}
			}
			for _, w := range wp.Waves {
				for _, a := range w.Actions {
					seen["action/"+a.Type]++
					if a.Surge {
						seen["surge"]++
					}
				}
			}
		}
	}
	for _, k := range []string{
		"Deployment/RollingUpdate", "Deployment/Recreate", "StatefulSet/RollingUpdate", "StatefulSet/OnDelete",
		"DaemonSet/RollingUpdate", "DaemonSet/OnDelete", "managed", "held", "halted", "sts-parallel", "pdb", "rollover",
		"change/image", "change/initImage", "change/env", "change/resources", "change/labels", "change/annotations",
		"change/command", "change/other", "terminating", "unscheduled", "node-should-not-run",
		"action/InPlaceUpdate", "action/Recreate", "action/ScaleReplicaSet", "action/Delete", "surge",
	} {
		if seen[k] == 0 {
			t.Errorf("300 generated cases never produce %s", k)
		}
	}
	t.Logf("coverage: %v", seen)
}
