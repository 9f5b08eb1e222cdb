package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/plan"
)

// plan's exit code is the README's table: 1 when a workload could not be
// planned (the others are), 3 halted, 4 stalled, 0 otherwise or, for 3 and
// 4, with --allow-halted.
func TestPlanExitCodes(t *testing.T) {
	const (
		mixed   = "testdata/scenarios/mixed-invalid-workload/snapshot.yaml"
		stalled = "testdata/scenarios/stalled-plan/snapshot.yaml"
		halted  = "testdata/scenarios/sts-inplaceonly-halt/snapshot.yaml"
		valid   = "testdata/scenarios/sts-ondelete-managed/snapshot.yaml"
	)
	cases := []struct {
		name string
		args []string
		code int
		// workloads: kind/name of the plan's workloads, in order; error: the
		// one that could not be planned ("" for none).
		workloads []string
		error     string
		stderr    string // in the error line
	}{
		{"one invalid workload", []string{"-f", mixed}, exitError, []string{"DaemonSet/agent", "Deployment/api", "StatefulSet/web"}, "DaemonSet/agent",
			`DaemonSet default/agent: annotation rollplan.dev/managed="yes": want "true" or "false" (1 of 3 workloads could not be planned; the others are)`},
		{"only a valid workload selected", []string{"-f", mixed, "--workload", "deploy/api"}, exitOK, []string{"Deployment/api"}, "", ""},
		{"only the invalid workload selected", []string{"-f", mixed, "--workload", "ds/agent"}, exitError, []string{"DaemonSet/agent"}, "DaemonSet/agent",
			`DaemonSet default/agent: annotation rollplan.dev/managed="yes"`},
		{"--allow-halted does not hide an error", []string{"-f", mixed, "--allow-halted"}, exitError, []string{"DaemonSet/agent", "Deployment/api", "StatefulSet/web"}, "DaemonSet/agent", "could not be planned"},
		{"stalled", []string{"-f", stalled}, exitStalled, []string{"StatefulSet/web"}, "",
			"stalled: StatefulSet default/web after 0s: pod web-4 cannot start without exceeding budget maxUnavailable"},
		{"stalled, allowed", []string{"-f", stalled, "--allow-halted"}, exitOK, []string{"StatefulSet/web"}, "", ""},
		{"halted", []string{"-f", halted}, exitHalted, []string{"StatefulSet/web"}, "", "halted: StatefulSet default/web: InPlaceOnly: pod web-0"},
		{"halted, allowed", []string{"-f", halted, "--allow-halted"}, exitOK, []string{"StatefulSet/web"}, "", ""},
		{"rolls out", []string{"-f", valid}, exitOK, []string{"StatefulSet/web"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"plan", "-o", "json", "--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36"}, c.args...)
			out, _, err := run(t, args...)
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit code %d, want %d (%v)", got, c.code, err)
			}
			if c.stderr != "" && (err == nil || !strings.Contains(errorLine(newPlanCommand(), err), c.stderr)) {
				t.Errorf("error %v, want one containing %q", err, c.stderr)
			}
			var p plan.Plan
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("the plan is printed whatever the exit code: %v\n%s", err, out)
			}
			var names []string
			failed := ""
			for _, wp := range p.Workloads {
				names = append(names, wp.Kind+"/"+wp.Name)
				if wp.Error != "" {
					failed += wp.Kind + "/" + wp.Name
				}
			}
			if strings.Join(names, " ") != strings.Join(c.workloads, " ") || failed != c.error {
				t.Errorf("workloads %v with error %q, want %v with %q", names, failed, c.workloads, c.error)
			}
		})
	}
}

