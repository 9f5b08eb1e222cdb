// Package cputime reads the process's CPU time, for benchmarks: planning and
// the gate run on every core and the garbage collector runs beside them, so
// wall time alone hides their cost.
package cputime

import (
	"syscall"
	"time"
)

// Process is the user+system CPU time of the process so far, every thread
// (GC workers included). It is 0 where getrusage fails.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
