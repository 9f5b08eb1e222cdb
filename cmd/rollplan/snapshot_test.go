package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// fakeCluster makes rollplan snapshot read a fake clientset holding the
// objects of snapshot files, in namespace "default", at a fixed time.
func fakeCluster(t *testing.T, now time.Time, files ...string) *fake.Clientset {
	t.Helper()
	s, _, err := snapshot.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, o := range s.Deployments {
		objs = append(objs, o)
	}
	for _, o := range s.ReplicaSets {
		objs = append(objs, o)
	}
	for _, o := range s.StatefulSets {
		objs = append(objs, o)
	}
	for _, o := range s.DaemonSets {
		objs = append(objs, o)
	}
	for _, o := range s.ControllerRevisions {
		objs = append(objs, o)
	}
	for _, o := range s.Pods {
		objs = append(objs, o)
	}
	for _, o := range s.Nodes {
		objs = append(objs, o)
	}
	for _, o := range s.PDBs {
		objs = append(objs, o)
	}
	client := fake.NewClientset(objs...)
	// What discovery answers, as a v1.37.2 API server would.
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &k8sversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}
	prevConnect, prevClock := connectCluster, captureClock
	t.Cleanup(func() { connectCluster, captureClock = prevConnect, prevClock })
	connectCluster = func(k *kubeFlags) (*cluster, error) {
		ns := k.overrides.Context.Namespace
		if ns == "" {
			ns = "default"
		}
		return &cluster{client: client, namespace: ns, source: `context "test"`}, nil
	}
	captureClock = func() time.Time { return now }
	return client
}

var digestLine = regexp.MustCompile(`(?m)^(\s*"?snapshotDigest"?:).*$`)

// A snapshot captured from a cluster holding a scenario's objects plans
// exactly as the scenario's file does: same waves, same reasons, same
// budgets; only the snapshot digest differs (env values are redacted,
// metadata noise is gone).
func TestSnapshotRoundTrip(t *testing.T) {
	dirs, err := filepath.Glob("testdata/scenarios/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	tmp := t.TempDir()
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			fixture := filepath.Join(dir, "snapshot.yaml")
			fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), fixture)
			captured := filepath.Join(tmp, filepath.Base(dir)+".yaml")
			out, stderr, err := run(t, "snapshot", "-A", "--output-file", captured)
			if err != nil {
				t.Fatalf("snapshot: %v\n%s", err, stderr)
			}
			if out != "" || !strings.HasPrefix(stderr, "captured ") || !strings.HasSuffix(stderr, ` from context "test" into `+captured+"\n") {
				t.Errorf("stdout %q, stderr %q", out, stderr)
			}
			args := scenarioArgs(t, dir)
			want, _ := runScenario(t, dir, append([]string{"plan", "-o", "yaml", "-f", fixture}, args...)...)
			got, stderr := runScenario(t, dir, append([]string{"plan", "-o", "yaml", "-f", captured}, args...)...)
			if strings.Contains(stderr, "warning") {
				t.Errorf("plan of the captured snapshot warns: %s", stderr)
			}
			want, got = digestLine.ReplaceAllString(want, "$1 X"), digestLine.ReplaceAllString(got, "$1 X")
			want = renameComputedRevisions(t, fixture, want, got)
			want, got = drainListed(want), drainListed(got)
			if got != want {
				t.Errorf("the captured snapshot plans differently:\n%s", diff(want, got))
			}
		})
	}
}

var toRevision = regexp.MustCompile(`(?m)^\s*toRevision: (\S+)$`)

// renameComputedRevisions accepts the one known difference of a captured
// snapshot: where the update revision is not in the snapshot (the
// controller has not written it yet, or the Deployment is paused), the
// planner names it by hashing the pod template, and the template's env
// values are redacted. Such a name may differ; nothing else may.
func renameComputedRevisions(t *testing.T, fixture, want, got string) string {
	t.Helper()
	s, _, err := snapshot.LoadFiles([]string{fixture})
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, o := range s.ReplicaSets {
		written[o.Name] = true
	}
	for _, o := range s.ControllerRevisions {
		written[o.Name] = true
	}
	w, g := toRevision.FindAllStringSubmatch(want, -1), toRevision.FindAllStringSubmatch(got, -1)
	if len(w) != len(g) {
		return want
	}
	for i := range w {
		if from, to := w[i][1], g[i][1]; from != to && !written[from] {
			t.Logf("update revision %s is computed from the redacted template: %s", from, to)
			want = strings.ReplaceAll(want, from, to)
		}
	}
	return want
}

// drainPods and drainHolds: a capture holds the workload's pods and those
// its PDBs select, not every pod of a node, so a DrainNode may list fewer
// pods than the scenario's file (its reason says so). Nothing else of the
// plan may differ.
var (
	drainPods  = regexp.MustCompile(`(?m)^(\s+)pods:\n(\s+- [^\s/]+/\S+\n)+`)
	drainHolds = regexp.MustCompile(`the snapshot holds [^,;]*, but`)
)

