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
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/prometheus"
)

// Docs markers: each is the line right before a fenced block of the
// section "Try it on a cluster", of "Out of a broken rollout", or of "A
// bad version rolls back by itself".
const (
	markOutput   = "<!-- dev-cluster: output -->"   // what make dev-cluster prints, to the commands
	markSession  = "<!-- dev-cluster: session -->"  // the commands in order, with their output as comments
	markStop     = "<!-- dev-cluster: stop -->"     // what Ctrl-C prints
	markBroken   = "<!-- dev-cluster: broken -->"   // a broken rollout, after the session: its commands, as the session's
	markAnalysis = "<!-- dev-cluster: analysis -->" // a bad version an analysis rolls back, after the broken rollout
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

// analysisRun is what the analysis session's checks keep for the test:
// the output of apply under the bad version.
type analysisRun struct {
	badApply string
}

// The analysis session's images: web's before it, the bad version (its
// tag answers errors) and the fixed one.
const (
	analysisFrom  = simRegistry + "/testapp:2.0"
	analysisBad   = simRegistry + "/testapp:errors"
	analysisFixed = simRegistry + "/testapp:3.0"
)

// analysisChecks are docs/rollouts.md "A bad version rolls back by
// itself"'s commands, run in root after the broken rollout: the copied
// example's times shortened and its tests passing; under it, the bad
// version fails its first gate, naming the query and the value, and is
// rolled back in place (every pod on its image again, Ready); the fixed
// version passes both gates under the CEL twin.
func analysisChecks(root string, run *analysisRun) []check {
	badQuery := `query sum(rate(http_requests_total{namespace=\"demo\",pod=~\"web-4|web-5\",code=~\"5..\"}[5s])) / sum(rate(http_requests_total{namespace=\"demo\",pod=~\"web-4|web-5\"}[5s]))`
	return []check{
		{match: "cp -r policies/examples/analysis-error-rate "},
		{match: "sed -i ", also: func(t *testing.T, _ string) {
			for file, want := range map[string][]string{
				"policy.rego":      {`"soak": "5s"`, `"interval": "2s"`, `"window": "5s"`},
				"policy.yaml":      {"soak: 5s", "interval: 2s", "window: 5s"},
				"policy_test.yaml": {"soak: 5s", "[5s]"},
			} {
				b, err := os.ReadFile(filepath.Join(root, "bin/dev-cluster/my-analysis", file))
				if err != nil {
					t.Error(err)
					continue
				}
				for _, w := range want {
					if !strings.Contains(string(b), w) {
						t.Errorf("my-analysis/%s after the sed lacks %q", file, w)
					}
				}
				if old := regexp.MustCompile(`\b(2m|1m|30s)\b`).FindString(string(b)); old != "" {
					t.Errorf("my-analysis/%s after the sed still holds %q", file, old)
				}
			}
		}},
		{match: "rollplan test bin/dev-cluster/my-analysis", output: []string{" passed, 0 failed"}},
		{match: " set image sts/web app=$ROLLPLAN_REGISTRY/testapp:errors", output: []string{
			"Warning: rollplan: will update 6 pods in 3 waves: 6 in place",
			"statefulset.apps/web image updated",
		}},
		{match: "rollplan apply -n demo sts/web --policy bin/dev-cluster/my-analysis --analysis-config ", exit: 3, output: []string{
			`msg=analysis workload="StatefulSet demo/web" wave=1 pods=web-4,web-5 gate="soak 5s, 2 measurement(s)"`,
			`msg=soak workload="StatefulSet demo/web" wave=1 soak=5s`,
			`wave=1 attempt=1 verdict=fail message="error-rate = 0.`,
			", above 0.01 (" + badQuery + ")",
			`msg=rollback workload="StatefulSet demo/web" wave=1`,
			"StatefulSet demo/web: rolled back: 4 InPlaceUpdate",
			"6/6 pods updated, 6 available, 0 held, 0 in flight",
			"error: StatefulSet demo/web: rolled back to web-",
			") is refused until the template changes again or `rollplan resume sts/web -n demo`",
		}, also: func(t *testing.T, out string) {
			run.badApply = out
			if strings.Contains(out, "verdict=pass") {
				t.Errorf("apply under the bad version: a gate passed")
			}
			// The measured error rate: half the requests answered 500.
			m := regexp.MustCompile(`verdict=fail message="error-rate = ([0-9.]+),`).FindStringSubmatch(out)
			if m == nil {
				t.Fatal("apply under the bad version: no failing verdict with a value")
			}
			if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < 0.45 || v > 0.55 {
				t.Errorf("apply under the bad version: error-rate %s, want 0.5 ± 0.05", m[1])
			}
			// Only the first wave's pods ever ran it.
			for _, l := range regexp.MustCompile(`msg=InPlaceUpdate .* pod=(web-[0-9])`).FindAllStringSubmatch(out, -1) {
				if l[1] != "web-4" && l[1] != "web-5" {
					t.Errorf("apply under the bad version updated %s, beyond the first wave (web-4, web-5)", l[1])
				}
			}
		}},
		{match: "rollplan status -n demo sts/web", exit: 3, output: []string{
			"StatefulSet demo/web: rolled back to web-",
			" failed its analysis",
			"after wave 1: analysis after wave 1 failed: error-rate = 0.",
		}, also: func(t *testing.T, out string) {
			if !regexp.MustCompile(`(?m)^Analysis: +rolled back from web-[0-9a-f]+ after wave 1`).MatchString(out) {
				t.Errorf("status: no line Analysis: rolled back from ... after wave 1")
			}
		}},
		{match: " get pods -l app=web ", also: func(t *testing.T, out string) {
			back := regexp.MustCompile(`(?m)^web-[0-5] +`+regexp.QuoteMeta(analysisFrom)+` +true$`).FindAllString(out, -1)
			if len(back) != 6 {
				t.Errorf("kubectl get pods: %d of web's pods Ready on %s, want 6", len(back), analysisFrom)
			}
		}},
		{match: " set image sts/web app=$ROLLPLAN_REGISTRY/testapp:3.0", output: []string{
			"Warning: rollplan: will update 6 pods in 3 waves: 6 in place",
			"statefulset.apps/web image updated",
		}},
		{match: "rollplan apply -n demo sts/web --policy bin/dev-cluster/my-analysis/policy.yaml --analysis-config ", output: []string{
			`wave=1 attempt=1 verdict=pass message="error-rate at most 0, limit 0.01; latency-p99 at most 0.0`,
			"StatefulSet demo/web: done: 6 InPlaceUpdate",
			"6/6 pods updated, 6 available, 0 held, 0 in flight",
		}, also: func(t *testing.T, out string) {
			verdicts := regexp.MustCompile(`wave=([0-9]) attempt=[0-9]+ verdict=([a-z]+)`).FindAllStringSubmatch(out, -1)
			var got []string
			for _, v := range verdicts {
				got = append(got, v[2]+":"+v[1])
			}
			if strings.Join(got, " ") != "pass:1 pass:2" {
				t.Errorf("apply under the fixed version: verdicts %v, want a pass after waves 1 and 2", got)
			}
		}},
	}
}

// TestDevClusterSession is docs/dev-cluster.md, run: it builds
// bin/rollplan and the dev cluster into a folder laid out like a checkout
// (test/cluster/bin links to $ROLLPLAN_CLUSTER_BIN), starts it as `make
// dev-cluster` does, compares what it prints with the docs, runs the
// docs' commands in order from that folder and checks each, then those
// of "Out of a broken rollout" (after its undo, web's same pods on their
// image again) and "A bad version rolls back by itself" (a pod watch
// checks the budget and times the rollback), then sends SIGINT and checks that every process it started
// has exited and every port they listened on is free.
func TestDevClusterSession(t *testing.T) {
	versionDir, err := controlplane.VersionDir(harness.Version)
	if err != nil {
		t.Skip(err)
	}
	// The docs' output has Prometheus's lines, and their last session
	// needs it.
	prometheus.Binary(t, "prometheus")
	wantOutput, session, wantStop := docBlock(t, markOutput), docBlock(t, markSession), docBlock(t, markStop)
	broken := commandLines(docBlock(t, markBroken))
	analysisSession := commandLines(docBlock(t, markAnalysis))

	// About two minutes on 2 cores: the build (links two binaries), the
	// sessions, the analysis one's gates (soaks and measurements) 40 s of
	// it; the bound leaves room for a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "rollplan gate", "prometheus"} {
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
		if !t.Failed() {
			runAnalysisSession(ctx, t, root, client, analysisSession, after)
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
	checkStateGone(t, root, "gate", "analysis.yaml", "prometheus")
}

// runAnalysisSession runs "A bad version rolls back by itself" with a
// watch on web's pods beside it: never more than the budget (2)
// unavailable at once, and the time from the failing verdict (apply's
// log) to every pod Ready on the old image again (the watch). Then the
// fixed version: the same pods (uids) throughout, all in place.
func runAnalysisSession(ctx context.Context, t *testing.T, root string, client kubernetes.Interface, commands []string, uids map[string]types.UID) {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	w := watchWeb(wctx, t, client)
	var run analysisRun
	start := time.Now()
	runSession(ctx, t, root, commands, analysisChecks(root, &run))
	stop()
	<-w.done
	t.Logf("the analysis session took %s", time.Since(start).Round(100*time.Millisecond))
	if n := w.maxUnavailable(); n > 2 {
		t.Errorf("web had %d pods unavailable at once during the analysis session, the budget is 2", n)
	}
	m := regexp.MustCompile(`time=(\S+) level=INFO msg=analysis workload="StatefulSet demo/web" wave=1 attempt=1 verdict=fail`).FindStringSubmatch(run.badApply)
	if m != nil {
		failed, err := time.Parse(time.RFC3339Nano, m[1])
		back := w.allReadyOn(analysisFrom, failed)
		switch {
		case err != nil:
			t.Errorf("the failing verdict's time %q: %v", m[1], err)
		case back.IsZero():
			t.Errorf("the watch never saw web's six pods Ready on %s after the failing verdict (%s)", analysisFrom, failed)
		default:
			t.Logf("from the failing verdict (%s) to web's six pods Ready on %s again: %s; at most %d unavailable at once",
				failed.Format(time.RFC3339Nano), analysisFrom, back.Sub(failed).Round(time.Millisecond), w.maxUnavailable())
		}
	}
	final := webPods(ctx, t, client, analysisFixed)
	for name, uid := range uids {
		if final[name] != uid {
			t.Errorf("pod %s after the analysis session: uid %s, was %s: rollback and rollout are in place", name, final[name], uid)
		}
	}
}

// webWatch follows web's pods from a watch: how many were unavailable at
// most at once, and when all six turned Ready on one image.
type webWatch struct {
	done chan struct{}

	mu   sync.Mutex
	pods map[string]webPodState
	max  int
	// turned: when all six were Ready on an image, each time they turned so.
	turned []imageAt
	allOn  string
}

type webPodState struct {
	image string
	ready bool
}

type imageAt struct {
	image string
	at    time.Time
}

// watchWeb starts the watch; it ends with ctx (done closes).
func watchWeb(ctx context.Context, t *testing.T, client kubernetes.Interface) *webWatch {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: "app=web"}
	list, err := client.CoreV1().Pods("demo").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	w := &webWatch{done: make(chan struct{}), pods: map[string]webPodState{}}
	for i := range list.Items {
		w.pods[list.Items[i].Name] = webPod(&list.Items[i])
	}
	// Counted once the list is whole: a pod not seen yet is not missing.
	w.max = w.unavailable()
	w.allOn = w.allReadyImage()
	sel.ResourceVersion = list.ResourceVersion
	watcher, err := client.CoreV1().Pods("demo").Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				w.observe(p, ev.Type == watch.Deleted)
			}
		}
	}()
	return w
}

