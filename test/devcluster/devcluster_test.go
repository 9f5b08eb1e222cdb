package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
)

// Docs markers: each is the line right before a fenced block of the
// section "Try it on a cluster", or of "Out of a broken rollout".
const (
	markOutput  = "<!-- dev-cluster: output -->"  // what make dev-cluster prints, to the commands
	markSession = "<!-- dev-cluster: session -->" // the commands in order, with their output as comments
	markStop    = "<!-- dev-cluster: stop -->"    // what Ctrl-C prints
	markBroken  = "<!-- dev-cluster: broken -->"  // a broken rollout, after the session: its commands, as the session's
)

// check is what one docs command must do.
type check struct {
	// match picks the command: a substring of it.
	match string
	// exit is the exit code wanted.
	exit int
	// output holds substrings the combined output must contain.
	output []string
	// also checks more, given the output; nil: nothing more.
	also func(t *testing.T, out string)
	// alongside, when set, matches an earlier command this one runs
	// beside, as the docs say (a third terminal): it starts first, the
	// other once it printed a line, and both are checked once both ended.
	alongside string
}

// checks are the docs session's commands, each found by its match; a
// command none matches fails the test, so a step added to the docs
// (and the ready block) comes with its check.
var checks = []check{
	{match: " set image sts/web ", output: []string{
		"Warning: rollplan: will update 6 pods in 3 waves: 6 in place",
		"statefulset.apps/web image updated",
	}},
	{match: "rollplan snapshot ", output: []string{"captured 3 workloads, 16 pods, 6 nodes, 0 PDBs", "bin/dev-cluster/snapshot.yaml"}},
	{match: "rollplan plan ", output: []string{
		"StatefulSet demo/web",
		"6 pods: 0 updated, 6 to update (6 in place, 0 recreated), 0 held; 3 waves",
		"DaemonSet demo/agent", "Deployment demo/api",
	}, also: func(t *testing.T, out string) {
		// WAVE START BOUND BY ACTIONS: two pods a wave, the first two
		// waves full (max-unavailable 2), the last bound by nothing.
		waves := regexp.MustCompile(`(?m)^\s+([0-9]+)\s+\S+\s+(maxUnavailable 2/2|-)\s+InPlaceUpdate web-[0-9] web-[0-9]$`).FindAllStringSubmatch(out, -1)
		if len(waves) != 3 {
			t.Errorf("plan: %d waves of 2 in-place updates, want 3:\n%s", len(waves), out)
			return
		}
		for i, w := range waves {
			want := "maxUnavailable 2/2"
			if i == len(waves)-1 {
				want = "-"
			}
			if w[2] != want {
				t.Errorf("plan: wave %s bound by %q, want %q:\n%s", w[1], w[2], want, out)
			}
		}
	}},
	{match: "rollplan apply ", output: []string{"StatefulSet demo/web: done: 6 InPlaceUpdate", "6/6 pods updated, 6 available, 0 held, 0 in flight"}},
	{match: "rollplan status ", alongside: "rollplan apply ", output: []string{
		// Started before apply: it watched the waves go by.
		"StatefulSet demo/web: in progress: wave 1 of 3; 0/6 pods updated",
		"StatefulSet demo/web: rolled out; 6/6 pods updated, 6 available",
	}, also: func(t *testing.T, out string) {
		if n := strings.Count(out, "in progress: wave "); n < 3 {
			t.Errorf("status --watch printed %d in-progress lines during apply, want at least 3 (one per wave)", n)
		}
	}},
	{match: " delete pod web-0 web-1 web-2", exit: 1, output: []string{
		`pod "web-0" deleted`, `pod "web-1" deleted`,
		`admission webhook "pods.gate.rollplan.dev" denied the request: rollplan gate: deletion of pod demo/web-2 denied: StatefulSet demo/web budget maxUnavailable allows 2 pods unavailable`,
	}},
}

// brokenChecks are docs/rollouts.md "Out of a broken rollout"'s commands, run after
// the session as checks are: an image the test kubelet crash-loops halts
// apply (exit 3) with the first wave broken, status --watch sees it halt
// and why, and undo puts web back, in place, whatever the budget.
var brokenChecks = []check{
	{match: " set image sts/web ", output: []string{
		"Warning: rollplan: will update 6 pods in 3 waves: 6 in place",
		"statefulset.apps/web image updated",
	}},
	{match: "rollplan apply ", exit: 3, output: []string{
		"StatefulSet demo/web: halted by policy: 2 InPlaceUpdate",
		"2/6 pods updated, 4 available, 0 held, 2 in flight",
		"rollout halted by policy: pod web-",
		"is crash-looping since the update",
	}},
	{match: "rollplan status ", alongside: "rollplan apply ", exit: 3, output: []string{
		"StatefulSet demo/web: in progress: wave 1 of 3; 0/6 pods updated",
		"StatefulSet demo/web: halted: pod web-",
		"is crash-looping since the update",
	}},
	{match: "rollplan undo ", output: []string{
		"StatefulSet demo/web: template rolled back to revision 2",
		"unavailable and not at the update revision: replaced first, whatever the budget",
		"StatefulSet demo/web: done: 2 InPlaceUpdate",
		"6/6 pods updated, 6 available, 0 held, 0 in flight",
	}},
}

