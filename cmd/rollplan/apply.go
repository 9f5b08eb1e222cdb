package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/live"
)

// applyClock is the executor's clock; tests may fix it.
var applyClock = time.Now

// applyPoll is the executor's first wait between steps; tests shorten it.
var applyPoll = 500 * time.Millisecond

func newApplyCommand() *cobra.Command {
	var (
		config       kubeFlags
		pf           planFlags
		dryRun       string
		deleteMethod string
		once         bool
		timeout      time.Duration
		metrics      string
		waitLease    bool
		analysisCfg  string
	)
	cmd := &cobra.Command{
		Use:   "apply KIND/NAME [-n NAMESPACE] [--policy P] [--dry-run=server] [--once]",
		Short: "Carry out the rollout plan of one workload on a live cluster, safely",
		Long: `Carry out the rollout of one StatefulSet, DaemonSet or Deployment on a live cluster,
step by step, as rollplan plan previews it. Each step reads the live state,
plans, and carries out what the plan's first wave allows now; then it waits
for pods to become available and repeats, until every pod runs the update
revision (done), the policy halts the rollout, or --timeout passes. The
live state comes from informer caches (list once, then watch): a step runs
when something in the namespace changed or a pod's minReadySeconds ran out,
not on a timer. Right before every write it reads again from the API server.

It drives StatefulSets and DaemonSets with updateStrategy OnDelete
annotated rollplan.dev/managed="true" (a RollingUpdate one is refused: its
controller drives it; rollplan plan previews it), and Deployments annotated
rollplan.dev/managed="true": their pods are updated in place within their
ReplicaSet, which takes the new template once every pod runs it; rollplan
keeps such a Deployment paused (spec.paused) so its controller waits, and
hands a change that cannot go in place back to the controller's rolling
update (docs/deployment-in-place.md). A rollout paused with rollplan pause
starts no new action until rollplan resume.

Actions: an in-place update patches the pod's images and its
controller-revision-hash label (so the controller counts it updated) with
the pod's resourceVersion as precondition, and changes cpu/memory requests
and limits through the pods/resize subresource (complete once the container
statuses report the new resources); a recreation evicts the pod through
the Eviction API (PodDisruptionBudgets are honoured; a refusal means "not
now") with its UID as precondition, or, with --delete-method=delete, deletes
it with the same precondition (for clusters that do not allow eviction: the
API server then enforces no PodDisruptionBudget). Before every write the live budget
is checked again: a pod is unavailable when it is missing, terminating, not
Ready for minReadySeconds, or being updated in place (its spec image differs
from the running one, or its rollplan.dev/in-place-update record has not
completed). That state lives on the pods, so apply can be stopped and
started again at any moment without spending a budget twice.

Node preparation (DaemonSets, when the policy's node_preparation answers
cordon or drain): before a daemon pod is updated its node is cordoned
(spec.unschedulable plus the annotation rollplan.dev/cordoned-by naming the
DaemonSet, resourceVersion as precondition) once the pod's budget allows;
for drain, every pod on the node that no DaemonSet owns and that is not a
mirror pod is evicted, and the daemon pod waits until they are gone. Once
the node's daemon pod runs the update revision and is available, the node is
uncordoned. A node cordoned by someone else counts as prepared and stays
cordoned; a node rollplan cordoned is finished first by the next run.
Events: NodeCordoned, NodeDrain, NodeUncordoned.

It records Kubernetes Events on the workload (InPlaceUpdate, Evicted,
Deleted, RolloutHalted, RolloutComplete, and for a Deployment Hold and
InPlaceRevision; none with --dry-run), serves
Prometheus metrics at /metrics with --metrics-bind-address, and on a
terminal redraws one progress line after each step (waves, pods updated
and available, budgets in use). It exits 0 when done (or, with --once or
--dry-run, when the step succeeded) and 3 when the policy halts the
rollout (the table below).`,
		Example: `  rollplan apply sts/web -n prod
  rollplan apply deploy/api -n prod --timeout 30m
  rollplan apply statefulset/web -n prod --dry-run=server
  rollplan apply ds/agent --policy policies/examples/one-zone-at-a-time --timeout 30m
  rollplan apply sts/db --once --context staging`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one KIND/NAME, e.g. sts/web", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if deleteMethod != executor.DeleteEvict && deleteMethod != executor.DeletePlain {
				return usageError{fmt.Errorf("--delete-method %q: want evict or delete", deleteMethod)}
			}
			if dryRun != "none" && dryRun != "server" {
				return usageError{fmt.Errorf("--dry-run %q: want none or server", dryRun)}
			}
			w, err := openWorkload(cmd, args[0], &pf, &config)
			if err != nil {
				return err
			}
			defer w.stop()
			return drive(cmd, w, driveOptions{dryRun: dryRun == "server", deleteMethod: deleteMethod, once: once, timeout: timeout, metrics: metrics, waitForLease: waitLease, analysisConfig: analysisCfg})
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	fl := cmd.Flags()
	fl.StringSliceVar(&pf.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&pf.engine, "engine", "", "policy engine: "+engine.KindList()+"; "+engineDefault)
	pf.registerCluster(fl)
	durationVar(fl, &pf.timeout, "policy-timeout", time.Minute, positive, "deadline for evaluating the policy at each step")
	fl.StringVar(&dryRun, "dry-run", "none", `"server": send every write of one step with dryRun=All and report what would change; "none": apply`)
	fl.Lookup("dry-run").NoOptDefVal = "server"
	fl.StringVar(&deleteMethod, "delete-method", executor.DeleteEvict, `how a recreation removes a pod: "evict" through the Eviction API (PodDisruptionBudgets honoured), or "delete": a plain delete with a UID precondition, for clusters where eviction is not allowed (PodDisruptionBudgets are then NOT enforced by the API server; only the plan's budgets hold)`)
	fl.BoolVar(&once, "once", false, "carry out one step and exit, done or not")
	durationVarOff(fl, &timeout, "timeout", 0, zeroOrPositive, "no limit", "give up after this long (exit 1); 0: no limit")
	fl.StringVar(&metrics, "metrics-bind-address", "", `serve Prometheus metrics on this address at /metrics (e.g. ":8080"); "" or "0": off`)
	fl.StringVar(&analysisCfg, "analysis-config", "", analysisConfigHelp)
	fl.BoolVar(&waitLease, "wait-for-lease", false, "when the rollplan controller or another apply drives the workload, wait until it lets go (bounded by --timeout) instead of exiting")
	return cmd
}

