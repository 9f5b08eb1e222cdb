// Command devcluster is `make dev-cluster`: a local Kubernetes cluster to
// try rollplan on, made of the pieces the cluster test suites use. It
// starts the repository's own control plane (test/controlplane: etcd,
// kube-apiserver and kube-controller-manager built by `make cluster-bin`),
// the test kubelet (test/kubelet) with nodes in three zones, and the
// repository's `rollplan gate` with its webhook registered for the demo
// namespace (test/harness); it writes a kubeconfig, creates the demo
// workloads (a StatefulSet rollplan drives in place, a DaemonSet and a
// Deployment their controllers roll), waits for their pods to be ready, and
// prints the commands to try next (docs/dev-cluster.md). The
// kubelet gives an image a behaviour by its tag (imageTags: crash loop,
// never ready, slow start), so that a broken rollout can be tried with
// kubectl set image (docs/rollouts.md "Out of a broken rollout"). When
// Debian's prometheus is installed, it also runs a Prometheus scraping an
// exporter of simulated traffic per container (the kubelet's Metrics:
// the tag errors answers half its requests with 500) and writes an analysis
// config naming it, so that a bad version's rollback by analysis can be
// watched (docs/rollouts.md "A bad version rolls back by itself").
//
// With --node real (make dev-cluster NODE=real) it runs a real node
// instead (test/node: containerd with runc, a kubelet, kube-proxy and
// kube-scheduler, and a loopback registry with testapp images and
// rollplan's own, built from this checkout), installs rollplan from its
// manifests (controller and gate as pods; no gate on the host) and creates
// the same workloads on testapp images: the in-cluster controller rolls
// web by itself (real.go). It needs root, runc, iptables and nft.
//
// Everything runs as a local process. On SIGINT (Ctrl-C) or SIGTERM it
// stops every process it started and exits 0; a second signal quits at
// once, and the control plane's reaper and the other processes'
// parent-death signal still stop them. Each run starts from a new, empty
// cluster: --dir is emptied at start, and at exit keeps only the logs and
// what the user wrote there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
	"github.com/rollplan/rollplan/test/node"
	"github.com/rollplan/rollplan/test/prometheus"
)

// options are the command's flags.
type options struct {
	dir       string // state folder: kubeconfig, certificates, logs
	rollplan  string // the rollplan binary the gate runs and the commands name
	version   string // Kubernetes minor version of the control plane
	namespace string // of the demo workloads
	nodes     int    // spread over three zones
	node      string // nodeSimulated or nodeReal
}

// The kinds of node (--node).
const (
	nodeSimulated = "simulated"
	nodeReal      = "real"
)

func main() {
	var o options
	fs := flag.NewFlagSet("devcluster", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "bin/dev-cluster", "folder for the kubeconfig, the gate's certificate and the logs; emptied at start")
	fs.StringVar(&o.rollplan, "rollplan", "bin/rollplan", "the rollplan binary (make build): the gate runs it and the printed commands name it")
	fs.StringVar(&o.version, "kubernetes-version", "", "Kubernetes minor version of the control plane, e.g. v1.37; default: the newest built under $"+controlplane.BinEnv)
	fs.StringVar(&o.namespace, "namespace", "demo", "namespace of the demo workloads")
	fs.IntVar(&o.nodes, "nodes", 6, "number of simulated nodes, spread over zone-a, zone-b and zone-c (at least 3)")
	fs.StringVar(&o.node, "node", nodeSimulated, "simulated: the test kubelet plays --nodes nodes and the gate runs on the host; real: one real node (root, runc, iptables, nft) with rollplan installed from its manifests")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 || o.nodes < 3 || (o.node != nodeSimulated && o.node != nodeReal) {
		fmt.Fprintln(os.Stderr, "usage: devcluster [--dir DIR] [--rollplan BIN] [--kubernetes-version vX.Y] [--namespace NS] [--nodes N>=3] [--node simulated|real]")
		os.Exit(2)
	}
	os.Exit(run(o, os.Stdout))
}

