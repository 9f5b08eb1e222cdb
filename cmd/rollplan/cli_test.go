package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"two pods with one name", pod + "---\n" + pod, []string{"Pod default/p is defined twice"}},
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
}
