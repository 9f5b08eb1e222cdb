package snapshot_test

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
)

// BenchmarkDigest: the heap a snapshot digest needs above the snapshot
// itself (MiB-over), streamed as Digest does it, against marshalling the
// snapshot whole.
//
//	go test ./planner/snapshot -run '^$' -bench Digest -benchmem -benchtime 2x
func BenchmarkDigest(b *testing.B) {
	snap := synth.Snapshot(150000)
	for _, c := range []struct {
		name   string
		digest func()
	}{
		{"streamed", func() {
			if _, err := snap.Digest(); err != nil {
				b.Fatal(err)
			}
		}},
		{"whole", func() {
			data, err := json.Marshal(snap)
			if err != nil {
				b.Fatal(err)
			}
			sha256.Sum256(data)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var over uint64
			for b.Loop() {
				b.StopTimer()
				runtime.GC()
				base := measure.SampleHeap()()
				b.StartTimer()
				peak := measure.SampleHeap()
				c.digest()
				over = max(over, peak()-base)
			}
			b.ReportMetric(float64(over)/(1<<20), "MiB-over")
		})
	}
}
