package main

import (
	"slices"
	"testing"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// The memory limit follows the bytes read, file by file, never under the
// floor; decoding and re-reports of a file read already change nothing.
func TestHeapBound(t *testing.T) {
	const mb = 1 << 20
	var got []int64
	h := &heapBound{files: map[string]int64{}, set: func(v int64) int64 { got = append(got, v); return 0 }}
	for _, st := range []snapshot.Status{
		{File: "a.yaml", Stage: snapshot.StageReading, Done: 1 * mb, Total: 2 * mb}, // floor
		{File: "a.yaml", Stage: snapshot.StageReading, Done: 2 * mb, Total: 2 * mb}, // no change
		{File: "a.yaml", Stage: snapshot.StageDecoding, Done: 10, Total: 100},
		{File: "b.json", Stage: snapshot.StageReading, Done: 4 * mb, Total: 100 * mb},
		{File: "<stdin>", Stage: snapshot.StageReading, Done: 4 * mb},
		{File: "<stdin>", Stage: snapshot.StageReading, Done: 8 * mb},
	} {
		h.observe(st)
	}
	want := []int64{heapFloor, heapPerSnapshotByte * 102 * mb, heapPerSnapshotByte * 106 * mb, heapPerSnapshotByte * 110 * mb}
	if !slices.Equal(got, want) {
		t.Errorf("limits %v, want %v", got, want)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if newHeapBound() != nil {
		t.Error("GOMEMLIMIT set, and the plan still sets its own limit")
	}
	newHeapBound().observe(snapshot.Status{File: "a", Stage: snapshot.StageReading, Total: 1}) // nil: no panic
}
