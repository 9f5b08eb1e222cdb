package policytest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const validSuite = `apiVersion: rollplan.dev/v1alpha1
kind: RolloutPolicyTest
metadata: {name: s}
spec:
  policy: ../p
  tests:
    - name: first
      snapshot: [a.yaml, b/]
      now: "2026-03-01T12:00:00Z"
      featureGates: {MaxUnavailableStatefulSet: true}
      workload: sts/default/web
      expect:
        decisions:
          StatefulSet/default/web:
            pods:
              web-0: {scope: held, heldReason: below the partition}
              web-1: {scope: in, action: InPlace, reasons: [], order: [1, "a", -1]}
            budgets: [{name: maxUnavailable, maxUnavailable: 1, source: x}]
            pacing: wave
            halt: []
    - name: second
      objects: [{apiVersion: v1, kind: Pod, metadata: {name: p}}]
      expect:
        plan:
          workloads: []
`

func TestDecodeValid(t *testing.T) {
	// Other documents and kinds in the file are ignored.
	suites, err := Decode("dir/x_test.yaml", []byte("apiVersion: v1\nkind: ConfigMap\n---\n"+validSuite))
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) != 1 {
		t.Fatalf("%d suites, want 1", len(suites))
	}
	s := suites[0]
	if s.File != "dir/x_test.yaml" || s.Doc != 2 || s.Metadata.Name != "s" {
		t.Errorf("suite identity: %q doc %d name %q", s.File, s.Doc, s.Metadata.Name)
	}
	if !reflect.DeepEqual(s.Spec.Policy, Paths{"../p"}) || !reflect.DeepEqual(s.Spec.Tests[0].Snapshot, Paths{"a.yaml", "b/"}) {
		t.Errorf("paths: policy %q snapshot %q", s.Spec.Policy, s.Spec.Tests[0].Snapshot)
	}
	wd := s.Spec.Tests[0].Expect.Decisions["StatefulSet/default/web"]
	if wd.Halt == nil || len(*wd.Halt) != 0 || wd.Deny != nil {
		t.Errorf("halt: [] is compared (empty), an omitted deny is not: halt %v deny %v", wd.Halt, wd.Deny)
	}
	if p := wd.Pods["web-0"]; p.Scope != ScopeHeld || *p.HeldReason != "below the partition" || p.Order != nil {
		t.Errorf("web-0: %+v", p)
	}
	if p := wd.Pods["web-1"]; p.Reasons == nil || len(*p.Reasons) != 0 || len(*p.Order) != 3 {
		t.Errorf("web-1: %+v", p)
	}
	if b := (*wd.Budgets)[0]; b.Name != "maxUnavailable" || *b.MaxUnavailable != 1 {
		t.Errorf("budget: %+v", b)
	}
}

