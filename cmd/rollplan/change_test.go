package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/change"
)

// The -o markdown goldens: testdata/markdown/NAME.md is the plan of the
// scenario NAME (its args, --change or not) as a pull-request comment
// (go test ./cmd/rollplan -run TestMarkdownGolden -update rewrites them).
func TestMarkdownGolden(t *testing.T) {
	for _, name := range []string{"change-sts-inplace", "change-deploy-image", "change-sts-freeze-denied", "example-one-zone-at-a-time"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata/scenarios", name)
			args := append([]string{"plan", "-o", "markdown", "-f", filepath.Join(dir, "snapshot.yaml")}, scenarioArgs(t, dir)...)
			out, _ := runScenario(t, dir, args...)
			checkGolden(t, filepath.Join("testdata/markdown", name+".md"), out, "TestMarkdownGolden")
		})
	}
}

// A change the guard rails deny exits 3 even when the rollout itself is
// neither halted nor stalled, and --allow-halted does not let it pass.
func TestChangeDeniedExits3(t *testing.T) {
	snap := "testdata/scenarios/change-deploy-image/snapshot.yaml"
	base := []string{"plan", "-f", snap, "--now", "2026-03-01T12:00:00Z", "--policy", "policies/examples/guard-critical", "--change", "testdata/change/guard-critical"}
	for _, extra := range [][]string{nil, {"--allow-halted"}} {
		out, _, err := run(t, append(base, extra...)...)
		if got := exitCode(err); got != exitHalted {
			t.Fatalf("%v: exit %d (%v), want %d", extra, got, err, exitHalted)
		}
		if !strings.Contains(err.Error(), "denied: Deployment default/api: tier=critical allows at most 25% of pods unavailable") {
			t.Errorf("error %q does not name the workload and the guard rail", err)
		}
		if !strings.Contains(out, "DENIED by policy") || !strings.Contains(out, "WAVE") {
			t.Errorf("the plan does not show the denial and the waves it would have:\n%s", out)
		}
	}
	// The same snapshot without the change: nothing is denied, exit 0.
	if _, _, err := run(t, "plan", "-f", snap, "--now", "2026-03-01T12:00:00Z", "--policy", "policies/examples/guard-critical"); err != nil {
		t.Errorf("plan without the change: %v, want exit 0", err)
	}
}

