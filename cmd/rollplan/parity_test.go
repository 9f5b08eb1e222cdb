package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// engineLine: the metadata that names the engine and its policy bundle, the
// only lines that may differ between engines.
var engineLine = regexp.MustCompile(`(?m)^  (engine|policyDigest): .*\n`)

// TestEnginesAgreeOnGoldenScenarios: rego, cel and native give the same
// plan, byte for byte apart from the engine's name and policy digest, on
// every golden scenario. Scenarios that run an example Rego policy run its
// CEL twin (policy.yaml in the same directory); native has no policies.
func TestEnginesAgreeOnGoldenScenarios(t *testing.T) {
	dirs, err := filepath.Glob("testdata/scenarios/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			args := scenarioArgs(t, dir)
			policy := ""
			var rest []string
			for i := 0; i < len(args); i++ {
				if args[i] == "--policy" && i+1 < len(args) {
					policy = args[i+1]
					i++
					continue
				}
				rest = append(rest, args[i])
			}
			base := append([]string{"plan", "-o", "yaml", "-f", filepath.Join(dir, "snapshot.yaml")}, rest...)
			want, err := os.ReadFile(filepath.Join(dir, "plan.golden.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			runs := map[string][]string{}
			if policy == "" {
				runs["cel"] = slices.Concat(base, []string{"--engine", "cel"})
				runs["native"] = slices.Concat(base, []string{"--engine", "native"})
			} else {
				runs["cel"] = slices.Concat(base, []string{"--engine", "cel", "--policy", filepath.Join(policy, "policy.yaml")})
			}
			for name, a := range runs {
				got, _ := runScenario(t, dir, a...)
				if !strings.Contains(got, "engine: "+name+"\n") {
					t.Fatalf("%s: the plan does not name its engine:\n%s", name, got)
				}
				w, g := engineLine.ReplaceAllString(string(want), ""), engineLine.ReplaceAllString(got, "")
				if w != g {
					t.Errorf("%s and rego disagree on %s:\n%s", name, dir, diff(w, g))
				}
			}
		})
	}
}

func TestEngineFlag(t *testing.T) {
	snap := "testdata/scenarios/deploy-rollover/snapshot.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "wasm"}, `--engine "wasm": want rego, cel or native`},
		{[]string{"--engine", "native", "--policy", "policies/examples/leader-last"}, "--engine native runs the built-in default strategy only"},
		{[]string{"--policy", "testdata/policytest/does-not-exist.yaml"}, "does-not-exist.yaml"},
	} {
		_, _, err := run(t, append([]string{"plan", "-f", snap}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
