package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainGolden compares explain's output, for a pod and for a wave
// (--wave), in text, JSON and YAML, with testdata/explain/*.golden (go
// test ./cmd/rollplan -run TestExplainGolden -update rewrites them).
func TestExplainGolden(t *testing.T) {
	cases := []struct {
		name, scenario string
		args           []string
	}{
		{"sts-web-3.txt", "sts-partition-gate-off", []string{"web-3"}},
		{"sts-web-3.json", "sts-partition-gate-off", []string{"web-3", "-o", "json"}},
		{"sts-web-3.yaml", "sts-partition-gate-off", []string{"web-3", "-o", "yaml"}},
		{"sts-web-1-held.json", "sts-partition-gate-off", []string{"default/web-1", "-o", "json"}},
		{"sts-wave-2.txt", "sts-partition-gate-off", []string{"--wave", "2", "statefulset/web"}},
		{"sts-wave-2.json", "sts-partition-gate-off", []string{"--wave", "2", "statefulset/web", "-o", "json"}},
		{"sts-wave-2.yaml", "sts-partition-gate-off", []string{"--wave", "2", "sts/web", "-o", "yaml"}},
		{"sts-missing-replicas-wave-1.txt", "sts-missing-replicas", []string{"--wave", "1", "sts/db"}},
		{"ds-agent-dmp4p.txt", "ds-maxunavailable-int", []string{"agent-dmp4p"}},
		{"ds-wave-3.txt", "ds-maxunavailable-int", []string{"--wave", "3", "ds/agent"}},
		{"deploy-wave-2.txt", "deploy-rolling-10-25pct", []string{"--wave", "2", "deploy/api"}},
		{"deploy-wave-2.json", "deploy-rolling-10-25pct", []string{"--wave", "2", "deploy/api", "-o", "json"}},
		{"deploy-removed-pod.txt", "deploy-rolling-10-25pct", []string{"api-647569c96f-hsh4q"}},
		{"zone-wave-2.txt", "example-one-zone-at-a-time", []string{"--wave", "2", "daemonset/agent"}},
		// explain takes plan's --change (in the scenario's args): the pod's
		// place in the rollout the proposed manifest would cause.
		{"change-sts-web-2.txt", "change-sts-inplace", []string{"web-2"}},
		{"change-sts-wave-2.txt", "change-sts-inplace", []string{"--wave", "2", "sts/web"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata/scenarios", c.scenario)
			args := append(append([]string{"explain"}, c.args...), "-f", filepath.Join(dir, "snapshot.yaml"))
			out, stderr, err := run(t, append(args, scenarioArgs(t, dir)...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			checkGolden(t, filepath.Join("testdata/explain", c.name+".golden"), out, "TestExplainGolden")
		})
	}
}

// explain --wave names the workload and what exists when the wave or the
// workload is not there.
func TestExplainWaveErrors(t *testing.T) {
	const dir = "testdata/scenarios/sts-partition-gate-off"
	snap := filepath.Join(dir, "snapshot.yaml")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--wave", "4", "statefulset/web"}, exitError, "StatefulSet default/web has 3 waves: want --wave 1 to 3, not 4"},
		{[]string{"--wave", "0", "sts/web"}, exitError, "StatefulSet default/web has 3 waves"},
		{[]string{"--wave", "1", "sts/nope"}, exitError, "StatefulSet nope is not in the snapshot: it has StatefulSet default/web"},
		{[]string{"--wave", "1", "deploy/web", "-n", "other"}, exitError, `Deployment web is not in namespace "other" of the snapshot: it has StatefulSet default/web`},
		{[]string{"--wave", "1", "pod/web-1"}, exitUsage, `kind "pod" is not a workload rollplan plans`},
		{[]string{"--wave", "1", "web"}, exitUsage, "want KIND/NAME"},
		{[]string{"web-3", "-o", "table"}, exitUsage, `-o "table": want text, json, yaml`},
	}
	for _, c := range cases {
		_, _, err := run(t, append(append(append([]string{"explain"}, c.args...), "-f", snap), scenarioArgs(t, dir)...)...)
		if exitCode(err) != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("explain %q: exit %d, %v; want exit %d and %q", c.args, exitCode(err), err, c.code, c.want)
		}
	}
}
