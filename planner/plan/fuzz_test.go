package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// FuzzPlan runs the whole pipeline of rollplan plan on mutated snapshots:
// decode, facts, decisions and waves. Whatever the input, it must end in a
// plan or an error, never a panic; the plan must be byte-identical when
// computed twice; and the Rego default strategy and the native engine must
// agree, on the plan or on failing.
//
//	go test ./planner/plan -run '^$' -fuzz FuzzPlan -fuzztime 5m -fuzzminimizetime 0
//
// (Minimising a new input re-plans a seed snapshot thousands of times; with
// the default -fuzzminimizetime the fuzzer spends minutes on it.)
func FuzzPlan(f *testing.F) {
	seeds, err := filepath.Glob("../../testdata/scenarios/*/snapshot.yaml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed snapshots under ../../testdata/scenarios: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	rego := newEngine(f)
	nat := native.New()
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, _, err := snapshot.Decode("fuzz.yaml", data)
		if err != nil {
			return
		}
		run := func(e engine.Engine) ([]byte, error) {
			// Facts are built per run: nothing may depend on an earlier run.
			rollouts, err := facts.Build(snap, facts.Options{Now: synth.Now})
			if err != nil {
				return nil, err
			}
			res, err := plan.Build(context.Background(), rollouts, e, plan.Metadata{}, upstreamOptions)
			if err != nil {
				return nil, err
			}
			res.Plan.Metadata.Engine, res.Plan.Metadata.PolicyDigest = "", ""
			return json.Marshal(res.Plan)
		}
		n1, errN := run(nat)
		if errN == nil {
			n2, err := run(nat)
			if err != nil || !bytes.Equal(n1, n2) {
				t.Fatalf("native plan is not deterministic (second run error %v)\nfirst:  %s\nsecond: %s", err, n1, n2)
			}
		}
		r, errR := run(rego)
		switch {
		case errN != nil && errR != nil:
			if errN.Error() == "" || errR.Error() == "" {
				t.Fatalf("empty error message: native %q, rego %q", errN, errR)
			}
		case errN != nil || errR != nil:
			t.Fatalf("one engine failed: native error %v, rego error %v", errN, errR)
		case !bytes.Equal(n1, r):
			t.Fatalf("native and Rego plans differ\nnative: %s\nrego:   %s", n1, r)
		}
	})
}