// Every decoding error names the file, the test (or the document) and the field.
func TestDecodeErrors(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(validSuite, old) {
			t.Fatalf("%q is not in the suite", old)
		}
		return strings.Replace(validSuite, old, new, 1)
	}
	cases := []struct {
		name, doc, want string
	}{
		{"unknown top field", edit("spec:\n", "spec:\n  engnie: rego\n"),
			`f_test.yaml: document 1: field spec: unknown field "engnie" (did you mean "engine"?); valid fields: policy, engine, tests`},
		{"unknown pod field", edit("{scope: held,", "{scop: held,"),
			`f_test.yaml: test "first" (spec.tests[0]): field expect.decisions[StatefulSet/default/web].pods[web-0]: unknown field "scop" (did you mean "scope"?); valid fields: scope, heldReason, action, reasons, order`},
		{"wrong type", edit(`now: "2026-03-01T12:00:00Z"`, "now: 5"),
			`f_test.yaml: test "first" (spec.tests[0]): field now: want a string, got the number 5`},
		{"budget field type", edit("maxUnavailable: 1,", "maxUnavailable: one,"),
			`test "first" (spec.tests[0]): field expect.decisions[StatefulSet/default/web].budgets[0].maxUnavailable: want an integer, got the string "one"`},
		{"paths of the wrong type", edit("policy: ../p", "policy: {a: b}"),
			"document 1: field spec.policy: want a path or a list of paths, got a map"},
		{"plan workload typo", edit("workloads: []", "workloads: [{kind: StatefulSet, waevs: []}]"),
			`test "second" (spec.tests[1]): field expect.plan.workloads[0]: unknown field "waevs" (did you mean "waves"?); valid fields: kind, namespace, name,`},
		{"no plan workloads", edit("workloads: []", "{}"),
			`test "second" (spec.tests[1]): field expect.plan.workloads: missing`},
		{"bad now", edit(`now: "2026-03-01T12:00:00Z"`, "now: yesterday"),
			`test "first" (spec.tests[0]): field now: "yesterday": want an RFC 3339 time`},
		{"bad workload", edit("workload: sts/default/web", "workload: Job/x"),
			`test "first" (spec.tests[0]): field workload: "Job/x": kind must be Deployment, StatefulSet or DaemonSet`},
		{"decisions key without namespace", edit("StatefulSet/default/web:", "sts/web:"),
			`test "first" (spec.tests[0]): field expect.decisions[sts/web]: key "sts/web": want KIND/NAMESPACE/NAME`},
		{"bad scope", edit("{scope: held,", "{scope: out,"),
			`field expect.decisions[StatefulSet/default/web].pods[web-0].scope: "out": want in or held`},
		{"bad action", edit("action: InPlace", "action: Patch"),
			`field expect.decisions[StatefulSet/default/web].pods[web-1].action: "Patch": want InPlace or Recreate`},
		{"no snapshot", edit("      snapshot: [a.yaml, b/]\n", ""),
			`test "first" (spec.tests[0]): field snapshot: missing: give snapshot (paths) or objects (inline)`},
		{"snapshot and objects", edit("      snapshot: [a.yaml, b/]\n", "      snapshot: [a.yaml]\n      objects: [{}]\n"),
			`test "first" (spec.tests[0]): field objects: give snapshot or objects, not both`},
		{"no expectation", edit("        plan:\n          workloads: []\n", "        {}\n"),
			`test "second" (spec.tests[1]): field expect: missing: expect decisions, a plan or both`},
		{"duplicate test names", edit("- name: second", "- name: first"),
			`test "first" (spec.tests[1]): field name: "first" is also the name of spec.tests[0]`},
		{"unnamed test", edit("- name: second", "- name: \"\""),
			`test spec.tests[1]: field name: missing: name the test`},
		{"wrong apiVersion", edit("rollplan.dev/v1alpha1", "rollplan.dev/v1"),
			`document 1: field apiVersion: "rollplan.dev/v1": want rollplan.dev/v1alpha1`},
		{"unknown engine", edit("spec:\n", "spec:\n  engine: wasm\n"),
			`document 1: field spec.engine: "wasm": want rego, cel or native`},
		{"duplicate key", edit("metadata: {name: s}", "metadata: {name: s, name: t}"),
			`f_test.yaml: document 1: not valid YAML`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("f_test.yaml", []byte(c.doc))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "f_test.yaml: ") {
				t.Errorf("error\n  %s\nwant it to contain\n  %s", err, c.want)
			}
		})
	}
}

func TestParseWorkload(t *testing.T) {
	for in, want := range map[string][3]string{
		"sts/default/web":    {"StatefulSet", "default", "web"},
		"Deployment/api":     {"Deployment", "", "api"},
		"daemonsets/kube/ds": {"DaemonSet", "kube", "ds"},
	} {
		k, ns, n, err := ParseWorkload(in)
		if err != nil || [3]string{k, ns, n} != want {
			t.Errorf("ParseWorkload(%q) = %q %q %q %v, want %q", in, k, ns, n, err, want)
		}
	}
	for _, in := range []string{"web", "a/b/c/d", "Job/x", "sts//web", "sts/"} {
		if _, _, _, err := ParseWorkload(in); err == nil {
			t.Errorf("ParseWorkload(%q): no error", in)
		}
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a/policy.rego":        "package x",
		"a/policy_test.rego":   "package x_test",
		"a/suite_test.yaml":    "kind: RolloutPolicyTest",
		"a/snapshot.yaml":      "kind: Pod",
		"a/notes.txt":          "",
		".hidden/x_test.rego":  "package h",
		"b/deeper/s_test.yml":  "kind: RolloutPolicyTest",
		"b/deeper/other.json":  "{}",
		"b/deeper/lib/l.rego":  "package l",
		"b/deeper/lib/.x.rego": "package dot", // a file: not skipped
	}
	for f, src := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Discover([]string{dir, filepath.Join(dir, "a", "policy.rego")})
	if err != nil {
		t.Fatal(err)
	}
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	if got, want := rel(in.Rego), []string{"a/policy.rego", "a/policy_test.rego", "b/deeper/lib/.x.rego", "b/deeper/lib/l.rego"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Rego files %q, want %q", got, want)
	}
	if got, want := rel(in.YAML), []string{"a/suite_test.yaml", "b/deeper/s_test.yml"}; !reflect.DeepEqual(got, want) {
		t.Errorf("YAML files %q, want %q", got, want)
	}
	if _, err := Discover([]string{filepath.Join(dir, "nope")}); err == nil || !strings.Contains(err.Error(), "nope does not exist") {
		t.Errorf("missing path: %v", err)
	}
	if _, err := Discover([]string{filepath.Join(dir, "a", "notes.txt")}); err == nil || !strings.Contains(err.Error(), "notes.txt: not a .rego, .yaml or .yml file") {
		t.Errorf("explicit non-test file: %v", err)
	}
}
