package live

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Reader reads the live state of one workload.
type Reader interface {
	Read(ctx context.Context, t Target) (*snapshot.Snapshot, error)
}

// CaptureReader reads through capture.Capture: the workload, its
// ControllerRevisions, its pods, the PDBs selecting them (with their other
// pods) and the Nodes — the very objects `rollplan snapshot` captures, so
// the executor plans what `rollplan plan` would show for the same state.
// Every Read lists afresh from the API server (no cache), which is what
// the budget re-check before each write needs.
type CaptureReader struct {
	Client kubernetes.Interface
	Now    func() time.Time
}

// Read implements Reader.
func (c CaptureReader) Read(ctx context.Context, t Target) (*snapshot.Snapshot, error) {
	snap, _, err := capture.Capture(ctx, c.Client, capture.Options{
		Namespace: t.Namespace,
		Workloads: []capture.Ref{{Kind: t.Kind, Name: t.Name}},
		Now:       c.Now,
	})
	return snap, err
}
