package cel

import (
	"context"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// A bad spec.analysis is an error naming the policy file and the field
// when the policy loads.
func TestAnalysisLoadErrors(t *testing.T) {
	const where = "policy p.yaml (RolloutPolicy p): spec.analysis."
	m := "  - name: err\n    provider: prometheus\n    query: q\n"
	tests := []struct {
		name, spec, want string
	}{
		{"bad soak", "  analysis:\n    soak: 2 minutes\n    measurements:\n" + m, where + `soak "2 minutes": want a duration such as 30s or 5m`},
		{"unknown provider", "  analysis:\n    measurements:\n  - name: lat\n    provider: graphite\n    query: q\n", where + `measurements[0] (lat).provider "graphite": unknown provider: want "prometheus" or "web"`},
		{"count below 1", "  analysis:\n    measurements:\n  - name: err\n    provider: web\n    query: q\n    count: 0\n", where + "measurements[0] (err).count 0: want at least 1"},
		{"duplicate names", "  analysis:\n    measurements:\n" + m + m, where + `measurements[1] (err): name "err" is also measurements[0]'s: names must be unique`},
		{"onFail value", "  analysis:\n    onFail: retry\n    measurements:\n" + m, where + `onFail "retry": want "halt" or "rollback"`},
		{"verdict value", "  analysis:\n    measurements:\n" + m + "    verdicts:\n    - verdict: ok\n      expression: \"true\"\n      messageExpression: \"'x'\"\n", where + `verdicts[0].verdict "ok": want "pass", "fail" or "inconclusive"`},
		{"verdict reads pod", "  analysis:\n    measurements:\n" + m + "    verdicts:\n    - verdict: pass\n      expression: pod.ready\n      messageExpression: \"'x'\"\n", where + "verdicts[0]: a verdict judges the wave and cannot read pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The measurements list sits under analysis.
			spec := strings.ReplaceAll(tt.spec, "\n  - name", "\n    - name")
			spec = strings.ReplaceAll(spec, "\n    provider", "\n      provider")
			spec = strings.ReplaceAll(spec, "\n    query", "\n      query")
			spec = strings.ReplaceAll(spec, "\n    count", "\n      count")
			_, err := New(policy(t, spec), Options{})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// The first verdict rule that holds decides; none holding gives the
// default verdict, which never passes an unread measurement.
func TestAnalysisVerdicts(t *testing.T) {
	spec := `  analysis:
    soak: 1m
    measurements:
    - {name: err, provider: prometheus, query: q}
    verdicts:
    - verdict: fail
      expression: analysis.measurements.exists(m, m.results.exists(r, r.error == '' && r.value > 0.1))
      messageExpression: "'err above 0.1 over wave ' + string(analysis.wave)"
`
	e, err := New(policy(t, spec), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rollout()
	d, err := e.Decide(context.Background(), r)
	if err != nil || d.Analysis == nil || d.Analysis.Measurements[0].Count != 1 || d.Analysis.Measurements[0].Interval != "1m" || d.Verdict != nil {
		t.Fatalf("wave 0: %v, analysis %+v, verdict %+v; want the declaration with defaults and no verdict", err, d.Analysis, d.Verdict)
	}
	for _, tc := range []struct {
		name    string
		results []facts.Result
		want    engine.Verdict
	}{
		{"above", []facts.Result{{Value: 0.5}}, engine.Verdict{Verdict: "fail", Message: "err above 0.1 over wave 2"}},
		{"no rule holds", []facts.Result{{Value: 0.05}}, engine.Verdict{Verdict: "inconclusive", Message: "no verdict rule judges measurement(s) err: add a rule to spec.analysis.verdicts of policy p.yaml (RolloutPolicy p)"}},
		{"error", []facts.Result{{Error: "refused"}}, engine.Verdict{Verdict: "inconclusive", Message: "measurement err: query q: refused"}},
		{"none", nil, engine.Verdict{Verdict: "inconclusive", Message: "measurement err: no result for query q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.Analysis = facts.Analysis{Wave: 2, Attempt: 1, Measurements: []facts.MeasurementResults{{Name: "err", Provider: "prometheus", Query: "q", Results: tc.results}}}
			d, err := e.Decide(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict == nil || *d.Verdict != tc.want {
				t.Fatalf("verdict %+v, want %+v", d.Verdict, tc.want)
			}
		})
	}
}
