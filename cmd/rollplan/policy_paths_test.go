package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Policy files that do not fit the engine are named, with what to do,
// before any file is parsed as the wrong language.
func TestEngineKind(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	regoFile := write("r/policy.rego", "package rollplan.strategy\n")
	write("r/policy_test.yaml", "suite: x\n") // a test suite, not a CEL policy
	celFile := write("c/policy.yaml", "apiVersion: rollplan.dev/v1alpha1\n")
	write("c/policy_test.rego", "package x_test\n") // a Rego test, not a policy
	regoDir, celDir := filepath.Dir(regoFile), filepath.Dir(celFile)
	both := "policies/examples/leader-last" // policy.rego and its CEL twin policy.yaml

	tests := []struct {
		name     string
		engine   string
		policies []string
		want     string // the engine, or the error
	}{
		{"no policy", "", nil, "rego"},
		{"a Rego file", "", []string{regoFile}, "rego"},
		{"a CEL file", "", []string{celFile}, "cel"},
		{"a Rego directory", "", []string{regoDir}, "rego"},
		{"a CEL directory", "", []string{celDir}, "cel"},
		{"a directory with both is Rego", "", []string{both}, "rego"},
		{"a directory with both under --engine cel", "cel", []string{both}, "cel"},
		{"mixed files", "", []string{regoFile, celFile},
			"--policy mixes Rego (" + regoFile + ") and CEL (" + celFile + ") policies: keep one engine's files per --policy"},
		{"mixed directories", "", []string{regoDir, celDir},
			"--policy mixes Rego (" + regoDir + ") and CEL (" + celDir + ") policies: keep one engine's files per --policy"},
		{"--engine cel with a Rego file", "cel", []string{regoFile},
			"--engine cel: " + regoFile + " is not a CEL policy file (Rego policies are .rego files: use --engine rego or drop --engine)"},
		{"--engine cel with a Rego directory", "cel", []string{regoDir},
			"--engine cel: " + regoDir + " holds Rego files (.rego) and no CEL policy (Rego policies are .rego files: use --engine rego or drop --engine)"},
		{"--engine rego with a CEL file", "rego", []string{celFile},
			"--engine rego: " + celFile + " is not a Rego policy file (CEL policies are YAML: use --engine cel or drop --engine)"},
		{"--engine rego with a CEL directory", "rego", []string{celDir},
			"--engine rego: " + celDir + " holds CEL policies (.yaml) and no Rego policy (CEL policies are YAML: use --engine cel or drop --engine)"},
		{"--engine native with a policy", "native", []string{regoFile},
			"--engine native runs the built-in default strategy only: drop --policy, or pick --engine rego or cel"},
		{"unknown engine", "opa", nil, `--engine "opa": want rego, cel or native`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := planFlags{engine: tt.engine, policies: tt.policies}
			got, err := f.engineKind()
			if err != nil {
				var u usageError
				if !errors.As(err, &u) {
					t.Errorf("error %v is not a usage error", err)
				}
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("engineKind() = %q, want %q", got, tt.want)
			}
		})
	}
}

// Policy errors found while planning are one line naming the file, and exit
// 1 (not a usage error).
func TestPlanPolicyErrors(t *testing.T) {
	dir := t.TempDir()
	policyDir := func(name string, files map[string]string) string {
		t.Helper()
		d := filepath.Join(dir, name)
		for f, src := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(d, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, f), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	const snap = "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"
	noEntry := policyDir("no-entry", map[string]string{"a.rego": "package foo\n\nx := 1\n"})
	regoRack := policyDir("rego-rack", map[string]string{"p.rego": "package rollplan.strategy\n\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": 1, \"groupBy\": \"rack\"}]\n"})
	celRack := policyDir("cel-rack", map[string]string{"p.yaml": "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: p}\nspec:\n  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: \"'rack'\"\n"})
	syntax := policyDir("syntax", map[string]string{"p.rego": "package rollplan.strategy\n\nbudgets := [{\"name\":\"x\",}\n"})

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no entry package", []string{"--policy", noEntry},
			"policy " + noEntry + ": no file declares package rollplan.strategy (" + filepath.Join(noEntry, "a.rego") + " has package foo): the entry package must be rollplan.strategy; library packages it imports may sit beside it"},
		{"Rego groupBy rack", []string{"--policy", regoRack},
			"policy " + filepath.Join(regoRack, "p.rego") + ` (package rollplan.strategy): rule budgets for Deployment default/api: budget "x": groupBy "rack": want "zone", "node" or "label:<key>"`},
		{"CEL groupBy rack", []string{"--policy", celRack},
			"policy " + filepath.Join(celRack, "p.yaml") + ` (RolloutPolicy p): spec.budgets[0]: budget "x": groupBy "rack": want "zone", "node" or "label:<key>" for Deployment default/api`},
		{"Rego syntax error", []string{"--policy", syntax},
			"policy " + filepath.Join(syntax, "p.rego") + `:4: parse error: unexpected eof token: expected "," or "]" (and 1 more)`},
		{"Rego timeout", []string{"--policy-timeout", "1ns"},
			"policy evaluation for Deployment default/api stopped after 1ns (policy timeout): raise --policy-timeout"},
		{"CEL timeout", []string{"--engine", "cel", "--policy-timeout", "1ns"},
			"policy evaluation for Deployment default/api stopped after 1ns (policy timeout): raise --policy-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, append([]string{"plan", "-f", snap, "--now", "2026-03-01T12:00:00Z"}, tt.args...)...)
			if err == nil {
				t.Fatalf("planned, want the error %q:\n%s", tt.want, out)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n%v\nwant\n%s", err, tt.want)
			}
			if code := exitCode(err); code != exitError {
				t.Errorf("exit code %d, want %d", code, exitError)
			}
		})
	}
}

