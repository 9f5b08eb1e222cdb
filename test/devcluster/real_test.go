package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/node"
)

// realChecks are the docs session's commands on the real node, run once
// the in-cluster controller has rolled web by itself after the first: the
// plan finds nothing left, apply (--wait-for-lease) nothing to do, and the
// gate in its pods holds kubectl to the same budget.
var realChecks = []check{
	{match: " set image sts/web ", output: []string{
		"Warning: rollplan: will update 6 pods in 3 waves: 6 in place",
		"statefulset.apps/web image updated",
	}},
	{match: "rollplan snapshot ", output: []string{"captured 3 workloads, 11 pods, 1 node, 0 PDBs", "bin/dev-cluster/snapshot.yaml"}},
	{match: "rollplan plan ", output: []string{
		"StatefulSet demo/web",
		"6 pods: 6 updated, 0 to update (0 in place, 0 recreated), 0 held; 0 waves",
		"DaemonSet demo/agent", "Deployment demo/api",
	}},
	{match: "rollplan apply ", output: []string{"StatefulSet demo/web: done: no action", "6/6 pods updated, 6 available, 0 held, 0 in flight"}},
	{match: "rollplan status ", alongside: "rollplan apply ", output: []string{
		"StatefulSet demo/web: rolled out; 6/6 pods updated, 6 available",
	}},
	{match: " delete pod web-0 web-1 web-2", exit: 1, output: []string{
		`pod "web-0" deleted`, `pod "web-1" deleted`,
		`admission webhook "pods.gate.rollplan.dev" denied the request: rollplan gate: deletion of pod demo/web-2 denied: StatefulSet demo/web budget maxUnavailable allows 2 pods unavailable`,
	}},
}

