package request

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/snapshot"
)

func load(t *testing.T, scenario string) *snapshot.Snapshot {
	t.Helper()
	snap, _, err := snapshot.LoadFiles([]string{filepath.Join("..", "..", "testdata", "scenarios", scenario, "snapshot.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// A request selects workloads as --workload and -n do; selecting nothing
// says where the snapshot has what was asked for.
func TestFacts(t *testing.T) {
	snap := load(t, "mixed-invalid-workload")
	all, err := (&Request{Snapshot: snap}).Facts()
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Rollouts) == 0 || len(all.Failed) == 0 {
		t.Fatalf("the scenario has valid and invalid workloads: %d rollouts, %d failed", len(all.Rollouts), len(all.Failed))
	}
	if !all.Now.Equal(snap.Latest()) {
		t.Errorf("now %s, want the snapshot's latest time %s", all.Now, snap.Latest())
	}
	if _, err := (&Request{Snapshot: snap, Strict: true}).Facts(); err == nil {
		t.Error("a strict request over an invalid workload: no error")
	}
	w := all.Rollouts[0].Workload
	one, err := (&Request{Snapshot: snap, Workload: Workload{Kind: w.Kind, Name: w.Name}}).Facts()
	if err != nil || len(one.Rollouts) != 1 || len(one.Failed) != 0 || one.Rollouts[0].Workload.Name != w.Name {
		t.Errorf("selecting %s %s: %v, %+v", w.Kind, w.Name, err, one)
	}
	_, err = (&Request{Snapshot: snap, Workload: Workload{Kind: w.Kind, Namespace: "elsewhere", Name: w.Name, Arg: "x"}}).Facts()
	var nm *NoMatchError
	if !errors.As(err, &nm) || len(nm.Namespaces) != 1 || nm.Namespaces[0] != w.Namespace {
		t.Errorf("selecting another namespace: %v, want a NoMatchError naming %q", err, w.Namespace)
	}
}

// Now defaults to the snapshot's latest time; a snapshot without any is
// ErrNoTime unless Now is given.
func TestTime(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got, err := (&Request{Snapshot: &snapshot.Snapshot{}, Now: at}).Time(); err != nil || !got.Equal(at) {
		t.Errorf("Time() = %s, %v, want %s", got, err, at)
	}
	if _, err := (&Request{Snapshot: &snapshot.Snapshot{}}).Time(); !errors.Is(err, ErrNoTime) {
		t.Errorf("Time() of an empty snapshot: %v, want ErrNoTime", err)
	}
}