func drainListed(plan string) string {
	return drainHolds.ReplaceAllString(drainPods.ReplaceAllString(plan, ""), "the snapshot holds X, but")
}

// The capture time is the snapshot time of plan; capturing twice gives
// the same bytes.
func TestSnapshotCaptureTime(t *testing.T) {
	fixture := "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"
	at := time.Date(2026, 3, 1, 12, 34, 56, 0, time.UTC)
	fakeCluster(t, at, fixture)
	first, stderr, err := run(t, "snapshot")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "captured 1 workload, 10 pods, 3 nodes, 0 PDBs from context \"test\"\n"; stderr != want {
		t.Errorf("summary %q, want %q", stderr, want)
	}
	again, _, err := run(t, "snapshot", "-n", "default")
	if err != nil || again != first {
		t.Errorf("a second capture differs (%v):\n%s", err, diff(first, again))
	}
	f := filepath.Join(t.TempDir(), "snap.yaml")
	if err := os.WriteFile(f, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "plan", "-o", "json", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"now": "2026-03-01T12:34:56Z"`) {
		t.Errorf("plan does not take the capture time as its snapshot time:\n%.600s", out)
	}
	js, _, err := run(t, "snapshot", "-o", "json", "deploy/api")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(js, "{\n") || !strings.Contains(js, `"`+snapshot.AnnCapturedAt+`": "2026-03-01T12:34:56Z"`) {
		t.Errorf("json output:\n%.400s", js)
	}
}

func TestSnapshotErrors(t *testing.T) {
	fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml")
	usage := [][]string{
		{"snapshot", "job/x"},
		{"snapshot", "web"},
		{"snapshot", "-A", "deploy/api"},
		{"snapshot", "-l", "app=api", "deploy/api"},
		{"snapshot", "-l", "app in (x"},
		{"snapshot", "-o", "table"},
		{"snapshot", "--no-such-flag"},
	}
	for _, args := range usage {
		_, _, err := run(t, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("rollplan %s: want a usage error (exit 2), got %v", strings.Join(args, " "), err)
		}
	}
	failures := []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "-n", "prod", "deploy/api"}, `deployment "api" not found in namespace "prod"`},
		{[]string{"snapshot", "sts/api"}, `statefulset "api" not found in namespace "default"`},
		{[]string{"snapshot", "-n", "prod"}, `no Deployment, StatefulSet or DaemonSet found in namespace "prod"`},
		{[]string{"snapshot", "-l", "app=nope"}, `no Deployment, StatefulSet or DaemonSet found in namespace "default" matching selector "app=nope"`},
	}
	for _, f := range failures {
		out, _, err := run(t, f.args...)
		var u usageError
		if err == nil || errors.As(err, &u) || err.Error() != f.want {
			t.Errorf("rollplan %s: got %v, want the error %q (exit 1)", strings.Join(f.args, " "), err, f.want)
		}
		if out != "" {
			t.Errorf("rollplan %s wrote to stdout on failure: %q", strings.Join(f.args, " "), out)
		}
	}
	// A failed capture leaves --output-file as it was.
	f := filepath.Join(t.TempDir(), "snap.yaml")
	if err := os.WriteFile(f, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "snapshot", "deploy/nope", "--output-file", f); err == nil {
		t.Fatal("want an error")
	}
	if b, _ := os.ReadFile(f); string(b) != "previous" {
		t.Errorf("the output file was changed: %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Dir(f)); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// An --output-file that cannot be written is one line naming the path as
// given (never the temporary file beside it), exit 1, before any capture.
func TestSnapshotOutputFileErrors(t *testing.T) {
	fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml")
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent", "dir")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(missing, "x.yaml"), "--output-file " + filepath.Join(missing, "x.yaml") + ": directory " + missing + " does not exist: create it or pass a file in an existing directory"},
		{filepath.Join(file, "x.yaml"), "--output-file " + filepath.Join(file, "x.yaml") + ": " + file + " is not a directory: pass a file in an existing directory"},
		{dir, "--output-file " + dir + ": is a directory: pass a file name"},
	} {
		out, line, code := execute(t, "snapshot", "--output-file", c.path)
		if code != exitError || line != "error: "+c.want || out != "" {
			t.Errorf("snapshot --output-file %s: exit %d, %q, stdout %q; want exit %d, %q", c.path, code, line, out, exitError, "error: "+c.want)
		}
	}
	// The write itself (the directory gone after the check) names the path too.
	path := filepath.Join(missing, "x.yaml")
	err := writeFileAtomic(path, []byte("x"))
	if want := "--output-file " + path + ": directory " + missing + " does not exist: create it or pass a file in an existing directory"; err == nil || err.Error() != want {
		t.Errorf("writeFileAtomic: %v, want %q", err, want)
	}
}