// TestDevClusterSession is docs/dev-cluster.md, run: it builds
// bin/rollplan and the dev cluster into a folder laid out like a checkout
// (test/cluster/bin links to $ROLLPLAN_CLUSTER_BIN), starts it as `make
// dev-cluster` does, compares what it prints with the docs, runs the
// docs' commands in order from that folder and checks each, then those
// of "Out of a broken rollout" (after its undo, web's same pods on their
// image again), then sends SIGINT and checks that every process it started
// has exited and every port they listened on is free.
func TestDevClusterSession(t *testing.T) {
	versionDir, err := controlplane.VersionDir(harness.Version)
	if err != nil {
		t.Skip(err)
	}
	wantOutput, session, wantStop := docBlock(t, markOutput), docBlock(t, markSession), docBlock(t, markStop)
	broken := commandLines(docBlock(t, markBroken))

	// About a minute on 2 cores, most of it the build (links two
	// binaries); the bound leaves room for a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := t.TempDir()
	layOut(ctx, t, root, versionDir, "etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
	dc := startDevCluster(ctx, t, root, nodeSimulated)
	printed := dc.out.String()
	if got, want := normalize(printed), normalize(wantOutput); got != want {
		t.Errorf("make dev-cluster prints, normalised:\n%s\ndocs (%s) say:\n%s", got, markOutput, want)
	}
	commands := commandLines(session)
	checkPrintedCommands(t, printed, commands)

	procs := descendants(t, dc.cmd.Process.Pid)
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "rollplan gate"} {
		found := false
		for _, cmd := range procs {
			found = found || strings.Contains(cmd, want)
		}
		if !found {
			t.Errorf("no %s among the dev cluster's processes: %v", want, procs)
		}
	}
	ports := listening(t, procs)
	apiserver := regexp.MustCompile(`at https://127\.0\.0\.1:([0-9]+)/`).FindStringSubmatch(printed)
	if apiserver == nil || !ports[atoi(apiserver[1])] {
		t.Errorf("the API server's port (%v) is not among the ports the processes listen on: %v", apiserver, ports)
	}

	runSession(ctx, t, root, commands, checks)
	if !t.Failed() {
		// kubectl returned once web-0 and web-1 were deleted; a user
		// reading on gives their replacements the second they take.
		client := clientFor(t, filepath.Join(root, "bin/dev-cluster/kubeconfig"))
		before := webPods(ctx, t, client, simRegistry+"/testapp:2.0")
		runSession(ctx, t, root, broken, brokenChecks)
		after := webPods(ctx, t, client, simRegistry+"/testapp:2.0")
		for name, uid := range before {
			if after[name] != uid {
				t.Errorf("pod %s after undo: uid %s, was %s: the rollback is an image change, in place", name, after[name], uid)
			}
		}
	}

	stopOut := dc.interrupt(t)
	if got, want := normalize(stopOut), normalize(wantStop); got != want {
		t.Errorf("on SIGINT the dev cluster prints, normalised:\n%s\ndocs (%s) say:\n%s", got, markStop, want)
	}
	var left []string
	for pid, cmd := range procs {
		if alive(pid) {
			left = append(left, fmt.Sprintf("%d %s", pid, cmd))
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left running after SIGINT:\n%s", strings.Join(left, "\n"))
	}
	for port := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Errorf("port %d is still taken after SIGINT: %v", port, err)
			continue
		}
		_ = l.Close()
	}
	checkStateGone(t, root, "gate")
}

// checkPrintedCommands compares the commands of the ready block with the
// docs session's.
func checkPrintedCommands(t *testing.T, printed string, commands []string) {
	t.Helper()
	if tryAt := strings.Index(printed, tryHeader); tryAt < 0 {
		t.Fatalf("no %q in the output", tryHeader)
	} else if got := commandLines(printed[tryAt:]); strings.Join(got, "\n") != strings.Join(commands, "\n") {
		t.Errorf("the commands printed:\n%s\nthe docs session's:\n%s", strings.Join(got, "\n"), strings.Join(commands, "\n"))
	}
}

