package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

func newGateCommand() *cobra.Command {
	var (
		config                 kubeFlags
		pf                     planFlags
		certFile, keyFile      string
		enforcement            string
		bind, health, metrics  string
		exempt                 []string
		reservationTTL, reload time.Duration
		shutdownDelay, gcEvery time.Duration
		policyModes            map[string]string
	)
	cmd := &cobra.Command{
		Use:   "gate --tls-cert-file F --tls-private-key-file F [--policy P] [--enforcement deny|warn|dryrun]",
		Short: "Serve the admission webhook that holds every actor to the rollout budgets",
		Long: `Serve a validating admission webhook (admission.k8s.io/v1) at /validate
that enforces the same policies and budgets as rollplan plan and apply on
everyone: kubectl delete, node drains, autoscalers, other controllers.

  - A pod deletion, a pods/eviction, or a pod update that restarts a
    container (an image change; a resize whose resizePolicy restarts it) is
    admitted while every budget of the pod's Deployment, StatefulSet or
    DaemonSet keeps room, resolved by the policy as the planner resolves
    it (PodDisruptionBudgets included); otherwise it is denied with the
    workload, the budget, its limit and the pods already unavailable
    (evictions get 429, so drains retry). An unavailable pod may always go,
    and so may a pod whose owner is gone or being deleted (garbage
    collection); pods without an owning workload are not gated. Pods the
    workload no longer wants (StatefulSet ordinals past its replicas,
    daemon pods on nodes that should no longer run them) cost no budget.
  - A Deployment, StatefulSet or DaemonSet create or update is denied by
    the policy's deny rules; otherwise the response carries a warning
    summarising the plan it produces, which kubectl prints.

Admitted disruptions are reserved in ConfigMaps of the gate's namespace
(rollplan-budget-*, optimistic concurrency) until the informer cache shows
them, so replicas never admit the same unit of budget twice. Dry-run
requests never reserve. Every --reservation-gc-interval each replica
deletes the ConfigMaps whose every reservation has lapsed.

Enforcement: deny (default), warn (admit with a warning) or dryrun (admit;
only logs and metrics tell); --policy-enforcement sets it per policy name
(the workloads whose rollplan.dev/policy annotation names it), and a
workload's annotation rollplan.dev/gate-enforcement overrides both. Failure modes: when the gate
cannot decide (cache or reservation errors) it denies disruptions of
workloads annotated rollplan.dev/managed="true" and admits others; a
policy evaluation error denies disruptions and says why. kube-system and
the gate's own namespace are never gated.

The gate's own namespace (where it keeps the reservations, and which it
never gates) is -n/--namespace when given, else the POD_NAMESPACE
environment variable (the manifests set it), else rollplan-system; never
the kubeconfig's namespace. It is logged at start.

Policies are compiled at start and again when the files under --policy
change (checked every --policy-reload-interval), never per request; a
disruption evaluates the budgets rule alone. Unless GOGC is set, the gate
runs with GOGC=400 (fewer GC pauses in the p99; bound the heap with
GOMEMLIMIT).
/healthz and /readyz are served on --health-probe-bind-address, Prometheus
metrics on --metrics-bind-address; one structured log line per request.
/healthz says the process is alive. /readyz answers 200 only when the gate
can decide: its informer caches synced and its reservation store usable
(the namespace exists and the gate may list and create ConfigMaps there,
checked every 5s); otherwise 503 with the reason, logged once per change
(e.g. "reservation store: namespace rollplan-system not found: create it
..."), and it recovers by itself. On SIGTERM, /readyz fails at once while
/validate keeps answering for --shutdown-delay, so that the API servers
stop calling this replica before it closes; then the requests in flight
finish.

Install it with the controller: 'rollplan manifests | kubectl apply -f -',
or the kustomize base in deploy/; alone: 'rollplan gate manifests'.`,
		Example: `  rollplan gate --tls-cert-file /etc/rollplan/tls/tls.crt --tls-private-key-file /etc/rollplan/tls/tls.key
  rollplan gate --tls-cert-file tls.crt --tls-private-key-file tls.key --policy policies/examples/one-zone-at-a-time --enforcement warn`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if certFile == "" || keyFile == "" {
				return usageError{fmt.Errorf("--tls-cert-file and --tls-private-key-file are required: the API server calls webhooks over HTTPS only")}
			}
			for _, m := range append([]string{enforcement}, mapValues(policyModes)...) {
				switch m {
				case gate.Deny, gate.Warn, gate.DryRun:
				default:
					return usageError{fmt.Errorf("enforcement %q (--enforcement or --policy-enforcement): want deny, warn or dryrun", m)}
				}
			}
			if err := pf.checkCluster(); err != nil {
				return err
			}
			kind, err := pf.engineKind()
			if err != nil {
				return err
			}
			// The certificate first: a gate that cannot serve HTTPS is
			// useless whatever the kubeconfig, and its error should say so.
			if err := checkServingCert(certFile, keyFile); err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				// An admission webhook's p99 is mostly GC pauses: collect
				// less often (bound the heap with GOMEMLIMIT, as the
				// manifests do from the container's memory limit).
				debug.SetGCPercent(400)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log := jsonLog(cmd.ErrOrStderr())
			eng, err := newEngine(ctx, kind, pf.policies, pf.timeout)
			if err != nil {
				return err
			}
			for _, w := range engine.Warnings(eng) {
				log.Warn("policy", "warning", w)
			}
			for _, n := range engine.Notes(eng) {
				log.Info("policy", "note", n)
			}
			cl, err := connectCluster(&config)
			if err != nil {
				return err
			}
			cluster, err := pf.liveClusterOptions(cl, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			log.Info("planning for the cluster's Kubernetes version", "kubernetesVersion", cluster.KubernetesVersion.String(), "featureGates", pf.featureGates)
			ns, nsFrom := gateNamespace(config.overrides.Context.Namespace, os.Getenv("POD_NAMESPACE"))
			// The gate caches every pod of the cluster: without their
			// managed fields.
			factory := informers.NewSharedInformerFactoryWithOptions(cl.client, 0, informers.WithTransform(capture.StripManagedFields))
			src := capture.NewListerSource(factory, factory)
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			store := &gate.ConfigMapStore{Client: cl.client, Namespace: ns}
			g, err := gate.New(gate.Options{
				Engine: eng, Cache: src, Store: store,
				Enforcement: enforcement, PolicyEnforcement: policyModes, Namespace: ns, Exempt: exempt,
				KubernetesVersion: cluster.KubernetesVersion, FeatureGates: cluster.FeatureGates,
				ReservationTTL: reservationTTL, Log: log, Metrics: gate.NewMetrics(reg),
				PlanOptions: planOptions(),
			})
			if err != nil {
				return err
			}
			factory.Start(ctx.Done())
			// Nothing else deletes a workload's reservations once it is gone.
			go gate.PruneEvery(ctx, store, gcEvery, log.With("namespace", ns))
			stopMetrics, err := serveMetrics(metrics, reg, log)
			if err != nil {
				return err
			}
			defer stopMetrics()
			if len(pf.policies) > 0 && reload > 0 {
				go watchPolicies(ctx, pf.policies, reload, log, func() error {
					e, err := newEngine(ctx, kind, pf.policies, pf.timeout)
					if err != nil {
						return err
					}
					g.SetEngine(e)
					log.Info("policies reloaded", "digest", e.Digest())
					return nil
				})
			}
			// Ready when the gate can decide: caches synced, and reservations
			// writable (a gate without them denies every disruption of a
			// managed workload). The store costs two API requests a check:
			// every few seconds, not on every probe.
			ready := gate.NewReadiness(log).
				Add("informer caches", func(context.Context) error {
					if !src.HasSynced() {
						return errors.New("not synced yet (pods, nodes, workloads, PodDisruptionBudgets): if this lasts, check the gate's access to the API server and its cluster-wide list and watch permissions")
					}
					return nil
				}).
				Add("reservation store", store.ReadinessCheck(readinessGrace))
			go ready.Run(ctx, readinessEvery)
			go func() {
				if src.WaitForSync(ctx) == nil {
					log.Info("informer caches synced")
					ectx, cancel := context.WithTimeout(ctx, readinessEvery)
					ready.Evaluate(ectx) // ready now, not at the next check
					cancel()
				}
			}()
			log.Info("starting", "namespace", ns, "namespaceFrom", nsFrom, "enforcement", enforcement, "engine", eng.Name(), "policy", eng.Digest(), "cluster", cl.source)
			srv := &gate.Server{Gate: g, Addr: bind, CertFile: certFile, KeyFile: keyFile, HealthAddr: health, Ready: ready.Err, Log: log,
				ShutdownDelay: shutdownDelay}
			return srv.Run(ctx)
		},
	}
	config.register(cmd.Flags())
	fl := cmd.Flags()
	if f := fl.Lookup("namespace"); f != nil {
		f.Usage = "the gate's own namespace (reservations; never gated); default: $POD_NAMESPACE, else " + deploy.DefaultNamespace + ", not the kubeconfig's"
	}
	fl.StringSliceVar(&pf.policies, "policy", nil, "policy files or directories: Rego (entry package rollplan.strategy) or CEL RolloutPolicy YAML; default: the built-in strategy")
	fl.StringVar(&pf.engine, "engine", "", "policy engine: "+engine.KindList()+"; "+engineDefault)
	pf.registerCluster(fl)
	durationVar(fl, &pf.timeout, "policy-timeout", 2*time.Second, positive, "deadline for evaluating the policy for one request")
	fl.StringVar(&certFile, "tls-cert-file", "", "serving certificate (PEM); re-read when it changes")
	fl.StringVar(&keyFile, "tls-private-key-file", "", "serving certificate's private key (PEM)")
	fl.StringVar(&enforcement, "enforcement", gate.Deny, "deny, warn (admit with a warning) or dryrun (admit, log only); a workload's rollplan.dev/gate-enforcement annotation overrides it")
	fl.StringVar(&bind, "bind-address", ":8443", "address of the webhook (HTTPS, path /validate)")
	fl.StringVar(&health, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "": off`)
	fl.StringVar(&metrics, "metrics-bind-address", ":8080", `address of Prometheus /metrics; "" or "0": off`)
	fl.StringToStringVar(&policyModes, "policy-enforcement", nil, "enforcement per policy name, for workloads whose rollplan.dev/policy annotation names it, e.g. strict=deny,canary=warn")
	fl.StringSliceVar(&exempt, "exempt-namespaces", nil, "namespaces never gated, besides kube-system and the gate's own")
	durationVar(fl, &reservationTTL, "reservation-ttl", 30*time.Second, positiveSeconds, "how long an admitted disruption holds its budget at most before the cache shows it (at least 1s)")
	durationVar(fl, &gcEvery, "reservation-gc-interval", 10*time.Minute, positiveSeconds, "how often to delete the reservation ConfigMaps whose every reservation has lapsed (at least 1s)")
	durationVarOff(fl, &shutdownDelay, "shutdown-delay", 5*time.Second, zeroOrPositive, "no delay", "on SIGTERM, how long /validate keeps answering while /readyz already fails, so the API servers stop calling this replica first; 0: no delay")
	durationVarOff(fl, &reload, "policy-reload-interval", 10*time.Second, zeroOrSeconds, "never", "how often to check --policy files for changes (at least 1s); 0: never")
	cmd.AddCommand(newGateManifestsCommand())
	return cmd
}

// The gate checks its readiness every readinessEvery; an API server that
// does not answer makes it unready after readinessGrace (see
// gate.ConfigMapStore.ReadinessCheck).
const (
	readinessEvery = 5 * time.Second
	readinessGrace = 30 * time.Second
)

// checkServingCert: the serving certificate and its key exist and load as
// a pair (the server re-reads them when they change).
func checkServingCert(certFile, keyFile string) error {
	for _, f := range []struct{ flag, path string }{{"--tls-cert-file", certFile}, {"--tls-private-key-file", keyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return fmt.Errorf("serving certificate --tls-cert-file %s, --tls-private-key-file %s: %w", certFile, keyFile, err)
	}
	return nil
}

// gateNamespace is the gate's own namespace, where it keeps its
// reservations and which it never gates: -n when given, else
// POD_NAMESPACE (the manifests set it from the pod), else the manifests'
// default. Never the kubeconfig's namespace: run from a workstation, that
// is "default", which the gate would then silently exempt. from says which.
func gateNamespace(flag, env string) (ns, from string) {
	switch {
	case flag != "":
		return flag, "--namespace"
	case env != "":
		return env, "POD_NAMESPACE"
	}
	return deploy.DefaultNamespace, "built-in default"
}

// watchPolicies calls reload when the digest of the policy files changes.
func watchPolicies(ctx context.Context, paths []string, every time.Duration, log *slog.Logger, reload func() error) {
	last, _ := policyFilesDigest(paths)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		d, err := policyFilesDigest(paths)
		if err != nil || d == last {
			return
		}
		if err := reload(); err != nil {
			log.Error("policies changed but do not compile: still serving the previous ones", "error", err)
			return
		}
		last = d
	}, every)
}

// policyFilesDigest hashes the names and contents of every file under paths.
// Symlinked files are read through (a mounted ConfigMap's keys are symlinks
// into its current version); the kubelet's own ..data symlink and
// ..TIMESTAMP directories of a mounted ConfigMap are left out: the first
// is a directory (it cannot be read as a file), the second the same files
// again.
func policyFilesDigest(paths []string) (string, error) {
	var files []string
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), "..") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", f)
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