// TestDevClusterRealNode is `make dev-cluster NODE=real` with the docs
// session: in a folder laid out like a checkout (the sources linked, for
// the node to build its images; the binaries as make leaves them), it
// starts bin/devcluster --node real, checks the ready block's commands are
// the docs' and that no gate runs on the host, runs the session's
// image change and checks that the in-cluster controller rolls web by
// itself, in place (same UIDs, one restart, the new image's digest from
// the registry, Ready), runs the rest of the session, then sends SIGINT:
// exit 0 (node.Stop found nothing left on the host), and no process of
// the node (its binaries, shims, containers) still running.
func TestDevClusterRealNode(t *testing.T) {
	versionDir, err := controlplane.VersionDir(harness.Version)
	if err != nil {
		t.Skip(err)
	}
	parts, err := node.PartsDir()
	if err != nil {
		t.Skip(err)
	}
	if err := node.Requirements(); err != nil {
		t.Skipf("no real node on this host: %v", err)
	}
	commands := commandLines(docBlock(t, markSession))

	// Ready within 40 minutes: the node waits for the host lock while
	// another suite's node runs (make test-cluster runs test/node beside
	// this package). Alone, with a warm build cache, about a minute.
	startCtx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	root := t.TempDir()
	linkSources(t, root)
	layOut(startCtx, t, root, versionDir, "etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kubelet", "kube-scheduler", "kube-proxy")
	if err := os.Symlink(parts, filepath.Join(root, "test/cluster/bin/node")); err != nil {
		t.Fatal(err)
	}
	dc := startDevCluster(startCtx, t, root, nodeReal)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The session's commands as printed: the docs' but for the
	// registry's address, which the user copies from the ready block.
	printed := dc.out.String()
	readmeCommands := commands
	if at := strings.Index(printed, tryHeader); at >= 0 {
		commands = commandLines(printed[at:])
	}
	registryLine := regexp.MustCompile(`(?m)^export ` + registryEnv + `=.*$`)
	anyRegistry := func(lines []string) string {
		return registryLine.ReplaceAllString(strings.Join(lines, "\n"), "export "+registryEnv+"=HOST:PORT")
	}
	if got, want := anyRegistry(commands), anyRegistry(readmeCommands); got != want {
		t.Errorf("the commands printed, the registry's address aside:\n%s\nthe docs session's:\n%s", got, want)
	}
	for _, want := range []string{
		"installing rollplan from its manifests: controller and gate as pods of 127.0.0.1:",
		"/rollplan:" + rollplanTag + " ... ok",
		"StatefulSet web   6 pods  rolled by the rollplan controller",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the ready output lacks %q", want)
		}
	}
	registry := submatch(t, printed, `export `+registryEnv+`=(127\.0\.0\.1:[0-9]+)`)
	nodeDir := submatch(t, printed, `its folder (/\S+) goes at Ctrl-C`)
	for pid, cmd := range descendants(t, dc.cmd.Process.Pid) {
		if strings.Contains(cmd, " gate ") {
			t.Errorf("a gate runs on the host (pid %d: %s): with a real node it runs as pods", pid, cmd)
		}
	}
	procs := nodeProcesses(t, dc.cmd.Process.Pid, nodeDir)
	var kinds []string
	for pid := range procs {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		kinds = append(kinds, filepath.Base(exe))
	}
	for _, want := range []string{"kubelet", "kube-proxy", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "registry", "testapp", "rollplan"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s among the node's processes (%v): the leftover check below would not see one", want, kinds)
		}
	}

	client := clientFor(t, filepath.Join(root, "bin/dev-cluster/kubeconfig"))
	oldDigest, newDigest := registryDigest(t, registry, "testapp:1.0"), registryDigest(t, registry, "testapp:2.0")
	before := webState(ctx, t, client, registry+"/testapp:1.0", oldDigest)
	// The session up to the image change; then nobody runs anything.
	at := slices.IndexFunc(commands, func(l string) bool { return strings.Contains(l, " set image sts/web ") })
	if at < 0 {
		t.Fatalf("docs session: no set image of sts/web: %q", commands)
	}
	runSession(ctx, t, root, commands[:at+1], realChecks)
	began := time.Now()
	after := webState(ctx, t, client, registry+"/testapp:2.0", newDigest)
	t.Logf("the controller rolled web in place in %s", time.Since(began).Round(time.Second/10))
	for name, b := range before {
		a := after[name]
		if a.uid != b.uid {
			t.Errorf("pod %s: uid %s, was %s: rolled in place, the pod is kept", name, a.uid, b.uid)
		}
		if a.restarts != b.restarts+1 {
			t.Errorf("pod %s: %d restarts, was %d: one per in-place image change", name, a.restarts, b.restarts)
		}
	}
	var exports []string
	for _, l := range commands[:at] {
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
	}
	runSession(ctx, t, root, append(exports, commands[at+1:]...), realChecks)

	stopOut := dc.interrupt(t)
	for _, want := range []string{
		"stopping the node: its pods, then its processes; checking it left nothing on the host ... ok",
		"stopping kube-controller-manager, kube-apiserver and etcd ... ok",
		"stopped: every process this dev cluster started has exited",
	} {
		if !strings.Contains(stopOut, want) {
			t.Errorf("on SIGINT the dev cluster prints:\n%s\nwithout %q", stopOut, want)
		}
	}
	var left []string
	for pid, cmd := range procs {
		if alive(pid) {
			left = append(left, fmt.Sprintf("%d %s", pid, cmd))
		}
	}
	for pid, cmd := range nodeProcesses(t, 0, nodeDir) {
		if _, seen := procs[pid]; !seen && alive(pid) {
			left = append(left, fmt.Sprintf("%d %s", pid, cmd))
		}
	}
	if len(left) > 0 {
		t.Errorf("the node's processes left running after SIGINT:\n%s", strings.Join(left, "\n"))
	}
	if _, err := os.Stat(nodeDir); !os.IsNotExist(err) {
		t.Errorf("the node's folder %s is still there after SIGINT (%v)", nodeDir, err)
	}
	checkStateGone(t, root)
}

// submatch is the first group of pattern in s; the test fails without it.
func submatch(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("the output has no %s:\n%s", pattern, s)
	}
	return m[1]
}

