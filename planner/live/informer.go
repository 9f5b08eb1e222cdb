package live

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Notifier is a Reader that says when the state it reads has changed, so
// a consumer (the executor's Run) steps on a change instead of polling.
type Notifier interface {
	Reader
	// Changes receives a value after the state changed (coalesced: one
	// value may stand for many changes).
	Changes() <-chan struct{}
}

// InformerReader reads the live state from client-go informer caches: the
// workloads, ReplicaSets, ControllerRevisions, pods and PDBs of one
// namespace, and the Nodes. Every add, update or delete in them is a
// change (Changes). Planning from a cache can lag the API server by a
// watch event; the executor therefore re-reads from the API server before
// every write (executor.Options.Checker), as the budget check needs.
type InformerReader struct {
	src     *capture.ListerSource
	changes chan struct{}
	now     func() time.Time
}

var _ Notifier = (*InformerReader)(nil)

// NewInformerReader starts the informers for namespace and waits until
// their caches are synced; they stop when ctx ends. Credentials that may
// not list Nodes get no Node informer (the capture warns, as `rollplan
// snapshot` does).
func NewInformerReader(ctx context.Context, client kubernetes.Interface, namespace string, now func() time.Time) (*InformerReader, error) {
	if now == nil {
		now = time.Now
	}
	strip := informers.WithTransform(capture.StripManagedFields)
	objects := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace), strip)
	var nodes informers.SharedInformerFactory
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
		nodes = informers.NewSharedInformerFactoryWithOptions(client, 0, strip)
	} else if !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	r := &InformerReader{src: capture.NewListerSource(objects, nodes), changes: make(chan struct{}, 1), now: now}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.changed() },
		UpdateFunc: func(any, any) { r.changed() },
		DeleteFunc: func(any) { r.changed() },
	}
	for _, inf := range r.src.Informers() {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return nil, fmt.Errorf("watch in namespace %q: %w", namespace, err)
		}
	}
	objects.Start(ctx.Done())
	if nodes != nil {
		nodes.Start(ctx.Done())
	}
	if err := r.src.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("namespace %q: %w", namespace, err)
	}
	return r, nil
}

func (r *InformerReader) changed() {
	select {
	case r.changes <- struct{}{}:
	default: // a change is pending already
	}
}

// Changes implements Notifier.
func (r *InformerReader) Changes() <-chan struct{} { return r.changes }

// Read implements Reader: a capture of the target from the caches.
func (r *InformerReader) Read(ctx context.Context, t Target) (*snapshot.Snapshot, error) {
	return ListerReader{Source: r.src, Now: r.now}.Read(ctx, t)
}

// ListerReader reads from the caches of informers someone else runs (the
// controller's, shared by every workload it drives): a capture of the
// target, as CaptureReader takes from the API server.
type ListerReader struct {
	Source *capture.ListerSource
	Now    func() time.Time
}

// Read implements Reader.
func (r ListerReader) Read(ctx context.Context, t Target) (*snapshot.Snapshot, error) {
	snap, _, err := capture.CaptureFrom(ctx, r.Source, capture.Options{
		Namespace: t.Namespace,
		Workloads: []capture.Ref{{Kind: t.Kind, Name: t.Name}},
		Now:       r.Now,
	})
	return snap, err
}
