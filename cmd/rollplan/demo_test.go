package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The README's demo block is what `make demo` prints: the Makefile's own
// recipe, run with a freshly built bin/rollplan in a folder laid out like
// a checkout; only the checkout's absolute path is normalised (issue 33:
// the README showed v1.36 revision names where the demo planned v1.37,
// without its notes).
func TestReadmeDemoIsMakeDemo(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	readme, err := os.ReadFile("README.md") // TestMain runs the tests from the repository root
	if err != nil {
		t.Fatal(err)
	}
	want := demoBlock(t, string(readme))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "bin", "rollplan"), "./cmd/rollplan")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"Makefile", "testdata", "policies"} {
		abs, err := filepath.Abs(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	// -o build: bin/rollplan is the one just built; the rest of the
	// recipe runs as written.
	demo := exec.CommandContext(ctx, "make", "--no-print-directory", "-o", "build", "demo")
	demo.Dir = root
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	got := strings.ReplaceAll(string(out), root, "/path/to/rollplan")
	if got != want {
		t.Errorf("README's demo block differs from `make demo`'s output; update the README with:\n%s\n(README has:\n%s)", got, want)
	}
	if page, err := os.Stat(filepath.Join(root, "bin/demo/plan.html")); err != nil || page.Size() < 10_000 {
		t.Errorf("make demo wrote no HTML page (%v)", err)
	}
}

// demoBlock: the README's fenced block that starts with the demo's first
// command.
func demoBlock(t *testing.T, readme string) string {
	const first = "./bin/rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/"
	_, rest, ok := strings.Cut(readme, "```\n"+first)
	if !ok {
		t.Fatalf("README has no block starting with %q", first)
	}
	block, _, ok := strings.Cut(first+rest, "```\n")
	if !ok {
		t.Fatal("README's demo block is not closed")
	}
	return block
}
