package plan_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

func newEngine(tb testing.TB) *rego.Engine {
	tb.Helper()
	e, err := rego.Load(context.Background(), nil, 10*time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// planSnapshot is the whole pipeline after decoding: facts, policy, waves.
func planSnapshot(tb testing.TB, e *rego.Engine, snap *snapshot.Snapshot) *plan.Result {
	rollouts, err := facts.Build(snap, facts.Options{Now: synth.Now})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := plan.Build(context.Background(), rollouts, e, plan.Metadata{}, upstreamOptions)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// BenchmarkPlan: go test ./planner/plan -run '^$' -bench BenchmarkPlan -benchmem
func BenchmarkPlan(b *testing.B) {
	e := newEngine(b)
	for _, n := range []int{1000, 10000, 150000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			snap := synth.Snapshot(n)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			var peak uint64
			for i := 0; i < b.N; i++ {
				// Each op starts from a collected heap, as rollplan plan
				// does: the previous op's plan is garbage, not live.
				b.StopTimer()
				runtime.GC()
				b.StartTimer()
				cpu0, heap := measure.CPU(), measure.SampleHeap()
				res := planSnapshot(b, e, snap)
				cpu += measure.CPU() - cpu0
				peak = max(peak, heap())
				if len(res.Plan.Workloads) == 0 {
					b.Fatal("empty plan")
				}
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-heap")
		})
	}
}

// TestPlanScalesLinearly guards against quadratic policies or packing:
// doubling the pods must not much more than double the work. Time must stay
// under the bound, t(8k)/t(4k) < 2.5; allocations are counted
// exactly and are the sharp check (a quadratic step shows 4×). Other test
// packages running at once disturb the clock, never the allocations: a time
// ratio over the bound is measured again, up to three times, and fails only
// if every measurement is over it. A real non-linearity is over it every
// time.
func TestPlanScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("timing comparison")
	}
	e := newEngine(t)
	snap4, snap8 := synth.Snapshot(4000), synth.Snapshot(8000)
	once := func(snap *snapshot.Snapshot) (time.Duration, int64) {
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for j := 0; j < b.N; j++ {
				planSnapshot(b, e, snap)
			}
		})
		return time.Duration(r.NsPerOp()), r.AllocsPerOp()
	}
	const maxRatio, maxAllocRatio = 2.5, 2.3
	var ratios []string
	for attempt := 1; attempt <= 3; attempt++ {
		// Best of five, the sizes interleaved, so that load from other test
		// packages running at the same time hits both sizes alike.
		t4, t8 := time.Duration(1<<63-1), time.Duration(1<<63-1)
		var a4, a8 int64
		for i := 0; i < 5; i++ {
			d4, n4 := once(snap4)
			d8, n8 := once(snap8)
			t4, t8, a4, a8 = min(t4, d4), min(t8, d8), n4, n8
		}
		ratio, allocRatio := float64(t8)/float64(t4), float64(a8)/float64(a4)
		t.Logf("attempt %d: t(4k)=%v t(8k)=%v ratio %.2f; allocs %d → %d, ratio %.2f", attempt, t4, t8, ratio, a4, a8, allocRatio)
		if allocRatio >= maxAllocRatio {
			t.Fatalf("planning is not linear: allocations(8k)/allocations(4k) = %.2f, want < %.1f", allocRatio, maxAllocRatio)
		}
		if ratio < maxRatio {
			return
		}
		ratios = append(ratios, fmt.Sprintf("%.2f", ratio))
	}
	t.Errorf("planning is not linear: t(8k)/t(4k) = %s in three measurements, want < %.1f", strings.Join(ratios, ", "), maxRatio)
}
