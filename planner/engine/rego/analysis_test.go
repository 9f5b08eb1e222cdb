package rego

import (
	"context"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

const goodMeasurement = `{"name": "err", "provider": "prometheus", "query": "rate(x{pod=~\"{{.PodRegex}}\"}[1m])"}`

// Every bad analysis answer is an error naming the policy file, the rule,
// the workload and the field.
func TestDecideAnalysisErrors(t *testing.T) {
	const prefix = "policy " + userFile + " (package rollplan.strategy): rule analysis for StatefulSet default/web: "
	tests := []struct {
		name, body, want string
	}{
		{"bad soak", `analysis := {"soak": "2 minutes", "measurements": [` + goodMeasurement + `]}`,
			`soak "2 minutes": want a duration such as 30s or 5m`},
		{"unknown provider", `analysis := {"measurements": [{"name": "lat", "provider": "graphite", "query": "q"}]}`,
			`measurements[0] (lat).provider "graphite": unknown provider: want "prometheus" or "web"`},
		{"count below 1", `analysis := {"measurements": [{"name": "err", "provider": "web", "query": "q", "count": 0}]}`,
			`measurements[0] (err).count 0: want at least 1`},
		{"duplicate names", `analysis := {"measurements": [` + goodMeasurement + `, ` + goodMeasurement + `]}`,
			`measurements[1] (err): name "err" is also measurements[0]'s: names must be unique`},
		{"onFail value", `analysis := {"onFail": "retry", "measurements": [` + goodMeasurement + `]}`,
			`onFail "retry": want "halt" or "rollback"`},
		{"query field unknown", `analysis := {"measurements": [{"name": "err", "provider": "web", "query": "{{.Pod}}"}]}`,
			`measurements[0] (err).query: `},
		{"interval not a duration", `analysis := {"measurements": [{"name": "err", "provider": "web", "query": "q", "interval": 30}]}`,
			`measurements[0] (err).interval: want a string, got the number 30`},
		{"unknown field", `analysis := {"soak": "1m", "measurement": []}`,
			`unknown field "measurement"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(tt.body))
			_, err := e.Decide(context.Background(), stsRollout())
			if err == nil || !strings.HasPrefix(err.Error(), prefix+tt.want) {
				t.Fatalf("error\n%v\nwant prefix\n%s", err, prefix+tt.want)
			}
		})
	}
}

// The verdict is asked only while a wave is judged, and answers as the
// policy says; the declaration fills its defaults.
func TestDecideAnalysisVerdict(t *testing.T) {
	e := newEngine(t, userPolicy(`
analysis := {"soak": "1m", "measurements": [`+goodMeasurement+`]}

analysis_verdict := {"verdict": "fail", "message": sprintf("err = %v", [input.analysis.measurements[0].results[0].value])}
`))
	r := stsRollout()
	d, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Measurement{Name: "err", Provider: "prometheus", Query: `rate(x{pod=~"{{.PodRegex}}"}[1m])`, Interval: "1m", Count: 1}
	if d.Analysis == nil || d.Analysis.OnFail != engine.AnalysisHalt || len(d.Analysis.Measurements) != 1 || d.Analysis.Measurements[0] != want || d.Verdict != nil {
		t.Fatalf("wave 0: analysis %+v, verdict %+v; want the declaration with defaults and no verdict", d.Analysis, d.Verdict)
	}
	r.Analysis = facts.Analysis{Wave: 1, Attempt: 1, Pods: []string{}, Measurements: []facts.MeasurementResults{{Name: "err", Query: "q", Results: []facts.Result{{Value: 0.5, Taken: "2026-03-01T12:00:00Z"}}}}}
	for _, interpret := range []bool{false, true} {
		e.interpret = interpret
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Verdict == nil || *d.Verdict != (engine.Verdict{Verdict: "fail", Message: "err = 0.5"}) {
			t.Fatalf("interpret %t: verdict %+v, want fail: err = 0.5", interpret, d.Verdict)
		}
	}
}
