package native

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
)

var benchSizes = []int{1000, 10000, 150000}

// benchFacts caches the facts of synth.Snapshot(n): both benchmarks run on
// the same rollouts.
var (
	benchMu    sync.Mutex
	benchFacts = map[int][]*facts.Rollout{}
)

func benchRollouts(b *testing.B, n int) []*facts.Rollout {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if rs, ok := benchFacts[n]; ok {
		return rs
	}
	rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
	if err != nil {
		b.Fatal(err)
	}
	benchFacts[n] = rs
	return rs
}

// decideAll is one op: Decide over every rollout of the snapshot.
func decideAll(b *testing.B, e engine.Engine, rs []*facts.Rollout) {
	for _, r := range rs {
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Pods) != len(r.Pods) {
			b.Fatalf("%s: %d decisions for %d pods", wid(r), len(d.Pods), len(r.Pods))
		}
	}
}

// cpuPerOp runs b.N ops and reports the process CPU time per op (GC
// workers included: allocation cost shows up here, not in ns/op).
func cpuPerOp(b *testing.B, e engine.Engine, rs []*facts.Rollout) time.Duration {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := measure.CPU()
	for i := 0; i < b.N; i++ {
		decideAll(b, e, rs)
	}
	cpu := (measure.CPU() - cpu0) / time.Duration(b.N)
	b.ReportMetric(cpu.Seconds(), "cpu-s/op")
	return cpu
}

// BenchmarkDecide: the native engine over synth.Snapshot(n), all rollouts.
//
//	go test ./planner/engine/native -run '^$' -bench . -benchmem
func BenchmarkDecide(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			cpuPerOp(b, New(), benchRollouts(b, n))
		})
	}
}

// BenchmarkDecideRego: the Rego engine, with the default policy and with
// each example policy (policies/examples), on the same facts. It also times
// the native engine in the same run and reports the ratio (x-native: Rego
// CPU / native CPU).
//
//	go test ./planner/engine/native -run '^$' -bench DecideRego -benchmem -benchtime 2x
func BenchmarkDecideRego(b *testing.B) {
	policies := []struct {
		name string
		e    engine.Engine
	}{{"default", regoEngine(b)}}
	dirs, err := filepath.Glob("../../../policies/examples/*")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs {
		e, err := rego.Load(context.Background(), []string{d}, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		policies = append(policies, struct {
			name string
			e    engine.Engine
		}{filepath.Base(d), e})
	}
	for _, n := range benchSizes {
		var nativeCPU time.Duration // per op, measured once per size
		for _, p := range policies {
			b.Run(fmt.Sprintf("pods=%d/%s", n, p.name), func(b *testing.B) {
				rs := benchRollouts(b, n)
				regoCPU := cpuPerOp(b, p.e, rs)
				b.StopTimer()
				if nativeCPU == 0 {
					nat := New()
					var total time.Duration
					runs := 0
					for cpu0 := measure.CPU(); runs < 10 || (total < 200*time.Millisecond && runs < 1000); runs++ {
						decideAll(b, nat, rs)
						total = measure.CPU() - cpu0
					}
					nativeCPU = total / time.Duration(runs)
				}
				b.ReportMetric(nativeCPU.Seconds(), "native-cpu-s/op")
				b.ReportMetric(float64(regoCPU)/float64(nativeCPU), "x-native")
			})
		}
	}
}
