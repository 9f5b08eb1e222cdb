package cel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/policies"
)

// FuzzPolicy parses, compiles and evaluates mutated RolloutPolicy files
// over the rollouts of a few golden scenarios. A policy is user input: it
// must end in an error naming the file, or in decisions, never a panic or
// an evaluation that escapes its cost limit.
//
//	go test ./planner/engine/cel -run '^$' -fuzz FuzzPolicy -fuzztime 5m -fuzzminimizetime 0
func FuzzPolicy(f *testing.F) {
	f.Add([]byte(policies.CELDefaults))
	seeds, _ := filepath.Glob("../../../policies/examples/*/policy.yaml")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if len(seeds) == 0 {
		f.Fatal("no example policies under ../../../policies/examples")
	}
	rollouts, err := scenario.Rollouts("../../../testdata/scenarios", "sts-inplace-image-only", "ds-maxsurge", "deploy-rolling-10-25pct", "example-one-zone-at-a-time")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "policy fuzz.yaml") {
				t.Fatalf("error does not name the policy file: %v", err)
			}
			return
		}
		e, err := New(ps, Options{})
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("compile error does not name the policy file: %v", err)
			}
			return
		}
		for _, r := range rollouts {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			d, err := e.Decide(ctx, r)
			cancel()
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("Decide took %s: the cost limit did not bound it", took)
			}
			if err == nil && len(d.Pods) != len(r.Pods) {
				t.Fatalf("%d decisions for %d pods", len(d.Pods), len(r.Pods))
			}
		}
	})
}
