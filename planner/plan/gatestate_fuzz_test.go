package plan

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzAnalysisState: the gate's record comes from the workload's
// annotation, which anyone with write access to the workload can edit, and
// the plan, status and the Rollout all read it. Whatever it holds, it parses
// or fails with an error naming the annotation, and what reads a parsed
// record (its state, summary and the time it still needs) never panics.
//
//	go test ./planner/plan -run '^$' -fuzz FuzzAnalysisState -fuzztime 1m
func FuzzAnalysisState(f *testing.F) {
	seeds, _ := filepath.Glob("../../testdata/scenarios/analysis-recorded-*/snapshot.yaml")
	ann := regexp.MustCompile(`rollplan.dev/analysis: (.*)`)
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range ann.FindAllSubmatch(b, -1) {
			var v string
			if err := yaml.Unmarshal(m[1], &v); err == nil {
				f.Add(v)
			}
		}
	}
	if len(seeds) == 0 {
		f.Fatal("no seed snapshots testdata/scenarios/analysis-recorded-*")
	}
	f.Add(`{"revision":"r","measuredFrom":"x","attempt":2}`)
	f.Add(`{"gate":{"soak":"-1h","measurements":[{"count":-3,"interval":"bogus"}]},"availableAt":"now"}`)
	f.Fuzz(func(t *testing.T, v string) {
		st, err := ParseAnalysisState(v)
		if err != nil || st == nil {
			return
		}
		_ = st.State()
		_ = st.Summary()
		_, _ = st.Taken()
		_ = st.Open()
		if st.Gate != nil {
			if left := gateRemaining(st, "2026-03-01T12:00:00Z"); left < 0 {
				t.Errorf("gateRemaining %v < 0 for %q", left, v)
			}
		}
	})
}
