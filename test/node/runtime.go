package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

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
