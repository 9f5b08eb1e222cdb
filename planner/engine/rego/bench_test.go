package rego

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/facts"
)

// constantPolicy answers every decision point with a constant: what it
// costs is the engine's floor, whatever the strategy.
const constantPolicy = "../../../testdata/policies/constant"

// BenchmarkDecideFloor measures what the Rego engine costs before a policy
// does any work, over every workload of synth.Snapshot(n) (facts built
// outside the timer):
//
//   - input: converting the facts to OPA's input (AST), nothing evaluated:
//     what the interpreter, the fallback, pays first (the VM reads the
//     facts in place);
//   - constant: Decide with constantPolicy (on the VM: one call per pod and
//     per-pod decision point, decode the answers);
//   - default: Decide with the default strategy;
//   - interpreted: the default strategy on OPA's interpreter alone, the
//     reference the VM is judged against (BENCHMARKS.md, Engines).
//
// CPU is the process's (both cores, collector included) per op.
//
//	go test ./planner/engine/rego -run '^$' -bench DecideFloor -benchmem -benchtime 2x
func BenchmarkDecideFloor(b *testing.B) {
	ctx := context.Background()
	constant, err := LoadBundle([]string{constantPolicy})
	if err != nil {
		b.Fatal(err)
	}
	defaults, err := LoadBundle(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10000, 150000} {
		rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name      string
			bundle    *Bundle
			interpret bool
		}{{"input", nil, false}, {"constant", constant, false}, {"default", defaults, false}, {"interpreted", defaults, true}} {
			var e *Engine
			if c.bundle != nil {
				if e, err = New(ctx, c.bundle, time.Minute); err != nil {
					b.Fatal(err)
				}
				if e.compiled == nil {
					b.Fatalf("%s: not compiled: %v", c.name, e.Notes())
				}
				e.interpret = c.interpret
			}
			b.Run(fmt.Sprintf("pods=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := measure.CPU()
				for i := 0; i < b.N; i++ {
					for _, r := range rs {
						if e == nil {
							if _, err := inputValue(r); err != nil {
								b.Fatal(err)
							}
							continue
						}
						d, err := e.Decide(ctx, r)
						if err != nil {
							b.Fatal(err)
						}
						if len(d.Pods) != len(r.Pods) {
							b.Fatalf("%s: %d decisions for %d pods", workloadID(r), len(d.Pods), len(r.Pods))
						}
					}
				}
				cpu := (measure.CPU() - cpu0) / time.Duration(b.N)
				b.ReportMetric(cpu.Seconds(), "cpu-s/op")
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/pod")
			})
		}
	}
}
