package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/live"
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

// The summary counts pods as rollplan status does: updated out of the
// desired pods not held; old pods still terminating are not in the total.
func TestReport(t *testing.T) {
	target := live.Target{Namespace: "prod", Kind: "Deployment", Name: "api"}
	tests := []struct {
		name  string
		steps int
		last  executor.StepResult
		want  string
	}{
		{name: "a rolling update's old pods still terminating", steps: 10,
			last: executor.StepResult{Done: true, Pods: 9, Desired: 6, Updated: 6, Available: 6},
			want: "Deployment prod/api: done: no action in 10 steps; 6/6 pods updated, 6 available, 0 held, 0 in flight\n"},
		{name: "held pods are not in the total", steps: 10,
			last: executor.StepResult{Done: true, Pods: 5, Desired: 5, Held: 2, Updated: 3, Available: 5},
			want: "Deployment prod/api: done: no action in 10 steps; 3/3 pods updated, 5 available, 2 held, 0 in flight\n"},
		{name: "one step", steps: 1,
			last: executor.StepResult{Done: true, Pods: 1, Desired: 1, Updated: 1, Available: 1},
			want: "Deployment prod/api: done: no action in 1 step; 1/1 pods updated, 1 available, 0 held, 0 in flight\n"},
		{name: "no step counted reads as one", steps: 0,
			last: executor.StepResult{Done: true, Pods: 2, Desired: 2, Updated: 2, Available: 2},
			want: "Deployment prod/api: done: no action in 1 step; 2/2 pods updated, 2 available, 0 held, 0 in flight\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			report(&b, target, false, &executor.Summary{Steps: tt.steps, Actions: map[string]int{}, Last: &tt.last}, nil)
			if b.String() != tt.want {
				t.Errorf("report %q, want %q", b.String(), tt.want)
			}
		})
	}
}

// The error lines of a refusal and a halt: one line, the first reason,
// what to do next.
func TestApplyErrorLines(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		scenario string
		args     []string
		code     int
		want     []string
		not      []string
	}{
		{
			name:     "an unmanaged Deployment: annotate it, apply holds it (README, Deployments in place)",
			scenario: "deploy-rolling-4-25pct",
			args:     []string{"apply", "deploy/api"}, code: exitError,
			want: []string{"Deployment default/api: not managed by rollplan",
				"`kubectl annotate deploy/api -n default rollplan.dev/managed=true rollplan.dev/pod-update-policy=InPlaceIfPossible`",
				"holds the Deployment with spec.paused itself"},
			not: []string{"set spec.paused"},
		},
		{
			name:     "InPlaceOnly: the first reason of 4, how to go on, where the rest is",
			scenario: "sts-inplaceonly-halt",
			args:     []string{"apply", "sts/web", "--once"}, code: exitHalted,
			want: []string{"StatefulSet default/web: rollout halted by policy: InPlaceOnly: pod web-0 cannot be updated in place: spec.containers[app].env (and 3 more)",
				"`kubectl annotate sts/web -n default rollplan.dev/pod-update-policy=InPlaceIfPossible --overwrite`",
				"revert the template change",
				"every reason: `rollplan status sts/web -n default` (or `rollplan plan`)"},
			not: []string{"web-1", "web-3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeApply(t, march, tt.scenario)
			_, line, code := execute(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d: %s", code, tt.code, line)
			}
			for _, s := range tt.want {
				if !strings.Contains(line, s) {
					t.Errorf("error line lacks %q:\n%s", s, line)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(line, s) {
					t.Errorf("error line has %q:\n%s", s, line)
				}
			}
		})
	}
}

// One driver per workload: apply refuses a workload the controller drives,
// naming the holder and the Lease, and holds the Lease itself while it
// drives, giving it up when done.
func TestApplyDriverLease(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	target := live.Target{Namespace: "default", Kind: "StatefulSet", Name: "web"}
	t.Run("the controller drives it", func(t *testing.T) {
		client := fakeApply(t, march, "sts-inplace-image-only")
		id, renew := "rollplan-controller-0_ab12", metav1.NewMicroTime(march)
		leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "rollplan-system", Name: "rollplan-controller"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, RenewTime: &renew, LeaseDurationSeconds: ptr.To[int32](15)}}
		if _, err := client.CoordinationV1().Leases("rollplan-system").Create(ctx, leader, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		clock := func() time.Time { return march }
		if _, err := executor.AcquireDriver(ctx, client, target, "", executor.Driver{Identity: "controller " + id, Liveness: "rollplan-system/rollplan-controller"}, clock); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := run(t, "apply", "sts/web", "--once")
		if got := exitCode(err); got != exitError {
			t.Fatalf("exit code %d, want %d (err %v)", got, exitError, err)
		}
		for _, want := range []string{"driven by the rollplan controller", "controller " + id, "default/rollplan-statefulset-web", "--wait-for-lease"} {
			if !strings.Contains(stderr+err.Error(), want) {
				t.Errorf("refusal lacks %q: %v", want, err)
			}
		}
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			if p.Annotations[live.AnnInPlaceUpdate] != "" {
				t.Errorf("apply updated %s while the controller drives the workload", p.Name)
			}
		}
	})
	t.Run("apply holds it while driving", func(t *testing.T) {
		client := fakeApply(t, march, "sts-inplace-image-only")
		if _, stderr, err := run(t, "apply", "sts/web", "--once"); err != nil {
			t.Fatalf("apply: %v\n%s", err, stderr)
		}
		l, err := client.CoordinationV1().Leases("default").Get(ctx, "rollplan-statefulset-web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("apply took no driver Lease: %v", err)
		}
		if l.Spec.AcquireTime == nil || l.Spec.HolderIdentity != nil {
			t.Errorf("after apply the Lease should have been taken and given up: %+v", l.Spec)
		}
	})
}
