package plan

import (
	"context"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/request"
)

// Run evaluates the engine for the facts of a request and packs their
// plan. The metadata names the snapshot's digest, the time, the Kubernetes
// version and the feature gates planned for (the version's defaults with
// the request's overrides), and carries the snapshot's warnings.
func Run(ctx context.Context, f *request.Facts, eng engine.Engine, o Options) (*Result, error) {
	req := f.Request
	digest, err := req.Snapshot.Digest()
	if err != nil {
		return nil, err
	}
	v := req.Cluster.KubernetesVersion.Or(kubeversion.Newest)
	gates, err := kubeversion.WithOverrides(v, req.Cluster.FeatureGates)
	if err != nil {
		return nil, err
	}
	meta := Metadata{SnapshotDigest: digest, Now: f.Now.UTC().Format(time.RFC3339), Warnings: req.Warnings,
		KubernetesVersion: v.Release(), FeatureGates: gates, PatchRules: kubeversion.PatchRules(v)}
	return Build(ctx, f.Rollouts, eng, meta, o)
}