// linkSources links the checkout's sources into root, all but bin/ and
// test/cluster/bin/ (the test lays those out): the node builds pause,
// testapp and rollplan's image from the module it finds in its working
// directory, as `make dev-cluster NODE=real` does from the checkout.
func linkSources(t *testing.T, root string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	mod := filepath.Dir(strings.TrimSpace(string(out)))
	for _, d := range []struct{ from, to, except string }{
		{mod, root, "test"}, {filepath.Join(mod, "test"), filepath.Join(root, "test"), "cluster"},
		{filepath.Join(mod, "test/cluster"), filepath.Join(root, "test/cluster"), "bin"},
	} {
		if err := os.MkdirAll(d.to, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(d.from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); n != d.except && n != "bin" && n != ".git" {
				if err := os.Symlink(filepath.Join(d.from, n), filepath.Join(d.to, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// nodeProcesses are the node's processes: the dev cluster's children
// (pid; 0: none) running one of the node's binaries, every process whose
// command line names the node's folder (containerd, its shims, the
// kubelet, the registry), and theirs (the containers).
func nodeProcesses(t *testing.T, pid int, nodeDir string) map[int]string {
	t.Helper()
	out := map[int]string{}
	if pid != 0 {
		for p, cmd := range descendants(t, pid) {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
			if slices.Contains([]string{"kubelet", "kube-proxy", "kube-scheduler", "containerd", "registry"}, filepath.Base(exe)) {
				out[p] = cmd
			}
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(raw), nodeDir) {
			continue
		}
		p := atoi(e.Name())
		out[p] = strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		for c, cmd := range descendants(t, p) {
			out[c] = cmd
		}
	}
	return out
}

// registryDigest is the manifest digest the registry serves for
// repository:tag, which a container's imageID ends with.
func registryDigest(t *testing.T, registry, ref string) string {
	t.Helper()
	repo, tag, _ := strings.Cut(ref, ":")
	req, err := http.NewRequest(http.MethodHead, "http://"+registry+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("registry %s: %v", registry, err)
	}
	_ = resp.Body.Close()
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("registry %s: HEAD %s: %s, digest %q", registry, ref, resp.Status, digest)
	}
	return digest
}

// podState is what an in-place update keeps or changes of a pod.
type podState struct {
	uid      types.UID
	restarts int32
}

// webState waits (two minutes at most) until web's six pods are Ready,
// not terminating, on image, their container running the image of digest,
// and returns them by name.
func webState(ctx context.Context, t *testing.T, client kubernetes.Interface, image, digest string) map[string]podState {
	t.Helper()
	var got map[string]podState
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got = map[string]podState{}
		var state []string
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			if len(p.Status.ContainerStatuses) != 1 {
				state = append(state, p.Name+" no container status")
				continue
			}
			cs := p.Status.ContainerStatuses[0]
			state = append(state, fmt.Sprintf("%s %s %s ready=%v", p.Name, p.Spec.Containers[0].Image, cs.ImageID, ready))
			if ready && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image && strings.HasSuffix(cs.ImageID, "@"+digest) {
				got[p.Name] = podState{uid: p.UID, restarts: cs.RestartCount}
			}
		}
		last = strings.Join(state, ", ")
		return len(got) == stsReplicas && len(pods.Items) == stsReplicas, nil
	})
	if err != nil {
		t.Fatalf("web's %d pods not all Ready on %s (%s): %v (%s)", stsReplicas, image, digest, err, last)
	}
	return got
}

// TestTriesSameOnBothNodes checks, without a cluster, that the ready
// block gives the same commands on a real node as on the simulated one
// (the docs have one session for both), only what it says of them
// differs, and that the sessions set the image in $ROLLPLAN_REGISTRY.
func TestTriesSameOnBothNodes(t *testing.T) {
	base := options{dir: "bin/dev-cluster", rollplan: "bin/rollplan", namespace: "demo"}
	commands := map[string][]string{}
	says := map[string][]string{}
	for _, tc := range []struct {
		name string
		node *node.Node
	}{{nodeSimulated, nil}, {nodeReal, &node.Node{}}} {
		c := &cluster{opts: base, cp: &controlplane.ControlPlane{BinDir: "test/cluster/bin/v1.37"}, node: tc.node}
		for _, try := range c.tries() {
			commands[tc.name] = append(commands[tc.name], try.commands...)
			says[tc.name] = append(says[tc.name], try.says...)
		}
	}
	if !slices.Equal(commands[nodeSimulated], commands[nodeReal]) {
		t.Errorf("commands differ:\nsimulated %q\nreal      %q", commands[nodeSimulated], commands[nodeReal])
	}
	if slices.Equal(says[nodeSimulated], says[nodeReal]) {
		t.Errorf("the real node's steps say what the simulated ones say, yet its controller rolls web by itself: %q", says[nodeReal])
	}
	if !slices.ContainsFunc(commands[nodeReal], func(c string) bool { return strings.HasSuffix(c, "app=$"+registryEnv+"/testapp:2.0") }) {
		t.Errorf("no command sets web's image in $%s: %q", registryEnv, commands[nodeReal])
	}
}