// A Rego package that nothing refers to has no effect: plan says so on
// stderr and plans as if it were not there.
func TestPlanPolicyWarnings(t *testing.T) {
	dir := t.TempDir()
	for f, src := range map[string]string{
		"entry.rego": "package rollplan.strategy\n\npacing := \"rolling\"\n",
		"stray.rego": "package stray\n\nx := 1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := run(t, "plan", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml", "--now", "2026-03-01T12:00:00Z", "--policy", dir, "--kubernetes-version", "v1.36")
	if err != nil {
		t.Fatal(err)
	}
	want := "warning: policy " + filepath.Join(dir, "stray.rego") + ": package stray is not the entry package (rollplan.strategy) and no other policy file refers to it: it has no effect\n"
	if errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	if !strings.Contains(out, "Deployment default/api") {
		t.Errorf("no plan:\n%s", out)
	}
}

// A --policy path that is not there is one line naming it as the flag took
// it (not "policy PATH: stat PATH: ..."), exit 1, for every command taking
// --policy, whatever the engine.
func TestMissingPolicyPath(t *testing.T) {
	fakeApply(t, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "deploy-inplace-managed")
	missing := filepath.Join(t.TempDir(), "nonexistent", "policy")
	want := "error: --policy " + missing + ": no such file or directory: pass a policy file or directory"
	for _, args := range [][]string{
		{"plan", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"},
		{"plan", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml", "--engine", "cel"},
		{"plan", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml", "--engine", "rego"},
		{"explain", "api-0", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"},
		{"apply", "deploy/api"},
		{"status", "deploy/api"},
		{"undo", "deploy/api", "--dry-run=client"},
		{"gate", "--tls-cert-file", "tls.crt", "--tls-private-key-file", "tls.key"}, // checked before the certificate is read
		{"gate", "manifests", "--image", "registry.example/rollplan:v1"},
		{"manifests", "--image", "registry.example/rollplan:v1"},
	} {
		// An existing policy first: the missing one is found among several.
		args := append(args, "--policy", "policies/examples/leader-last", "--policy", missing)
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			_, line, code := execute(t, args...)
			if code != exitError || line != want {
				t.Errorf("rollplan %s: exit %d, %q; want exit %d, %q", strings.Join(args, " "), code, line, exitError, want)
			}
		})
	}
}

// A Rego rule the compiler leaves to OPA's interpreter is planned all the
// same, with a note on stderr naming the rule and where it is; plan and
// explain print it.
func TestPlanPolicyNotes(t *testing.T) {
	dir := t.TempDir()
	src := "package rollplan.strategy\n\norder(pod) := [pod.name] if {\n\trand.intn(pod.name, 1) == 0\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "note: the policy is interpreted, not compiled (same answers, slower), because of rule data.rollplan.strategy.order (" + filepath.Join(dir, "policy.rego") + ":4): builtin rand.intn is not a pure function of its arguments\n"
	snap := "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml"
	for _, args := range [][]string{
		{"plan", "-f", snap},
		{"explain", "api-647569c96f-gn4hp", "-f", snap},
	} {
		out, errOut, err := run(t, append(args, "--now", "2026-03-01T12:00:00Z", "--policy", dir, "--kubernetes-version", "v1.36")...)
		if err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
		if errOut != want {
			t.Errorf("%s: stderr %q, want %q", args[0], errOut, want)
		}
		if out == "" {
			t.Errorf("%s: no output", args[0])
		}
	}
}