// checkStateGone checks that the files stale without the cluster went
// with it.
func checkStateGone(t *testing.T, root string, more ...string) {
	t.Helper()
	for _, f := range append([]string{"kubeconfig", "devcluster.pid"}, more...) {
		if _, err := os.Stat(filepath.Join(root, "bin/dev-cluster", f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("bin/dev-cluster/%s is still there after the stop (%v): it is stale without the cluster", f, err)
		}
	}
}

// layOut makes root a folder laid out like a checkout as the docs'
// commands expect it: test/cluster/bin/<version>/ as make cluster-bin
// leaves it, each binary a link to the one the test was given, and
// bin/rollplan and bin/devcluster built by the test.
func layOut(ctx context.Context, t *testing.T, root, versionDir string, binaries ...string) {
	t.Helper()
	binDir := filepath.Join(root, "test/cluster/bin", harness.Version)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range binaries {
		if err := os.Symlink(filepath.Join(versionDir, name), filepath.Join(binDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "bin")+"/",
		"github.com/rollplan/rollplan/cmd/rollplan", "github.com/rollplan/rollplan/test/devcluster")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built bin/rollplan and bin/devcluster in %s", time.Since(start).Round(time.Second/10))
}

// devCluster is bin/devcluster, started by startDevCluster.
type devCluster struct {
	root    string
	cmd     *exec.Cmd
	out     *harness.SyncBuffer
	exited  chan error
	stopped bool
	printed int // the output's length when it was ready
}

// startDevCluster starts bin/devcluster in root as the Makefile runs it
// and waits until it printed its ready block; at the test's end it kills
// it if still running and, if the test failed, logs its output and logs.
func startDevCluster(ctx context.Context, t *testing.T, root, nodeKind string) *devCluster {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("./bin/devcluster", "--node", nodeKind, "--kubernetes-version", harness.Version, "--rollplan", "./bin/rollplan", "--dir", "bin/dev-cluster")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), controlplane.BinEnv+"=test/cluster/bin")
	dc := &devCluster{root: root, cmd: cmd, out: &harness.SyncBuffer{}, exited: make(chan error, 1)}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = dc.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			fmt.Fprintln(dc.out, sc.Text())
			if strings.HasPrefix(sc.Text(), "Ctrl-C here stops") {
				close(ready)
			}
		}
		dc.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if !dc.stopped {
			_ = cmd.Process.Kill()
			<-dc.exited
		}
		if t.Failed() {
			t.Logf("dev cluster output:\n%s", dc.out.String())
			for _, log := range []string{"gate.log", "devcluster.log"} {
				if b, err := os.ReadFile(filepath.Join(root, "bin/dev-cluster", log)); err == nil {
					t.Logf("%s:\n%s", log, b)
				}
			}
		}
	})
	select {
	case <-ready:
	case err := <-dc.exited:
		dc.stopped = true
		t.Fatalf("the dev cluster exited before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("the dev cluster was not ready within the test's time")
	}
	t.Logf("dev cluster (%s) ready in %s", nodeKind, time.Since(start).Round(time.Second/10))
	dc.printed = len(dc.out.String())
	return dc
}

// interrupt sends SIGINT, waits (a minute at most) for the exit, checks
// it is 0, and returns what the dev cluster printed since it was ready.
func (dc *devCluster) interrupt(t *testing.T) string {
	t.Helper()
	start := time.Now()
	if err := dc.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-dc.exited:
		dc.stopped = true
		if err != nil {
			t.Errorf("the dev cluster after SIGINT: %v, want exit 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the dev cluster did not exit within 2 minutes of SIGINT")
	}
	t.Logf("stopped in %s", time.Since(start).Round(time.Second/10))
	return dc.out.String()[dc.printed:]
}

// runSession runs the commands in order from root, each after the export
// lines before it, and checks each against its check; a command whose
// check runs it alongside an earlier one starts right before that one.
func runSession(ctx context.Context, t *testing.T, root string, commands []string, checks []check) {
	var exports []string
	find := func(line string) *check {
		for i := range checks {
			if strings.Contains(line, checks[i].match) {
				return &checks[i]
			}
		}
		return nil
	}
	started := map[string]bool{}
	for i, line := range commands {
		if strings.HasPrefix(line, "export ") {
			exports = append(exports, line)
			continue
		}
		if started[line] {
			continue
		}
		c := find(line)
		if c == nil {
			t.Errorf("docs command %q has no check in this test: add one", line)
			continue
		}
		// A later command that runs beside this one starts first.
		var beside *running
		for _, later := range commands[i+1:] {
			if lc := find(later); lc != nil && lc.alongside != "" && strings.Contains(line, lc.alongside) {
				beside = start(ctx, t, root, exports, later, lc)
				started[later] = true
				beside.waitOutput(t)
			}
		}
		start(ctx, t, root, exports, line, c).check(t)
		if beside != nil {
			beside.check(t)
		}
	}
}

