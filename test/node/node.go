// Package node runs a real Kubernetes node against a test control plane
// (test/controlplane): containerd 2.x with its CRI plugin and runc, the CNI
// bridge and host-local plugins, a kubelet and kube-scheduler of the control
// plane's version, and an image registry on loopback holding images built
// here (pause, testapp, and rollplan's own when Options.Rollplan asks:
// image.go) with no Docker and no network. Pods run as real containers
// with real probes.
//
// The simulated kubelet (test/kubelet) stays for what a real node cannot
// carry on two cores (the 2,000-pod scale run, the fidelity steps); this
// package is for what only a real node can prove: an image changed in place
// by the kubelet itself, real readiness.
//
// The node needs root, cgroup v1 or v2 with cgroupfs, overlayfs, runc,
// iptables and nft (Debian packages runc, iptables, nftables), and the binaries `make
// node-bin` and `make cluster-bin` build under $ROLLPLAN_CLUSTER_BIN.
// Everything Start creates on the host (processes, mounts, network
// namespaces, the bridge and veths, iptables rules and chains, cgroups,
// sysctls, files) Stop removes, and Stop fails if any of it is left.
package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/test/controlplane"
)

// Options configure one node.
type Options struct {
	// Name is the node's name; empty: "rollplan-node".
	Name string
	// Output receives the processes' logs besides their log files; nil:
	// only the files, unless ROLLPLAN_CLUSTER_LOGS=1 adds stderr.
	Output io.Writer
	// Rollplan are rollplan images to build from the repository's
	// Dockerfile and .ko.yaml and serve as rollplan:TAG, on BaseImage
	// (image.go).
	Rollplan []RollplanImage
}

// Node is a running node.
type Node struct {
	// Name is the Node object's name.
	Name string
	// Registry is the image registry's HOST:PORT: images are
	// Registry+"/testapp:1.0" (the value of $ROLLPLAN_REGISTRY).
	Registry string
	// Digests maps "repository:tag" (testapp:1.0, rollplan:TAG) to its
	// manifest digest, which a running container's
	// status.containerStatuses[].imageID ends with.
	Digests map[string]string
	// PodCIDR is the range the bridge gives pods their IPs from.
	PodCIDR string

	dir        string
	bin        string // the node's parts: containerd, cni/, registry
	k8sBin     string // kubelet, kube-scheduler of the control plane's version
	cp         *controlplane.ControlPlane
	out        io.Writer
	procs      []*process
	bridge     string
	cgroupName string
	before     *hostState
	binding    string // ClusterRoleBinding giving the kubelet system:node
	reaper     *os.Process
	stopped    bool
	lock       *os.File // the host-wide node lock (lockHost), held until Stop
	rollplan   []RollplanImage
}

// Tags are the testapp image's tags. broken never becomes ready; errors
// is Ready and answers half its requests 500 (what only metrics show).
var Tags = []string{"1.0", "2.0", "3.0", "broken", "errors"}

// tagEnv is each testapp tag's environment besides TESTAPP_VERSION.
var tagEnv = map[string][]string{
	"broken": {"TESTAPP_READY=never"},
	"errors": {"TESTAPP_ERROR_RATIO=0.5"},
}

// PartsDir returns the folder of the node's parts ($ROLLPLAN_CLUSTER_BIN/node),
// or an error saying how to build them.
func PartsDir() (string, error) {
	root := os.Getenv(controlplane.BinEnv)
	if root == "" {
		return "", fmt.Errorf("%s is not set: run `make test-cluster`, or `make node-bin cluster-bin` and set %s to test/cluster/bin", controlplane.BinEnv, controlplane.BinEnv)
	}
	dir := filepath.Join(root, "node")
	for _, f := range []string{"containerd", "containerd-shim-runc-v2", "registry", "cni/bridge", "cni/host-local", "cni/loopback"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("node part %s: %w (run `make node-bin`)", f, err)
		}
	}
	return dir, nil
}

// Requirements says what the host lacks to run a node: root, runc,
// iptables, nft, ip. nil: nothing.
func Requirements() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("a real node needs root (containers, mounts, network namespaces)"))
	}
	// nft removes the nftables tables iptables-nft creates for the
	// kubelet's rules: iptables cannot delete a table.
	for _, cmd := range []string{"runc", "iptables", "nft", "ip"} {
		if _, err := exec.LookPath(cmd); err != nil {
			errs = append(errs, fmt.Errorf("%s not found on PATH: install it (Debian: apt-get install -y runc iptables nftables iproute2)", cmd))
		}
	}
	return errors.Join(errs...)
}

