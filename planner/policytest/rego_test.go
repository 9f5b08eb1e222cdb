package policytest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGroupRego(t *testing.T) {
	files := []string{
		"policies/defaults.rego",
		"policies/defaults_test.rego",
		"policies/examples/a/policy.rego",
		"policies/examples/a/policy_test.rego",
		"policies/examples/a/lib/helpers.rego",
		"policies/examples/b/policy.rego",
		"policies/examples/b/tests/policy_test.rego",
		"policies/examples/no-tests/policy.rego",
	}
	got := GroupRego(files)
	want := []RegoSuite{
		{Root: "policies", Files: []string{"policies/defaults.rego", "policies/defaults_test.rego", "policies/examples/b/policy.rego", "policies/examples/no-tests/policy.rego"}},
		{Root: "policies/examples/a", Files: []string{"policies/examples/a/lib/helpers.rego", "policies/examples/a/policy.rego", "policies/examples/a/policy_test.rego"}},
		{Root: "policies/examples/b/tests", Files: []string{"policies/examples/b/tests/policy_test.rego"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GroupRego:\n got %q\nwant %q", got, want)
	}

	// A policy under no test directory joins every suite: rollplan test
	// policy.rego tests/ tests policy.rego.
	got = GroupRego([]string{"p/policy.rego", "p/tests/a_test.rego", "p/other/b_test.rego"})
	want = []RegoSuite{
		{Root: "p/other", Files: []string{"p/other/b_test.rego", "p/policy.rego"}},
		{Root: "p/tests", Files: []string{"p/policy.rego", "p/tests/a_test.rego"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GroupRego with a shared file:\n got %q\nwant %q", got, want)
	}
	if got := GroupRego([]string{"p/policy.rego"}); len(got) != 0 {
		t.Errorf("no tests, no suites: %q", got)
	}
}

func TestRunRego(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The embedded default library is there for a suite without it.
	write("ok/p_test.rego", `package ok_test

import data.rollplan.defaults

test_defaults_loaded if defaults.deny == []

todo_test_later if false

test_cases[name] := name != "c" if {
	some name in ["a", "b", "c"]
}

test_print if {
	print("hello")
	false
}
`)
	write("broken/p_test.rego", "package broken_test\n\ntest_x if {\n")
	in, err := Discover([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	run, err := RunRego(context.Background(), GroupRego(in.Rego), RegoOptions{Coverage: true})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Result{}
	for _, r := range run.Results {
		byID[r.ID] = r
	}
	for id, want := range map[string]Status{
		"data.ok_test.test_defaults_loaded":         Pass,
		"data.ok_test.todo_test_later":              Skip,
		"data.ok_test.test_cases/a":                 Pass,
		"data.ok_test.test_cases/b":                 Pass,
		"data.ok_test.test_print":                   Fail,
		filepath.Join(dir, "broken") + " (compile)": Error,
	} {
		if r, ok := byID[id]; !ok || r.Status != want {
			t.Errorf("%s: %v (found %t), want %v", id, r.Status, ok, want)
		}
	}
	if len(run.Results) != 7 {
		t.Errorf("%d results, want 7: %+v", len(run.Results), run.Results)
	}
	if d := byID["data.ok_test.test_print"].Detail; !strings.Contains(d, "output:\n  hello") || !strings.Contains(d, "failed at ") {
		t.Errorf("failure detail lacks the print output or the failing line:\n%s", d)
	}
	if d := byID[filepath.Join(dir, "broken")+" (compile)"].Detail; !strings.Contains(d, "p_test.rego:4: rego_parse_error") {
		t.Errorf("compile error does not name the file and line: %s", d)
	}
	if run.Coverage == nil {
		t.Fatal("no coverage")
	}
	if _, ok := run.Coverage.Files[EmbeddedDefaults]; ok {
		t.Error("the embedded library is in the coverage report")
	}
	if _, ok := run.Coverage.Files[filepath.Join(dir, "ok/p_test.rego")]; !ok {
		t.Errorf("coverage lacks the test file: %v", run.Coverage.Files)
	}
}