// running is a docs command started by start.
type running struct {
	line  string
	c     *check
	begun time.Time
	out   *harness.SyncBuffer
	done  chan error
}

func start(ctx context.Context, t *testing.T, root string, exports []string, line string, c *check) *running {
	t.Helper()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.Join(append(exports, line), "\n"))
	cmd.Dir = root
	r := &running{line: line, c: c, begun: time.Now(), out: &harness.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	go func() { r.done <- cmd.Wait() }()
	return r
}

// waitOutput waits until the command printed something (a watch has its
// caches synced), or ended.
func (r *running) waitOutput(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); r.out.String() == "" && time.Now().Before(deadline); {
		select {
		case err := <-r.done:
			r.done <- err
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// check waits for the command to end (a minute at most) and checks it.
func (r *running) check(t *testing.T) {
	t.Helper()
	var err error
	select {
	case err = <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still running after a minute:\n%s", r.line, r.out.String())
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", r.line, err)
	}
	out := r.out.String()
	t.Logf("$ %s  (exit %d, %s)\n%s", r.line, code, time.Since(r.begun).Round(time.Millisecond), out)
	if code != r.c.exit {
		t.Errorf("%s: exit code %d, want %d", r.line, code, r.c.exit)
	}
	for _, want := range r.c.output {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the output lacks %q", r.line, want)
		}
	}
	if r.c.also != nil {
		r.c.also(t, out)
	}
}

// sessionPages are the docs pages that hold the marked blocks: the
// session in dev-cluster.md, the broken rollout in rollouts.md.
var sessionPages = []string{"../../docs/dev-cluster.md", "../../docs/rollouts.md"}

// docBlock is the fenced block right after the marker line, which exactly
// one of sessionPages holds; in a list item both are indented, and the
// block comes without the indentation.
func docBlock(t *testing.T, marker string) string {
	t.Helper()
	var page string
	var lines []string
	at := -1
	for _, p := range sessionPages {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		l := strings.Split(string(text), "\n")
		if i := slices.IndexFunc(l, func(l string) bool { return strings.TrimSpace(l) == marker }); i >= 0 {
			if at >= 0 {
				t.Fatalf("%s and %s both hold %s", page, p, marker)
			}
			page, lines, at = p, l, i
		}
	}
	if at < 0 {
		t.Fatalf("no page of %v holds %s", sessionPages, marker)
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " "))]
	if at+1 >= len(lines) || !strings.HasPrefix(lines[at+1], indent+"```") {
		t.Fatalf("%s: %s is not followed by a fenced block", page, marker)
	}
	var block []string
	for _, l := range lines[at+2:] {
		if l == indent+"```" {
			return strings.Join(block, "\n") + "\n"
		}
		if l != "" && !strings.HasPrefix(l, indent) {
			break
		}
		block = append(block, strings.TrimPrefix(l, indent))
	}
	t.Fatalf("%s: the block after %s does not end", page, marker)
	return ""
}

// clientFor is a client of the dev cluster the kubeconfig names.
func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// webPods waits until web's pods are all there, Ready and on image, and
// returns their UIDs by name.
func webPods(ctx context.Context, t *testing.T, client kubernetes.Interface, image string) map[string]types.UID {
	t.Helper()
	var got map[string]types.UID
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got = map[string]types.UID{}
		var state []string
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			state = append(state, fmt.Sprintf("%s %s ready=%v", p.Name, p.Spec.Containers[0].Image, ready))
			if ready && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image {
				got[p.Name] = p.UID
			}
		}
		last = strings.Join(state, ", ")
		return len(got) == 6 && len(pods.Items) == 6, nil
	})
	if err != nil {
		t.Fatalf("web's 6 pods not all Ready on %s: %v (%s)", image, err, last)
	}
	return got
}

