package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// liveWorkload is what apply and status share: the workload named on the
// command line, the policy engine, the feature gates and the cluster, with
// a context that ends on Ctrl-C or SIGTERM (call stop when done).
type liveWorkload struct {
	ctx    context.Context
	stop   context.CancelFunc
	target live.Target
	engine engine.Engine
	// cluster: the version and gate overrides the workload is planned with.
	cluster facts.Options
	client  kubernetes.Interface
}

// connectTarget reads a KIND/NAME argument (a usage error when it is not
// one) and connects to the cluster the kubeconfig flags name: the
// commands that act on one workload without planning it (history, undo,
// pause, resume, promote, abort).
func connectTarget(config *kubeFlags, arg string) (*cluster, live.Target, error) {
	ref, err := capture.ParseRef(arg)
	if err != nil {
		return nil, live.Target{}, usageError{err}
	}
	cl, err := connectCluster(config)
	if err != nil {
		return nil, live.Target{}, err
	}
	return cl, live.Target{Namespace: cl.namespace, Kind: ref.Kind, Name: ref.Name}, nil
}

func openWorkload(cmd *cobra.Command, arg string, pf *planFlags, config *kubeFlags) (*liveWorkload, error) {
	ref, err := capture.ParseRef(arg)
	if err != nil {
		return nil, usageError{err}
	}
	if err := pf.checkCluster(); err != nil {
		return nil, err
	}
	kind, err := pf.engineKind()
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	eng, err := newEngine(ctx, kind, pf.policies, pf.timeout)
	if err != nil {
		stop()
		return nil, err
	}
	cl, err := connectCluster(config)
	if err != nil {
		stop()
		return nil, err
	}
	cluster, err := pf.liveClusterOptions(cl, cmd.ErrOrStderr())
	if err != nil {
		stop()
		return nil, err
	}
	return &liveWorkload{ctx: ctx, stop: stop, target: live.Target{Namespace: cl.namespace, Kind: ref.Kind, Name: ref.Name},
		engine: eng, cluster: cluster, client: cl.client}, nil
}
