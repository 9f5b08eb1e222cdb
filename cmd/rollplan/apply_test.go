package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/rollplan/rollplan/executor"
)

func scenario(name string) string {
	return filepath.Join("testdata", "scenarios", name, "snapshot.yaml") // TestMain runs from the repository root
}

// fakeApply makes rollplan apply work on a fake clientset holding a
// scenario's objects, at the scenario's time.
func fakeApply(t *testing.T, now time.Time, name string) *fake.Clientset {
	t.Helper()
	client := fakeCluster(t, now, scenario(name))
	prev := applyClock
	t.Cleanup(func() { applyClock = prev })
	applyClock = func() time.Time { return now }
	return client
}

func TestApply(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		scenario string
		now      time.Time
		args     []string
		code     int
		stderr   []string // substrings
	}{
		{
			name: "a native RollingUpdate StatefulSet is refused, naming it",
			// A StatefulSet the controller rolls (RollingUpdate, partition 2).
			scenario: "captured-sts-partition-2-gate-off-step-1", now: time.Date(2026, 11, 21, 22, 31, 35, 0, time.UTC),
			args: []string{"apply", "sts/app", "-n", "sts-partition-2-gate-off"},
			code: exitError,
		},
		{
			name:     "a Deployment rollplan does not manage is refused",
			scenario: "deploy-rolling-4-25pct", now: march,
			args: []string{"apply", "deploy/api"},
			code: exitError,
		},
		{
			name:     "an InPlaceOnly rollout that cannot go in place halts with exit code 3",
			scenario: "sts-inplaceonly-halt", now: march,
			args:   []string{"apply", "sts/web", "--once"},
			code:   exitHalted,
			stderr: []string{"halted by policy"},
		},
		{
			name:     "dry run: one step, reports what it would do",
			scenario: "sts-inplace-image-only", now: march,
			args:   []string{"apply", "statefulset/web", "--dry-run=server"},
			code:   exitOK,
			stderr: []string{"outcome=would", "dry run, nothing changed: would"},
		},
		{
			name:     "--once carries out one step",
			scenario: "sts-inplace-image-only", now: march,
			args:   []string{"apply", "sts/web", "--once"},
			code:   exitOK,
			stderr: []string{"action=InPlaceUpdate", "outcome=done", "in progress"},
		},
		{
			name: "bad --dry-run is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"apply", "sts/web", "--dry-run=client"}, code: exitUsage,
		},
		{
			name: "bad --delete-method is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"apply", "sts/web", "--delete-method=drain"}, code: exitUsage,
		},
		{
			name: "no workload is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"apply"}, code: exitUsage,
		},
		{
			name: "a kind rollplan does not drive is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"apply", "pod/web-0"}, code: exitUsage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeApply(t, tt.now, tt.scenario)
			_, stderr, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d, want %d (err %v)\nstderr:\n%s", got, tt.code, err, stderr)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// The refusal of a native RollingUpdate workload names the workload, says
// its controller drives it and that rollplan plan previews it.
func TestApplyRefusesRollingUpdate(t *testing.T) {
	fakeApply(t, time.Date(2026, 11, 21, 22, 31, 35, 0, time.UTC), "captured-sts-partition-2-gate-off-step-1")
	_, _, err := run(t, "apply", "sts/app", "-n", "sts-partition-2-gate-off")
	var r *executor.RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("err %v, want a RefusedError", err)
	}
	for _, s := range []string{"StatefulSet sts-partition-2-gate-off/app", "RollingUpdate", "controller drives this rollout", "rollplan plan", "OnDelete"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q lacks %q", err, s)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for err, want := range map[error]int{
		nil:                                exitOK,
		errors.New("boom"):                 exitError,
		usageError{errors.New("bad flag")}: exitUsage,
		&executor.HaltedError{Reasons: []string{"x"}}: exitHalted,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
