package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// --kubernetes-version and --feature-gates: what is accepted, what is a
// usage error (exit 2) naming the supported versions or the gate, and where
// the version comes from when the flag is absent.
func TestKubernetesVersionFlag(t *testing.T) {
	const snap = "testdata/scenarios/sts-maxunavailable-percent/snapshot.yaml"
	cases := []struct {
		name       string
		args       []string
		usage      bool
		wantErr    string
		wantMeta   string // the plan's metadata line
		wantStderr string
	}{
		{"minor", []string{"--kubernetes-version", "v1.36"}, false, "", "kubernetesVersion: v1.36", ""},
		{"patch kept", []string{"--kubernetes-version", "v1.37.2"}, false, "", "kubernetesVersion: v1.37.2", ""},
		{"patch of a gate default change", []string{"--kubernetes-version", "v1.35.2"}, false, "", "kubernetesVersion: v1.35.2\n  featureGates:\n    MaxUnavailableStatefulSet: true", ""},
		{"without v", []string{"--kubernetes-version", "1.35"}, false, "", "kubernetesVersion: v1.35", ""},
		{"too old", []string{"--kubernetes-version", "v1.34"}, true, "--kubernetes-version v1.34 is not supported: rollplan plans for v1.35, v1.36 and v1.37", "", ""},
		{"too new", []string{"--kubernetes-version", "v1.38.0"}, true, "v1.38 is not supported: rollplan plans for v1.35, v1.36 and v1.37", "", ""},
		{"not a version", []string{"--kubernetes-version", "latest"}, true, `"latest" is not a Kubernetes version such as v1.37 or v1.37.2`, "", ""},
		{"gate of a newer version", []string{"--kubernetes-version", "v1.36", "--feature-gates", "StatefulSetRecreateStrategy=true"}, true, "feature gate StatefulSetRecreateStrategy does not exist in Kubernetes v1.36 (it arrived in v1.37)", "", ""},
		{"unknown gate", []string{"--feature-gates", "Bogus=true"}, true, "unknown feature gate Bogus: rollplan models MaxUnavailableStatefulSet and StatefulSetRecreateStrategy", "", ""},
		{"gate overrides the default", []string{"--kubernetes-version", "v1.37", "--feature-gates", "MaxUnavailableStatefulSet=false"}, false, "", "kubernetesVersion: v1.37", ""},
		{"nothing recorded: the newest, with a note", nil, false, "", "kubernetesVersion: v1.37", "note: the snapshot records no Kubernetes version: planning for v1.37's controllers (pass --kubernetes-version to plan for another)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, err := run(t, append([]string{"plan", "-o", "yaml", "-f", snap, "--now", "2026-03-01T12:00:00Z"}, c.args...)...)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				if got, want := exitCode(err), map[bool]int{true: 2, false: 1}[c.usage]; got != want {
					t.Errorf("exit code %d, want %d", got, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if !strings.Contains(out, "\n  "+c.wantMeta+"\n") {
				t.Errorf("plan metadata lacks %q:\n%.500s", c.wantMeta, out)
			}
			if stderr != c.wantStderr {
				t.Errorf("stderr %q, want %q", stderr, c.wantStderr)
			}
		})
	}
}

// The same objects plan as their cluster's controllers roll them: a native
// maxUnavailable-2 StatefulSet goes two pods at a time on v1.37 (recorded
// in the snapshot) and one at a time with --kubernetes-version v1.36.
func TestVersionChangesTheStatefulSetWaves(t *testing.T) {
	const dir = "testdata/scenarios/sts-orderedready-maxunavail2-v1.37"
	args := append([]string{"plan", "-f", filepath.Join(dir, "snapshot.yaml")}, scenarioArgs(t, dir)...)
	v137, stderr, err := run(t, args...)
	if err != nil || stderr != "" {
		t.Fatalf("%v, stderr %q", err, stderr)
	}
	if !strings.Contains(v137, "1     0s     maxUnavailable 2/2  Recreate app-2 app-1\n") {
		t.Errorf("v1.37 (recorded): want app-2 and app-1 in the first wave:\n%s", v137)
	}
	v136, _, err := run(t, append(args, "--kubernetes-version", "v1.36")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v136, "1     0s     maxUnavailable 1/1  Recreate app-2\n") || !strings.Contains(v136, "2     1m     maxUnavailable 1/1  Recreate app-1\n") {
		t.Errorf("v1.36: want one pod per wave:\n%s", v136)
	}
}

// rollplan snapshot records discovery's version on the List, and a plan of
// the file plans for it without a flag or a note.
func TestSnapshotRecordsTheClusterVersion(t *testing.T) {
	client := fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "testdata/scenarios/sts-maxunavailable-percent/snapshot.yaml")
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &k8sversion.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3-eks-1a2b3c"}
	f := filepath.Join(t.TempDir(), "snap.yaml")
	if _, stderr, err := run(t, "snapshot", "-A", "--output-file", f); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), snapshot.AnnKubernetesVersion+": v1.36.3-eks-1a2b3c\n") {
		t.Fatalf("the snapshot does not record the version:\n%.400s", b)
	}
	out, stderr, err := run(t, "plan", "-o", "yaml", "-f", f)
	if err != nil || stderr != "" {
		t.Fatalf("%v, stderr %q", err, stderr)
	}
	if !strings.Contains(out, "\n  kubernetesVersion: v1.36.3\n") || !strings.Contains(out, "MaxUnavailableStatefulSet: false") {
		t.Errorf("the plan is not for v1.36's defaults:\n%.500s", out)
	}
	// A snapshot from a cluster newer than rollplan knows plans for the
	// newest, and says so.
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &k8sversion.Info{GitVersion: "v1.39.0"}
	if _, stderr, err := run(t, "snapshot", "-A", "--output-file", f); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out, stderr, err = run(t, "plan", "-o", "yaml", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if want := "note: the snapshot runs Kubernetes v1.39.0, which rollplan does not model (it plans for v1.35, v1.36 and v1.37): planning for v1.37's controllers\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if !strings.Contains(out, "\n  kubernetesVersion: v1.37\n") {
		t.Errorf("want a plan for v1.37:\n%.400s", out)
	}
}

// An API server that cannot be reached gets its connection error, once:
// not a note that it "records no Kubernetes version" on top, as if it had
// answered without one.
func TestUnreachableAPIServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: down, context: {cluster: c, user: u}}]\ncurrent-context: down\n", url)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"plan", "--change", "testdata/scenarios/change-sts-inplace/change"},
		{"status", "sts/web"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, stderr, err := run(t, append(args, "--kubeconfig", kubeconfig)...)
			if exitCode(err) != exitError {
				t.Fatalf("exit %d (%v), want 1", exitCode(err), err)
			}
			if stderr != "" {
				t.Errorf("stderr %q, want nothing but the error", stderr)
			}
			if msg := err.Error(); !strings.Contains(msg, "connection refused") || !strings.Contains(msg, `cannot reach the API server (context "down")`) || strings.Contains(msg, "records no Kubernetes version") {
				t.Errorf("error %q: want the connection error, naming the context", msg)
			}
		})
	}
}
