package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
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
			stdout: []string{"StatefulSet default/web: waiting for a driver (run rollplan apply, or install the controller): nothing has moved for 1h2m0s", "web-6545fdd768 → web-59c59f4f75", "4 desired, 4 total: 0 updated, 4 available, 0 held, 0 in flight", "Current wave 1 (starts now)", "InPlaceUpdate", "0/1 in use"},
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
				// The controller's waves are not numbered (TestStatusWaveNumbers).
				if want := "in progress: rolled by the Deployment controller, 2 waves left"; st.State != executor.StatusInProgress || st.Verdict != want {
					t.Errorf("state %s %q, want in progress: %q", st.State, st.Verdict, want)
				}
				if st.Waves != (executor.StatusWaves{Remaining: 2}) {
					t.Errorf("waves %+v, want only 2 remaining", st.Waves)
				}
				want := executor.StatusPods{Desired: 10, Total: 13, Updated: 5, Available: 13}
				if st.Pods != want {
					t.Errorf("pods %+v, want %+v", st.Pods, want)
				}
				if !reflect.DeepEqual(st.Revisions, executor.StatusRevisions{Current: "app-df7bb4cc9", Update: "app-67cf9b44b6"}) {
					t.Errorf("revisions %+v", st.Revisions)
				}
				if st.CurrentWave == nil || st.CurrentWave.Number != 0 || len(st.CurrentWave.Actions) == 0 || st.CurrentWave.Actions[0].Type != "ScaleReplicaSet" {
					t.Errorf("current wave %+v", st.CurrentWave)
				}
				if len(st.Budgets) != 2 || st.Budgets[0].Limit != 2 || st.Budgets[1].Limit != 3 {
					t.Errorf("budgets %+v, want maxUnavailable 2 and maxSurge 3", st.Budgets)
				}
			},
		},
		{
			name:     "after an undo: the broken revision the pods still run is named",
			scenario: "captured-sts-broken-rolled-back", now: time.Date(2026, 11, 27, 3, 32, 32, 0, time.UTC),
			args: []string{"status", "sts/web", "-n", "e2e-964446382"}, code: exitOK,
			stdout: []string{"web-9bc8c8bb9 (current); pods to update also run other revisions: 2 on web-64894dbd45"},
		},
		{
			name:     "after an undo, -o json: revisions.other",
			scenario: "captured-sts-broken-rolled-back", now: time.Date(2026, 11, 27, 3, 32, 32, 0, time.UTC),
			args: []string{"status", "sts/web", "-n", "e2e-964446382", "-o", "json"}, code: exitOK,
			check: func(t *testing.T, st *executor.RolloutStatus) {
				if !reflect.DeepEqual(st.Revisions.Other, map[string]int{"web-64894dbd45": 2}) {
					t.Errorf("other revisions %v, want 2 pods on web-64894dbd45", st.Revisions.Other)
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
			args: []string{"status", "sts/web", "-o", "xml"}, code: exitUsage,
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
	if st.State != executor.StatusWaitingForDriver || st.Verdict != "waiting for a driver (run rollplan apply, or install the controller): nothing has moved for 1h2m0s" || st.CurrentWave == nil || len(st.CurrentWave.Actions) != 1 {
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
			want: []string{"waiting for a driver (run rollplan apply, or install the controller): nothing has moved for 1h2m0s; 0/4 pods updated, 4 available", "rolled out; 4/4 pods updated, 4 available, 0 held, 0 in flight"}, lines: 2},
		{name: "on a terminal, redrawn", scenario: "sts-inplace-image-only", complete: true, tty: true,
			args: []string{"status", "sts/web", "-w"}, code: exitOK,
			want: []string{"\x1b[H\x1b[2J", "waiting for a driver", "\x1b[H\x1b[2J", "StatefulSet default/web: rolled out"}},
		{name: "halted: exit code 3", scenario: "sts-inplaceonly-halt",
			args: []string{"status", "sts/web", "--watch"}, code: exitHalted,
			want: []string{"halted: InPlaceOnly"}, lines: 1},
		{name: "-o json: a document per change", scenario: "sts-inplace-image-only", complete: true,
			args: []string{"status", "sts/web", "--watch", "-o", "json"}, code: exitOK,
			want: []string{`"state": "WaitingForDriver"`, `"verdict": "waiting for a driver (run rollplan apply, or install the controller): nothing has moved for 1h2m0s"`, `"verdict": "rolled out"`}},
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
	if exitCode(err) != exitError || err == nil || !strings.Contains(err.Error(), "waiting for a driver") {
		t.Errorf("err %v, want exit 1 naming the verdict", err)
	}
}

// The verdict, the table and the progress line tell one story of waves:
// the waves done, the current one (the pods in flight, joined by the
// plan's first wave when that starts now) and the ones after it; a
// Deployment its controller rolls is not numbered.
func TestStatusWaveNumbers(t *testing.T) {
	type podState struct {
		updated, available bool
	}
	sts := func(n int, updated, inFlight []int) (*facts.Rollout, map[string]string) {
		r := &facts.Rollout{Workload: facts.Workload{Kind: "StatefulSet", Namespace: "prod", Name: "web", Replicas: n, Managed: true,
			Strategy: facts.Strategy{Type: "OnDelete"}, PodUpdatePolicy: "InPlaceIfPossible", CurrentRevision: "web-1", UpdateRevision: "web-2"}}
		st := make([]podState, n)
		for i := range st {
			st[i].available = true
		}
		for _, i := range updated {
			st[i].updated = true
		}
		fl := map[string]string{}
		for _, i := range inFlight {
			st[i] = podState{updated: true}
			fl[fmt.Sprintf("web-%d", i)] = "spec says example.com/app:v2, the container runs example.com/app:v1"
		}
		for i, s := range st {
			r.Pods = append(r.Pods, facts.Pod{Name: fmt.Sprintf("web-%d", i), Updated: s.updated, Available: s.available, Ready: s.available})
		}
		return r, fl
	}
	inPlace := func(start string, pods ...int) plan.Wave {
		w := plan.Wave{Start: start}
		for _, i := range pods {
			w.Actions = append(w.Actions, plan.Action{Type: plan.ActionInPlace, Pod: fmt.Sprintf("web-%d", i)})
		}
		return w
	}
	// deploy: 6 pods of the new ReplicaSet (unavailable: the last ones),
	// old pods beside them, rolled by the controller.
	deploy := func(updated, unavailable, old int) *facts.Rollout {
		r := &facts.Rollout{Workload: facts.Workload{Kind: "Deployment", Namespace: "prod", Name: "api", Replicas: 6,
			Strategy: facts.Strategy{Type: "RollingUpdate"}, CurrentRevision: "api-1", UpdateRevision: "api-2"}}
		for i := range updated {
			r.Pods = append(r.Pods, facts.Pod{Name: fmt.Sprintf("api-2-%d", i), Updated: true, Available: i < updated-unavailable})
		}
		for i := range old {
			r.Pods = append(r.Pods, facts.Pod{Name: fmt.Sprintf("api-1-%d", i), Available: true})
		}
		return r
	}
	scale := func(rs string, from, to int) plan.Wave {
		return plan.Wave{Start: "0s", Actions: []plan.Action{{Type: plan.ActionScaleRS, ReplicaSet: rs, From: &from, To: &to}}}
	}
	tests := []struct {
		name     string
		rollout  *facts.Rollout
		inFlight map[string]string
		waves    []plan.Wave
		origin   []plan.Wave // the rollout's own plan; nil: none
		verdict  string
		waveNums executor.StatusWaves
		table    []string // substrings of the table
		not      []string
	}{
		{
			name: "nothing in flight: the plan's first wave is the current one",
			rollout: func() *facts.Rollout {
				r, _ := sts(4, nil, nil)
				return r
			}(),
			waves:    []plan.Wave{inPlace("0s", 0), inPlace("20s", 1), inPlace("40s", 2), inPlace("1m", 3)},
			origin:   []plan.Wave{inPlace("0s", 0), inPlace("20s", 1), inPlace("40s", 2), inPlace("1m", 3)},
			verdict:  "in progress: wave 1 of 4",
			waveNums: executor.StatusWaves{Done: 0, Current: 1, Remaining: 4, Total: 4},
			table:    []string{"Waves:      wave 1 of 4: 0 done (estimated), 3 after it", "Current wave 1 (starts now):"},
		},
		{
			name: "pods in flight and the next wave waits for them: in flight is wave 2, the next wave 3",
			rollout: func() *facts.Rollout {
				r, _ := sts(10, []int{0, 1}, []int{2, 3})
				return r
			}(),
			inFlight: func() map[string]string { _, fl := sts(10, []int{0, 1}, []int{2, 3}); return fl }(),
			waves:    []plan.Wave{inPlace("1m", 4, 5), inPlace("2m", 6, 7), inPlace("3m", 8, 9)},
			origin:   []plan.Wave{inPlace("0s", 0, 1), inPlace("1m", 2, 3), inPlace("2m", 4, 5), inPlace("3m", 6, 7), inPlace("4m", 8, 9)},
			verdict:  "in progress: wave 2 of 5",
			waveNums: executor.StatusWaves{Done: 1, Current: 2, Remaining: 4, Total: 5},
			table:    []string{"wave 2 of 5: 1 done (estimated), 3 after it", "In flight (wave 2):", "Next wave 3 (starts in 1m):"},
			not:      []string{"Current wave 3"},
		},
		{
			name: "the next wave starts now beside the pods in flight: one wave",
			rollout: func() *facts.Rollout {
				r, _ := sts(6, []int{0, 1}, []int{2})
				return r
			}(),
			inFlight: func() map[string]string { _, fl := sts(6, []int{0, 1}, []int{2}); return fl }(),
			waves:    []plan.Wave{inPlace("0s", 5), inPlace("20s", 4), inPlace("40s", 3)},
			origin:   []plan.Wave{inPlace("0s", 0, 1), inPlace("20s", 2, 3), inPlace("40s", 4, 5)},
			verdict:  "in progress: wave 2 of 3",
			waveNums: executor.StatusWaves{Done: 1, Current: 2, Remaining: 2, Total: 3},
			table:    []string{"In flight (wave 2):", "Current wave 2 (starts now):"},
		},
		{
			name:     "a Deployment its controller rolls, first waves: not numbered",
			rollout:  deploy(2, 2, 5),
			waves:    []plan.Wave{scale("api-2", 2, 3), scale("api-1", 5, 3), scale("api-2", 3, 6)},
			verdict:  "in progress: rolled by the Deployment controller, 3 waves left",
			waveNums: executor.StatusWaves{Remaining: 3},
			table:    []string{"Waves:      3 left, as planned now", "Current wave (starts now):"},
			not:      []string{" of "},
		},
		{
			name:     "a Deployment its controller rolls, last wave with a pod unavailable: not wave 7 of 7",
			rollout:  deploy(6, 1, 1),
			waves:    []plan.Wave{scale("api-1", 1, 0)},
			verdict:  "in progress: rolled by the Deployment controller, 1 wave left",
			waveNums: executor.StatusWaves{Remaining: 1},
			table:    []string{"6 desired, 7 total: 6 updated, 6 available"},
			not:      []string{"7 of 7", "wave 7"},
		},
	}
	now := time.Date(2026, 11, 22, 8, 14, 20, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wp := plan.WorkloadPlan{Kind: tt.rollout.Workload.Kind, Namespace: "prod", Name: tt.rollout.Workload.Name, Waves: tt.waves}
			var origin *plan.WorkloadPlan
			if tt.origin != nil {
				origin = &plan.WorkloadPlan{Kind: wp.Kind, Namespace: wp.Namespace, Name: wp.Name, Waves: tt.origin}
			}
			st := executor.BuildStatus(tt.rollout, wp, origin, tt.inFlight, now)
			if st.Verdict != tt.verdict || st.Waves != tt.waveNums {
				t.Errorf("verdict %q, waves %+v; want %q, %+v", st.Verdict, st.Waves, tt.verdict, tt.waveNums)
			}
			var b bytes.Buffer
			if err := writeStatus(&b, st, "table"); err != nil {
				t.Fatal(err)
			}
			statusLine(&b, st)
			b.WriteString(progressLine(st) + "\n")
			out := b.String()
			for _, s := range append(tt.table, tt.verdict) {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}

// --watch prints a line (or a document) per change: not again when only
// the read time, the time nothing has moved for, or what the line does
// not show changed; the redrawn table on a terminal is the exception.
func TestStatusWatchPrintsChanges(t *testing.T) {
	prev := statusInterval
	t.Cleanup(func() { statusInterval = prev })
	statusInterval = time.Millisecond
	base := func(sec int, state, verdict string, updated, available, inFlight int, act string) *executor.RolloutStatus {
		st := &executor.RolloutStatus{APIVersion: "rollplan.dev/v1alpha1", Kind: "RolloutStatus",
			Workload: executor.StatusWorkload{Kind: "StatefulSet", Namespace: "demo", Name: "web"},
			Time:     time.Date(2026, 11, 29, 1, 0, sec, 0, time.UTC).Format(time.RFC3339), State: state, Verdict: verdict,
			Pods: executor.StatusPods{Desired: 6, Total: 6, Updated: updated, Available: available, InFlight: inFlight},
			Held: []executor.StatusPod{}, InFlight: []executor.StatusPod{}, Budgets: []executor.StatusBudget{}, Halted: []string{}}
		if act != "" {
			st.LastActivity = &executor.Activity{Time: act, What: "pod web-5 created"}
		}
		return st
	}
	waiting := "waiting for a driver (run rollplan apply, or install the controller): nothing has moved for "
	seq := []*executor.RolloutStatus{
		base(0, executor.StatusWaitingForDriver, waiting+"1h0m0s", 0, 6, 0, "2026-11-29T00:00:00Z"),
		base(2, executor.StatusWaitingForDriver, waiting+"1h0m2s", 0, 6, 0, "2026-11-29T00:00:00Z"),
		base(4, executor.StatusInProgress, "in progress: wave 1 of 3", 2, 4, 2, "2026-11-29T01:00:03Z"),
		// A pod turned Ready at the update revision: the line is the same.
		base(5, executor.StatusInProgress, "in progress: wave 1 of 3", 2, 4, 2, "2026-11-29T01:00:05Z"),
		base(6, executor.StatusInProgress, "in progress: wave 1 of 3", 2, 4, 2, "2026-11-29T01:00:05Z"),
		base(8, executor.StatusRolledOut, "rolled out", 6, 6, 0, "2026-11-29T01:00:07Z"),
	}
	tests := []struct {
		format string
		want   []string // what is printed, in order: a line or a document's verdict each
	}{
		{format: "table", want: []string{
			"2026-11-29T01:00:00Z StatefulSet demo/web: " + waiting + "1h0m0s; 0/6 pods updated, 6 available, 0 held, 0 in flight",
			"2026-11-29T01:00:04Z StatefulSet demo/web: in progress: wave 1 of 3; 2/6 pods updated, 4 available, 0 held, 2 in flight",
			"2026-11-29T01:00:08Z StatefulSet demo/web: rolled out; 6/6 pods updated, 6 available, 0 held, 0 in flight",
		}},
		{format: "json", want: []string{waiting + "1h0m0s", "in progress: wave 1 of 3", "in progress: wave 1 of 3", "rolled out"}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			i := 0
			read := func(context.Context) (*executor.RolloutStatus, error) {
				st := seq[min(i, len(seq)-1)]
				i++
				return st, nil
			}
			var out bytes.Buffer
			err := watchStatus(context.Background(), read, live.Target{Kind: "StatefulSet", Namespace: "demo", Name: "web"}, &out, tt.format, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if tt.format == "table" {
				got = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			} else {
				dec := json.NewDecoder(&out)
				for dec.More() {
					var st executor.RolloutStatus
					if err := dec.Decode(&st); err != nil {
						t.Fatal(err)
					}
					got = append(got, st.Verdict)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// --wait prints nothing while the rollout goes on, then the last status
// once, and exits by the table: 0 rolled out, 3 halted, 4 stalled, 1 when
// --timeout passes first.
func TestStatusWait(t *testing.T) {
	prev := statusInterval
	t.Cleanup(func() { statusInterval = prev })
	statusInterval = time.Millisecond
	st := func(state, verdict string, updated int) *executor.RolloutStatus {
		return &executor.RolloutStatus{APIVersion: "rollplan.dev/v1alpha1", Kind: "RolloutStatus",
			Workload: executor.StatusWorkload{Kind: "StatefulSet", Namespace: "demo", Name: "web"},
			Time:     "2026-11-29T01:00:00Z", State: state, Verdict: verdict,
			Pods: executor.StatusPods{Desired: 6, Total: 6, Updated: updated, Available: 6},
			Held: []executor.StatusPod{}, InFlight: []executor.StatusPod{}, Budgets: []executor.StatusBudget{}, Halted: []string{"pod web-5 is crash-looping"}}
	}
	rolling := st(executor.StatusInProgress, "in progress: wave 1 of 3", 2)
	for _, tc := range []struct {
		name     string
		last     *executor.RolloutStatus
		timeout  time.Duration
		code     int
		printed  string
		inErrMsg string
	}{
		{"rolled out", st(executor.StatusRolledOut, "rolled out", 6), 0, exitOK, "StatefulSet demo/web: rolled out; 6/6 pods updated", ""},
		{"halted", st(executor.StatusHalted, "halted: pod web-5 is crash-looping", 2), 0, exitHalted, "halted: pod web-5", "crash-looping"},
		{"stalled", st(executor.StatusStalled, "stalled for 5m0s: budget maxUnavailable is used up (1/1)", 2), 0, exitStalled, "stalled for 5m0s", "budget maxUnavailable"},
		{"timed out", nil, 20 * time.Millisecond, exitError, "in progress: wave 1 of 3", "not rolled out within 20ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			read := func(context.Context) (*executor.RolloutStatus, error) {
				reads++
				if reads < 4 || tc.last == nil {
					return rolling, nil
				}
				return tc.last, nil
			}
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, tc.timeout, errTimedOut{tc.timeout})
				defer cancel()
			}
			var out bytes.Buffer
			err := waitStatus(ctx, read, live.Target{Kind: "StatefulSet", Namespace: "demo", Name: "web"}, &out, "table", nil)
			if got := exitCode(err); got != tc.code {
				t.Errorf("exit code %d (%v), want %d", got, err, tc.code)
			}
			if err != nil && !strings.Contains(err.Error(), tc.inErrMsg) {
				t.Errorf("error %q, want it to contain %q", err, tc.inErrMsg)
			}
			if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tc.printed) {
				t.Errorf("printed %q, want one line with %q", out.String(), tc.printed)
			}
		})
	}
}

// The table marks the controller's record stale beside a verdict it no
// longer matches.
func TestStatusTableStaleController(t *testing.T) {
	st := &executor.RolloutStatus{Workload: executor.StatusWorkload{Kind: "StatefulSet", Namespace: "demo", Name: "web", Strategy: "OnDelete", Managed: true},
		State: executor.StatusWaitingForDriver, Verdict: "waiting for a driver (run rollplan apply, or install the controller)",
		Revisions:       executor.StatusRevisions{Current: "web-1", Update: "web-2"},
		Controller:      &live.RolloutState{Phase: live.RolloutInProgress, Revision: "web-2", Wave: 2, Waves: 3, Desired: 6, Updated: 2, Driver: "controller c1"},
		ControllerStale: "controller c1 no longer holds the driver Lease (it lapsed)"}
	var b bytes.Buffer
	if err := statusTable(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "Controller:  InProgress: wave 2 of 3; 2/6 pods updated, 0 available, 0 in flight; revision web-2; driven by controller c1 (stale: controller c1 no longer holds the driver Lease (it lapsed))\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

// A rollout a failed analysis rolled back is rolled out, but not to the
// version applied: status says so with the halt's exit code, so a
// pipeline's `status --wait` fails; every other state keeps its code.
func TestStatusErrRolledBack(t *testing.T) {
	target := live.Target{Namespace: "prod", Kind: "StatefulSet", Name: "web"}
	back := &executor.AnalysisState{Revision: "web-old", From: "web-new", RolledBack: true, Wave: 1, Message: "analysis after wave 1 failed: errors = 0.9, above 0.5"}
	for _, tc := range []struct {
		name string
		st   executor.RolloutStatus
		code int
		want string
	}{
		{"rolled out", executor.RolloutStatus{State: executor.StatusRolledOut}, exitOK, ""},
		{"rolled out, the gate passed", executor.RolloutStatus{State: executor.StatusRolledOut, Analysis: &executor.AnalysisState{Revision: "web-new", Verdict: "pass"}}, exitOK, ""},
		{"rolled back and done", executor.RolloutStatus{State: executor.StatusRolledOut, Analysis: back}, exitHalted,
			"StatefulSet prod/web: rolled back to web-old: analysis after wave 1 failed: errors = 0.9, above 0.5; the revision that failed (web-new) is refused"},
		{"rolling back", executor.RolloutStatus{State: executor.StatusInProgress, Analysis: back}, exitOK, ""},
		{"halted", executor.RolloutStatus{State: executor.StatusHalted, Halted: []string{"crash-looping"}}, exitHalted, "crash-looping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := statusErr(target, &tc.st)
			if got := exitCode(err); got != tc.code || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
				t.Errorf("exit %d, error %v; want %d and %q", got, err, tc.code, tc.want)
			}
		})
	}
}