// run starts the cluster, waits for a signal and stops it; it returns the
// exit code.
func run(o options, out io.Writer) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := &cluster{opts: o, out: out}
	err := c.start(ctx)
	if err == nil {
		c.printReady()
		err = c.wait(ctx)
	}
	// A second signal quits at once (the default action): what is left
	// dies with this process (parent-death signal, the reaper).
	cancel()
	if errors.Is(err, context.Canceled) {
		err = nil
		fmt.Fprintln(out, "\nstopping (Ctrl-C again quits at once)")
	}
	if stopErr := c.stop(); stopErr != nil {
		err = errors.Join(err, stopErr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dev-cluster: %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "stopped: every process this dev cluster started has exited; logs in %s\n", c.rel(o.dir))
	return 0
}

// cluster is one dev cluster: what start started, for stop.
type cluster struct {
	opts options
	out  io.Writer

	cp         *controlplane.ControlPlane
	kubeconfig string
	// kubeletStop ends the test kubelet's workers and informers.
	kubeletStop context.CancelFunc
	nodes       []kubelet.Node

	// prom is the Prometheus scraping the containers' exporters (nil:
	// none, promSkipped says why); analysisConfig names it for
	// --analysis-config.
	prom           *prometheus.Server
	promSkipped    string
	promLog        string
	analysisConfig string

	gate     *exec.Cmd
	gateDone chan struct{}
	gateURL  string
	gateLog  string

	// registry is $ROLLPLAN_REGISTRY, the images' HOST:PORT: the real
	// node's registry, or simRegistry.
	registry string
	// node is the real node (--node real), rollplanImage the image
	// rollplan is installed from there.
	node          *node.Node
	nodeLog       string
	nodeLogFile   *os.File
	rollplanImage string
	// removeAtStop: files stale once the cluster is gone.
	removeAtStop []string
}

// The demo workloads.
const (
	stsName, stsReplicas    = "web", 6
	dsName                  = "agent"
	deployName, deployScale = "api", 4
	gateNamespace           = "rollplan-system"
)

// step prints "what ... " and returns the function that ends the line
// with "ok (1.2s)", "interrupted" (a signal) or "failed".
func (c *cluster) step(what string) func(error) {
	fmt.Fprintf(c.out, "%s ... ", what)
	start := time.Now()
	return func(err error) {
		took := time.Since(start).Seconds()
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(c.out, "interrupted (%.1fs)\n", took)
			return
		}
		if err != nil {
			fmt.Fprintf(c.out, "failed (%.1fs)\n", took)
			return
		}
		fmt.Fprintf(c.out, "ok (%.1fs)\n", took)
	}
}

// rel is path relative to the working directory when it lies under it
// (the printed commands are run from the repository root), else absolute.
func (c *cluster) rel(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	if r, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return abs
}

