// Package controlplane starts a real Kubernetes control plane for tests:
// etcd, kube-apiserver and kube-controller-manager of one Kubernetes minor
// version, built from pinned sources by `make cluster-bin` (one module per
// version in test/cluster/<version>, binaries in test/cluster/bin/<version>,
// the folder ROLLPLAN_CLUSTER_BIN names). etcd and the apiserver are
// run by controller-runtime's envtest (ports, serving certs, an admin
// identity, RBAC); the controller-manager, which envtest does not know, is
// started here with the rollout controllers rollplan predicts.
//
// Every process is stopped by Stop, which tests register with t.Cleanup or
// call from TestMain (and test/devcluster, a program, calls on Ctrl-C); the
// controller-manager also dies with the test binary (Pdeathsig), a reaper
// stops etcd and the apiserver when the process that started them dies
// without Stop, and `make test-cluster` fails if any process outlives it.
package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

// BinEnv names the environment variable holding the folder of the
// control-plane builds: one folder per Kubernetes minor version
// (test/cluster/bin/v1.36, test/cluster/bin/v1.37), each with etcd,
// kube-apiserver, kube-controller-manager and kubectl. `make test-cluster`
// sets it to test/cluster/bin. It may also name one version's folder
// (test/cluster/bin/v1.36): then only that version is available.
const BinEnv = "ROLLPLAN_CLUSTER_BIN"

// binaries are what a version's folder must hold to start a control plane.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// Controllers are the kube-controller-manager controllers the tests run:
// the rollout controllers rollplan predicts, the disruption controller that
// keeps PodDisruptionBudget status, and the garbage collector that removes
// pods of deleted ReplicaSets.
var Controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"disruption-controller",
	"garbage-collector-controller",
}

// Options configure one control plane.
type Options struct {
	// Version is the Kubernetes minor version to run, e.g. "v1.37" (a
	// patch, "v1.37.2", names the same build); empty: the newest built.
	Version string
	// FeatureGates are passed to the apiserver and the controller-manager,
	// e.g. {"MaxUnavailableStatefulSet": true}; without any, no
	// --feature-gates flag is passed and the version's defaults hold. A
	// gate rollplan models that the version does not have
	// (StatefulSetRecreateStrategy before v1.37) is an error: the
	// components would refuse to start.
	FeatureGates map[string]bool
	// Output receives the processes' logs; nil discards them, unless
	// ROLLPLAN_CLUSTER_LOGS=1 sends them to stderr.
	Output io.Writer
	// Progress, when set, is called as each component starts ("etcd and
	// kube-apiserver v1.37", "kube-controller-manager"); the function it
	// returns is called once that component is ready (nil) or failed. A
	// program uses it for its progress lines (test/devcluster).
	Progress func(component string) (done func(error))
	// ServePods makes the control plane serve pods on real nodes
	// (test/node): pods reach the apiserver through the kubernetes Service
	// with their service-account tokens, and Services get EndpointSlices.
	// See preparePods and PodControllers. The simulated kubelet needs none
	// of it.
	ServePods bool
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config authenticates as a cluster admin (group system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for the admin identity,
	// for commands under test (`rollplan --kubeconfig`).
	Kubeconfig string
	// Version is the Kubernetes minor version running, e.g. "v1.37".
	Version string
	// ServerVersion is the apiserver's gitVersion, e.g. "v1.37.2".
	ServerVersion string
	// BinDir is the folder of this version's binaries (kubectl included).
	BinDir string
	// FeatureGates as given in Options: the overrides of the version's
	// defaults (nil: none).
	FeatureGates map[string]bool

	// HostIP is the address pods reach the apiserver by (ServePods), the
	// kubernetes Service's endpoint; empty otherwise.
	HostIP string

	env  *envtest.Environment
	pods *podServing // ServePods
	kcm  *exec.Cmd
	// kcmDone is closed when the controller-manager has exited.
	kcmDone chan struct{}
	reaper  *os.Process
	dir     string
}

// BinDir returns the folder of the newest version's binaries, or an error
// saying how to build them. Tests that only need to know whether a control
// plane can start call it to skip.
func BinDir() (string, error) {
	return VersionDir("")
}

// VersionDir returns the folder of one version's binaries ("v1.36"; a
// patch is accepted; "": the newest built), or an error saying how to
// build them.
func VersionDir(version string) (string, error) {
	builds, err := builds()
	if err != nil {
		return "", err
	}
	if version == "" {
		return builds[len(builds)-1].dir, nil
	}
	v, err := kubeversion.ParseAny(version)
	if err != nil {
		return "", fmt.Errorf("control plane version: %w", err)
	}
	for _, b := range builds {
		if b.version.Minor == v.Minor {
			return b.dir, nil
		}
	}
	return "", fmt.Errorf("no control plane %s under %s (built: %s): add it to CLUSTER_VERSIONS in the Makefile and run `make cluster-bin`",
		v, os.Getenv(BinEnv), strings.Join(names(builds), ", "))
}

// Versions lists the Kubernetes minor versions built under
// $ROLLPLAN_CLUSTER_BIN, oldest first ("v1.36", "v1.37"), or an error
// saying how to build them.
func Versions() ([]string, error) {
	builds, err := builds()
	if err != nil {
		return nil, err
	}
	return names(builds), nil
}

type build struct {
	version kubeversion.Version
	dir     string
}

func names(bs []build) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.version.String()
	}
	return out
}

