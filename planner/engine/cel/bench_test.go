package cel

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
)

// BenchmarkDecide: the CEL default strategy over synthetic snapshots,
// engine only (facts built outside the timer), under the default policy
// timeout (engine.DefaultTimeout) as every rollplan command runs the
// engine: evaluations watch the deadline.
// go test ./planner/engine/cel -run '^$' -bench Decide -benchmem
func BenchmarkDecide(b *testing.B) {
	benchmarkDecide(b, celEngine(b))
}

// BenchmarkDecideExamples: each CEL example policy over the default
// strategy, as BenchmarkDecide (its own x-native against the native
// default strategy: the examples only add to or reorder its answers).
// go test ./planner/engine/cel -run '^$' -bench DecideExamples -benchmem
func BenchmarkDecideExamples(b *testing.B) {
	paths, err := filepath.Glob("../../../policies/examples/*/policy.yaml")
	if err != nil || len(paths) == 0 {
		b.Fatalf("no example policies: %v", err)
	}
	for _, p := range paths {
		ps, err := Load([]string{p})
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(ps, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(filepath.Dir(p)), func(b *testing.B) { benchmarkDecide(b, e) })
	}
}

func benchmarkDecide(b *testing.B, e *Engine) {
	for _, n := range []int{1000, 10000, 150000} {
		rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			// The peak heap holds the facts too, as a plan's would.
			cpu0, heap := measure.CPU(), measure.SampleHeap()
			for b.Loop() {
				for _, r := range rs {
					if _, err := e.Decide(context.Background(), r); err != nil {
						b.Fatal(err)
					}
				}
			}
			celCPU := (measure.CPU() - cpu0).Seconds() / float64(b.N)
			peak := heap()
			// The native engine on the same facts, in the same run: the
			// ratio is the figure BENCHMARKS.md compares with its target.
			nat := native.New()
			cpu1 := measure.CPU()
			const reps = 5
			for range reps {
				for _, r := range rs {
					if _, err := nat.Decide(context.Background(), r); err != nil {
						b.Fatal(err)
					}
				}
			}
			natCPU := (measure.CPU() - cpu1).Seconds() / reps
			b.ReportMetric(celCPU, "cpu-s/op")
			b.ReportMetric(natCPU, "native-cpu-s/op")
			b.ReportMetric(celCPU/natCPU, "x-native")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-heap")
		})
	}
}