func (c *cluster) start(ctx context.Context) error {
	o := c.opts
	real := o.node == nodeReal
	if real {
		// Before anything is emptied or started: say what the host lacks.
		if err := realRequirements(); err != nil {
			return err
		}
	}
	if err := c.prepareDir(); err != nil {
		return err
	}
	if _, err := os.Stat(o.rollplan); err != nil {
		return fmt.Errorf("rollplan binary: %w (run `make build`, or pass --rollplan)", err)
	}
	// client-go reports through klog; keep it out of the progress lines.
	klogFile, err := os.Create(filepath.Join(o.dir, "devcluster.log"))
	if err != nil {
		return fmt.Errorf("dev cluster log: %w", err)
	}
	klog.LogToStderr(false)
	klog.SetOutput(klogFile)
	cpLog, err := os.Create(filepath.Join(o.dir, "control-plane.log"))
	if err != nil {
		return fmt.Errorf("control plane log: %w", err)
	}

	c.cp, err = controlplane.Start(ctx, controlplane.Options{
		Version:  o.version,
		Output:   cpLog,
		Progress: func(component string) func(error) { return c.step("starting " + component) },
		// A real node's pods reach the API server through the kubernetes
		// Service with service-account tokens (the controller, the gate).
		ServePods: real,
	})
	if err != nil {
		return fmt.Errorf("start the control plane (its log: %s): %w", c.rel(cpLog.Name()), err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(o.dir, "kubeconfig")
	raw, err := os.ReadFile(c.cp.Kubeconfig)
	if err == nil {
		err = os.WriteFile(c.kubeconfig, raw, 0o600)
	}
	if err != nil {
		return fmt.Errorf("write the kubeconfig %s: %w", c.kubeconfig, err)
	}
	c.removeAtStop = append(c.removeAtStop, c.kubeconfig)

	// Prometheus first: the kubelet writes its exporters to the file
	// Prometheus watches.
	steps := []func(context.Context) error{c.startPrometheus, c.startKubelet, c.startGate, c.createWorkloads}
	c.registry = simRegistry
	if real {
		steps = []func(context.Context) error{c.startNode, c.installRollplan, c.createWorkloads}
	}
	for _, run := range steps {
		if err := run(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// prepareDir empties the state folder, unless a dev cluster still runs
// from it, and records this process's pid there.
func (c *cluster) prepareDir() error {
	dir := c.opts.dir
	pidFile := filepath.Join(dir, "devcluster.pid")
	if raw, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmdline), "devcluster") {
				return fmt.Errorf("a dev cluster already runs from %s (pid %d): stop it with Ctrl-C in its terminal (or kill -INT %d), or pass another --dir", dir, pid, pid)
			}
		}
	}
	// Emptied only when it is a dev cluster's folder (its log or pid file
	// is there) or empty: --dir . must not wipe a checkout.
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		_, errLog := os.Stat(filepath.Join(dir, "devcluster.log"))
		_, errPid := os.Stat(pidFile)
		if errLog != nil && errPid != nil {
			return fmt.Errorf("--dir %s holds files but no devcluster.log: it is not a dev cluster's folder, which each start empties; pass a new or empty folder", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("empty %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", pidFile, err)
	}
	c.removeAtStop = append(c.removeAtStop, pidFile)
	return nil
}

// zones are the nodes' zones; node i is in zones[i%3].
var zones = []string{"zone-a", "zone-b", "zone-c"}

func (c *cluster) startKubelet(ctx context.Context) (err error) {
	perZone := map[string]int{}
	for i := range c.opts.nodes {
		z := zones[i%len(zones)]
		perZone[z]++
		c.nodes = append(c.nodes, kubelet.Node{Name: fmt.Sprintf("node-%s%d", strings.TrimPrefix(z, "zone-"), perZone[z]), Zone: z})
	}
	done := c.step(fmt.Sprintf("starting the test kubelet: %d nodes in %d zones", len(c.nodes), len(zones)))
	defer func() { done(err) }()
	kctx, cancel := context.WithCancel(context.Background())
	c.kubeletStop = cancel
	opts := kubeletImages()
	opts.Nodes = c.nodes
	if c.prom != nil {
		opts.Metrics = &kubelet.Metrics{TargetsFile: c.prom.TargetsFile(promJob)}
	}
	k := kubelet.New(c.cp.Client, opts)
	if err := k.Run(kctx); err != nil {
		return fmt.Errorf("start the test kubelet: %w", err)
	}
	return ctx.Err()
}

// imageTag is an image tag the test kubelet gives a behaviour, whatever
// the repository: the behaviours the cluster suites set with SetImage,
// for a user who has only kubectl (docs/rollouts.md "Out of a broken rollout").
type imageTag struct {
	tag string
	b   kubelet.Behavior
}

// Containers take a moment to start and turn Ready, so a rollout has
// waves one can watch.
var (
	defaultBehavior = kubelet.Behavior{StartDelay: 500 * time.Millisecond, ReadyDelay: time.Second, TerminationDelay: 500 * time.Millisecond}
	imageTags       = []imageTag{
		{"crashloop", kubelet.Behavior{StartDelay: 500 * time.Millisecond, CrashLoop: true, CrashInterval: time.Second, TerminationDelay: 500 * time.Millisecond}},
		{"never-ready", kubelet.Behavior{StartDelay: 500 * time.Millisecond, NeverReady: true, TerminationDelay: 500 * time.Millisecond}},
		// testapp:broken as on a real node (test/node): runs, never Ready.
		{"broken", kubelet.Behavior{StartDelay: 500 * time.Millisecond, NeverReady: true, TerminationDelay: 500 * time.Millisecond}},
		{"slow", kubelet.Behavior{StartDelay: 500 * time.Millisecond, ReadyDelay: 30 * time.Second, TerminationDelay: 500 * time.Millisecond}},
		// A bad version: Ready, but its exporter shows half its requests
		// answered 500 (docs/rollouts.md "A bad version rolls back by
		// itself"), as testapp:errors on a real node (test/node).
		{"errors", kubelet.Behavior{StartDelay: 500 * time.Millisecond, ReadyDelay: time.Second, TerminationDelay: 500 * time.Millisecond, ErrorRatio: 0.5}},
	}
)

// kubeletImages are the test kubelet's image behaviours: by tag, else
// the default.
func kubeletImages() kubelet.Options {
	o := kubelet.Options{Default: defaultBehavior, Tags: map[string]kubelet.Behavior{}}
	for _, t := range imageTags {
		o.Tags[t.tag] = t.b
	}
	return o
}

// describe says what a container of behaviour b does, for the ready
// block; it reads b, so the printout cannot drift from what runs.
func describe(b kubelet.Behavior) string {
	switch {
	case b.CrashLoop:
		interval := b.CrashInterval
		if interval <= 0 {
			interval = time.Second
		}
		return fmt.Sprintf("crash-loops: restarts every %s, never Ready", secs(interval))
	case b.NeverReady:
		return fmt.Sprintf("starts in %s, never turns Ready", secs(b.StartDelay))
	case b.ErrorRatio > 0:
		return fmt.Sprintf("starts in %s, turns Ready %s later; answers %s of requests with 500", secs(b.StartDelay), secs(b.ReadyDelay), percent(b.ErrorRatio))
	default:
		return fmt.Sprintf("starts in %s, turns Ready %s later", secs(b.StartDelay), secs(b.ReadyDelay))
	}
}

// percent is a share as the ready block writes it: "30%".
func percent(f float64) string {
	return strconv.FormatFloat(f*100, 'f', -1, 64) + "%"
}

// secs is d in seconds as the progress lines write them: "0.5s", "30s".
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// startGate runs `rollplan gate` with a new serving certificate for
// 127.0.0.1, waits for its /readyz, and registers its webhook for the
// demo namespace; it returns once the API server calls it.
func (c *cluster) startGate(ctx context.Context) (err error) {
	done := c.step("starting rollplan gate")
	defer func() { done(err) }()
	client := c.cp.Client
	for _, ns := range []string{gateNamespace, c.opts.namespace} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	certDir := filepath.Join(c.opts.dir, "gate")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	c.removeAtStop = append(c.removeAtStop, certDir)
	ca, certFile, keyFile, err := harness.WriteServingCert(certDir, 24*time.Hour)
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	health, err := freeAddr()
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	c.gateLog = filepath.Join(c.opts.dir, "gate.log")
	logFile, err := os.Create(c.gateLog)
	if err != nil {
		return fmt.Errorf("gate log: %w", err)
	}
	cmd := exec.Command(c.opts.rollplan, "gate", "--kubeconfig", c.kubeconfig, "-n", gateNamespace,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--bind-address", addr,
		"--health-probe-bind-address", health, "--metrics-bind-address", "", "--shutdown-delay", "0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: Ctrl-C reaches this process only, which stops
	// the gate in order; and it dies with this process whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s gate: %w", c.opts.rollplan, err)
	}
	c.gate, c.gateDone = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(c.gateDone) }()

	readyz := "http://" + health + "/readyz"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-c.gateDone:
			return false, fmt.Errorf("rollplan gate exited (%v): see %s", cmd.ProcessState, c.rel(c.gateLog))
		default:
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("rollplan gate not ready at %s: %w", readyz, err)
	}

	c.gateURL = "https://" + addr + "/validate"
	vwc, err := harness.NamespaceWebhook(ca, c.gateURL, c.opts.namespace)
	if err != nil {
		return fmt.Errorf("gate webhook: %w", err)
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register the gate's webhook %s: %w", vwc.Name, err)
	}
	// The API server reads webhook configurations from an informer: wait
	// until a dry-run create reaches the gate.
	probe := testobj.StatefulSet(c.opts.namespace, "gate-probe").Obj()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, _ = client.AppsV1().StatefulSets(c.opts.namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		log, err := os.ReadFile(c.gateLog)
		return err == nil && strings.Contains(string(log), `"operation":"statefulsets CREATE"`), nil
	})
	if err != nil {
		return fmt.Errorf("the API server never called the gate's webhook at %s (see %s): %w", c.gateURL, c.rel(c.gateLog), err)
	}
	return nil
}

