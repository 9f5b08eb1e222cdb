package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/history"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// The way out of a bad rollout: a managed workload gets an image that
// crash-loops, rollplan apply halts with the first wave broken, and then
// either rollplan undo or a fixed image must finish, though the broken pods
// use up the unavailability budget their own replacement needs. A pod that
// is unavailable and not at the update revision is replaced whatever the
// budget (upstream's DaemonSet rule), in place where the policy allows.

const (
	goodImage  = "example.com/app:v1"
	badImage   = "example.com/app:bad"
	fixedImage = "example.com/app:v3"
)

// breakRollout sets the crash-looping image on the workload (set), runs
// the executor until it halts and returns the pods on the bad image.
func (e *env) breakRollout(kind, name, sel string, set func(func(*corev1.PodSpec))) []string {
	e.t.Helper()
	e.kubelet.SetImage(badImage, kubelet.Behavior{CrashLoop: true, CrashInterval: 200 * time.Millisecond})
	set(func(s *corev1.PodSpec) { s.Containers[0].Image = badImage })
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	_, err := e.executorFor(kind, name, nil, &log, false).Run(ctx, false)
	var h *executor.HaltedError
	if !errors.As(err, &h) {
		e.t.Fatalf("%s %s with a crash-looping image: %v, want a HaltedError\n%s", kind, name, err, log.String())
	}
	var broken []string
	for p, img := range e.podImages(sel) {
		if img == badImage {
			broken = append(broken, p)
		}
	}
	if len(broken) == 0 {
		e.t.Fatalf("%s %s halted with no pod on %s\n%s", kind, name, badImage, log.String())
	}
	e.t.Logf("halted (%s) with %d pod(s) on the broken image: %v", strings.Join(h.Reasons, "; "), len(broken), broken)
	return broken
}

// recover runs the executor to the end, as rollplan apply and undo do,
// and checks every pod runs want, with the UIDs of before when in place.
func (e *env) recover(kind, name, sel, want string, before map[string]types.UID, inPlace bool) {
	e.t.Helper()
	var log bytes.Buffer
	sum := run(e.t, e.executorFor(kind, name, nil, &log, false), e.ctx, &log)
	if !sum.Last.Done {
		e.t.Fatalf("%s %s: the executor returned before the rollout was done\n%s", kind, name, log.String())
	}
	got := e.pods(sel)
	if len(got) != len(before) {
		e.t.Errorf("%s %s: %d pods after the recovery, want %d", kind, name, len(got), len(before))
	}
	for _, p := range got {
		if img := p.Spec.Containers[0].Image; img != want {
			e.t.Errorf("pod %s: image %s after the recovery, want %s", p.Name, img, want)
		}
		if inPlace && before[p.Name] != p.UID {
			e.t.Errorf("pod %s was recreated (uid %s, was %s): the recovery is an image change, in place", p.Name, p.UID, before[p.Name])
		}
	}
}

// captureDir: with -e2e.capture DIR, the state right after the undo is
// written as a golden scenario (snapshot.yaml, args, README.md) into
// DIR/captured-<sts|ds|deploy-inplace>-broken-rolled-back: how
// testdata/scenarios/captured-*-broken-rolled-back were made.
var captureDir = flag.String("e2e.capture", "", "write the state after each undo as a golden scenario into this directory")