// The valid workloads of a snapshot with an invalid one are planned
// exactly as without it: no silently different plan.
func TestPlanOneInvalidWorkload(t *testing.T) {
	flags := []string{"-o", "json", "--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36"}
	mixed, _, _ := run(t, append([]string{"plan", "-f", "testdata/scenarios/mixed-invalid-workload/snapshot.yaml"}, flags...)...)
	var p plan.Plan
	if err := json.Unmarshal([]byte(mixed), &p); err != nil {
		t.Fatal(err)
	}
	byName := map[string]plan.WorkloadPlan{}
	for _, wp := range p.Workloads {
		byName[wp.Kind+"/"+wp.Name] = wp
	}
	for name, scenario := range map[string]string{"Deployment/api": "deploy-inplace-managed", "StatefulSet/web": "sts-ondelete-managed"} {
		alone, _, err := run(t, append([]string{"plan", "-f", "testdata/scenarios/" + scenario + "/snapshot.yaml"}, flags...)...)
		if err != nil {
			t.Fatal(err)
		}
		var q plan.Plan
		if err := json.Unmarshal([]byte(alone), &q); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(byName[name])
		b, _ := json.Marshal(q.Workloads[0])
		if string(a) != string(b) {
			t.Errorf("%s is planned differently beside the invalid workload:\n%s", name, diff(string(b), string(a)))
		}
	}
	if wp := byName["DaemonSet/agent"]; wp.Error == "" || len(wp.Waves) != 0 {
		t.Errorf("DaemonSet/agent: error %q, %d waves: want its error and nothing planned", wp.Error, len(wp.Waves))
	}
	// explain names the workload a pod may belong to.
	_, _, err := run(t, "explain", "agent-5f729", "-f", "testdata/scenarios/mixed-invalid-workload/snapshot.yaml", "--now", "2026-03-01T12:00:00Z")
	if err == nil || !strings.Contains(err.Error(), `it may be a pod of a workload that could not be planned: DaemonSet default/agent: annotation rollplan.dev/managed="yes"`) {
		t.Errorf("explain of a pod of the invalid workload: %v", err)
	}
}

// exitCode maps every outcome to the table's code.
func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("bad input"), exitError},
		{usageError{errors.New("bad flag")}, exitUsage},
		{&executor.HaltedError{}, exitHalted},
		{codedError{exitStalled, errors.New("stalled")}, exitStalled},
		{codedError{exitHalted, errors.New("halted")}, exitHalted},
		{codedError{exitError, errors.New("a workload failed")}, exitError},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// status exits by the same table: 3 halted, 4 stalled, 0 otherwise (a
// rollout nobody drives is not an error).
func TestStatusExitCodes(t *testing.T) {
	march := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		scenario string
		code     int
		state    string
		verdict  string
	}{
		{"stalled-plan", exitStalled, executor.StatusStalled, "stalled for 1m0s: budget maxUnavailable is used up (1/1): pod web-4 cannot start without exceeding budget maxUnavailable"},
		{"sts-inplaceonly-halt", exitHalted, executor.StatusHalted, "halted: InPlaceOnly"},
		{"sts-ondelete-managed", exitOK, executor.StatusWaitingForDriver, "waiting for a driver (run rollplan apply, or install the controller)"},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			fakeApply(t, march, c.scenario)
			out, _, err := run(t, "status", "sts/web", "-o", "json", "--kubernetes-version", "v1.36")
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit code %d, want %d (%v)", got, c.code, err)
			}
			var st executor.RolloutStatus
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatal(err)
			}
			if st.State != c.state || !strings.HasPrefix(st.Verdict, c.verdict) {
				t.Errorf("%s %q, want %s %q", st.State, st.Verdict, c.state, c.verdict)
			}
		})
	}
}