// promJob is the scrape job of the containers' exporters.
const promJob = "pods"

// startPrometheus runs Prometheus on the containers' exporters (when its
// binary is installed: else it says why it is skipped) and writes the
// analysis config that names it.
func (c *cluster) startPrometheus(context.Context) (err error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		c.promSkipped = fmt.Sprintf("no prometheus binary (%v); apt-get install prometheus for the analysis demo", err)
		fmt.Fprintf(c.out, "prometheus: skipped: %s\n", c.promSkipped)
		return nil
	}
	done := c.step(fmt.Sprintf("starting prometheus: scrapes every container's exporter each %s", secs(prometheus.Interval)))
	defer func() { done(err) }()
	c.promLog = filepath.Join(c.opts.dir, "prometheus.log")
	logFile, err := os.Create(c.promLog)
	if err != nil {
		return fmt.Errorf("prometheus log: %w", err)
	}
	dataDir := filepath.Join(c.opts.dir, "prometheus")
	c.removeAtStop = append(c.removeAtStop, dataDir)
	c.prom, err = prometheus.Run(bin, prometheus.Config{Discovered: []string{promJob}}, prometheus.RunOptions{Dir: dataDir, Log: logFile})
	if err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start prometheus (its log: %s): %w", c.rel(c.promLog), err)
	}
	go func() { <-c.prom.Done(); _ = logFile.Close() }()
	c.analysisConfig = filepath.Join(c.opts.dir, "analysis.yaml")
	cfg := fmt.Sprintf(`# rollplan apply --analysis-config %s: the dev cluster's Prometheus,
# which scrapes every container's exporter (docs/rollouts.md
# "A bad version rolls back by itself"). Gone with the cluster.
providers:
  prometheus:
    address: %s
    timeout: 5s
`, c.rel(c.analysisConfig), c.prom.URL)
	if err := os.WriteFile(c.analysisConfig, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write the analysis config: %w", err)
	}
	c.removeAtStop = append(c.removeAtStop, c.analysisConfig)
	return nil
}