// Start brings up the registry, containerd, the kubelet and the scheduler
// against cp and waits until the node is Ready. On error everything it
// created is removed.
func Start(ctx context.Context, cp *controlplane.ControlPlane, opts Options) (_ *Node, err error) {
	if err := Requirements(); err != nil {
		return nil, err
	}
	parts, err := PartsDir()
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"kubelet", "kube-scheduler", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(cp.BinDir, f)); err != nil {
			return nil, fmt.Errorf("node %s: %s of %s: %w (run `make cluster-bin`)", opts.Name, f, cp.Version, err)
		}
	}
	name := opts.Name
	if name == "" {
		name = "rollplan-node"
	}
	lock, err := lockHost(ctx, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	suffix, err := randomHex(3)
	if err != nil {
		return nil, err
	}
	// A short root: the containerd and shim sockets live under it, and a
	// unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "rpnode-")
	if err != nil {
		return nil, fmt.Errorf("node %s: temp dir: %w", name, err)
	}
	n := &Node{
		Name: name, dir: dir, bin: parts, k8sBin: cp.BinDir, cp: cp,
		bridge: "rpbr" + suffix, lock: lock, rollplan: opts.Rollplan,
		cgroupName: "rollplan-node-" + suffix,
		binding:    "rollplan-node:" + name,
	}
	n.out = opts.Output
	if n.out == nil && os.Getenv("ROLLPLAN_CLUSTER_LOGS") == "1" {
		n.out = os.Stderr
	}
	// Before anything is created: what Stop restores and Leftovers compares.
	if n.before, err = snapshotHost(n); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := n.Stop(); stopErr != nil {
				err = fmt.Errorf("%w; and removing what it started: %v", err, stopErr)
			}
		}
	}()
	if err := n.startReaper(); err != nil {
		return nil, err
	}
	for _, sub := range []string{"logs", "cni/net.d", "cni/ipam", "certs.d", "kubelet", "pod-logs", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
	}
	if n.PodCIDR, err = freePodCIDR(); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if err := n.startRegistry(ctx); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.makeCgroupRoot(); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return nil, err
	}
	if err := n.startProxy(ctx); err != nil {
		return nil, err
	}
	if err := n.startScheduler(ctx); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// Image is the registry's name of repository:tag, e.g. Image("testapp:2.0").
func (n *Node) Image(ref string) string { return n.Registry + "/" + ref }

