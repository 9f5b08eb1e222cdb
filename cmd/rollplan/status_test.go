package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/executor"
)

func TestStatusCommand(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	captured := time.Date(2026, 11, 21, 22, 30, 44, 0, time.UTC)
	tests := []struct {
		name     string
		scenario string
		now      time.Time
		args     []string
		code     int
		stdout   []string // substrings
		check    func(t *testing.T, st *executor.RolloutStatus)
	}{
		{
			name:     "a managed StatefulSet before its rollout: the first wave",
			scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/web"}, code: exitOK,
			stdout: []string{"StatefulSet default/web: in progress: wave 1 of 4", "web-6545fdd768 → web-59c59f4f75", "4 desired, 4 total: 0 updated, 4 available, 0 held, 0 in flight", "Current wave 1 (starts now)", "InPlaceUpdate", "0/1 in use"},
		},
		{
			name:     "halted by policy: exit code 3, the reasons printed",
			scenario: "sts-inplaceonly-halt", now: march,
			args: []string{"status", "sts/web"}, code: exitHalted,
			stdout: []string{"halted: InPlaceOnly: pod web-0 cannot be updated in place", "(and 3 more)", "Halted:"},
		},
		{
			name:     "-o json: a native RollingUpdate Deployment mid-rollout decodes to a RolloutStatus",
			scenario: "captured-deploy-rolling-10-25pct-step-1", now: captured,
			args: []string{"status", "deploy/app", "-n", "deploy-rolling-10-25pct", "-o", "json"}, code: exitOK,
			check: func(t *testing.T, st *executor.RolloutStatus) {
				if st.State != executor.StatusInProgress || st.Verdict != "in progress: wave 2 of 3" {
					t.Errorf("state %s %q, want in progress: wave 2 of 3", st.State, st.Verdict)
				}
				want := executor.StatusPods{Desired: 10, Total: 13, Updated: 5, Available: 13}
				if st.Pods != want {
					t.Errorf("pods %+v, want %+v", st.Pods, want)
				}
				if st.Revisions != (executor.StatusRevisions{Current: "app-df7bb4cc9", Update: "app-67cf9b44b6"}) {
					t.Errorf("revisions %+v", st.Revisions)
				}
				if st.CurrentWave == nil || st.CurrentWave.Number != 2 || len(st.CurrentWave.Actions) == 0 || st.CurrentWave.Actions[0].Type != "ScaleReplicaSet" {
					t.Errorf("current wave %+v", st.CurrentWave)
				}
				if len(st.Budgets) != 2 || st.Budgets[0].Limit != 2 || st.Budgets[1].Limit != 3 {
					t.Errorf("budgets %+v, want maxUnavailable 2 and maxSurge 3", st.Budgets)
				}
			},
		},
		{
			name:     "-o yaml decodes too",
			scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "statefulset/web", "-o", "yaml"}, code: exitOK,
			check: func(t *testing.T, st *executor.RolloutStatus) {
				if st.Workload.Kind != "StatefulSet" || !st.Workload.Managed || st.Pods.Desired != 4 {
					t.Errorf("status %+v", st)
				}
			},
		},
		{
			name:     "a paused Deployment",
			scenario: "deploy-paused", now: march,
			args: []string{"status", "deploy/api"}, code: exitOK,
			stdout: []string{"Deployment default/api: paused"},
		},
		{
			name: "a missing workload is an error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/nope"}, code: exitError,
		},
		{
			name: "no workload is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status"}, code: exitUsage,
		},
		{
			name: "two workloads are a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/web", "sts/db"}, code: exitUsage,
		},
		{
			name: "a kind rollplan does not plan is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "pod/web-0"}, code: exitUsage,
		},
		{
			name: "a bad -o is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/web", "-o", "wide"}, code: exitUsage,
		},
		{
			name: "a bad --feature-gates is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/web", "--feature-gates", "Nope=true"}, code: exitUsage,
		},
		{
			name: "an unknown flag is a usage error", scenario: "sts-inplace-image-only", now: march,
			args: []string{"status", "sts/web", "--nope"}, code: exitUsage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeApply(t, tt.now, tt.scenario)
			stdout, stderr, err := run(t, tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d, want %d (err %v)\nstdout:\n%s\nstderr:\n%s", got, tt.code, err, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			if tt.check != nil {
				var st executor.RolloutStatus
				if err := yaml.UnmarshalStrict([]byte(stdout), &st); err != nil {
					t.Fatalf("decode: %v\n%s", err, stdout)
				}
				if st.APIVersion != "rollplan.dev/v1alpha1" || st.Kind != "RolloutStatus" {
					t.Errorf("apiVersion %q kind %q", st.APIVersion, st.Kind)
				}
				tt.check(t, &st)
			}
		})
	}
}