// commandLines are the lines of text that are neither blank nor comments,
// trimmed, from tryHeader on when text holds it (the ready block).
func commandLines(text string) []string {
	if _, rest, ok := strings.Cut(text, tryHeader); ok {
		text = rest
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "Ctrl-C") || strings.HasPrefix(line, "stopping") || strings.HasPrefix(line, "stopped") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// normalize replaces what changes between runs: durations, ports.
var (
	durations = regexp.MustCompile(`\([0-9]+\.[0-9]s\)`)
	portRe    = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

func normalize(s string) string {
	s = durations.ReplaceAllString(s, "(T)")
	s = portRe.ReplaceAllString(s, "127.0.0.1:PORT")
	return strings.TrimSpace(s)
}

// descendants are the processes under pid (children, theirs, ...), by
// pid, with their command lines.
func descendants(t *testing.T, pid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			children[atoi(fields[1])] = append(children[atoi(fields[1])], p)
		}
	}
	out := map[int]string{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			out[c] = strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
			queue = append(queue, c)
		}
	}
	return out
}

// listening are the TCP ports the processes listen on: their sockets'
// inodes, found in /proc/net/tcp{,6} in state LISTEN (0A).
func listening(t *testing.T, procs map[int]string) map[int]bool {
	t.Helper()
	inodes := map[string]bool{}
	for pid := range procs {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
	}
	if len(ports) == 0 {
		t.Fatal("the dev cluster's processes listen on no TCP port")
	}
	return ports
}

// alive tells whether pid runs (a zombie has exited: it only waits to be
// reaped).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestReadmeSession checks, without a cluster, what TestDevClusterSession
// relies on in docs/dev-cluster.md: its three blocks, the same
// commands in the printed output as in the session, each with a check.
func TestReadmeSession(t *testing.T) {
	printed := commandLines(docBlock(t, markOutput))
	session := commandLines(docBlock(t, markSession))
	if strings.Join(printed, "\n") != strings.Join(session, "\n") {
		t.Errorf("docs: the commands of the printed block:\n%s\nand of the session:\n%s", strings.Join(printed, "\n"), strings.Join(session, "\n"))
	}
	exports := []string{"export KUBECONFIG=$PWD/bin/dev-cluster/kubeconfig", "export " + registryEnv + "=" + simRegistry}
	if len(session) != len(checks)+len(exports) || strings.Join(session[:min(len(exports), len(session))], "\n") != strings.Join(exports, "\n") {
		t.Errorf("docs session: commands %q, want %q and %d checked ones", session, exports, len(checks))
	}
	for _, line := range session {
		n := 0
		for _, c := range checks {
			if strings.Contains(line, c.match) {
				n++
			}
		}
		if n != 1 && !strings.HasPrefix(line, "export ") {
			t.Errorf("docs command %q matches %d checks, want 1", line, n)
		}
	}
	if stop := docBlock(t, markStop); !strings.Contains(stop, "stopped: every process") {
		t.Errorf("docs stop block:\n%s", stop)
	}

	// "Out of a broken rollout": each command with its check, and the
	// image it sets one the dev cluster's kubelet crash-loops.
	broken := commandLines(docBlock(t, markBroken))
	if len(broken) != len(brokenChecks)+len(exports) || strings.Join(broken[:min(len(exports), len(broken))], "\n") != strings.Join(exports, "\n") {
		t.Errorf("docs broken rollout: commands %q, want the session's exports %q and %d checked ones", broken, exports, len(brokenChecks))
	}
	crashing := false
	for _, line := range broken[min(len(exports), len(broken)):] {
		n := 0
		for _, c := range brokenChecks {
			if strings.Contains(line, c.match) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("docs broken-rollout command %q matches %d checks, want 1", line, n)
		}
		if _, image, ok := strings.Cut(line, " set image sts/web app="); ok {
			tag := image[strings.LastIndex(image, ":")+1:]
			b, ok := kubeletImages().Tags[tag]
			crashing = ok && b.CrashLoop
		}
	}
	if !crashing {
		t.Errorf("docs broken rollout: no `set image sts/web app=...` to an image the dev cluster crash-loops (tags %v): %q", imageTags, broken)
	}
}

func TestCommandLinesAndNormalize(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"ready block from its header", "Cluster ready\n  x\n" + tryHeader + "\n\n  export A=1\n  # 1. say\n  ./bin/rollplan plan\n\nCtrl-C here stops\n", []string{"export A=1", "./bin/rollplan plan"}},
		{"session with outputs as comments", "export A=1\ncmd one\n# out\n\ncmd two\n# more\n", []string{"export A=1", "cmd one", "cmd two"}},
		{"stop lines are not commands", "stopping x ... ok (1.0s)\nstopped: all\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandLines(tc.in); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("commandLines = %q, want %q", got, tc.want)
			}
		})
	}
	if got, want := normalize(" at https://127.0.0.1:38313/ ... ok (7.3s)\n"), "at https://127.0.0.1:PORT/ ... ok (T)"; got != want {
		t.Errorf("normalize = %q, want %q", got, want)
	}
}