// simRegistry is $ROLLPLAN_REGISTRY on the simulated cluster: a name
// only, the test kubelet pulls nothing and runs any image. On a real node
// the same image names (REGISTRY/testapp:TAG) are its registry's.
const simRegistry = "registry.example:5000"

// demoImage is the demo workloads' first image, in registry.
func demoImage(registry string) string { return registry + "/testapp:1.0" }

// The demo workloads, in the namespace ns, on images of registry.
func webStatefulSet(ns, registry string) *appsv1.StatefulSet {
	return testobj.StatefulSet(ns, stsName).Template(node.TestappTemplate(stsName, demoImage(registry))).
		Managed().Annotate(map[string]string{facts.AnnMaxUnavailable: "2"}).
		Replicas(stsReplicas).ServiceName(stsName).PodManagement(appsv1.ParallelPodManagement).OnDelete().Obj()
}

func agentDaemonSet(ns, registry string) *appsv1.DaemonSet {
	return testobj.DaemonSet(ns, dsName).Template(node.TestappTemplate(dsName, demoImage(registry))).RollingUpdate("0", "1").Obj()
}

func apiDeployment(ns, registry string) *appsv1.Deployment {
	return testobj.Deployment(ns, deployName).Template(node.TestappTemplate(deployName, demoImage(registry))).
		Replicas(deployScale).RollingUpdate("25%", "25%").Obj()
}

