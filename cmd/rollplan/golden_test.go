package main

import (
	"bytes"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/scenarios")

// Tests run from the repository root: scenario args name policies by their
// path from there.
func TestMain(m *testing.M) {
	if err := os.Chdir("../.."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func scenarioArgs(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// scenarioExit is the exit code a scenario's plan ends with: the number in
// its exit-code file, 0 without one (README "Exit codes").
func scenarioExit(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "exit-code"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s/exit-code: %v", dir, err)
	}
	return code
}

// runScenario runs a plan of the scenario in dir and fails unless it ends
// with the scenario's exit code.
func runScenario(t *testing.T, dir string, args ...string) (string, string) {
	t.Helper()
	out, stderr, err := run(t, args...)
	if got, want := exitCode(err), scenarioExit(t, dir); got != want {
		t.Fatalf("%s: exit code %d, want %d (%v)\n%s", dir, got, want, err, stderr)
	}
	return out, stderr
}

// TestGoldenScenarios plans every scenario and compares the YAML plan and
// the table with the golden files (go test ./cmd/rollplan -update rewrites them).
func TestGoldenScenarios(t *testing.T) {
	dirs, err := filepath.Glob("testdata/scenarios/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			base := append([]string{"plan", "-f", filepath.Join(dir, "snapshot.yaml")}, scenarioArgs(t, dir)...)
			for _, g := range []struct{ format, file string }{{"yaml", "plan.golden.yaml"}, {"table", "plan.golden.txt"}} {
				out, _ := runScenario(t, dir, append(base, "-o", g.format)...)
				checkGolden(t, filepath.Join(dir, g.file), out, "TestGoldenScenarios")
			}
		})
	}
}

// checkGolden compares got with the golden file, or rewrites the file under
// -update; test names the test whose -update rewrites it (the hint).
func checkGolden(t *testing.T, golden, got, test string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("missing golden file (run go test ./cmd/rollplan -run %s -update): %v", test, err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test ./cmd/rollplan -run %s -update after checking the change):\n%s", golden, test, diff(string(want), got))
	}
}

// TestPlanIsDeterministic: the same snapshot in another document order and
// the same policy give byte-identical JSON.
func TestPlanIsDeterministic(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/scenarios/*")
	tmp := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	for _, dir := range dirs {
		snap, err := os.ReadFile(filepath.Join(dir, "snapshot.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		docs := strings.Split(string(snap), "\n---\n")
		rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
		shuffled := filepath.Join(tmp, filepath.Base(dir)+".yaml")
		if err := os.WriteFile(shuffled, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		args := scenarioArgs(t, dir)
		a, _ := runScenario(t, dir, append([]string{"plan", "-o", "json", "-f", filepath.Join(dir, "snapshot.yaml")}, args...)...)
		b, _ := runScenario(t, dir, append([]string{"plan", "-o", "json", "-f", shuffled}, args...)...)
		if a != b {
			t.Errorf("%s: the plan depends on document order:\n%s", dir, diff(a, b))
		}
	}
}

func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var sb strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			sb.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + a + "\n  got:  " + b + "\n")
			if sb.Len() > 3000 {
				break
			}
		}
	}
	return sb.String()
}
