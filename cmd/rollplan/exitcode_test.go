package main

import (
	"encoding/json"
	"errors"
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