// HostIP is the host's address on the pod bridge (the pods' gateway):
// where a server a test runs on the host is reachable from pods. The CNI
// plugin makes the bridge with the first pod.
func (n *Node) HostIP() (string, error) {
	iface, err := net.InterfaceByName(n.bridge)
	if err != nil {
		return "", fmt.Errorf("node %s: bridge %s (made with the first pod): %w", n.Name, n.bridge, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", fmt.Errorf("node %s: bridge %s: %w", n.Name, n.bridge, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("node %s: bridge %s has no IPv4 address (%v)", n.Name, n.bridge, addrs)
}

// KillContainer kills a container's processes outright (SIGKILL, through
// runc, as the OOM killer or a crash would): no graceful shutdown, nothing
// released. id is the runtime's ID (a containerStatuses[].containerID
// without "containerd://"). The kubelet then restarts it.
func (n *Node) KillContainer(id string) error {
	// containerd's runc shim keeps its containers' state under the
	// runtime's Root, in a folder per containerd namespace (the CRI's is
	// k8s.io).
	out, err := exec.Command("runc", "--root", filepath.Join(n.dir, "runc", "k8s.io"), "kill", "--all", id, "KILL").CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s: kill container %s: %w: %s", n.Name, id, err, out)
	}
	return nil
}

// Dir is the node's working folder (logs in Dir()/logs), removed by Stop.
func (n *Node) Dir() string { return n.dir }

// LogTail returns the last lines of a component's log ("kubelet",
// "containerd", "kube-scheduler", "registry"), for a failing test to show.
func (n *Node) LogTail(component string, lines int) string {
	b, err := os.ReadFile(filepath.Join(n.dir, "logs", component+".log"))
	if err != nil {
		return fmt.Sprintf("(no log of %s: %v)", component, err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// freePodCIDR picks a /24 in 10.244.0.0/16 that no interface or route of
// the host overlaps, so that two nodes (two test packages) never share one.
func freePodCIDR() (string, error) {
	used := map[int]bool{}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return "", fmt.Errorf("pod CIDR: ip route: %w", err)
	}
	for _, f := range strings.Fields(string(routes)) {
		if _, ipnet, err := net.ParseCIDR(f); err == nil {
			ip := ipnet.IP.To4()
			if ip != nil && ip[0] == 10 && ip[1] == 244 {
				used[int(ip[2])] = true
			}
		}
	}
	start, err := randomHex(1)
	if err != nil {
		return "", err
	}
	first, _ := strconv.ParseUint(start, 16, 8)
	for i := range 256 {
		third := (int(first) + i) % 256
		if !used[third] {
			return fmt.Sprintf("10.244.%d.0/24", third), nil
		}
	}
	return "", errors.New("pod CIDR: every 10.244.N.0/24 is in use")
}

// Stop removes everything Start created: the node's pods (through the
// kubelet, which tears their sandboxes and network down), then the
// processes, whatever containers remain, mounts, network namespaces, the
// bridge and veths, iptables rules and chains, cgroups, sysctls and files;
// then checks that nothing is left (Leftovers) and fails if anything is.
// Safe to call more than once.
func (n *Node) Stop() error {
	if n.before == nil || n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.kubeletRunning() {
		if err := n.drainPods(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(15 * time.Second)
	}
	n.procs = nil
	if n.cp != nil && n.cp.Client != nil && n.binding != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, n.binding, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !isUnreachable(err) {
			errs = append(errs, fmt.Errorf("node %s: delete ClusterRoleBinding %s: %w", n.Name, n.binding, err))
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err = n.cp.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !isUnreachable(err) {
			errs = append(errs, fmt.Errorf("node %s: delete Node: %w", n.Name, err))
		}
	}
	if err := n.cleanHost(); err != nil {
		errs = append(errs, err)
	}
	if err := n.Leftovers(); err != nil {
		errs = append(errs, err)
	}
	if n.reaper != nil {
		_ = syscall.Kill(-n.reaper.Pid, syscall.SIGKILL)
		n.reaper = nil
	}
	if n.lock != nil {
		_ = n.lock.Close() // closing releases the flock
		n.lock = nil
	}
	return errors.Join(errs...)
}

// lockPath is the host-wide lock one node at a time holds: what a node
// changes is the host's (kube-proxy's iptables chains, the kubelet's
// sysctls and cgroup root), so two suites in parallel (go test ./... runs
// packages side by side) would undo each other's rules and each would
// report the other's as leftovers.
const lockPath = "/run/lock/rollplan-node.lock"

// lockHost waits for the host-wide node lock until ctx ends. The lock is
// an flock: the kernel releases it when its holder dies, however it dies.
func lockHost(ctx context.Context, name string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node %s: open the host lock: %w", name, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("node %s: lock %s: %w", name, lockPath, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("node %s: waiting for another node on this host to stop (%s): %w", name, lockPath, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func isUnreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED)
}

func (n *Node) kubeletRunning() bool {
	for _, p := range n.procs {
		if p.name == "kubelet" {
			return n.exited(p) == nil
		}
	}
	return false
}

// drainPods deletes every pod bound to the node and waits until the
// kubelet has stopped them (their sandboxes and CNI networks go with
// them).
func (n *Node) drainPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A webhook served through a Service by pods on this node would refuse
	// the deletions once its own pods are gone when it fails closed (the
	// gate's does): its configuration goes first, as when uninstalling.
	hooks, err := n.cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("node %s: list webhook configurations: %w", n.Name, err)
	}
	for _, h := range hooks.Items {
		if len(h.Webhooks) == 0 || h.Webhooks[0].ClientConfig.Service == nil {
			continue
		}
		err := n.cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, h.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: delete webhook configuration %s: %w", n.Name, h.Name, err)
		}
	}
	// Tainted first: no new pod is bound to the node while its pods go,
	// neither by the scheduler nor by the DaemonSet controller, whose
	// pods tolerate cordoning but not this taint.
	err = n.waitFor(ctx, nil, "tainted "+stoppingTaint, 20*time.Second, func() (bool, error) {
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, t := range node.Spec.Taints {
			if t.Key == stoppingTaint {
				return true, nil
			}
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: stoppingTaint, Effect: corev1.TaintEffectNoSchedule})
		_, err = n.cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err != nil {
		return err
	}
	sel := "spec.nodeName=" + n.Name
	pods, err := n.cp.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return fmt.Errorf("node %s: list its pods: %w", n.Name, err)
	}
	for _, p := range pods.Items {
		err := n.cp.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: delete pod %s/%s: %w", n.Name, p.Namespace, p.Name, err)
		}
	}
	return n.waitFor(ctx, nil, "its pods gone", 55*time.Second, func() (bool, error) {
		pods, err := n.cp.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err
		}
		if len(pods.Items) > 0 {
			var names bytes.Buffer
			for _, p := range pods.Items {
				fmt.Fprintf(&names, " %s/%s", p.Namespace, p.Name)
			}
			return false, fmt.Errorf("still there:%s", names.String())
		}
		return true, nil
	})
}

// stoppingTaint keeps new pods off a node that Stop is draining.
const stoppingTaint = "rollplan.dev/node-stopping"

// startReaper starts a shell that outlives the test binary: if it dies
// without Stop (a timeout panic, SIGKILL), it kills every process whose
// command line names the node's folder (containerd, the shims, the
// registry, the kubelet). Mounts, links and cgroups it cannot undo: the
// next Start's snapshot does not see them as its own, and Leftovers of a
// later run reports what the earlier one left only by name.
func (n *Node) startReaper() error {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; pkill -KILL -f -- "$2"`
	cmd := exec.Command("sh", "-c", script, "rollplan-node-reaper", strconv.Itoa(os.Getpid()), n.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: start reaper: %w", n.Name, err)
	}
	n.reaper = cmd.Process
	go func() { _ = cmd.Wait() }()
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
