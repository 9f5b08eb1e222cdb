package cel

import (
	"fmt"

	celgo "github.com/google/cel-go/cel"

	"github.com/rollplan/rollplan/planner/engine"
)

// AnalysisSpec is the analysis decision point of a RolloutPolicy. The
// declaration is data, written as it is (durations, names, the query
// template): only `when` and the verdict rules are expressions.
//
//	analysis:
//	  when: "workload.kind == 'StatefulSet'"   # optional; false declares none
//	  soak: 2m
//	  maxInconclusive: 2
//	  onFail: rollback                          # halt (default) | rollback
//	  measurements:
//	  - name: error-rate
//	    provider: prometheus                    # prometheus | web
//	    query: sum(rate(http_errors_total{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"}[{{.Window}}]))
//	    interval: 30s                           # default 1m
//	    count: 3                                # default 1
//	    window: 2m
//	    options: prometheus-main                # provider options by reference name
//	  verdicts:                                 # the first rule whose expression holds decides
//	  - verdict: fail
//	    expression: analysis.measurements.exists(m, m.name == 'error-rate' && m.results.exists(r, r.value > 0.01))
//	    messageExpression: "'error rate above 1%'"
//
// Verdict rules read `analysis` (facts.Analysis: the wave judged and each
// measurement's results) and every workload-level name; they cannot read
// pod. When no rule holds, the verdict is the default strategy's:
// inconclusive while a measurement has no result or an error, or when
// something is measured that no rule judged; pass when nothing is.
type AnalysisSpec struct {
	When            string            `json:"when,omitempty" cel:"expr"`
	Soak            string            `json:"soak,omitempty"`
	MaxInconclusive int               `json:"maxInconclusive,omitempty"`
	OnFail          string            `json:"onFail,omitempty"`
	Measurements    []MeasurementSpec `json:"measurements,omitempty"`
	Verdicts        []VerdictRule     `json:"verdicts,omitempty"`
}

// MeasurementSpec is one measurement (engine.Measurement).
type MeasurementSpec struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Query    string `json:"query"`
	Interval string `json:"interval,omitempty"`
	// Count: nil means 1; 0 is an error.
	Count   *int   `json:"count,omitempty"`
	Window  string `json:"window,omitempty"`
	Options string `json:"options,omitempty"`
}

// VerdictRule: when expression (bool) holds, the verdict is Verdict with
// messageExpression (string), which should name the query and the value.
type VerdictRule struct {
	Verdict           string `json:"verdict"`
	Expression        string `json:"expression" cel:"expr"`
	MessageExpression string `json:"messageExpression" cel:"expr"`
}

// analysisProgram is a compiled AnalysisSpec: the declaration checked once
// (it holds no expression but when) and the verdict rules.
type analysisProgram struct {
	when     *program
	declared *engine.Analysis // nil: it gates nothing
	verdicts []verdictProgram
}

type verdictProgram struct {
	verdict   string
	when, msg *program
}

// analysis compiles spec.analysis; the declaration's errors name the
// policy file and the field (spec.analysis.measurements[0] (error-rate).count).
func (cc *compiler) analysis(s *AnalysisSpec) (*analysisProgram, error) {
	if s == nil {
		return nil, nil
	}
	where := cc.p.where()
	ap := &analysisProgram{}
	var err error
	if s.When != "" {
		if ap.when, _, err = cc.compile("spec.analysis.when", s.When, celgo.BoolType); err != nil {
			return nil, err
		}
		if ap.when.perPod {
			return nil, fmt.Errorf("%s: spec.analysis.when: analysis is decided per workload and cannot read pod", where)
		}
	}
	a := &engine.Analysis{Soak: s.Soak, MaxInconclusive: s.MaxInconclusive, OnFail: s.OnFail}
	if a.Soak == "" {
		a.Soak = "0s"
	}
	if a.OnFail == "" {
		a.OnFail = engine.AnalysisHalt
	}
	for _, m := range s.Measurements {
		em := engine.Measurement{Name: m.Name, Provider: m.Provider, Query: m.Query, Interval: m.Interval, Count: 1, Window: m.Window, Options: m.Options}
		if em.Interval == "" {
			em.Interval = engine.DefaultInterval
		}
		if m.Count != nil {
			em.Count = *m.Count
		}
		a.Measurements = append(a.Measurements, em)
	}
	if err := engine.ValidateAnalysis(a); err != nil {
		return nil, fmt.Errorf("%s: spec.analysis.%s", where, err)
	}
	ap.declared = engine.Declared(a)
	for i, r := range s.Verdicts {
		field := fmt.Sprintf("spec.analysis.verdicts[%d]", i)
		if !engine.ValidVerdict(r.Verdict) {
			return nil, fmt.Errorf("%s: %s.verdict %q: want %q, %q or %q", where, field, r.Verdict, engine.VerdictPass, engine.VerdictFail, engine.VerdictInconclusive)
		}
		vp := verdictProgram{verdict: r.Verdict}
		if vp.when, _, err = cc.compile(field+".expression", r.Expression, celgo.BoolType); err != nil {
			return nil, err
		}
		if vp.msg, _, err = cc.compile(field+".messageExpression", r.MessageExpression, celgo.StringType); err != nil {
			return nil, err
		}
		if vp.when.perPod || vp.msg.perPod {
			return nil, fmt.Errorf("%s: %s: a verdict judges the wave and cannot read pod", where, field)
		}
		ap.verdicts = append(ap.verdicts, vp)
	}
	return ap, nil
}

// decideAnalysis answers the analysis point from the policy that declares
// it (by: the first matching policy that defines spec.analysis, else the
// default strategy): the declaration, and the verdict while a wave is
// judged.
func (a *activation) decideAnalysis(d *engine.Decisions) error {
	ap := a.c.analysis
	if ap == nil || ap.declared == nil {
		return nil
	}
	if ap.when != nil {
		on, err := a.boolean(ap.when)
		if err != nil || !on {
			return err
		}
	}
	d.Analysis = ap.declared
	if a.b.rollout.Analysis.Wave == 0 {
		return nil
	}
	for _, r := range ap.verdicts {
		hold, err := a.boolean(r.when)
		if err != nil {
			return err
		}
		if !hold {
			continue
		}
		msg, err := a.str(r.msg)
		if err != nil {
			return err
		}
		v := &engine.Verdict{Verdict: r.verdict, Message: msg}
		if err := engine.ValidateVerdict(v); err != nil {
			return fmt.Errorf("%s: %s: %w", a.c.policy.where(), r.msg.field, err)
		}
		d.Verdict = v
		return nil
	}
	hint := "add a rule to spec.analysis.verdicts of " + a.c.policy.where()
	d.Verdict = engine.DefaultVerdict(&a.b.rollout.Analysis, hint)
	return nil
}
