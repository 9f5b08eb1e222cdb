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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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

// Tags are the testapp image's tags. broken never becomes ready.
var Tags = []string{"1.0", "2.0", "3.0", "broken"}

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

// process is one started component.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// start runs a component in its own process group, killed with the test
// binary (Pdeathsig), its output in logs/NAME.log.
func (n *Node) start(name string, path string, args []string, env []string) (*process, error) {
	logf, err := os.Create(filepath.Join(n.dir, "logs", name+".log"))
	if err != nil {
		return nil, fmt.Errorf("node %s: %s log: %w", n.Name, name, err)
	}
	cmd := exec.Command(path, args...)
	var w io.Writer = logf
	if n.out != nil {
		w = io.MultiWriter(logf, n.out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("node %s: start %s: %w", n.Name, name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p, nil
}

// stop ends p: SIGTERM to its group, SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.log.Close()
}

// exited reports an error when p has exited, naming its log.
func (n *Node) exited(p *process) error {
	select {
	case <-p.done:
		return fmt.Errorf("node %s: %s exited (%v); its log ends:\n%s", n.Name, p.name, p.cmd.ProcessState, n.LogTail(p.name, 30))
	default:
		return nil
	}
}

// waitFor polls cond every 200ms until it is true, p exits, or timeout.
func (n *Node) waitFor(ctx context.Context, p *process, what string, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if p != nil {
			if err := n.exited(p); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("node %s: %s: not within %v", n.Name, what, timeout)
			if last != nil {
				msg += fmt.Sprintf(" (last: %v)", last)
			}
			if p != nil {
				msg += fmt.Sprintf("; %s's log ends:\n%s", p.name, n.LogTail(p.name, 30))
			}
			return errors.New(msg)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startRegistry builds the pause and testapp binaries and serves their
// images from the registry program on loopback.
func (n *Node) startRegistry(ctx context.Context) error {
	images := filepath.Join(n.dir, "images")
	for _, prog := range []string{"pause", "testapp"} {
		if err := buildStatic(ctx, "./test/node/"+prog, filepath.Join(images, prog)); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	spec := registrySpec{Images: []registryImage{{
		Repository: "pause", Tag: PauseTag,
		Files:      []registryFile{{Path: "/pause", Source: filepath.Join(images, "pause"), Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}}}
	for _, tag := range Tags {
		version, env := tag, []string{}
		if tag == "broken" {
			env = append(env, "TESTAPP_READY=never")
		}
		spec.Images = append(spec.Images, registryImage{
			Repository: "testapp", Tag: tag,
			Files:      []registryFile{{Path: "/testapp", Source: filepath.Join(images, "testapp"), Mode: 0o755}},
			Entrypoint: []string{"/testapp"},
			Env:        append([]string{"TESTAPP_VERSION=" + version}, env...),
			User:       "65532:65532",
		})
	}
	rollplan, err := n.rollplanSpec(ctx, n.rollplan)
	if err != nil {
		return err
	}
	spec.Images = append(spec.Images, rollplan...)
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specPath := filepath.Join(images, "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return fmt.Errorf("node %s: registry spec: %w", n.Name, err)
	}
	readyPath := filepath.Join(images, "ready.json")
	p, err := n.start("registry", filepath.Join(n.bin, "registry"), []string{"--spec", specPath, "--out", readyPath, "--listen", "127.0.0.1:0"}, nil)
	if err != nil {
		return err
	}
	var ready struct {
		Address string            `json:"address"`
		Digests map[string]string `json:"digests"`
	}
	err = n.waitFor(ctx, p, "registry ready", 60*time.Second, func() (bool, error) {
		b, err := os.ReadFile(readyPath)
		if err != nil {
			return false, err
		}
		return true, json.Unmarshal(b, &ready)
	})
	if err != nil {
		return registryHint(err)
	}
	n.Registry, n.Digests = ready.Address, ready.Digests
	return nil
}

// PauseTag is the pause image's tag in the registry.
const PauseTag = "3.10"

type registrySpec struct {
	Images []registryImage `json:"images"`
}

// registryImage and registryFile are test/node/registry's Image and File.
type registryImage struct {
	Repository string         `json:"repository"`
	Tag        string         `json:"tag"`
	Base       string         `json:"base,omitempty"`
	Files      []registryFile `json:"files"`
	Entrypoint []string       `json:"entrypoint,omitempty"`
	Env        []string       `json:"env,omitempty"`
	User       string         `json:"user,omitempty"`
	WorkingDir string         `json:"workingDir,omitempty"`
}

type registryFile struct {
	Path    string `json:"path"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Mode    int64  `json:"mode"`
	UID     int    `json:"uid,omitempty"`
	GID     int    `json:"gid,omitempty"`
}

// buildStatic builds a program of this module as a static binary (images
// have no libc). It runs from the module root, found from this file's
// package directory at test time (the working directory of `go test`).
func buildStatic(ctx context.Context, pkg, out string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// moduleRoot is the folder of rollplan's go.mod, above the working
// directory.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside rollplan's module: run from its checkout")
	}
	return filepath.Dir(mod), nil
}

// startContainerd writes containerd's config (every path under the node's
// folder, the CRI plugin pulling from the registry over plain HTTP, the CNI
// bridge) and starts it.
func (n *Node) startContainerd(ctx context.Context) error {
	d := n.dir
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "rollplan",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "dataDir": %q
      }
    }
  ]
}
`, n.bridge, n.PodCIDR, filepath.Join(d, "cni/ipam"))
	if err := os.WriteFile(filepath.Join(d, "cni/net.d/10-rollplan.conflist"), []byte(cni), 0o644); err != nil {
		return fmt.Errorf("node %s: CNI config: %w", n.Name, err)
	}
	hostDir := filepath.Join(d, "certs.d", n.Registry)
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", n.Registry, n.Registry)
	if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("node %s: registry hosts: %w", n.Name, err)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
imports = []
# Plugins that would write outside the node's folder, and ones unused.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.image-verifier.v1.bindir",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.shim.v1.manager"]
  socket_dir = %[5]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[6]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[7]q

[plugins."io.containerd.cri.v1.runtime"]
  # The test machines run without CAP_SYS_RESOURCE: no process may lower
  # its oom_score_adj, so runc cannot give a sandbox the kubelet's -998
  # ("failed to update /proc/self/oom_score_adj: Permission denied").
  # Restricted, a container's score is never below containerd's own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%[8]q]
  enable_criu = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[11]q
        Root = %[12]q
        SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`,
		filepath.Join(d, "containerd/root"), filepath.Join(d, "containerd/state"),
		n.containerdSocket(), n.containerdSocket()+".ttrpc", filepath.Join(d, "s"),
		n.Image("pause:"+PauseTag), filepath.Join(d, "certs.d"), filepath.Join(d, "cdi"),
		filepath.Join(n.bin, "cni"), filepath.Join(d, "cni/net.d"), runc, filepath.Join(d, "runc"))
	cfgPath := filepath.Join(d, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: containerd config: %w", n.Name, err)
	}
	// The shim is found on PATH.
	p, err := n.start("containerd", filepath.Join(n.bin, "containerd"), []string{"--config", cfgPath, "--log-level", "info"},
		[]string{"PATH=" + n.bin + ":" + os.Getenv("PATH")})
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, "containerd serving on "+n.containerdSocket(), 60*time.Second, func() (bool, error) {
		c, err := net.Dial("unix", n.containerdSocket())
		if err != nil {
			return false, err
		}
		_ = c.Close()
		return true, nil
	})
}

func (n *Node) containerdSocket() string { return filepath.Join(n.dir, "containerd.sock") }

// cgroupRoots are the mounted cgroup hierarchies: /sys/fs/cgroup itself on
// cgroup v2, each controller's folder (and unified, systemd) on v1.
func cgroupRoots() ([]string, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return []string{"/sys/fs/cgroup"}, nil
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		// Symlinks (cpu,cpuacct -> cpu) name the same hierarchy twice.
		if e.Type()&os.ModeSymlink != 0 || !e.IsDir() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// makeCgroupRoot creates the kubelet's cgroupRoot in every hierarchy (the
// kubelet requires it to exist), cpuset's with its parent's CPUs and memory
// nodes so that tasks may join it.
func (n *Node) makeCgroupRoot() error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	for _, r := range roots {
		dir := filepath.Join(r, n.cgroupName)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("node %s: cgroup %s: %w", n.Name, dir, err)
		}
		if filepath.Base(r) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(r, f))
				if err != nil {
					return fmt.Errorf("node %s: %w", n.Name, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("node %s: cgroup %s: %w", n.Name, f, err)
				}
			}
		}
	}
	return nil
}

// startKubelet gives the kubelet its identity (system:node:NAME, bound to
// the system:node role: the test apiserver has no Node authorizer) and
// starts it.
func (n *Node) startKubelet(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	_, err = n.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: n.binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:node:" + n.Name}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: bind system:node: %w", n.Name, err)
	}
	ip, err := controlplane.HostIP()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	d := n.dir
	// Eviction and image GC thresholds are off: a shared test machine's
	// disk must not evict the test's pods. The kubelet's own API trusts
	// the apiserver's client CA only.
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
staticPodPath: ""
podLogsDir: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
resolvConf: ""
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 10s
`, n.cgroupName, n.containerdSocket(), ip, port, healthz, filepath.Join(d, "pod-logs"), n.cp.ClientCAFile())
	cfgPath := filepath.Join(d, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: kubelet config: %w", n.Name, err)
	}
	p, err := n.start("kubelet", filepath.Join(n.k8sBin, "kubelet"), []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(d, "kubelet"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + ip,
		"--v=2",
	}, nil)
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, "node "+n.Name+" registered", 90*time.Second, func() (bool, error) {
		_, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil, err
	})
}

// startProxy runs kube-proxy in iptables mode as system:kube-proxy (its
// bootstrap RBAC role): Services' ClusterIPs lead to their pods, from pods
// and from the host (the apiserver calls the gate's webhook through its
// Service). It is told to leave the host's conntrack settings and
// route_localnet alone (clean.go checks that it did).
func (n *Node) startProxy(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:kube-proxy")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kube-proxy.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  minSyncPeriod: 100ms
`, kubeconfig, n.Name, n.PodCIDR, healthz, metrics)
	cfgPath := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: kube-proxy config: %w", n.Name, err)
	}
	p, err := n.start("kube-proxy", filepath.Join(n.k8sBin, "kube-proxy"), []string{"--config=" + cfgPath, "--v=2"}, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	return n.waitFor(ctx, p, "kube-proxy healthy", 60*time.Second, func() (bool, error) {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("healthz: %s", resp.Status)
	})
}

// startScheduler runs kube-scheduler as system:kube-scheduler (its
// bootstrap RBAC role).
func (n *Node) startScheduler(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:kube-scheduler")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := n.start("kube-scheduler", filepath.Join(n.k8sBin, "kube-scheduler"), []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(n.dir, "scheduler-certs"),
		"--v=2",
	}, nil)
	if err != nil {
		return err
	}
	// Up once it has its informers: no port check needed, a scheduled pod
	// is the proof; here only that it did not exit at once.
	time.Sleep(500 * time.Millisecond)
	return n.exited(p)
}

// waitReady waits for the node's Ready condition, then takes off the
// not-ready taint the kubelet registers with, as kube-controller-manager's
// node lifecycle controller would: the test control plane does not run it
// (it would mark the simulated kubelet's nodes NotReady).
func (n *Node) waitReady(ctx context.Context) error {
	var kubelet *process
	for _, p := range n.procs {
		if p.name == "kubelet" {
			kubelet = p
		}
	}
	err := n.waitFor(ctx, kubelet, "node "+n.Name+" Ready", 120*time.Second, func() (bool, error) {
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("condition Ready=%s: %s", c.Status, c.Message)
			}
		}
		return false, errors.New("no Ready condition yet")
	})
	if err != nil {
		return err
	}
	return n.waitFor(ctx, kubelet, "node "+n.Name+" untainted", 30*time.Second, func() (bool, error) {
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return true, nil
		}
		node.Spec.Taints = kept
		// A conflict (the kubelet updated it) is retried.
		_, err = n.cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return false, err
	})
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
