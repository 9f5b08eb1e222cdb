package main

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/rollplan/rollplan/planner/policytest"
)

// regoTestRule matches the head of a test rule (test_* runs, todo_* is skipped).
var regoTestRule = regexp.MustCompile(`(?m)^(test|todo)_\w+`)

// countRegoTests counts the test rules of every _test.rego file under dir,
// per file.
func countRegoTests(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.rego") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = len(regoTestRule.FindAll(b, -1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countYAMLTests counts the tests of the RolloutPolicyTest suites under dir.
func countYAMLTests(t *testing.T, dir string) int {
	t.Helper()
	in, err := policytest.Discover([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range in.YAML {
		suites, err := policytest.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range suites {
			n += len(s.Spec.Tests)
		}
	}
	return n
}

// The shipped suites pass, and every Rego test rule of every _test.rego file
// runs once (counted from the files, so a test that stops running shows).
func TestTestShippedSuites(t *testing.T) {
	perFile := countRegoTests(t, "policies")
	rego := 0
	for _, n := range perFile {
		rego += n
	}
	yaml := countYAMLTests(t, "policies")
	if rego < 60 || yaml < 2 {
		t.Fatalf("found %d Rego and %d YAML tests under policies/: the count is broken", rego, yaml)
	}
	out, _, err := run(t, "test", "policies/")
	if err != nil {
		t.Fatalf("rollplan test policies/: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%d passed, 0 failed\n", rego+yaml); out != want {
		t.Errorf("output %q, want %q (%d Rego tests, %d YAML tests)", out, want, rego, yaml)
	}

	out, _, err = run(t, "test", "-o", "junit", "policies/")
	if err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("junit output does not parse: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, s := range doc.Suites {
		if strings.HasSuffix(s.Name, ".rego") {
			got[filepath.FromSlash(s.Name)] = s.Tests
		}
	}
	for f, n := range perFile {
		if got[f] != n {
			t.Errorf("%s: %d tests ran, the file has %d test rules", f, got[f], n)
		}
	}
	if doc.Tests != rego+yaml || doc.Failures != 0 || doc.Errors != 0 {
		t.Errorf("junit totals: tests %d failures %d errors %d, want %d 0 0", doc.Tests, doc.Failures, doc.Errors, rego+yaml)
	}
}

func TestTestFailingRego(t *testing.T) {
	out, _, err := run(t, "test", "testdata/policytest/rego-fail")
	if !errors.Is(err, errTestsFailed) {
		t.Fatalf("want errTestsFailed (exit 1), got %v", err)
	}
	want := `FAIL data.fixture.failing_test.test_deployments_go_by_wave_too
    testdata/policytest/rego-fail/policy_test.rego:10
    the test rule is false or undefined
    failed at testdata/policytest/rego-fail/policy_test.rego:11: strategy.pacing == "wave" with input as {"workload": {"kind": "Deployment"}}
ERROR data.fixture.failing_test.test_errors
    testdata/policytest/rego-fail/policy_test.rego:19
    testdata/policytest/rego-fail/policy_test.rego:17: eval_conflict_error: rule data.fixture.failing_test.conflicting produced conflicting values:
`
	if !strings.HasPrefix(out, want) {
		t.Errorf("output does not start with\n%s\ngot:\n%s", want, out)
	}
	if !strings.HasSuffix(out, "\n1 passed, 1 failed, 1 error\n") {
		t.Errorf("summary line missing:\n%s", out)
	}
	if strings.Contains(out, "PASS") {
		t.Errorf("passing tests listed without -v:\n%s", out)
	}
	out, _, _ = run(t, "test", "-v", "testdata/policytest/rego-fail")
	if !strings.Contains(out, "PASS data.fixture.failing_test.test_statefulsets_go_by_wave (") {
		t.Errorf("-v does not list the passing test:\n%s", out)
	}
}

func TestTestFailingYAML(t *testing.T) {
	out, _, err := run(t, "test", "testdata/policytest/yaml-fail")
	if !errors.Is(err, errTestsFailed) {
		t.Fatalf("want errTestsFailed (exit 1), got %v", err)
	}
	want := `FAIL wrong-expectations/decisions
    testdata/policytest/yaml-fail/suite_test.yaml: test "decisions" (spec.tests[0])
    decisions[DaemonSet/default/agent].pods[agent-mj5kw].scope:
      want: "held"
      got:  "in"
    decisions[DaemonSet/default/agent].pods[agent-ncvbn].action:
      want: "InPlace"
      got:  "Recreate"
    decisions[DaemonSet/default/agent].pods[agent-ncvbn].order:
      want: [1,"zone-b","worker-1","agent-ncvbn"]
      got:  [1,"zone-a","worker-1","agent-ncvbn"]
    decisions[DaemonSet/default/agent].pacing:
      want: "wave"
      got:  "rolling"
    decisions[DaemonSet/default/agent].halt:
      want: ["stop"]
      got:  []
FAIL wrong-expectations/plan
    testdata/policytest/yaml-fail/suite_test.yaml: test "plan" (spec.tests[1])
    plan workloads differ (- want, + got):
    @@ -41,7 +41,7 @@
            start: 1m
            actions:
              - type: Recreate
    -           pod: agent-sm787
    +           pod: agent-m5vgg
                node: worker-2
                reasons:
                  - spec.containers[app].image changed
    @@ -73,4 +73,4 @@
          recreate: 6
          held: 0
          waves: 3
    -   estimatedDuration: 2m
    +   estimatedDuration: 3m
1 passed, 2 failed
`
	if out != want {
		t.Errorf("output differs:\n%s", diff(want, out))
	}
}

func TestTestBadYAML(t *testing.T) {
	out, _, err := run(t, "test", "testdata/policytest/bad-yaml")
	if !errors.Is(err, errTestsFailed) {
		t.Fatalf("want errTestsFailed (exit 1), got %v", err)
	}
	for _, w := range []string{
		"ERROR testdata/policytest/bad-yaml/bad_test.yaml\n",
		`testdata/policytest/bad-yaml/bad_test.yaml: test "a typo" (spec.tests[0]): field expect.decisions[StatefulSet/default/web].pods[web-4]: unknown field "scop" (did you mean "scope"?); valid fields: scope, heldReason, action, reasons, order`,
		"0 passed, 0 failed, 1 error\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestTestJUnit(t *testing.T) {
	out, _, err := run(t, "test", "-o", "junit", "testdata/policytest/rego-fail", "testdata/policytest/yaml-fail", "testdata/policytest/yaml-pass")
	if !errors.Is(err, errTestsFailed) {
		t.Fatalf("want errTestsFailed, got %v", err)
	}
	var doc junitSuites
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("junit output does not parse: %v\n%s", err, out)
	}
	if doc.Tests != 7 || doc.Failures != 3 || doc.Errors != 1 || doc.Skipped != 0 {
		t.Errorf("totals: tests %d failures %d errors %d skipped %d, want 7 3 1 0", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	type counts struct{ tests, failures, errors int }
	want := map[string]counts{
		"testdata/policytest/rego-fail/policy_test.rego":           {3, 1, 1},
		"testdata/policytest/yaml-fail/suite_test.yaml":            {3, 2, 0},
		"testdata/policytest/yaml-pass/default_strategy_test.yaml": {1, 0, 0},
	}
	if len(doc.Suites) != len(want) {
		t.Errorf("%d testsuites, want %d (one per file)", len(doc.Suites), len(want))
	}
	for _, s := range doc.Suites {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected testsuite %q", s.Name)
			continue
		}
		var f, e int
		for _, c := range s.Cases {
			if c.Failure != nil {
				f++
			}
			if c.Error != nil {
				e++
			}
		}
		if got := (counts{s.Tests, s.Failures, s.Errors}); got != w || len(s.Cases) != w.tests || f != w.failures || e != w.errors {
			t.Errorf("%s: attributes %+v, cases %d/%d/%d, want %+v", s.Name, got, len(s.Cases), f, e, w)
		}
	}
	if !strings.Contains(out, "-           pod: agent-sm787\n+           pod: agent-m5vgg") {
		t.Errorf("the plan diff is not in the failure body:\n%s", out)
	}
}

// The coverage figures are those of OPA's tester over the same modules.
func TestTestCoverageMatchesTester(t *testing.T) {
	dir := "testdata/policytest/rego-fail"
	out, _, err := run(t, "test", "--coverage", dir)
	if !errors.Is(err, errTestsFailed) {
		t.Fatalf("want errTestsFailed, got %v", err)
	}

	files := []string{filepath.Join(dir, "policy.rego"), filepath.Join(dir, "policy_test.rego")}
	modules := map[string]*ast.Module{}
	for _, f := range append(files, "policies/defaults.rego") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		modules[f] = mustParse(t, f, string(b))
	}
	cov := cover.New()
	ch, err := tester.NewRunner().SetModules(modules).SetCoverageQueryTracer(cov).RunTests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	rep := cov.Report(modules)
	covered, total := 0, 0
	for _, f := range files {
		fr := rep.Files[f]
		want := fmt.Sprintf("  %6.2f%%  %s (%d of %d lines)\n", fr.Coverage, f, fr.CoveredLines, fr.CoveredLines+fr.NotCoveredLines)
		if !strings.Contains(out, want) {
			t.Errorf("output lacks the tester's figure %q:\n%s", want, out)
		}
		if fr.Coverage == 100 || fr.Coverage == 0 {
			t.Errorf("%s: coverage %v: the fixture should be partly covered", f, fr.Coverage)
		}
		covered += fr.CoveredLines
		total += fr.CoveredLines + fr.NotCoveredLines
	}
	if want := fmt.Sprintf("  %6.2f%%  total (%d of %d lines)\n", 100*float64(covered)/float64(total), covered, total); !strings.Contains(out, want) {
		t.Errorf("output lacks the overall figure %q:\n%s", want, out)
	}
	if strings.Contains(out, policytest.EmbeddedDefaults) {
		t.Errorf("the embedded default library is in the coverage report:\n%s", out)
	}
}

func mustParse(t *testing.T, name, src string) *ast.Module {
	t.Helper()
	m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTestFailUnder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.rego", "package rollplan.strategy\n\npacing := \"wave\"\n\nhalt := [\"never\"] if {\n\tinput.workload.kind == \"Job\"\n} else := []\n")
	write("policy_test.rego", "package p_test\n\nimport data.rollplan.strategy\n\ntest_pacing if {\n\tstrategy.pacing == \"wave\"\n}\n")
	out, _, err := run(t, "test", "--fail-under", "99", dir)
	if err == nil || errors.Is(err, errTestsFailed) || !strings.Contains(err.Error(), "is below --fail-under 99") {
		t.Errorf("--fail-under 99: want a coverage error, got %v\n%s", err, out)
	}
	var u usageError
	if errors.As(err, &u) {
		t.Errorf("a coverage shortfall is not a usage error")
	}
	if !strings.Contains(out, "coverage:\n") || !strings.HasSuffix(out, "1 passed, 0 failed\n") {
		t.Errorf("--fail-under prints the coverage and the summary:\n%s", out)
	}
	if _, _, err := run(t, "test", "--fail-under", "10", dir); err != nil {
		t.Errorf("--fail-under 10: %v", err)
	}
}

func TestTestUsageAndPaths(t *testing.T) {
	for _, args := range [][]string{
		{"test"},
		{"test", "-o", "xml", "policies/"},
		{"test", "--fail-under", "150", "policies/"},
		{"test", "--no-such-flag", "policies/"},
	} {
		_, _, err := run(t, args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("rollplan %s: want a usage error (exit 2), got %v", strings.Join(args, " "), err)
		}
	}
	_, _, err := run(t, "test", "policies/", "no/such/dir")
	var u usageError
	if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), "test path no/such/dir does not exist") {
		t.Errorf("a missing PATH: want an error naming it (exit 1), got %v", err)
	}
	_, _, err = run(t, "test", "testdata/scenarios/ds-maxsurge")
	if err == nil || !strings.Contains(err.Error(), "no tests found under testdata/scenarios/ds-maxsurge") {
		t.Errorf("a PATH without tests: got %v", err)
	}
}

// rollplan test warns about what plan would warn about in the policy under
// test: a misspelt decision rule has no effect, and its tests may pass.
func TestTestWarnsAboutThePolicy(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"policy.rego": "package rollplan.strategy\n\nscopes(pod) := {\"in\": false, \"reason\": \"pinned\"} if pod.labels.pinned == \"true\"\n",
		"policy_test.rego": "package rollplan.strategy_test\n\nimport data.rollplan.strategy\n\n" +
			"test_pinned if strategy.scopes({\"labels\": {\"pinned\": \"true\"}}).in == false\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := run(t, "test", dir)
	if err != nil {
		t.Fatalf("rollplan test: %v\n%s%s", err, out, errOut)
	}
	want := "warning: policy " + filepath.Join(dir, "policy.rego") + ":3: rule scopes is not a decision point of package rollplan.strategy and no rule uses it: it has no effect (did you mean scope?)"
	if strings.Count(errOut, want) != 1 {
		t.Errorf("stderr should hold once:\n%s\ngot:\n%s", want, errOut)
	}
}

// A test that runs past --timeout says which flag stopped it.
func TestTestTimeoutNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	src := "package slow_test\n\ntest_slow if {\n\tevery i in numbers.range(1, 3000) {\n\t\tevery j in numbers.range(1, 3000) {\n\t\t\ti + j > 0\n\t\t}\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "slow_test.rego"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "test", "--timeout", "200ms", dir)
	if err == nil {
		t.Fatalf("a test past its timeout passed:\n%s", out)
	}
	if !strings.Contains(out, "rollplan test --timeout: raise it") {
		t.Errorf("output does not name --timeout:\n%s", out)
	}
}