// createWorkloads creates the demo workloads and waits until every pod
// of each is ready.
func (c *cluster) createWorkloads(ctx context.Context) error {
	apps := c.cp.Client.AppsV1()
	ns := c.opts.namespace
	type workload struct {
		what   string
		create func() error
		ready  func() (bool, error)
	}
	nodes := int32(c.nodeCount())
	for _, w := range []workload{
		{fmt.Sprintf("creating StatefulSet %s/%s (%d pods, driven by rollplan, in place)", ns, stsName, stsReplicas),
			func() error {
				_, err := apps.StatefulSets(ns).Create(ctx, webStatefulSet(ns, c.registry), metav1.CreateOptions{})
				return err
			},
			func() (bool, error) {
				s, err := apps.StatefulSets(ns).Get(ctx, stsName, metav1.GetOptions{})
				return err == nil && s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == stsReplicas, err
			}},
		{fmt.Sprintf("creating DaemonSet %s/%s (%s, one per node)", ns, dsName, pods(int(nodes))),
			func() error {
				_, err := apps.DaemonSets(ns).Create(ctx, agentDaemonSet(ns, c.registry), metav1.CreateOptions{})
				return err
			},
			func() (bool, error) {
				d, err := apps.DaemonSets(ns).Get(ctx, dsName, metav1.GetOptions{})
				return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.NumberReady == nodes && d.Status.DesiredNumberScheduled == nodes, err
			}},
		{fmt.Sprintf("creating Deployment %s/%s (%d pods)", ns, deployName, deployScale),
			func() error {
				_, err := apps.Deployments(ns).Create(ctx, apiDeployment(ns, c.registry), metav1.CreateOptions{})
				return err
			},
			func() (bool, error) {
				d, err := apps.Deployments(ns).Get(ctx, deployName, metav1.GetOptions{})
				return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == deployScale && d.Status.UpdatedReplicas == deployScale, err
			}},
	} {
		done := c.step(w.what)
		err := w.create()
		if err == nil {
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return w.ready() })
		}
		done(err)
		if err != nil {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(w.what, "creating "), err)
		}
	}
	return nil
}

// nodeCount is how many nodes the cluster has.
func (c *cluster) nodeCount() int {
	if c.node != nil {
		return 1
	}
	return len(c.nodes)
}

// pods is "1 pod", "6 pods".
func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// wait blocks until ctx ends (a signal), or the gate or Prometheus
// exits by itself.
func (c *cluster) wait(ctx context.Context) error {
	var promDone <-chan struct{}
	if c.prom != nil {
		promDone = c.prom.Done()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.gateDone:
		return fmt.Errorf("rollplan gate exited (%v): see %s; stopping the cluster", c.gate.ProcessState, c.rel(c.gateLog))
	case <-promDone:
		return fmt.Errorf("prometheus exited: see %s; stopping the cluster", c.rel(c.promLog))
	}
}

// stop stops what start started, newest first, and removes the files
// that are stale without the cluster. It is safe after a partial start.
func (c *cluster) stop() error {
	var errs []error
	if c.prom != nil {
		done := c.step("stopping prometheus")
		err := c.prom.Stop()
		done(err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.gate != nil {
		done := c.step("stopping rollplan gate")
		_ = syscall.Kill(-c.gate.Process.Pid, syscall.SIGTERM)
		var err error
		select {
		case <-c.gateDone:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-c.gate.Process.Pid, syscall.SIGKILL)
			<-c.gateDone
			err = errors.New("rollplan gate did not exit within 20s of SIGTERM: killed")
		}
		done(err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.node != nil {
		errs = append(errs, c.stopNode())
	}
	if c.kubeletStop != nil {
		done := c.step("stopping the test kubelet")
		c.kubeletStop()
		done(nil)
	}
	if c.cp != nil {
		done := c.step("stopping kube-controller-manager, kube-apiserver and etcd")
		err := c.cp.Stop()
		done(err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range c.removeAtStop {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
