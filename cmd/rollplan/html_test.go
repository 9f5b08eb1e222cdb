package main

import (
	"path/filepath"
	"regexp"
	"testing"
)

// htmlGoldenScenario is the one scenario whose HTML page is kept as a
// golden file: small, with a wave per pod and an explain for each.
const htmlGoldenScenario = "testdata/scenarios/sts-inplace-image-only"

// TestGoldenHTML compares `plan -o html` of one scenario with its golden
// page (go test ./cmd/rollplan -update rewrites it): the page is
// byte-identical from run to run.
func TestGoldenHTML(t *testing.T) {
	dir := htmlGoldenScenario
	args := append([]string{"plan", "-f", filepath.Join(dir, "snapshot.yaml"), "-o", "html"}, scenarioArgs(t, dir)...)
	out, _ := runScenario(t, dir, args...)
	again, _ := runScenario(t, dir, args...)
	if out != again {
		t.Fatalf("two runs of plan -o html differ:\n%s", diff(out, again))
	}
	checkGolden(t, filepath.Join(dir, "plan.golden.html"), out, "TestGoldenHTML")
}

// The page fetches nothing: no element loads a URL, no stylesheet imports
// one, no script is loaded from a file.
var fetches = regexp.MustCompile(`(?i)<(link|img|iframe|object|embed|source|video|audio)\b|\bsrc=|@import|url\(|https?://|//fonts\.`)

func TestHTMLFetchesNothing(t *testing.T) {
	for _, dir := range []string{htmlGoldenScenario, "testdata/scenarios/example-cordon-nodes", "testdata/scenarios/deploy-rolling-10-25pct", "testdata/scenarios/mixed-invalid-workload"} {
		args := append([]string{"plan", "-f", filepath.Join(dir, "snapshot.yaml"), "-o", "html"}, scenarioArgs(t, dir)...)
		out, _ := runScenario(t, dir, args...)
		if m := fetches.FindString(out); m != "" {
			t.Errorf("%s: the page would fetch something: %q", dir, m)
		}
	}
}