func (w *webWatch) observe(p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.pods, p.Name)
	} else {
		w.pods[p.Name] = webPod(p)
	}
	w.max = max(w.max, w.unavailable())
	img := w.allReadyImage()
	if img != "" && img != w.allOn {
		w.turned = append(w.turned, imageAt{img, time.Now()})
	}
	w.allOn = img
}

func webPod(p *corev1.Pod) webPodState {
	c := condition(p, corev1.PodReady)
	ready := p.DeletionTimestamp == nil && c != nil && c.Status == corev1.ConditionTrue
	return webPodState{image: p.Spec.Containers[0].Image, ready: ready}
}

// unavailable: web's pods not Ready, a missing one included.
func (w *webWatch) unavailable() int {
	ready := 0
	for _, s := range w.pods {
		if s.ready {
			ready++
		}
	}
	return 6 - ready
}

// allReadyImage: the image all six pods are Ready on, "" when they are not.
func (w *webWatch) allReadyImage() string {
	img := ""
	if len(w.pods) != 6 {
		return ""
	}
	for _, s := range w.pods {
		if !s.ready || (img != "" && s.image != img) {
			return ""
		}
		img = s.image
	}
	return img
}

func (w *webWatch) maxUnavailable() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

// allReadyOn: the first time after since all six turned Ready on image.
func (w *webWatch) allReadyOn(image string, since time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.turned {
		if t.image == image && t.at.After(since) {
			return t.at
		}
	}
	return time.Time{}
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
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
	// The example policies, and the scenarios their tests plan (linked
	// already where the whole checkout is: linkSources).
	for _, dir := range []string{"policies", "testdata"} {
		abs, err := filepath.Abs(filepath.Join("../..", dir))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(root, dir)); err == nil {
			continue
		}
		if err := os.Symlink(abs, filepath.Join(root, dir)); err != nil {
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

	// "A bad version rolls back by itself": each command with its check,
	// the bad image one the dev cluster's exporters answer errors for, the
	// fixed one not.
	analysisSession := commandLines(docBlock(t, markAnalysis))
	aChecks := analysisChecks("", &analysisRun{})
	if len(analysisSession) != len(aChecks)+len(exports) || strings.Join(analysisSession[:min(len(exports), len(analysisSession))], "\n") != strings.Join(exports, "\n") {
		t.Errorf("docs analysis session: commands %q, want the session's exports %q and %d checked ones", analysisSession, exports, len(aChecks))
	}
	errorRatio := map[string]float64{}
	for _, line := range analysisSession[min(len(exports), len(analysisSession)):] {
		n := 0
		for _, c := range aChecks {
			if strings.Contains(line, c.match) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("docs analysis command %q matches %d checks, want 1", line, n)
		}
		if _, image, ok := strings.Cut(line, " set image sts/web app=$"+registryEnv+"/"); ok {
			b := kubeletImages().Default
			if tb, ok := kubeletImages().Tags[image[strings.LastIndex(image, ":")+1:]]; ok {
				b = tb
			}
			errorRatio[simRegistry+"/"+image] = b.ErrorRatio
		}
	}
	if r, ok := errorRatio[analysisBad]; !ok || r < 0.1 {
		t.Errorf("docs analysis session: sets %v (error ratios), want %s answering errors", errorRatio, analysisBad)
	}
	if r, ok := errorRatio[analysisFixed]; !ok || r != 0 {
		t.Errorf("docs analysis session: sets %v (error ratios), want %s answering none", errorRatio, analysisFixed)
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
