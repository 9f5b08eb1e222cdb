package main

import (
	"os"
	"runtime/debug"
	"sync"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// heapPerSnapshotByte and heapFloor bound the heap of a plan as the
// snapshot is read: a soft memory limit of heapPerSnapshotByte times the
// bytes read so far, never under heapFloor. The decoded objects take about
// 3× a JSON file and 6.5× a YAML one; with the collector's default
// headroom the heap would reach twice that (a 119 MB YAML snapshot of
// 150,000 pods: 1.37 GB of RSS). The limit makes the collector run sooner
// instead, so that the process stays under 10× its input (7.2× for that
// snapshot, at 12% more CPU; 9.8× for 20,000 pods in a 16 MB file, where
// the binary's own 49 MB counts for 3×). It is soft: a
// snapshot whose objects need more only makes the collector run more often
// (the runtime caps that at half the CPU), never fails. GOMEMLIMIT, when
// set, wins.
const (
	heapPerSnapshotByte = 7
	heapFloor           = 64 << 20
)

// heapBound raises the process's memory limit as files are read.
type heapBound struct {
	mu    sync.Mutex
	files map[string]int64
	total int64
	// set is debug.SetMemoryLimit (a test's recorder in tests).
	set func(int64) int64
}

// newHeapBound: nil when GOMEMLIMIT is set (the user's limit stands).
func newHeapBound() *heapBound {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return &heapBound{files: map[string]int64{}, set: debug.SetMemoryLimit}
}

// observe takes a load's status: a file being read counts with its size
// (its total, or what has been read of the standard input).
func (h *heapBound) observe(st snapshot.Status) {
	if h == nil || st.Stage != snapshot.StageReading {
		return
	}
	size := max(st.Total, st.Done)
	h.mu.Lock()
	defer h.mu.Unlock()
	if size <= h.files[st.File] {
		return
	}
	h.total += size - h.files[st.File]
	h.files[st.File] = size
	h.set(max(heapPerSnapshotByte*h.total, heapFloor))
}