// captureUndone writes the snapshot of the workload after its undo as a
// golden scenario (see captureDir).
func (e *env) captureUndone(kind, name string) {
	e.t.Helper()
	if *captureDir == "" {
		return
	}
	snap, _, err := capture.Capture(e.ctx, e.client, capture.Options{Namespace: e.ns, Workloads: []capture.Ref{{Kind: kind, Name: name}}})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := capture.Marshal(snap, capture.FormatYAML)
	if err != nil {
		e.t.Fatal(err)
	}
	scenario := "captured-" + map[string]string{"StatefulSet": "sts", "DaemonSet": "ds", "Deployment": "deploy-inplace"}[kind] + "-broken-rolled-back"
	dir := filepath.Join(*captureDir, scenario)
	readme := fmt.Sprintf("# %s\n\nCaptured with `rollplan snapshot` from the test control plane (test/e2e %s, Kubernetes %s):\n"+
		"a managed %s got an image that crash-loops (%s), `rollplan apply` halted with the first wave broken, and\n"+
		"`rollplan undo` rolled its template back to %s. The broken pods are unavailable and use up the\n"+
		"budget, yet they are replaced first, in place, whatever the budget: their rollback costs no availability.\n",
		scenario, e.t.Name(), harness.Cluster(e.t).ServerVersion, kind, badImage, goodImage)
	args := fmt.Sprintf("--now %s --kubernetes-version %s\n", snap.CapturedAt.UTC().Format(time.RFC3339), harness.Cluster(e.t).Version)
	for file, content := range map[string][]byte{"snapshot.yaml": raw, "args": []byte(args), "README.md": []byte(readme)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}

// undo rolls the workload's template back to the previous revision, as
// rollplan undo does before it drives the rollout.
func (e *env) undo(kind, name string) {
	e.t.Helper()
	target := live.Target{Namespace: e.ns, Kind: kind, Name: name}
	revs, err := history.List(e.ctx, e.client, target)
	if err != nil {
		e.t.Fatal(err)
	}
	rev, err := history.Find(revs, target, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	if img := rev.Template.Spec.Containers[0].Image; img != goodImage {
		e.t.Fatalf("undo of %s %s would go to image %s, want %s", kind, name, img, goodImage)
	}
	if changed, err := history.Rollback(e.ctx, e.client, target, rev, false); err != nil || !changed {
		e.t.Fatalf("rollback %s %s: changed %t, %v", kind, name, changed, err)
	}
	e.captureUndone(kind, name)
}

// rollbackBoth runs the two ways out for one kind: undo, and a fixed
// image. create makes the workload and waits until it is rolled out; set
// changes its template.
func rollbackBoth(t *testing.T, nodes int, kind, name string, create func(e *env), set func(e *env, c func(*corev1.PodSpec))) {
	for _, tc := range []struct {
		name string
		undo bool
	}{{"undo", true}, {"fixed-image", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nodes)
			sel := "app=" + name
			create(e)
			before := uids(e.pods(sel))
			e.breakRollout(kind, name, sel, func(c func(*corev1.PodSpec)) { set(e, c) })
			want := fixedImage
			if tc.undo {
				e.undo(kind, name)
				want = goodImage
			} else {
				set(e, func(s *corev1.PodSpec) { s.Containers[0].Image = fixedImage })
			}
			e.recover(kind, name, sel, want, before, true)
		})
	}
}

func TestRollbackStatefulSet(t *testing.T) {
	rollbackBoth(t, 3, "StatefulSet", "web", func(e *env) {
		if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, statefulSet(e.ns, "web", 6, "2"), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.waitSettled("web", 6)
	}, func(e *env, c func(*corev1.PodSpec)) { e.setTemplate("web", c) })
}

// TestRollbackStatefulSetCLI: the operator's way, with the rollplan
// binary: apply halts (exit 3), undo completes (exit 0), in place.
func TestRollbackStatefulSetCLI(t *testing.T) {
	e := newEnv(t, 3)
	const name, replicas = "web", 6
	sel := "app=" + name
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, statefulSet(e.ns, name, replicas, "2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitSettled(name, replicas)
	before := uids(e.pods(sel))
	e.kubelet.SetImage(badImage, kubelet.Behavior{CrashLoop: true, CrashInterval: 200 * time.Millisecond})
	e.setTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = badImage })
	out := e.cli(3, "apply", "statefulset/"+name, "--timeout", "2m")
	if !strings.Contains(out, "crash-looping") {
		t.Errorf("rollplan apply halted without naming the crash loop:\n%s", out)
	}
	out = e.cli(0, "undo", "statefulset/"+name, "--timeout", "90s")
	t.Logf("rollplan undo:\n%s", out)
	for _, p := range e.pods(sel) {
		if img := p.Spec.Containers[0].Image; img != goodImage || before[p.Name] != p.UID {
			t.Errorf("pod %s after undo: image %s, uid %s (was %s); want %s in place", p.Name, img, p.UID, before[p.Name], goodImage)
		}
	}
}

func TestRollbackDaemonSet(t *testing.T) {
	rollbackBoth(t, 4, "DaemonSet", "agent", func(e *env) {
		if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, daemonSet(e.ns, "agent", goodImage), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.waitDaemonSet("agent", 4, false)
	}, func(e *env, c func(*corev1.PodSpec)) { e.setDaemonSetTemplate("agent", c) })
}

func TestRollbackDeployment(t *testing.T) {
	rollbackBoth(t, 3, "Deployment", "api", func(e *env) {
		e.createDeployment(managedDeployment(e.ns, "api", 6, "2"))
	}, func(e *env, c func(*corev1.PodSpec)) { e.setDeploymentTemplate("api", c) })
}