// -o json is plain JSON (what yaml.UnmarshalStrict above also reads).
func TestStatusJSON(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "sts-inplace-image-only")
	stdout, _, err := run(t, "status", "sts/web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var st executor.RolloutStatus
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("decode: %v\n%s", err, stdout)
	}
	if st.Verdict != "in progress: wave 1 of 4" || st.CurrentWave == nil || len(st.CurrentWave.Actions) != 1 {
		t.Errorf("status %+v", st)
	}
}

// completeRollout rolls every pod of StatefulSet web to its update
// revision (web-59c59f4f75, the hash of its template: the scenario's status
// is stale) in the fake cluster, through the client, so the informers of
// status --watch see it.
func completeRollout(t *testing.T) {
	cl, err := connectCluster(&kubeFlags{})
	if err != nil {
		t.Error(err)
		return
	}
	ctx := context.Background()
	sts, err := cl.client.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	pods, err := cl.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	for _, p := range pods.Items {
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = "web-59c59f4f75"
		p.Spec.Containers = sts.Spec.Template.Spec.Containers
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Image = p.Spec.Containers[i].Image
		}
		if _, err := cl.client.CoreV1().Pods("default").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
}

// firstWrite is stdout that calls then once, after the first write: the
// rollout completes once the first status is printed.
type firstWrite struct {
	bytes.Buffer
	once sync.Once
	then func()
}

func (w *firstWrite) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	w.once.Do(w.then)
	return n, err
}

// --watch reads until the rollout is rolled out (exit 0) or halted (exit 3):
// on a terminal it redraws the table, otherwise it prints a line per change.
func TestStatusWatch(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	prev := statusInterval
	t.Cleanup(func() { statusInterval = prev })
	statusInterval = time.Millisecond
	tests := []struct {
		name     string
		scenario string
		tty      bool
		args     []string
		complete bool
		code     int
		want     []string // stdout lines, in order (substrings)
		lines    int      // with !tty: the lines printed
	}{
		{name: "until rolled out, a line per change", scenario: "sts-inplace-image-only", complete: true,
			args: []string{"status", "sts/web", "--watch"}, code: exitOK,
			want: []string{"in progress: wave 1 of 4; 0/4 pods updated, 4 available", "rolled out; 4/4 pods updated, 4 available, 0 held, 0 in flight"}, lines: 2},
		{name: "on a terminal, redrawn", scenario: "sts-inplace-image-only", complete: true, tty: true,
			args: []string{"status", "sts/web", "-w"}, code: exitOK,
			want: []string{"\x1b[H\x1b[2J", "in progress: wave 1 of 4", "\x1b[H\x1b[2J", "StatefulSet default/web: rolled out"}},
		{name: "halted: exit code 3", scenario: "sts-inplaceonly-halt",
			args: []string{"status", "sts/web", "--watch"}, code: exitHalted,
			want: []string{"halted: InPlaceOnly"}, lines: 1},
		{name: "-o json: a document per change", scenario: "sts-inplace-image-only", complete: true,
			args: []string{"status", "sts/web", "--watch", "-o", "json"}, code: exitOK,
			want: []string{`"verdict": "in progress: wave 1 of 4"`, `"verdict": "rolled out"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeApply(t, march, tt.scenario)
			prevTTY := statusIsTTY
			t.Cleanup(func() { statusIsTTY = prevTTY })
			statusIsTTY = func(io.Writer) bool { return tt.tty }
			out := &firstWrite{then: func() {}}
			if tt.complete {
				out.then = func() { completeRollout(t) }
			}
			var errOut bytes.Buffer
			cmd := newRootCommand()
			cmd.SetOut(out)
			cmd.SetErr(&errOut)
			cmd.SetArgs(tt.args)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := cmd.ExecuteContext(ctx)
			stdout, stderr := out.String(), errOut.String()
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d, want %d (err %v)\nstdout:\n%s\nstderr:\n%s", got, tt.code, err, stdout, stderr)
			}
			rest := stdout
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout lacks %q (in order):\n%q", w, stdout)
				}
				rest = rest[i+len(w):]
			}
			if tt.lines > 0 {
				if n := strings.Count(stdout, "\n"); n != tt.lines {
					t.Errorf("%d lines, want %d:\n%s", n, tt.lines, stdout)
				}
			}
		})
	}
}

// Ctrl-C (the context ending) stops --watch with an error naming the verdict.
func TestStatusWatchStops(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "sts-inplace-image-only")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := newRootCommand()
	cmd.SetOut(&firstWrite{then: cancel}) // Ctrl-C once the status is printed
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"status", "sts/web", "--watch"})
	err := cmd.ExecuteContext(ctx)
	if exitCode(err) != exitError || err == nil || !strings.Contains(err.Error(), "in progress: wave 1 of 4") {
		t.Errorf("err %v, want exit 1 naming the verdict", err)
	}
}
