package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Bad input gives one clear error naming the object and field, never a
// panic or a silent plan.
func TestBadInputErrors(t *testing.T) {
	deploy := func(strategy string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: default, uid: d1, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  replicas: 3
  selector: {matchLabels: {app: api}}
  strategy: ` + strategy + `
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: app, image: "app:1"}]}
`
	}
	sts := func(extra string) string {
		return `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: default, uid: s1, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  ` + extra + `
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "app:1"}]}
`
	}
	pod := `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {containers: [{name: app, image: "app:1"}]}
`
	cases := []struct {
		name, snapshot string
		want           []string
	}{
		{"malformed YAML", "kind: Deployment\n  bad: [", []string{"document 1", "not valid YAML"}},
		{"valid control", deploy("{type: RollingUpdate}") + "\n", nil},
		{"maxUnavailable abc", deploy("{type: RollingUpdate, rollingUpdate: {maxUnavailable: abc}}"), []string{"Deployment default/api", "spec.strategy.rollingUpdate.maxUnavailable", `"abc"`}},
		{"maxUnavailable 120%", deploy(`{type: RollingUpdate, rollingUpdate: {maxUnavailable: "120%"}}`), []string{"Deployment default/api", "maxUnavailable", "greater than 100%"}},
		{"negative maxSurge", deploy("{type: RollingUpdate, rollingUpdate: {maxSurge: -1}}"), []string{"spec.strategy.rollingUpdate.maxSurge", "-1"}},
		{"negative partition", sts("updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: -2}}"), []string{"StatefulSet default/web", "partition -2"}},
		{"replicas is a string", strings.Replace(deploy("{type: RollingUpdate}"), "replicas: 3", "replicas: three", 1), []string{"Deployment default/api", "spec.replicas"}},
		{"no template", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web, namespace: default, creationTimestamp: \"2026-01-01T00:00:00Z\"}\nspec: {replicas: 1}\n", []string{"StatefulSet default/web", "spec.template.spec.containers is empty"}},
		{"two pods with one name", pod + "---\n" + strings.Replace(pod, `"app:1"`, `"app:2"`, 1), []string{"Pod default/p is defined twice with different content"}},
		{"bad managed annotation", strings.Replace(sts("updateStrategy: {type: OnDelete}"), "uid: s1,", "uid: s1, annotations: {rollplan.dev/managed: \"yes\"},", 1), []string{"StatefulSet default/web", "rollplan.dev/managed"}},
		{"bad paused annotation", strings.Replace(sts("updateStrategy: {type: OnDelete}"), "uid: s1,", "uid: s1, annotations: {rollplan.dev/paused: \"yes\"},", 1), []string{"StatefulSet default/web", "rollplan.dev/paused", `"yes"`, "rollplan resume"}},
		{"bad max-unavailable annotation", strings.Replace(sts("updateStrategy: {type: OnDelete}"), "uid: s1,", "uid: s1, annotations: {rollplan.dev/managed: \"true\", rollplan.dev/max-unavailable: \"lots\"},", 1), []string{"StatefulSet default/web", "rollplan.dev/max-unavailable", `"lots"`}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(f, []byte(c.snapshot), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, err := run(t, "plan", "-f", f)
			if c.want == nil {
				if err != nil {
					t.Fatalf("valid snapshot failed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q, got a plan:\n%s", c.want, out)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error should be one line: %q", err)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{"plan"},
		{"plan", "-f", "testdata/scenarios/ds-maxsurge/snapshot.yaml", "-o", "xml"},
		{"plan", "-f", "testdata/scenarios/ds-maxsurge/snapshot.yaml", "--now", "yesterday"},
		{"plan", "-f", "testdata/scenarios/ds-maxsurge/snapshot.yaml", "--feature-gates", "Foo=true"},
		{"plan", "-f", "testdata/scenarios/ds-maxsurge/snapshot.yaml", "--workload", "Job/x"},
		{"plan", "--no-such-flag"},
		{"explain", "-f", "testdata/scenarios/ds-maxsurge/snapshot.yaml"},
		{"version", "extra"},
	}
	for _, args := range cases {
		_, _, err := run(t, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("rollplan %s: want a usage error (exit 2), got %v", strings.Join(args, " "), err)
		}
	}
}

func TestExplain(t *testing.T) {
	out, _, err := run(t, "explain", "web-4", "-f", "testdata/scenarios/example-leader-last/snapshot.yaml", "--now", "2026-03-01T12:00:00Z",
		"--feature-gates", "MaxUnavailableStatefulSet=true", "--policy", "policies/examples/leader-last")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod default/web-4 of StatefulSet web", "spec.containers[app].image", "scope:       in this rollout", "wave:        3 of 3", "maxUnavailable: limit 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run(t, "explain", "web-1", "-f", "testdata/scenarios/sts-partition-gate-off/snapshot.yaml", "--now", "2026-03-01T12:00:00Z")
	if err != nil || !strings.Contains(out, "held: ordinal 1 below partition 3") {
		t.Errorf("explain of a held pod: %v\n%s", err, out)
	}
	if _, _, err := run(t, "explain", "nope", "-f", "testdata/scenarios/sts-partition-gate-off/snapshot.yaml"); err == nil || !strings.Contains(err.Error(), "pod nope is not a pod") {
		t.Errorf("explain of an unknown pod: %v", err)
	}
	// A pod the policy holds but the controller of a native StatefulSet
	// replaces anyway: explain says both, and the wave the plan gives it.
	pin := filepath.Join(t.TempDir(), "pin.rego")
	if err := os.WriteFile(pin, []byte("package rollplan.strategy\nimport data.rollplan.defaults\nscope(p) := {\"in\": false, \"reason\": \"pinned\"} if p.name == \"web-4\" else := defaults.scope(p)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, "explain", "web-4", "-f", "testdata/scenarios/sts-partition-parallel-gate-on/snapshot.yaml", "--now", "2026-03-01T12:00:00Z", "--policy", pin, "--kubernetes-version", "v1.36")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scope:       held: pinned", "(Go overrode the policy: scope: the StatefulSet controller's (in this rollout))", "wave:        2 of 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain of a pod the policy holds and the controller replaces lacks %q:\n%s", want, out)
		}
	}
}

// execute runs rollplan as main does and returns the error line main
// prints and the exit code.
func execute(t *testing.T, args ...string) (stdout, errLine string, code int) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		errLine = errorLine(cmd, err)
	}
	return out.String(), errLine, exitCode(err)
}

// Durations that would change a plan, a deadline or a ticker (negative,
// zero, less than the second a plan counts) are usage errors naming the
// flag and the value as typed.
func TestDurationFlags(t *testing.T) {
	const snap = "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-f", snap, "--recreate-duration", "-1m"}, "--recreate-duration -1m: want a positive duration"},
		{[]string{"plan", "-f", snap, "--recreate-duration", "0"}, "--recreate-duration 0: want a positive duration"},
		{[]string{"plan", "-f", snap, "--inplace-duration", "500ms"}, "--inplace-duration 500ms: want at least 1s"},
		{[]string{"plan", "-f", snap, "--terminate-duration", "-30s"}, "--terminate-duration -30s: want a duration of at least 1s such as 30s (the default), or 0 for pods that go at once"},
		{[]string{"plan", "-f", snap, "--policy-timeout", "0s"}, "--policy-timeout 0s: want a positive duration"},
		{[]string{"plan", "-f", snap, "--recreate-duration", "soon"}, "--recreate-duration soon: want a duration such as"},
		{[]string{"explain", "api-x", "-f", snap, "--inplace-duration", "0"}, "--inplace-duration 0: want a positive duration"},
		{[]string{"apply", "sts/web", "--timeout", "-5m"}, "--timeout -5m: want a positive duration, or 0 for no limit"},
		{[]string{"apply", "sts/web", "--policy-timeout", "-1s"}, "--policy-timeout -1s: want a positive duration"},
		{[]string{"apply", "sts/web", "--request-timeout", "-1s"}, "--request-timeout -1s: want a duration"},
		{[]string{"undo", "deploy/web", "--timeout", "-1h"}, "--timeout -1h: want a positive duration, or 0 for no limit"},
		{[]string{"status", "sts/web", "--policy-timeout", "0"}, "--policy-timeout 0: want a positive duration"},
		{[]string{"gate", "--reservation-ttl", "0s"}, "--reservation-ttl 0s: want a positive duration"},
		{[]string{"gate", "--policy-reload-interval", "-10s"}, "--policy-reload-interval -10s: want a duration of at least 1s"},
		{[]string{"gate", "--policy-reload-interval", "1ms"}, "--policy-reload-interval 1ms: want a duration of at least 1s"},
		{[]string{"gate", "manifests", "--valid-for", "-24h"}, "--valid-for -24h: want a positive duration"},
		{[]string{"test", "policies/", "--timeout", "0"}, "--timeout 0: want a positive duration"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, line, code := execute(t, c.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (usage error); %s\n%s", code, exitUsage, line, out)
			}
			if !strings.Contains(line, c.want) {
				t.Errorf("error line %q does not contain %q", line, c.want)
			}
			if strings.Contains(line, "invalid argument") {
				t.Errorf("error line %q repeats pflag's wrapping", line)
			}
			if want := "run '" + "rollplan " + c.args[0]; !strings.Contains(line, want) {
				t.Errorf("error line %q does not point at %s --help", line, want)
			}
		})
	}

	// Every duration flag of every command is bounded: a new one
	// registered with pflag's DurationVar would take -1m silently.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			if _, ok := f.Value.(*boundedDuration); !ok {
				t.Errorf("%s --%s: a duration flag not registered with durationVar", c.CommandPath(), f.Name)
				return
			}
			path := strings.Fields(c.CommandPath())[1:]
			_, line, code := execute(t, append(path, "--"+f.Name, "-1m")...)
			if code != exitUsage || !strings.Contains(line, "--"+f.Name+" -1m: want") {
				t.Errorf("%s --%s -1m: exit %d, %q; want a usage error naming the flag", c.CommandPath(), f.Name, code, line)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())

	// 0 is "off" where the flag says so; positive values pass and count.
	var d time.Duration
	fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
	durationVarOff(fl, &d, "timeout", 0, zeroOrPositive, "no limit", "")
	if err := fl.Parse([]string{"--timeout", "0"}); err != nil || d != 0 {
		t.Errorf("--timeout 0: %v, %s", err, d)
	}
	out, _, err := run(t, "plan", "-f", snap, "--now", "2026-03-01T12:00:00Z", "--recreate-duration", "2m")
	if err != nil || !strings.Contains(out, "est. 4m") {
		t.Errorf("--recreate-duration 2m: %v\n%s", err, out)
	}
	// test/fidelity plans with --terminate-duration 0s: pods go at once.
	if _, _, err := run(t, "plan", "-f", snap, "--now", "2026-03-01T12:00:00Z", "--terminate-duration", "0s"); err != nil {
		t.Errorf("--terminate-duration 0s: %v", err)
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"foo"}, []string{`unknown command "foo" for "rollplan"`, "run 'rollplan --help' for the commands"}},
		{[]string{"pln", "-h"}, nil}, // -h: help of the root, exit 0
		{[]string{"pln"}, []string{`unknown command "pln"`, "did you mean plan?", "run 'rollplan --help' for the commands"}},
		{[]string{"plan", "extra"}, []string{"rollplan plan takes no arguments", "run 'rollplan plan --help' for usage"}},
		{[]string{"gate", "manifests", "--bogus"}, []string{"unknown flag: --bogus", "run 'rollplan gate manifests --help' for usage"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, line, code := execute(t, c.args...)
			if c.want == nil {
				if code != exitOK {
					t.Errorf("exit %d: %s", code, line)
				}
				return
			}
			if code != exitUsage {
				t.Errorf("exit %d, want %d: %s", code, exitUsage, line)
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("error line %q does not contain %q", line, w)
				}
			}
			if strings.Count(line, "--help") != 1 || strings.Contains(line, "\n") {
				t.Errorf("want one line with one help hint: %q", line)
			}
		})
	}
	out, line, code := execute(t)
	if code != exitOK || !strings.Contains(out, "Available Commands") {
		t.Errorf("rollplan alone: exit %d %s, want the help\n%s", code, line, out)
	}
}

// The same objects passed twice (one file twice, captures that share
// Nodes) plan as if passed once; two different objects with one name are
// an error naming both places.
func TestDuplicateObjects(t *testing.T) {
	const snap = "testdata/scenarios/ds-maxsurge/snapshot.yaml"
	once, _, err := run(t, "plan", "-f", snap, "--now", "2026-03-01T12:00:00Z", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	twice, _, err := run(t, "plan", "-f", snap, "-f", snap, "--now", "2026-03-01T12:00:00Z", "-o", "yaml")
	if err != nil {
		t.Fatalf("the same file twice: %v", err)
	}
	if once != twice {
		t.Errorf("the same file twice plans differently:\n%s\n---\n%s", once, twice)
	}
	dir := t.TempDir()
	node := func(zone string) string {
		return "apiVersion: v1\nkind: Node\nmetadata: {name: worker-1, labels: {topology.kubernetes.io/zone: " + zone + "}}\n"
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A second capture holding worker-1 again, as JSON: same object.
	same := write("same.json", `{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", "apiVersion": "v1", "metadata": {"labels": {"topology.kubernetes.io/zone": "zone-a", "kubernetes.io/hostname": "worker-1", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}, "name": "worker-1", "uid": "7a4802c1-e849-571a-9c4c-90918b2f17cd", "creationTimestamp": "2026-01-10T08:00:00Z"}, "spec": {"podCIDR": "10.244.1.0/24"}, "status": {"addresses": [{"address": "10.0.0.11", "type": "InternalIP"}], "allocatable": {"cpu": "4000m", "memory": "16Gi", "pods": 110}, "conditions": [{"lastHeartbeatTime": "2026-03-01T11:59:30Z", "lastTransitionTime": "2026-01-10T08:00:00Z", "message": "kubelet is posting ready status", "reason": "KubeletReady", "status": "True", "type": "Ready"}]}}]}`)
	if out, _, err := run(t, "plan", "-f", snap, "-f", same, "--now", "2026-03-01T12:00:00Z", "-o", "yaml"); err != nil || out != once {
		t.Errorf("a capture sharing an identical Node: %v\n%s", err, out)
	}
	a, b := write("a.yaml", node("zone-a")), write("b.yaml", node("zone-b"))
	_, line, code := execute(t, "plan", "-f", a, "-f", b, "--now", "2026-03-01T12:00:00Z")
	for _, w := range []string{b + ": document 1", "Node worker-1 is defined twice with different content", "first in " + a + ": document 1"} {
		if !strings.Contains(line, w) {
			t.Errorf("error line %q does not contain %q", line, w)
		}
	}
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
}