// What a change cannot preview is said plainly, naming the object; bad
// manifests and contradictory flags fail with the exit code scripts expect.
func TestChangeInputs(t *testing.T) {
	tmp := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	snap := "testdata/scenarios/change-sts-inplace/snapshot.yaml"
	now := "--now=2026-03-01T12:00:00Z"
	newDeploy := write("new.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: brand-new}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: x, image: x:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: brand-new}
`)
	same := write("same.yaml", `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, annotations: {rollplan.dev/managed: "true", rollplan.dev/pod-update-policy: InPlaceIfPossible}}
spec:
  replicas: 4
  serviceName: web
  selector: {matchLabels: {app: web}}
  updateStrategy: {type: OnDelete}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1.0
        resources: {requests: {cpu: 100m, memory: 128Mi}}
`)
	typo := write("typo.yaml", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\nspec: {replicass: 3}\n")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		inOut   []string // in stdout and stderr together
		inError string
	}{
		{"new workload and another kind", []string{"-f", snap, now, "--change", newDeploy, "-o", "json", "--allow-empty"}, exitOK,
			[]string{"Deployment default/brand-new (" + newDeploy + ": document 1) is not in the snapshot: the change creates it, and nothing rolls out", "Service brand-new (v1) left out of the preview", `"workloads": []`}, ""},
		{"unchanged", []string{"-f", snap, now, "--change", same, "--allow-empty"}, exitOK,
			[]string{"StatefulSet default/web (" + same + ": document 1) proposes the spec the workload already has: nothing changes", "nothing to plan"}, ""},
		{"-n is the manifests' namespace", []string{"-f", snap, now, "--change", same, "-n", "prod", "--allow-empty"}, exitOK,
			[]string{"StatefulSet prod/web"}, ""},
		{"new workload, not allowed", []string{"-f", snap, now, "--change", newDeploy}, exitError, nil, "--change plans nothing: Deployment default/brand-new is not in the snapshot"},
		{"unchanged, not allowed", []string{"-f", snap, now, "--change", same}, exitError, nil, "--change plans nothing: StatefulSet default/web proposes the spec it has"},
		{"unknown field", []string{"-f", snap, now, "--change", typo}, exitError, nil, `StatefulSet default/web: unknown field "spec.replicass"`},
		{"missing change", []string{"-f", snap, now, "--change", filepath.Join(tmp, "nope")}, exitError, nil, "no such file or directory"},
		{"-f and --kubeconfig", []string{"-f", snap, "--change", same, "--kubeconfig", "/dev/null"}, exitUsage, nil, "--kubeconfig and -f"},
		{"--context without --change", []string{"-f", snap, "--context", "x"}, exitUsage, nil, "--context and -f"},
		{"--context alone", []string{"--context", "x"}, exitUsage, nil, "no snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := run(t, append([]string{"plan"}, tc.args...)...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tc.code, stderr)
			}
			for _, want := range tc.inOut {
				if !strings.Contains(out+stderr, want) {
					t.Errorf("output lacks %q:\n%s\n%s", want, out, stderr)
				}
			}
			if tc.inError != "" && (err == nil || !strings.Contains(err.Error(), tc.inError)) {
				t.Errorf("error %v, want it to contain %q", err, tc.inError)
			}
		})
	}
}

// Without -f, the change goes to the cluster the kubeconfig flags name:
// the proposed object is what the API answers to the apply, the workload
// it replaces is read from the cluster, and the plan is the one the same
// change previews from a snapshot file. (test/e2e runs it on a real API
// server, whose dry-run stores nothing and whose defaults apply.)
func TestChangeLive(t *testing.T) {
	dir := "testdata/scenarios/change-sts-inplace"
	fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), filepath.Join(dir, "snapshot.yaml"))
	// The fake clientset neither defaults nor honours dryRun: send it the
	// manifest as the API server would default it.
	objs, _, err := change.Read([]string{filepath.Join(dir, "change")}, "default")
	if err != nil {
		t.Fatal(err)
	}
	if err := change.Default(objs[0], nil); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(objs[0].Obj)
	if err != nil {
		t.Fatal(err)
	}
	proposed := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(proposed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36", "-o", "yaml"}
	live, stderr, err := run(t, append([]string{"plan", "--change", proposed, "--context", "test"}, args...)...)
	if err != nil {
		t.Fatalf("live preview: %v\n%s", err, stderr)
	}
	files, _ := runScenario(t, dir, "plan", "-f", filepath.Join(dir, "snapshot.yaml"), "--change", proposed, "-o", "yaml", "--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36")
	if digestLine.ReplaceAllString(live, "$1 X") != digestLine.ReplaceAllString(files, "$1 X") {
		t.Errorf("the live preview plans differently from the preview of the snapshot file:\n%s", diff(files, live))
	}
	for _, want := range []string{"toRevision: web-59c59f4f75", "type: InPlaceUpdate", "previewed from the change in " + proposed} {
		if !strings.Contains(live, want) {
			t.Errorf("live preview lacks %q:\n%s", want, live)
		}
	}
	if strings.Count(live, "type: InPlaceUpdate") != 4 {
		t.Errorf("live preview: want 4 in-place updates:\n%s", live)
	}
}

// explain --change reads -n as plan --change does: the namespace of the
// manifests that name none, from snapshot files and from the live
// cluster alike. It explains the pod, and the wave, that plan --change
// -n plans (the golden of namespace "default", moved to "real").
func TestExplainChangeNamespace(t *testing.T) {
	dir := "testdata/scenarios/change-sts-inplace"
	tmp := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "snapshot.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(tmp, "snapshot.yaml")
	if err := os.WriteFile(snap, []byte(strings.ReplaceAll(string(b), "namespace: default", "namespace: real")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The live cluster's manifest, defaulted as the API server would (the
	// fake clientset does not), and without a namespace: -n gives it.
	objs, _, err := change.Read([]string{filepath.Join(dir, "change")}, "real")
	if err != nil {
		t.Fatal(err)
	}
	if err := change.Default(objs[0], nil); err != nil {
		t.Fatal(err)
	}
	objs[0].Obj.SetNamespace("")
	if b, err = yaml.Marshal(objs[0].Obj); err != nil {
		t.Fatal(err)
	}
	proposed := filepath.Join(tmp, "web.yaml")
	if err := os.WriteFile(proposed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-n", "real", "--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36"}
	for _, mode := range []struct {
		name   string
		source []string
	}{
		{"files", []string{"-f", snap, "--change", filepath.Join(dir, "change")}},
		{"live", []string{"--change", proposed, "--context", "test"}},
	} {
		for _, c := range []struct {
			golden string
			args   []string
		}{
			{"change-sts-web-2.txt", []string{"web-2"}},
			{"change-sts-wave-2.txt", []string{"--wave", "2", "sts/web"}},
		} {
			t.Run(mode.name+"/"+c.golden, func(t *testing.T) {
				if mode.name == "live" {
					fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), snap)
				}
				out, stderr, err := run(t, slices.Concat([]string{"explain"}, c.args, mode.source, common)...)
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
				want, err := os.ReadFile(filepath.Join("testdata/explain", c.golden+".golden"))
				if err != nil {
					t.Fatal(err)
				}
				if w := strings.ReplaceAll(string(want), "default/", "real/"); out != w {
					t.Errorf("explain %s: not what plan --change -n real plans:\n%s", strings.Join(c.args, " "), diff(w, out))
				}
			})
		}
	}
}
