package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/rollplan/rollplan/controller"
	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
)

// controllerFlags are rollplan controller's flags.
type controllerFlags struct {
	selector string
	named    []string
	// analysisConfig: --analysis-config.
	analysisConfig string
	reload         time.Duration
	workers        int
	dryRun         bool
	deleteMethod   string
	leaderElect    bool
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	leaseNS        string
	leaseName      string
	health         string
	metrics        string
	qps            float32
	burst          int
}

func newControllerCommand() *cobra.Command {
	var (
		config kubeFlags
		pf     planFlags
		cf     controllerFlags
	)
	cmd := &cobra.Command{
		Use:   "controller [--policy P] [--named-policy NAME=P] [-n NAMESPACE] [--selector S] [--dry-run]",
		Short: "Drive every managed rollout of the cluster by itself, highly available",
		Long: `Run in the cluster (or out of it, with --kubeconfig/--context) and drive
the rollout of every Deployment, StatefulSet and DaemonSet annotated
rollplan.dev/managed="true" (all namespaces, or -n; --selector narrows them
by label), step by step exactly as rollplan apply would: the same facts,
policies, plan, budgets, re-checks and writes. A workload is stepped when
it or one of its pods changes, and every few seconds while its rollout is
in progress; one workload is never stepped by two workers at once, at
most --concurrent-rollouts are stepped at the same time, and a step that
fails is retried with backoff.

  - A template change mid-rollout re-targets the newest revision at the
    next step.
  - A paused rollout (rollplan pause) is left alone until rollplan resume.
  - A rollout the policy halts stays halted (a Warning Event
    RolloutHalted, the reason in its rollout state) until its template
    changes or rollplan resume.
  - --dry-run plans every step and logs what it would do, sending each
    write with dryRun=All: nothing changes, no Lease of a workload is
    taken, no state or Event is written.

One driver per workload: before its first action on a workload the
controller takes the workload's driver Lease (rollplan-KIND-NAME in the
workload's namespace); rollplan apply takes the same Lease, so a
workload a person drives is left alone (and rollplan apply refuses one
the controller drives). The controller's hold lasts exactly as long as
its leadership: with --leader-elect (the manifests' default) replicas
elect a leader through the Lease --leader-elect-resource-name in
--leader-elect-resource-namespace, only the leader drives, and when it
dies another takes over every rollout within the lease duration. Standby
replicas keep their caches warm. Without --leader-elect a replica holds
a Lease of its own (rollplan-controller-HASH) for the same purpose.

Rollout state: each managed workload carries the annotation
rollplan.dev/rollout-state (JSON: phase, revision, wave i of n, pods
updated/available/in flight, who drives it, why it is halted), written by
server-side apply under the field manager rollplan-controller, which owns
that annotation and nothing else; rollplan status shows it.

/healthz and /readyz on --health-probe-bind-address (ready once the caches
are synced and the leader-election Lease's namespace is usable; the reason
is logged once when not), Prometheus metrics on --metrics-bind-address:
rollplan_controller_rollouts{phase}, rollplan_controller_leader,
rollplan_controller_rollout_phase{workload_namespace,kind,workload,phase},
rollplan_controller_rollout_last_progress_timestamp_seconds,
rollplan_executor_actions_total{kind,action,outcome}, workqueue_*; the
alerting rules and Grafana dashboard over them are in deploy/monitoring.`,
		Example: `  rollplan controller --kubeconfig ~/.kube/config --leader-elect=false
  rollplan controller --policy /etc/rollplan/policy --named-policy canary=/etc/rollplan/canary
  rollplan controller -n prod --selector team=payments --dry-run`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd, &config, &pf, &cf)
		},
	}
	config.register(cmd.Flags())
	fl := cmd.Flags()
	if f := fl.Lookup("namespace"); f != nil {
		f.Usage = "drive only the workloads of this namespace (default: all namespaces)"
	}
	fl.StringSliceVar(&pf.policies, "policy", nil, "the default policy: files or directories, Rego or CEL; default: the built-in strategy")
	fl.StringArrayVar(&cf.named, "named-policy", nil, "NAME=PATH: a policy that workloads annotated rollplan.dev/policy=NAME roll with (repeat for more paths or names)")
	fl.StringVar(&pf.engine, "engine", "", "engine of the default policy: "+engine.KindList()+"; "+engineDefault)
	pf.registerCluster(fl)
	durationVar(fl, &pf.timeout, "policy-timeout", time.Minute, positive, "deadline for evaluating the policy at each step")
	durationVarOff(fl, &cf.reload, "policy-reload-interval", 10*time.Second, zeroOrSeconds, "never", "how often to check the policy files for changes (at least 1s); 0: never")
	fl.StringVarP(&cf.selector, "selector", "l", "", "drive only managed workloads with these labels (a label selector, e.g. team=payments)")
	fl.IntVar(&cf.workers, "concurrent-rollouts", 10, "how many workloads are stepped at the same time")
	fl.BoolVar(&cf.dryRun, "dry-run", false, "plan and log every action, sending writes with dryRun=All: change nothing")
	fl.StringVar(&cf.deleteMethod, "delete-method", executor.DeleteEvict, `how a recreation removes a pod: "evict" (PodDisruptionBudgets honoured) or "delete" (see rollplan apply --help)`)
	fl.StringVar(&cf.analysisConfig, "analysis-config", "", analysisConfigHelp+"; a file that does not exist: none, said in the log (the manifests mount it optionally)")
	fl.BoolVar(&cf.leaderElect, "leader-elect", true, "elect a leader among the replicas; only the leader drives rollouts")
	durationVar(fl, &cf.leaseDuration, "leader-elect-lease-duration", 15*time.Second, positive, "how long standby replicas wait after the last renewal before taking over")
	durationVar(fl, &cf.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, positive, "how long the leader retries renewing before it stops leading (less than the lease duration)")
	durationVar(fl, &cf.retryPeriod, "leader-elect-retry-period", 2*time.Second, positive, "how long replicas wait between tries to acquire or renew")
	fl.StringVar(&cf.leaseNS, "leader-elect-resource-namespace", "", "namespace of the leader-election Lease; default: $POD_NAMESPACE, else "+deploy.DefaultNamespace)
	fl.StringVar(&cf.leaseName, "leader-elect-resource-name", "rollplan-controller", "name of the leader-election Lease")
	fl.StringVar(&cf.health, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "": off`)
	fl.StringVar(&cf.metrics, "metrics-bind-address", ":8080", `address of Prometheus /metrics; "" or "0": off`)
	fl.Float32Var(&cf.qps, "kube-api-qps", 50, "queries per second to the API server")
	fl.IntVar(&cf.burst, "kube-api-burst", 100, "burst of queries to the API server")
	return cmd
}

func runController(cmd *cobra.Command, config *kubeFlags, pf *planFlags, cf *controllerFlags) error {
	if cf.deleteMethod != executor.DeleteEvict && cf.deleteMethod != executor.DeletePlain {
		return usageError{fmt.Errorf("--delete-method %q: want evict or delete", cf.deleteMethod)}
	}
	if cf.workers < 1 {
		return usageError{fmt.Errorf("--concurrent-rollouts %d: want at least 1", cf.workers)}
	}
	if cf.leaderElect && !(cf.retryPeriod < cf.renewDeadline && cf.renewDeadline < cf.leaseDuration) {
		return usageError{fmt.Errorf("--leader-elect-retry-period %s < --leader-elect-renew-deadline %s < --leader-elect-lease-duration %s must hold", cf.retryPeriod, cf.renewDeadline, cf.leaseDuration)}
	}
	sel, err := labels.Parse(cf.selector)
	if err != nil {
		return usageError{fmt.Errorf("--selector %q: %w", cf.selector, err)}
	}
	if err := pf.checkCluster(); err != nil {
		return err
	}
	kind, err := pf.engineKind()
	if err != nil {
		return err
	}
	named, err := parseNamedPolicies(cf.named)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := jsonLog(cmd.ErrOrStderr())
	policies := &policySet{kind: kind, paths: pf.policies, named: named, timeout: pf.timeout}
	if err := policies.load(ctx); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := controller.NewMetrics(reg)
	config.qps, config.burst, config.wrap = cf.qps, cf.burst, metrics.CountRequests
	cl, err := connectCluster(config)
	if err != nil {
		return err
	}
	cluster, err := pf.liveClusterOptions(cl, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	leaseNS, _ := gateNamespace(cf.leaseNS, os.Getenv("POD_NAMESPACE"))
	identity := controllerIdentity()
	leaseName := cf.leaseName
	if !cf.leaderElect {
		// A Lease of its own: the driver Leases it holds need a liveness.
		sum := sha256.Sum256([]byte(identity))
		leaseName += "-" + hex.EncodeToString(sum[:])[:10]
	}
	o := controller.Options{
		Client: cl.client, Dynamic: cl.dynamic, Namespace: config.overrides.Context.Namespace, Selector: sel, Policies: policies,
		Workers: cf.workers, DryRun: cf.dryRun, DeleteMethod: cf.deleteMethod,
		KubernetesVersion: cluster.KubernetesVersion, FeatureGates: cluster.FeatureGates, PlanOptions: planOptions(),
		Identity: identity, Liveness: leaseNS + "/" + leaseName, Metrics: metrics, Log: log,
	}
	o.RollBack = history.RollBackTo
	if o.Providers, err = controllerAnalysisConfig(cf.analysisConfig, log); err != nil {
		return err
	}
	if !cf.dryRun {
		rec, err := executor.StartEvents(cl.client)
		if err != nil {
			return err
		}
		defer rec.Shutdown(5 * time.Second)
		o.Events = rec
	}
	ctrl, err := controller.New(o)
	if err != nil {
		return err
	}
	// Ready once the caches are synced and the leader-election Lease can
	// be written: a standby is ready too (it takes over with warm caches).
	ready := gate.NewReadiness(log).
		Add("informer caches", func(context.Context) error {
			if !ctrl.HasSynced() {
				return errors.New("informer caches are not synced yet")
			}
			return nil
		}).
		Add("leader-election Lease", func(ctx context.Context) error { return leaseUsable(ctx, cl.client, leaseNS, leaseName) })
	stopMetrics, err := serveMetrics(cf.metrics, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if cf.health != "" {
		stopHealth, err := serveHealth(cf.health, ready, log)
		if err != nil {
			return err
		}
		defer stopHealth()
	}
	if cf.reload > 0 {
		paths := policies.allPaths()
		if len(paths) > 0 {
			go watchPolicies(ctx, paths, cf.reload, log, func() error {
				if err := policies.load(ctx); err != nil {
					return err
				}
				log.Info("policies reloaded: stepping every managed workload again")
				ctrl.Requeue()
				return nil
			})
		}
	}
	scope := "all namespaces"
	if o.Namespace != "" {
		scope = "namespace " + o.Namespace
	}
	log.Info("starting", "identity", identity, "scope", scope, "selector", sel.String(), "leaderElection", cf.leaderElect,
		"lease", o.Liveness, "dryRun", cf.dryRun, "concurrentRollouts", cf.workers, "cluster", cl.source)
	if err := ctrl.Start(ctx); err != nil {
		return err
	}
	log.Info("informer caches synced")
	go ready.Run(ctx, 5*time.Second)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: leaseNS, Name: leaseName},
		Client:     cl.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	lost, finished := make(chan struct{}), make(chan struct{})
	var led atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: cf.leaseDuration, RenewDeadline: cf.renewDeadline, RetryPeriod: cf.retryPeriod,
		ReleaseOnCancel: true, Name: leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				defer close(finished)
				metrics.Leader.Set(1)
				log.Info("leading: driving every managed rollout", "lease", o.Liveness)
				ctrl.Run(ctx)
			},
			OnStoppedLeading: func() {
				metrics.Leader.Set(0)
				close(lost)
			},
			OnNewLeader: func(id string) {
				if id != identity {
					log.Info("standing by", "leader", id, "lease", o.Liveness)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election on Lease %s: %w", o.Liveness, err)
	}
	elector.Run(ctx)
	<-lost
	if ctx.Err() != nil {
		if led.Load() {
			// Let the workers finish their steps and give up the
			// driver Leases.
			select {
			case <-finished:
			case <-time.After(10 * time.Second):
			}
		}
		log.Info("stopped", "lease", o.Liveness)
		return nil
	}
	// As kube-controller-manager does: a replica that lost its lease may
	// still believe it drives rollouts; exit, and restart as a standby.
	return fmt.Errorf("lost the leader-election Lease %s (renewals failed for --leader-elect-renew-deadline %s): exiting so that this replica restarts as a standby", o.Liveness, cf.renewDeadline)
}

// controllerIdentity names this replica: its pod (POD_NAME), else the
// host, with a random suffix so two processes on one host differ.
func controllerIdentity() string {
	id := os.Getenv("POD_NAME")
	if id == "" {
		id, _ = os.Hostname()
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return id + "_" + hex.EncodeToString(b)
}

// leaseUsable: the leader-election Lease can be written where it lives (a
// server-side dry-run create: the namespace exists and the controller may
// create Leases there).
func leaseUsable(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, err := c.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s/%s: namespace %s not found: create it (kubectl create namespace %s) or set --leader-elect-resource-namespace", ns, name, ns, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s/%s: may not create Leases in namespace %s: grant it (rollplan manifests has the RBAC): %w", ns, name, ns, err)
	}
	return fmt.Errorf("%s/%s: %w", ns, name, err)
}

// parseNamedPolicies reads --named-policy NAME=PATH values.
func parseNamedPolicies(vals []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range vals {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" {
			return nil, usageError{fmt.Errorf("--named-policy %q: want NAME=PATH, e.g. canary=policies/examples/one-zone-at-a-time", v)}
		}
		out[name] = append(out[name], path)
	}
	for name, paths := range out {
		if err := checkPolicyPaths(paths); err != nil {
			return nil, fmt.Errorf("--named-policy %s: %w", name, err)
		}
	}
	return out, nil
}

// policySet is the controller's policies: the default and the named ones,
// swapped whole on a reload.
type policySet struct {
	kind    string
	paths   []string
	named   map[string][]string
	timeout time.Duration

	mu      sync.RWMutex
	def     engine.Engine
	engines map[string]engine.Engine
}

func (p *policySet) allPaths() []string {
	out := append([]string(nil), p.paths...)
	for _, paths := range p.named {
		out = append(out, paths...)
	}
	return out
}

// load compiles every policy; on an error the previous ones stay.
func (p *policySet) load(ctx context.Context) error {
	def, err := newEngine(ctx, p.kind, p.paths, p.timeout)
	if err != nil {
		return err
	}
	named := map[string]engine.Engine{}
	for name, paths := range p.named {
		kind, err := engines.Infer(paths)
		if err != nil {
			return fmt.Errorf("--named-policy %s: %w", name, err)
		}
		e, err := newEngine(ctx, kind, paths, p.timeout)
		if err != nil {
			return fmt.Errorf("--named-policy %s: %w", name, err)
		}
		named[name] = e
	}
	p.mu.Lock()
	p.def, p.engines = def, named
	p.mu.Unlock()
	return nil
}

// For implements controller.Policies. Without named policies every
// workload rolls with the default one (which sees the annotation as
// workload.policy); with them, a name the controller does not have is an
// error rather than a silent fallback.
func (p *policySet) For(name string) (engine.Engine, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if name == "" || len(p.engines) == 0 {
		return p.def, nil
	}
	if e, ok := p.engines[name]; ok {
		return e, nil
	}
	have := make([]string, 0, len(p.engines))
	for n := range p.engines {
		have = append(have, n)
	}
	sort.Strings(have)
	return nil, fmt.Errorf("annotation %s=%q names a policy the controller does not have (it has %s): fix the annotation, or start the controller with --named-policy %s=PATH",
		facts.AnnPolicy, name, strings.Join(have, ", "), name)
}

// healthHandler serves /healthz (alive) and /readyz (the readiness's
// last verdict; 503 with the reason when not ready).
func healthHandler(ready *gate.Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready.Err(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serveHealth serves /healthz (alive) and /readyz (readiness) on addr.
func serveHealth(addr string, r *gate.Readiness, log *slog.Logger) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	srv := &http.Server{Handler: healthHandler(r), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server", "error", err)
		}
	}()
	log.Info("serving health probes", "address", "http://"+l.Addr().String()+"/readyz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