// rollplan test --kubernetes-version: the version of the cases that name
// none; a case's own kubernetesVersion wins.
func TestTestKubernetesVersionFlag(t *testing.T) {
	suite := `apiVersion: rollplan.dev/v1alpha1
kind: RolloutPolicyTest
metadata: {name: versions}
spec:
  tests:
    - name: maxUnavailable 2 takes two at a time
      snapshot: ` + filepath.Join(wd(t), "testdata/scenarios/sts-parallel-two-phase-v1.37/snapshot.yaml") + `
      now: "2026-03-01T12:00:00Z"
      expect:
        decisions:
          StatefulSet/default/web:
            budgets: [{name: maxUnavailable, maxUnavailable: 4, source: "spec.updateStrategy.rollingUpdate.maxUnavailable=40% of 10 = 4, floor: 4"}]
    - name: its own version wins
      snapshot: ` + filepath.Join(wd(t), "testdata/scenarios/sts-parallel-two-phase-v1.37/snapshot.yaml") + `
      now: "2026-03-01T12:00:00Z"
      kubernetesVersion: v1.37
      expect:
        decisions:
          StatefulSet/default/web:
            budgets: [{name: maxUnavailable, maxUnavailable: 4, source: "spec.updateStrategy.rollingUpdate.maxUnavailable=40% of 10 = 4, floor: 4"}]
`
	f := filepath.Join(t.TempDir(), "versions_test.yaml")
	if err := os.WriteFile(f, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "test", f); err != nil || out != "2 passed, 0 failed\n" {
		t.Errorf("default version (v1.37): %v\n%s", err, out)
	}
	out, _, err := run(t, "test", "--kubernetes-version", "v1.36", f)
	if !errors.Is(err, errTestsFailed) || !strings.Contains(out, "FAIL versions/maxUnavailable 2 takes two at a time") || !strings.Contains(out, "1 passed, 1 failed") {
		t.Errorf("--kubernetes-version v1.36: want the first case to fail (one pod at a time), got %v\n%s", err, out)
	}
	if _, _, err := run(t, "test", "--kubernetes-version", "v1.20", f); exitCode(err) != 2 {
		t.Errorf("--kubernetes-version v1.20: want a usage error, got %v", err)
	}
}

func wd(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