// driveOptions are apply's flags that shape a run.
type driveOptions struct {
	dryRun       bool
	deleteMethod string
	once         bool
	timeout      time.Duration
	metrics      string
	// waitForLease: wait while another driver holds the workload instead
	// of exiting.
	waitForLease bool
	// undo: after rollplan undo rolled the template back; a workload the
	// controller drives is then rolled back by the controller.
	undo bool
	// analysisConfig: --analysis-config, the providers of the gates.
	analysisConfig string
}

// drive runs the executor on the workload until the rollout is done,
// halted or stopped, and reports it: rollplan apply, and rollplan undo
// after it rolled the template back.
func drive(cmd *cobra.Command, w *liveWorkload, o driveOptions) error {
	ctx, target, eng := w.ctx, w.target, w.engine
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("--timeout %s passed", o.timeout))
		defer cancel()
	}
	stderr := cmd.ErrOrStderr()
	providers, err := loadAnalysisConfig(o.analysisConfig)
	if err != nil {
		return err
	}
	opts := executor.Options{
		Providers: providers, RollBack: history.RollBackTo,
		Target: target, Engine: eng, DryRun: o.dryRun,
		KubernetesVersion: w.cluster.KubernetesVersion, FeatureGates: w.cluster.FeatureGates,
		DeleteMethod: o.deleteMethod, PlanOptions: planOptions(),
		Now: applyClock, Poll: applyPoll, Log: slog.New(slog.NewTextHandler(stderr, nil)),
	}
	var prog *progress
	if isTerminal(stderr) {
		// One status line, redrawn after each step; the log
		// lines scroll above it.
		prog = &progress{w: stderr}
		opts.Log = slog.New(slog.NewTextHandler(prog, nil))
		opts.Progress = prog.step
		// The API server's warnings scroll above the line too.
		defer kubeWarnings.redirect(prog)()
	} else {
		defer kubeWarnings.redirect(stderr)()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Metrics = executor.NewMetrics(reg)
	stopMetrics, err := serveMetrics(o.metrics, reg, opts.Log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if !opts.DryRun {
		rec, err := executor.StartEvents(w.client)
		if err != nil {
			return err
		}
		defer rec.Shutdown(5 * time.Second)
		opts.Events = rec
	}
	if !o.once && !opts.DryRun {
		// A run that waits watches instead of polling.
		var err error
		opts.Reader, err = live.NewInformerReader(ctx, w.client, target.Namespace, applyClock)
		if err != nil {
			return fmt.Errorf("%s: start informers: %w", target, err)
		}
	}
	if !opts.DryRun {
		// One driver per workload: hold its driver Lease while driving.
		lease, err := takeDriverLease(ctx, w, o, stderr, opts.Log)
		if err != nil || lease == nil {
			return err
		}
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go lease.KeepRenewed(ctx, func(err error) { cancel(fmt.Errorf("stopped driving: %w", err)) })
		defer func() {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			if err := lease.Release(rctx); err != nil {
				opts.Log.Warn("could not give up the driver Lease; it lapses by itself", "workload", target.String(), "error", err)
			}
		}()
	}
	x, err := executor.New(w.client, opts)
	if err != nil {
		return err
	}
	sum, err := x.Run(ctx, o.once)
	if prog != nil {
		prog.done()
	}
	report(stderr, target, o.dryRun, sum, err)
	return err
}

// takeDriverLease takes the workload's driver Lease for this apply, or
// explains who holds it (and, with --wait-for-lease, waits). A nil lease
// with a nil error: undo on a workload the controller drives, which rolls
// the rollback itself.
func takeDriverLease(ctx context.Context, w *liveWorkload, o driveOptions, stderr io.Writer, log *slog.Logger) (*executor.DriverLease, error) {
	uid, err := workloadUID(ctx, w)
	if err != nil {
		return nil, err
	}
	d := executor.Driver{Identity: applyIdentity()}
	waiting := ""
	for {
		lease, err := executor.AcquireDriver(ctx, w.client, w.target, uid, d, applyClock)
		var held *executor.HeldError
		if !errors.As(err, &held) {
			return lease, err
		}
		if o.undo && held.Holder.Controller {
			fmt.Fprintf(stderr, "%s: the rollplan controller (%s) drives this workload and rolls the rollback itself; watch it with `rollplan status %s --watch`\n",
				w.target, held.Holder.Identity, strings.ToLower(w.target.Kind)+"/"+w.target.Name+" -n "+w.target.Namespace)
			return nil, nil
		}
		if !o.waitForLease {
			return nil, held
		}
		if held.Holder.Identity != waiting {
			waiting = held.Holder.Identity
			log.Info("waiting for the driver Lease", "workload", w.target.String(), "holder", waiting, "lease", held.Holder.Lease)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: gave up waiting for the driver Lease held by %s: %w", w.target, waiting, context.Cause(ctx))
		case <-time.After(2 * time.Second):
		}
	}
}

// applyIdentity names this apply in the driver Lease: user@host (pid).
func applyIdentity() string {
	host, _ := os.Hostname()
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	return fmt.Sprintf("%s %s@%s (pid %d)", executor.DriverApply, user, host, os.Getpid())
}

// metricsOff reports whether --metrics-bind-address turns metrics off: ""
// and, as controller-runtime and kubebuilder projects read it, "0".
func metricsOff(addr string) bool { return addr == "" || addr == "0" }

// serveMetrics serves the registry's metrics at addr/metrics until the
// returned function stops it; when metricsOff(addr) it serves nothing.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	if metricsOff(addr) {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "error", err)
		}
	}()
	log.Info("serving metrics", "address", "http://"+l.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// report writes the final summary line. Pods are counted as rollplan
// status counts them: updated out of the desired ones not held, so old
// pods still terminating after a rolling update are not in the total.
func report(w io.Writer, t live.Target, dryRun bool, sum *executor.Summary, err error) {
	if sum == nil || sum.Last == nil {
		return
	}
	last := sum.Last
	var acts []string
	types := make([]string, 0, len(sum.Actions))
	for k := range sum.Actions {
		types = append(types, k)
	}
	sort.Strings(types)
	for _, k := range types {
		acts = append(acts, fmt.Sprintf("%d %s", sum.Actions[k], k))
	}
	if len(acts) == 0 {
		acts = []string{"no action"}
	}
	state := "in progress"
	var h *executor.HaltedError
	var rb *executor.RolledBackError
	switch {
	case errors.As(err, &h):
		state = "halted by policy"
	case errors.As(err, &rb):
		state = "rolled back"
	case err != nil:
		state = "stopped"
	case dryRun:
		state = "dry run, nothing changed"
		for i, a := range acts {
			acts[i] = "would " + a
		}
	case last.Done:
		state = "done"
	}
	fmt.Fprintf(w, "%s: %s: %s in %s; %d/%d pods updated, %d available, %d held, %d in flight\n",
		t, state, strings.Join(acts, ", "), plural.Count(max(sum.Steps, 1), "step", "steps"), last.Updated, last.Desired-last.Held, last.Available, last.Held, len(last.InFlight))
	if last.Note != "" && !last.Done {
		fmt.Fprintf(w, "%s: %s\n", t, last.Note)
	}
}
