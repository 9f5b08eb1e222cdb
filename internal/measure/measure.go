// Package measure reads what benchmarks report beside time: the process's
// CPU time and its peak heap. Planning and the gate run on every core with
// the garbage collector beside them, so wall time alone hides their cost,
// and a heap read once after the work misses its peak.
package measure

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// CPU is the user+system CPU time of the process so far, every thread
// (GC workers included). It is 0 where getrusage fails.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SampleHeap samples the heap in use (the spans holding objects, garbage
// not yet collected included, as MemStats.HeapInuse counts it) every 2 ms
// until the returned function is called, which stops and returns the
// highest sample. runtime/metrics reads it without stopping the world.
func SampleHeap() func() uint64 {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			peak = max(peak, samples[0].Value.Uint64()+samples[1].Value.Uint64())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak
	}
}
