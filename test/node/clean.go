package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysctls are the host settings a node changes: the kubelet sets the first
// six at start (unless protectKernelDefaults), the bridge plugin turns on
// forwarding for its gateway, kube-proxy may set the conntrack limits and
// route_localnet (it is told not to; the check holds it to that).
var sysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// hostPaths are where the kubelet, containerd or the CNI plugins write
// outside the node's folder when not told otherwise; whatever appears in
// them is the node's.
var hostPaths = []string{
	"/var/log/containers", // the kubelet's container log links: not configurable
	"/var/log/pods",
	"/var/lib/cni", // libcni's result cache
	"/var/lib/kubelet",
	"/var/lib/containerd",
	"/run/containerd",
	"/run/netns",
	"/run/nri",
	"/run/cdi",
	"/etc/cdi",
	"/opt/containerd",
	"/opt/cni",
	"/etc/cni",
	"/etc/containerd",
	"/etc/kubernetes",
}

// iptables are the commands whose rules a node may add to (the kubelet's
// canary chains exist for IPv4 and IPv6).
var iptables = []string{"iptables", "ip6tables"}

// hostState is what a node may change on the host, taken before Start.
type hostState struct {
	mounts  map[string]bool
	links   map[string]bool
	rules   map[string]map[string]bool // command/table -> "-A ..." and ":CHAIN" lines
	tables  map[string]bool            // nftables tables, "ip filter"
	sysctls map[string]string
	files   map[string]bool // every path under hostPaths
}

func snapshotHost(n *Node) (*hostState, error) {
	s := &hostState{sysctls: map[string]string{}}
	var err error
	if s.mounts, err = mountPoints(); err != nil {
		return nil, err
	}
	if s.links, err = links(); err != nil {
		return nil, err
	}
	if s.rules, err = iptablesState(); err != nil {
		return nil, err
	}
	if s.tables, err = nftTables(); err != nil {
		return nil, err
	}
	for _, k := range sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			continue // not on this kernel (no IPv6, no keys): nothing to restore
		}
		s.sysctls[k] = strings.TrimSpace(string(b))
	}
	s.files = hostFiles()
	return s, nil
}

func mountPoints() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out[unescapeMount(fields[4])] = true
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func links() (map[string]bool, error) {
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("links: ip link: %w", err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names[name] = true
	}
	return names, nil
}

// iptablesState is each command's and table's chains (":NAME") and rules
// ("-A NAME ..."), as iptables-save prints them.
func iptablesState() (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	for _, cmd := range iptables {
		save := cmd + "-save"
		if _, err := exec.LookPath(save); err != nil {
			continue
		}
		b, err := exec.Command(save).Output()
		if err != nil {
			continue // that family is not in this kernel: the node adds nothing there
		}
		table := ""
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				chain, _, _ := strings.Cut(line, " ")
				add(out, cmd+"/"+table, chain)
			case strings.HasPrefix(line, "-A "):
				add(out, cmd+"/"+table, line)
			}
		}
	}
	return out, nil
}

// nftTables lists the kernel's nftables tables ("ip filter"): iptables-nft
// creates a table on its first rule in it, and a table iptables cannot
// delete is deleted with nft.
func nftTables() (map[string]bool, error) {
	out := map[string]bool{}
	if _, err := exec.LookPath("nft"); err != nil {
		return out, nil // no nft: iptables is the legacy one, whose tables always exist
	}
	b, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			out[t] = true
		}
	}
	return out, nil
}

// nftFamily is the nftables family of an iptables command.
var nftFamily = map[string]string{"iptables": "ip", "ip6tables": "ip6"}

