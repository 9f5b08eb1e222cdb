package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	sc, err := Load("../../testdata/scenarios/example-leader-last")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Policies) != 1 || sc.Policies[0] != "policies/examples/leader-last" {
		t.Errorf("policies %q, want the leader-last example", sc.Policies)
	}
	if len(sc.Rollouts) == 0 {
		t.Fatal("no rollouts")
	}
	if r := sc.Rollouts[0]; r.Now != "2026-03-01T12:00:00Z" {
		t.Errorf("now %s: want the args' --now", r.Now)
	}
	gated, err := Load("../../testdata/scenarios/sts-partition-parallel-gate-on")
	if err != nil {
		t.Fatal(err)
	}
	if r := gated.Rollouts[0]; !r.FeatureGates["MaxUnavailableStatefulSet"] || len(gated.Policies) != 0 {
		t.Errorf("gates %v, policies %q: want the args' --feature-gates and no policy", r.FeatureGates, gated.Policies)
	}

	rs, err := Rollouts("../../testdata/scenarios", "example-leader-last", "example-leader-last")
	if err != nil || len(rs) != 2*len(sc.Rollouts) || rs[0].Workload.Name != sc.Rollouts[0].Workload.Name {
		t.Errorf("Rollouts of the scenario twice: %d rollouts (%v), want %d", len(rs), err, 2*len(sc.Rollouts))
	}

	all, err := All("../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("../../testdata/scenarios/*/snapshot.yaml")
	if len(all) != len(dirs) {
		t.Errorf("All read %d scenarios, the tree has %d", len(all), len(dirs))
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--now yesterday", `--now "yesterday"`},
		{"--feature-gates MaxUnavailableStatefulSet=maybe", `--feature-gates "MaxUnavailableStatefulSet=maybe"`},
		{"--workload", "--workload without a value"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "args"), []byte(tc.args), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("args %q: error %v, want one naming %s and %s", tc.args, err, dir, tc.want)
		}
	}
	// No snapshot: the default --now is the snapshot's time, so it is needed.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "args"), []byte("--now 2026-03-01T12:00:00Z"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load without snapshot.yaml succeeded")
	}
}

// A scenario's --change is in its facts as plan --change puts it: only the
// changed workload, at the change's update revision.
func TestLoadChange(t *testing.T) {
	s, err := Load("../../testdata/scenarios/change-sts-inplace")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rollouts) != 1 || s.Rollouts[0].Workload.UpdateRevision != "web-59c59f4f75" || s.Rollouts[0].Workload.CurrentRevision != "web-6545fdd768" {
		t.Fatalf("rollouts %d, want StatefulSet web from web-6545fdd768 to web-59c59f4f75", len(s.Rollouts))
	}
}
