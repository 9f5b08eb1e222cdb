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

// A budget whose value is a default says so in words, the same from every
// engine: the field or annotation left unset, then the default, not
// "default 1 unset: 1" or "(not set, default)=1".
func TestBudgetSourceOfADefault(t *testing.T) {
	b, err := os.ReadFile("testdata/scenarios/sts-orderedready-maxunavail2-v1.37/snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	unset := filepath.Join(t.TempDir(), "snapshot.yaml")
	if err := os.WriteFile(unset, []byte(strings.Replace(string(b), "        maxUnavailable: 2\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, snapshot, now, want string
	}{
		// v1.37 gate on: maxUnavailable applies, unset.
		{"native field unset", unset, "2026-11-21T22:31:55Z", "spec.updateStrategy.rollingUpdate.maxUnavailable unset: default 1"},
		// Managed OnDelete: the annotation takes the field's place.
		{"annotation unset", "testdata/scenarios/sts-inplace-image-only/snapshot.yaml", "2026-03-01T12:00:00Z", "annotation rollplan.dev/max-unavailable unset: default 1"},
	} {
		for _, eng := range []string{"rego", "cel", "native"} {
			t.Run(c.name+"/"+eng, func(t *testing.T) {
				out, stderr, err := run(t, "plan", "-o", "json", "-f", c.snapshot, "--now", c.now, "--engine", eng)
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
				if want := `"source": "` + c.want + `"`; !strings.Contains(out, want) {
					t.Errorf("the maxUnavailable budget lacks %s:\n%s", want, regexp.MustCompile(`"source": .*`).FindAllString(out, -1))
				}
			})
		}
	}
}