// builds finds the versions' folders: $ROLLPLAN_CLUSTER_BIN/v1.N holding
// every binary, or $ROLLPLAN_CLUSTER_BIN itself when it is such a folder.
func builds() ([]build, error) {
	root := os.Getenv(BinEnv)
	if root == "" {
		return nil, fmt.Errorf("%s is not set: run `make test-cluster`, or `make cluster-bin` and set %s to test/cluster/bin", BinEnv, BinEnv)
	}
	complete := func(dir string) error {
		for _, name := range binaries {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("control-plane binary %s: %w (run `make cluster-bin`)", name, err)
			}
		}
		return nil
	}
	versionOf := func(name string) (kubeversion.Version, bool) {
		v, err := kubeversion.ParseAny(name)
		return v, err == nil && v.String() == name
	}
	if v, ok := versionOf(filepath.Base(filepath.Clean(root))); ok {
		if err := complete(root); err != nil {
			return nil, err
		}
		return []build{{v, root}}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w (run `make cluster-bin`)", BinEnv, root, err)
	}
	var out []build
	var incomplete []string
	for _, e := range entries {
		v, ok := versionOf(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := complete(dir); err != nil {
			incomplete = append(incomplete, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		out = append(out, build{v, dir})
	}
	if len(out) == 0 {
		if complete(root) == nil {
			return nil, fmt.Errorf("%s=%s holds one build without a version: the binaries now live in one folder per version (test/cluster/bin/v1.37): run `make cluster-bin`", BinEnv, root)
		}
		msg := fmt.Sprintf("no control-plane build under %s=%s: run `make cluster-bin` (it builds test/cluster/bin/<version>/)", BinEnv, root)
		if len(incomplete) > 0 {
			msg += "; incomplete: " + strings.Join(incomplete, "; ")
		}
		return nil, errors.New(msg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version.Minor < out[j].version.Minor })
	return out, nil
}

// checkGates refuses a gate rollplan models that version v does not have:
// its components would not start with it.
func checkGates(v kubeversion.Version, gates map[string]bool) error {
	has := kubeversion.Gates(v)
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		if _, ok := has[name]; ok {
			continue
		}
		for _, other := range kubeversion.Supported {
			if _, ok := kubeversion.Gates(other)[name]; ok {
				return fmt.Errorf("control plane %s: feature gate %s does not exist in that version (%s has it): pass it only to the versions that know it", v, name, other)
			}
		}
	}
	return nil
}

// Start brings up etcd, the apiserver and the controller-manager and waits
// until all three are ready. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Version != "" {
		// Before looking for binaries: a wrong gate is the caller's bug
		// whether or not that version is built.
		v, err := kubeversion.ParseAny(opts.Version)
		if err != nil {
			return nil, fmt.Errorf("control plane version: %w", err)
		}
		if err := checkGates(v, opts.FeatureGates); err != nil {
			return nil, err
		}
	}
	bin, err := VersionDir(opts.Version)
	if err != nil {
		return nil, err
	}
	version := filepath.Base(bin)
	if v, err := kubeversion.ParseAny(version); err == nil {
		if err := checkGates(v, opts.FeatureGates); err != nil {
			return nil, err
		}
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
		if os.Getenv("ROLLPLAN_CLUSTER_LOGS") == "1" {
			out = os.Stderr
		}
	}
	dir, err := os.MkdirTemp("", "rollplan-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("control plane: temp dir: %w", err)
	}
	cp := &ControlPlane{Version: version, BinDir: bin, FeatureGates: opts.FeatureGates, dir: dir}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()

	// envtest logs through controller-runtime's logger; without one it
	// prints a stack trace warning.
	ctrllog.SetLogger(logr.Discard())
	gates := gateFlag(opts.FeatureGates)
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// Every process works under dir, so its command line names dir and the
	// reaper can find it.
	for _, sub := range []string{"etcd", "apiserver"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	if err := cp.startReaper(); err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: out, Err: out, DataDir: filepath.Join(dir, "etcd")}
	env.ControlPlane.APIServer = &envtest.APIServer{Out: out, Err: out, CertDir: filepath.Join(dir, "apiserver")}
	if gates != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("feature-gates", gates)
	}
	if opts.ServePods {
		if cp.pods, err = preparePods(dir, env.ControlPlane.APIServer); err != nil {
			return nil, err
		}
		cp.HostIP = cp.pods.hostIP
	}
	cp.env = env
	done := opts.progress("etcd and kube-apiserver " + version)
	cfg, err := env.Start()
	done(err)
	if err != nil {
		cp.env = nil
		// envtest stops what it started when Start fails part way.
		return nil, fmt.Errorf("start etcd and kube-apiserver %s: %w", version, err)
	}
	cp.Config = rest.CopyConfig(cfg)
	cp.Config.QPS, cp.Config.Burst = 200, 400
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("control plane client: %w", err)
	}
	info, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("control plane %s: server version: %w", version, err)
	}
	cp.ServerVersion = info.GitVersion
	if got, err := kubeversion.ParseAny(info.GitVersion); err != nil || got.String() != version {
		return nil, fmt.Errorf("control plane %s: the apiserver in %s reports %q: rebuild it with `make cluster-bin`", version, bin, info.GitVersion)
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	done = opts.progress("kube-controller-manager")
	err = cp.startControllerManager(ctx, bin, gates, out)
	done(err)
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// progress calls o.Progress, or does nothing without one.
func (o Options) progress(component string) func(error) {
	if o.Progress == nil {
		return func(error) {}
	}
	return o.Progress(component)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context, bin, gates string, out io.Writer) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	certDir := filepath.Join(cp.dir, "kcm-certs")
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + strings.Join(cp.controllers(), ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// Tests watch every step; the default 1 s batching of DaemonSet
		// and ReplicaSet syncs would only slow them down.
		"--concurrent-deployment-syncs=5",
		"--v=2",
	}
	if gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	if cp.pods != nil {
		args = append(args, cp.pods.kcmArgs()...)
	}
	cmd := exec.Command(filepath.Join(bin, "kube-controller-manager"), args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so Stop reaches any child; and killed with the
	// test binary even when a timeout panic skips the cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	cp.kcm = cmd
	cp.kcmDone = make(chan struct{})
	go func() { _ = cmd.Wait(); close(cp.kcmDone) }()

	healthz := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	client := &http.Client{
		Timeout: 2 * time.Second,
		// Its serving certificate is self-signed, generated in certDir.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health probe of a test process
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		resp, err := client.Get(healthz)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-cp.kcmDone:
			return fmt.Errorf("kube-controller-manager exited before it was ready (%v); rerun with ROLLPLAN_CLUSTER_LOGS=1 to see its log", cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager not healthy at %s: %w", healthz, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// controllers are the controller-manager's controllers: Controllers, and
// PodControllers when the control plane serves pods.
func (cp *ControlPlane) controllers() []string {
	if cp.pods == nil {
		return Controllers
	}
	return append(slices.Clone(Controllers), PodControllers...)
}

// AddUser provisions an identity the apiserver authenticates (a client
// certificate signed by its client CA) with the given user name and groups,
// and returns a kubeconfig for it. What the identity may do is RBAC's
// (the default bootstrap roles: system:kube-scheduler, system:node, ...).
// test/node gives the kubelet and the scheduler their own identities.
func (cp *ControlPlane) AddUser(name string, groups ...string) ([]byte, error) {
	if cp.env == nil {
		return nil, errors.New("control plane is not running")
	}
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, rest.CopyConfig(cp.Config))
	if err != nil {
		return nil, fmt.Errorf("control plane: add user %s: %w", name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig of user %s: %w", name, err)
	}
	return kc, nil
}

// ClientCAFile is the CA the apiserver trusts for client certificates (the
// one AddUser signs with): a kubelet trusts it for its own API.
func (cp *ControlPlane) ClientCAFile() string {
	return filepath.Join(cp.dir, "apiserver", "client-cert-auth-ca.crt")
}

// PauseControllers freezes kube-controller-manager (SIGSTOP): the API keeps
// serving, the controllers act on nothing until ResumeControllers. Tests use
// it to look at the cluster exactly before the controllers react to a
// change.
func (cp *ControlPlane) PauseControllers() error {
	return cp.signalKCM(syscall.SIGSTOP)
}

// ResumeControllers continues kube-controller-manager after
// PauseControllers; it catches up from its watches.
func (cp *ControlPlane) ResumeControllers() error {
	return cp.signalKCM(syscall.SIGCONT)
}

func (cp *ControlPlane) signalKCM(sig syscall.Signal) error {
	if cp.kcm == nil || cp.kcm.Process == nil {
		return errors.New("kube-controller-manager is not running")
	}
	if err := syscall.Kill(-cp.kcm.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal kube-controller-manager (%v): %w", sig, err)
	}
	return nil
}

// startReaper starts a shell that outlives this process: when the test
// binary dies without running Stop (a timeout panic, SIGKILL), it kills
// every process whose command line names the control plane's directory.
// envtest starts etcd and the apiserver without a parent-death signal, so
// this is what guarantees that no test leaves them running.
func (cp *ControlPlane) startReaper() error {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; pkill -KILL -f -- "--[a-z-]*=$2" ; rm -rf -- "$2"`
	cmd := exec.Command("sh", "-c", script, "rollplan-reaper", strconv.Itoa(os.Getpid()), cp.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("control plane: start reaper: %w", err)
	}
	cp.reaper = cmd.Process
	go func() { _ = cmd.Wait() }()
	return nil
}

// Stop stops the controller-manager, the apiserver and etcd, and removes
// their files. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.kcm != nil && cp.kcm.Process != nil {
		_ = syscall.Kill(-cp.kcm.Process.Pid, syscall.SIGTERM)
		_ = syscall.Kill(-cp.kcm.Process.Pid, syscall.SIGCONT) // if paused
		select {
		case <-cp.kcmDone:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cp.kcm.Process.Pid, syscall.SIGKILL)
			<-cp.kcmDone
		}
		cp.kcm = nil
	}
	if cp.env != nil {
		if err := cp.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop etcd and kube-apiserver: %w", err))
		}
		cp.env = nil
	}
	if cp.reaper != nil {
		// Its process group: the shell and the sleep it waits on, so that
		// nothing of it is left running, not even for a second.
		_ = syscall.Kill(-cp.reaper.Pid, syscall.SIGKILL)
		cp.reaper = nil
	}
	if cp.dir != "" {
		if err := os.RemoveAll(cp.dir); err != nil {
			errs = append(errs, err)
		}
		cp.dir = ""
	}
	return errors.Join(errs...)
}

// gateFlag renders gates as a --feature-gates value, sorted for stable
// command lines.
func gateFlag(gates map[string]bool) string {
	parts := make([]string, 0, len(gates))
	for name, on := range gates {
		parts = append(parts, name+"="+strconv.FormatBool(on))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