// Every command's help ends with the one exit-code table, and none words
// its exit codes another way.
func TestHelpEndsWithTheExitCodeTable(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !strings.HasSuffix(c.Long, exitCodesHelp) {
			t.Errorf("%s: help does not end with the exit-code table", c.CommandPath())
		}
		rest := strings.TrimSuffix(c.Long, exitCodesHelp)
		for _, other := range []string{"Exit codes", "Exit status", "exit codes as"} {
			if strings.Contains(rest, other) {
				t.Errorf("%s: help words its exit codes apart from the table (%q)", c.CommandPath(), other)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}

// Input that plans nothing is not a success a CI job should take for one
// (README "Exit codes"): a snapshot without a workload and a change that
// replaces none exit 1, saying why, unless --allow-empty; a kind slip is
// an error naming the object whatever the flags.
func TestNothingToPlanExits1(t *testing.T) {
	tmp := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const now = "--now=2026-03-01T12:00:00Z"
	nodes := write("nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: worker-1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: worker-2}\n")
	emptyList := write("empty.yaml", "apiVersion: v1\nkind: List\nmetadata: {annotations: {rollplan.dev/captured-at: \"2026-03-01T12:00:00Z\"}}\nitems: []\n")
	b, err := os.ReadFile("testdata/scenarios/change-sts-inplace/snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	real := write("real.yaml", strings.ReplaceAll(string(b), "namespace: default", "namespace: real"))
	change := "testdata/scenarios/change-sts-inplace/change"
	b, err = os.ReadFile(filepath.Join(change, "web.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	typo := write("typo.yaml", strings.Replace(string(b), "kind: StatefulSet", "kind: Daemonset", 1)+"---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n")
	snapTypo := write("snap-typo.yaml", strings.Replace(string(b), "kind: StatefulSet", "kind: Statefulset", 1)+"---\napiVersion: v1\nkind: Node\nmetadata: {name: worker-1}\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // in the error
		out  string   // in stdout
	}{
		{"a snapshot of Nodes only", []string{"plan", "-f", nodes, now}, exitError,
			[]string{nodes + ": the snapshot holds no Deployment, StatefulSet or DaemonSet (only 2 Node(s)): nothing to plan", "--allow-empty"}, ""},
		{"without --now: the same, not its time", []string{"plan", "-f", nodes}, exitError,
			[]string{"the snapshot holds no Deployment, StatefulSet or DaemonSet"}, ""},
		{"allowed", []string{"plan", "-f", nodes, now, "--allow-empty"}, exitOK, nil, "nothing to plan"},
		{"an empty List", []string{"plan", "-f", emptyList}, exitError, []string{"holds no Kubernetes objects"}, ""},
		{"an empty List, allowed", []string{"plan", "-f", emptyList, "--allow-empty"}, exitOK, nil, "nothing to plan"},
		{"explain does not offer the flag", []string{"explain", "web-0", "-f", nodes, now}, exitError,
			[]string{"the snapshot holds no Deployment, StatefulSet or DaemonSet"}, ""},
		{"a change whose namespace was left out", []string{"plan", "-f", real, now, "--change", change}, exitError,
			[]string{`--change plans nothing: StatefulSet default/web is not in the snapshot (a StatefulSet web is in namespace "real": name it with -n real or metadata.namespace)`, "--allow-empty"}, ""},
		{"a change whose namespace was left out, allowed", []string{"plan", "-f", real, now, "--change", change, "--allow-empty"}, exitOK, nil, "nothing to plan"},
		{"the change with its namespace", []string{"plan", "-f", real, now, "--change", change, "-n", "real"}, exitOK, nil, "StatefulSet real/web"},
		{"a change for a namespace the snapshot lacks", []string{"plan", "-f", "testdata/scenarios/change-sts-inplace/snapshot.yaml", now, "--change", real}, exitError,
			[]string{"--change plans nothing: StatefulSet real/web is not in the snapshot"}, ""},
		{"a kind slip in a change", []string{"plan", "-f", real, now, "--change", typo, "--allow-empty"}, exitError,
			[]string{typo + `: document 1: Daemonset default/web: field kind: apps/v1 has no kind "Daemonset": did you mean DaemonSet?`}, ""},
		{"a kind slip in a snapshot", []string{"plan", "-f", snapTypo, now, "--allow-empty"}, exitError,
			[]string{snapTypo + `: document 1: Statefulset web: field kind: apps/v1 has no kind "Statefulset": did you mean StatefulSet?`}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, err := run(t, c.args...)
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if c.args[0] == "explain" && strings.Contains(err.Error(), "--allow-empty") {
				t.Errorf("explain has no --allow-empty, its error offers it: %v", err)
			}
			if !strings.Contains(out, c.out) {
				t.Errorf("stdout lacks %q:\n%s", c.out, out)
			}
		})
	}
	// Against a live cluster, a change for a namespace the cluster does
	// not have the workload in plans nothing too.
	fakeCluster(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), real)
	live := []string{"plan", "--change", filepath.Join(change, "web.yaml"), "--context", "test", now}
	if _, _, err := run(t, live...); exitCode(err) != exitError || !strings.Contains(err.Error(), "--change plans nothing: StatefulSet default/web is not in the cluster") {
		t.Errorf("live change of nothing: exit %d (%v), want 1 saying the workload is not in the cluster", exitCode(err), err)
	}
	if out, _, err := run(t, append(live, "--allow-empty")...); err != nil || !strings.Contains(out, "nothing to plan") {
		t.Errorf("live change of nothing with --allow-empty: %v\n%s", err, out)
	}
}

// -o text is the table for every command that prints one, as explain
// calls its own layout: plan, status and history print the same for both.
func TestOutputText(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "sts-ondelete-managed")
	for _, args := range [][]string{
		{"plan", "-f", "testdata/scenarios/sts-ondelete-managed/snapshot.yaml", "--now", "2026-03-01T12:00:00Z"},
		{"status", "sts/web"},
		{"history", "sts/web"},
	} {
		table, _, err := run(t, append(args, "-o", "table")...)
		if err != nil {
			t.Fatalf("%v -o table: %v", args, err)
		}
		text, _, err := run(t, append(args, "-o", "text")...)
		if err != nil || text != table {
			t.Errorf("%v -o text: %v\n%s\nwant the table:\n%s", args, err, text, table)
		}
	}
}