// newTables are the nftables tables that appeared since the snapshot.
func (n *Node) newTables() ([]string, error) {
	now, err := nftTables()
	if err != nil {
		return nil, err
	}
	var out []string
	for t := range now {
		if !n.before.tables[t] {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

func hostFiles() map[string]bool {
	out := map[string]bool{}
	for _, root := range hostPaths {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			out[p] = true
			return nil
		})
	}
	return out
}

// nodeProcesses are the pids of processes that are the node's: their
// command line names its folder (containerd, shims, kubelet, registry) or
// they run in its cgroups (containers).
func (n *Node) nodeProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if n.reaper != nil && pid == n.reaper.Pid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(n.dir)) && !bytes.Contains(cmdline, []byte("rollplan-node-reaper")) {
			out = append(out, pid)
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if bytes.Contains(cg, []byte("/"+n.cgroupName+"/")) || bytes.HasSuffix(bytes.TrimSpace(cg), []byte("/"+n.cgroupName)) {
			out = append(out, pid)
		}
	}
	return out
}

// newMounts are mount points that appeared since the snapshot, under the
// node's folder or where the runtime mounts (network namespaces).
func (n *Node) newMounts() ([]string, error) {
	now, err := mountPoints()
	if err != nil {
		return nil, err
	}
	var out []string
	for m := range now {
		if n.before.mounts[m] {
			continue
		}
		if under(m, n.dir) || under(m, "/run/netns") || under(m, "/run/containerd") || under(m, "/var/lib/kubelet") {
			out = append(out, m)
		}
	}
	// Deepest first: unmount children before parents.
	sort.Slice(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/") || (strings.Count(out[i], "/") == strings.Count(out[j], "/") && out[i] > out[j])
	})
	return out, nil
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// newLinks are the node's bridge and the veths that appeared since the
// snapshot.
func (n *Node) newLinks() ([]string, error) {
	now, err := links()
	if err != nil {
		return nil, err
	}
	var out []string
	for l := range now {
		if !n.before.links[l] && (l == n.bridge || strings.HasPrefix(l, "veth")) {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out, nil
}

// newRules are iptables rules and chains that appeared since the snapshot,
// by "command/table".
func (n *Node) newRules() (map[string][]string, error) {
	now, err := iptablesState()
	if err != nil {
		return nil, err
	}
	tables, err := n.newTables()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for key, lines := range now {
		cmd, table, _ := strings.Cut(key, "/")
		if slices.Contains(tables, nftFamily[cmd]+" "+table) {
			continue // new as a whole: newTables has it
		}
		for l := range lines {
			if !n.before.rules[key][l] {
				out[key] = append(out[key], l)
			}
		}
		sort.Strings(out[key])
	}
	return out, nil
}

// cgroupDirs are the node's cgroups still present, deepest first.
func (n *Node) cgroupDirs() []string {
	roots, _ := cgroupRoots()
	var out []string
	for _, r := range roots {
		_ = filepath.WalkDir(filepath.Join(r, n.cgroupName), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

func (n *Node) changedSysctls() []string {
	var out []string
	for _, k := range sysctls {
		want, ok := n.before.sysctls[k]
		if !ok {
			continue
		}
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil || strings.TrimSpace(string(b)) != want {
			out = append(out, k)
		}
	}
	return out
}

func (n *Node) newFiles() []string {
	var out []string
	for p := range hostFiles() {
		if !n.before.files[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// cleanHost removes what the node left: processes first (they hold
// mounts, namespaces, cgroups), then mounts, links, rules, cgroups,
// sysctls, files and the node's folder. Every step runs; the errors are
// joined.
func (n *Node) cleanHost() error {
	var errs []error
	for range 50 {
		pids := n.nodeProcesses()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 5 { // mounts stack: repeat until none is new
		mounts, err := n.newMounts()
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(mounts) == 0 {
			break
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if ls, err := n.newLinks(); err == nil {
		for _, l := range ls {
			if out, err := exec.Command("ip", "link", "delete", l).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find")) {
				errs = append(errs, fmt.Errorf("delete link %s: %v: %s", l, err, bytes.TrimSpace(out)))
			}
		}
	} else {
		errs = append(errs, err)
	}
	if rules, err := n.newRules(); err == nil {
		errs = append(errs, deleteRules(rules)...)
	} else {
		errs = append(errs, err)
	}
	if tables, err := n.newTables(); err == nil {
		for _, t := range tables {
			args := append([]string{"delete", "table"}, strings.Fields(t)...)
			if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("nft delete table %s: %v: %s", t, err, bytes.TrimSpace(out)))
			}
		}
	} else {
		errs = append(errs, err)
	}
	for range 20 {
		dirs := n.cgroupDirs()
		if len(dirs) == 0 {
			break
		}
		for _, d := range dirs {
			_ = os.Remove(d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, v := range n.before.sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil && strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
			}
		}
	}
	files := n.newFiles()
	// Deepest first, so a folder is empty when its turn comes.
	slices.Reverse(files)
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", n.dir, err))
	}
	return errors.Join(errs...)
}

// deleteRules removes new rules, then new chains (a rule may jump to one).
func deleteRules(rules map[string][]string) []error {
	var errs []error
	for key, lines := range rules {
		cmd, table, _ := strings.Cut(key, "/")
		for _, l := range lines {
			if !strings.HasPrefix(l, "-A ") {
				continue
			}
			args := append([]string{"-w", "-t", table, "-D"}, splitRule(strings.TrimPrefix(l, "-A "))...)
			if out, err := exec.Command(cmd, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s: delete rule %q: %v: %s", cmd, table, l, err, bytes.TrimSpace(out)))
			}
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, ":") {
				continue
			}
			chain := strings.TrimPrefix(l, ":")
			for _, op := range []string{"-F", "-X"} {
				if out, err := exec.Command(cmd, "-w", "-t", table, op, chain).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s %s: %v: %s", cmd, table, op, chain, err, bytes.TrimSpace(out)))
				}
			}
		}
	}
	return errs
}

// splitRule splits an iptables-save rule into arguments, keeping quoted
// strings (comments) whole.
func splitRule(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, has := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			quoted, has = !quoted, true
		case c == '\\' && quoted && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == ' ' && !quoted:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteByte(c)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}

// Leftovers reports what the node created on the host and is still there:
// processes, mounts, links, iptables rules and chains, cgroups, changed
// sysctls, files in the host's paths, its folder. nil: nothing. Stop calls
// it after cleaning; a test may call it again.
func (n *Node) Leftovers() error {
	if n.before == nil {
		return errors.New("node was not started")
	}
	var left []string
	if pids := n.nodeProcesses(); len(pids) > 0 {
		var desc []string
		for _, pid := range pids {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			desc = append(desc, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))))
		}
		left = append(left, "processes: "+strings.Join(desc, ", "))
	}
	if m, err := n.newMounts(); err != nil {
		left = append(left, "mounts: "+err.Error())
	} else if len(m) > 0 {
		left = append(left, "mounts: "+strings.Join(m, ", "))
	}
	if l, err := n.newLinks(); err != nil {
		left = append(left, "links: "+err.Error())
	} else if len(l) > 0 {
		left = append(left, "links: "+strings.Join(l, ", "))
	}
	if r, err := n.newRules(); err != nil {
		left = append(left, "iptables: "+err.Error())
	} else {
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(r[k]) > 0 {
				left = append(left, fmt.Sprintf("%s: %s", k, strings.Join(r[k], "; ")))
			}
		}
	}
	if t, err := n.newTables(); err != nil {
		left = append(left, "nftables: "+err.Error())
	} else if len(t) > 0 {
		left = append(left, "nftables tables: "+strings.Join(t, ", "))
	}
	if c := n.cgroupDirs(); len(c) > 0 {
		left = append(left, "cgroups: "+strings.Join(c, ", "))
	}
	if s := n.changedSysctls(); len(s) > 0 {
		left = append(left, "sysctls changed: "+strings.Join(s, ", "))
	}
	if f := n.newFiles(); len(f) > 0 {
		left = append(left, "files: "+strings.Join(f, ", "))
	}
	if _, err := os.Stat(n.dir); err == nil {
		left = append(left, "folder: "+n.dir)
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("node %s left on the host:\n  %s", n.Name, strings.Join(left, "\n  "))
}