// Errors about what was asked for say what was looked at and what to do.
func TestWrongWayMessages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const (
		snap = "testdata/scenarios/example-leader-last/snapshot.yaml"
		now  = "2026-03-01T12:00:00Z"
	)
	empty, comments := write("empty.yaml", ""), write("comments.yaml", "# nothing yet\n---\n# still nothing\n")
	list, scalar := write("list.yaml", "- apiVersion: v1\n  kind: Pod\n"), write("scalar.yaml", "just some text\n")
	missing := filepath.Join(dir, "nonexistent.yaml")
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"empty file", []string{"plan", "-f", empty}, exitError, []string{empty + ": holds no Kubernetes objects"}},
		{"comment-only files", []string{"plan", "-f", comments, "-f", empty}, exitError, []string{comments + ", " + empty + ": hold no Kubernetes objects"}},
		{"a YAML list", []string{"plan", "-f", list}, exitError, []string{list + ": document 1: want a Kubernetes object (apiVersion, kind, metadata), got a list"}},
		{"a scalar", []string{"plan", "-f", scalar}, exitError, []string{scalar + ": document 1: want a Kubernetes object (apiVersion, kind, metadata), got a string"}},
		{"missing file", []string{"plan", "-f", missing}, exitError, []string{"-f " + missing + ": no such file or directory"}},
		{"namespace without workloads", []string{"plan", "-f", snap, "--now", now, "-n", "nope"}, exitError, []string{`namespace "nope"`, `workloads in namespace "default"`, "drop -n"}},
		{"workload in another namespace", []string{"plan", "-f", snap, "--now", now, "--workload", "sts/web", "-n", "other"}, exitError, []string{`no StatefulSet web in namespace "other"`, `namespace "default"`}},
		{"conflicting namespaces", []string{"plan", "-f", snap, "--workload", "deploy/default/api", "-n", "kube-system"}, exitUsage, []string{`"default"`, `"kube-system"`, "--workload deploy/default/api"}},
		{"explain in another namespace", []string{"explain", "web-4", "-f", snap, "--now", now, "-n", "other"}, exitError, []string{`pod web-4`, `in namespace "other"`, `namespace "default"`, "-n default"}},
		{"explain unknown pod in namespace", []string{"explain", "nope", "-f", snap, "--now", now, "-n", "default"}, exitError, []string{`pod nope`, `in namespace "default"`}},
		{"explain conflicting namespaces", []string{"explain", "default/web-4", "-f", snap, "-n", "other"}, exitUsage, []string{`"default"`, `"other"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, line, code := execute(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s\n%s", code, c.code, line, out)
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("error line %q does not contain %q", line, w)
				}
			}
			for _, bad := range []string{"pass --now", "load snapshot", "json: cannot unmarshal", "stat "} {
				if strings.Contains(line, bad) {
					t.Errorf("error line %q still says %q", line, bad)
				}
			}
		})
	}
}

// -f - reads the snapshot from the standard input, as kubectl does, once.
func TestPlanFromStdin(t *testing.T) {
	const snap = "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := run(t, "plan", "-f", snap, "--now", "2026-03-01T12:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"plan", "-f", "-", "--now", "2026-03-01T12:00:00Z"}, ""},
		{[]string{"plan", "-f", "-", "-f", "-"}, "-f -: the standard input can be read once"},
	} {
		root := newRootCommand()
		var out, errOut bytes.Buffer
		root.SetIn(bytes.NewReader(data))
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(c.args)
		err := root.Execute()
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.wantErr == "" && out.String() != want:
			t.Errorf("%v: the plan differs from -f %s:\n%s\nwant:\n%s", c.args, snap, out.String(), want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: error %v, want %q", c.args, err, c.wantErr)
		}
	}
}
