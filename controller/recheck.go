package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// recheckSource is what the executor re-reads right before each write
// (executor.Options.Checker): the workload, its pods and the
// PodDisruptionBudgets from the API server, as the budget re-check and the
// writes' preconditions need; the ControllerRevisions, ReplicaSets and
// Nodes from the controller's caches.
//
// The executor's default reads all of them afresh, and lists the whole
// namespace's revisions or ReplicaSets and every Node to do it: five
// requests per pod updated, the lists growing with the namespace and the
// cluster. With 100 workloads and 2,000 pods rolled at once that was most
// of the controller's requests and CPU, and its client's rate limit set
// the pace of every rollout (test/controllerscale). What is taken from the
// cache here changes only with the workload's template (revisions,
// ReplicaSets: the fresh workload names the revision it rolls to, and a
// step that finds its revision not cached yet fails and is retried) or
// says where pods run (Nodes, a watch event behind at most); a pod's
// availability and the budgets that count it are always read afresh.
type recheckSource struct {
	capture.APISource
	cache *capture.ListerSource
}

func (s recheckSource) ReplicaSets(ctx context.Context, ns string) ([]*appsv1.ReplicaSet, error) {
	return s.cache.ReplicaSets(ctx, ns)
}

func (s recheckSource) ControllerRevisions(ctx context.Context, ns string) ([]*appsv1.ControllerRevision, error) {
	return s.cache.ControllerRevisions(ctx, ns)
}

func (s recheckSource) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	return s.cache.Nodes(ctx)
}

// recheckReader captures the target from a recheckSource.
type recheckReader struct {
	src recheckSource
	now func() time.Time
}

var _ live.Reader = recheckReader{}

// Read implements live.Reader.
func (r recheckReader) Read(ctx context.Context, t live.Target) (*snapshot.Snapshot, error) {
	snap, _, err := capture.CaptureFrom(ctx, r.src, capture.Options{
		Namespace: t.Namespace,
		Workloads: []capture.Ref{{Kind: t.Kind, Name: t.Name}},
		Now:       r.now,
	})
	return snap, err
}
