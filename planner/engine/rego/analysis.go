package rego

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// analysisShape and measurementShape are the analysis answer as the
// contract writes it, for messages.
const (
	analysisShape    = `{"soak": "2m", "measurements": [...], "maxInconclusive": 1, "onFail": "halt" | "rollback"}`
	measurementShape = `{"name", "provider": "prometheus" | "web", "query", "interval"?, "count"?, "window"?, "options"?}`
)

// decodeAnalysis reads the analysis answer, fills its defaults (soak 0s,
// interval 1m, count 1, onFail halt) and validates it; nil when it gates
// nothing (engine.Declared). The caller names the policy, the rule and the
// workload.
func decodeAnalysis(t *ast.Term) (*engine.Analysis, error) {
	obj, err := jsonObject(t, analysisShape)
	if err != nil {
		return nil, err
	}
	a := &engine.Analysis{Soak: "0s", OnFail: engine.AnalysisHalt}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		switch k {
		case "soak":
			a.Soak, err = jsonString(k, v)
		case "onFail":
			a.OnFail, err = jsonString(k, v)
		case "maxInconclusive":
			a.MaxInconclusive, err = jsonInt(k, v)
		case "measurements":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("measurements: want a list of %s, got %s", measurementShape, jsonKind(v))
			}
			for i, e := range list {
				m, err := decodeMeasurement(i, e)
				if err != nil {
					return nil, err
				}
				a.Measurements = append(a.Measurements, m)
			}
		default:
			return nil, fmt.Errorf("unknown field %q: want %s", k, analysisShape)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := engine.ValidateAnalysis(a); err != nil {
		return nil, err
	}
	return engine.Declared(a), nil
}

func decodeMeasurement(i int, v any) (engine.Measurement, error) {
	m := engine.Measurement{Interval: engine.DefaultInterval, Count: 1}
	obj, ok := v.(map[string]any)
	if !ok {
		return m, fmt.Errorf("measurements[%d]: want an object %s, got %s", i, measurementShape, jsonKind(v))
	}
	field := fmt.Sprintf("measurements[%d]", i)
	if n, ok := obj["name"].(string); ok && n != "" {
		field = fmt.Sprintf("measurements[%d] (%s)", i, n)
	}
	var err error
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		switch k {
		case "name":
			m.Name, err = jsonString(k, v)
		case "provider":
			m.Provider, err = jsonString(k, v)
		case "query":
			m.Query, err = jsonString(k, v)
		case "interval":
			m.Interval, err = jsonString(k, v)
		case "window":
			m.Window, err = jsonString(k, v)
		case "options":
			m.Options, err = jsonString(k, v)
		case "count":
			m.Count, err = jsonInt(k, v)
		default:
			err = fmt.Errorf("unknown field %q: want %s", k, measurementShape)
		}
		if err != nil {
			return m, fmt.Errorf("%s.%w", field, err)
		}
	}
	return m, nil
}

// decodeVerdict reads the analysis_verdict answer.
func decodeVerdict(t *ast.Term) (*engine.Verdict, error) {
	const shape = `{"verdict": "pass" | "fail" | "inconclusive", "message": "..."}`
	obj, err := jsonObject(t, shape)
	if err != nil {
		return nil, err
	}
	v := &engine.Verdict{}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "verdict":
			v.Verdict, err = jsonString(k, obj[k])
		case "message":
			v.Message, err = jsonString(k, obj[k])
			if err == nil {
				err = formatted("message", v.Message)
			}
		default:
			err = fmt.Errorf("unknown field %q: want %s", k, shape)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := engine.ValidateVerdict(v); err != nil {
		return nil, err
	}
	return v, nil
}

func jsonObject(t *ast.Term, shape string) (map[string]any, error) {
	if _, ok := t.Value.(ast.Object); !ok {
		return nil, fmt.Errorf("want an object %s, got %s", shape, describe(t))
	}
	v, err := ast.JSON(t.Value)
	if err != nil {
		return nil, fmt.Errorf("want an object %s: %w", shape, err)
	}
	return v.(map[string]any), nil
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func jsonString(field string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %s", field, jsonKind(v))
	}
	return s, nil
}

func jsonInt(field string, v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fmt.Errorf("%s: %s is not a number", field, n)
		}
	case float64:
		f = n
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	default:
		return 0, fmt.Errorf("%s: want an integer, got %s", field, jsonKind(v))
	}
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, fmt.Errorf("%s: want an integer, got %v", field, f)
	}
	return int(f), nil
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	}
	return strings.TrimSpace(fmt.Sprintf("the number %v", v))
}

// decodeAnalysisAnswers reads the analysis and analysis_verdict answers of
// a decisions object; errors name the policy file, the rule and the
// workload. The verdict is nil unless a wave is judged and the policy
// declares an analysis.
func (e *Engine) decodeAnalysisAnswers(r *facts.Rollout, an, verdict *ast.Term) (*engine.Analysis, *engine.Verdict, error) {
	id := workloadID(r)
	if an == nil {
		return nil, nil, e.undefined("analysis", id)
	}
	a, err := decodeAnalysis(an)
	if err != nil {
		return nil, nil, fmt.Errorf("policy %s: rule analysis for %s: %w", e.bundle.where("analysis"), id, err)
	}
	if r.Analysis.Wave == 0 || a == nil {
		return a, nil, nil
	}
	if verdict == nil || ast.NullTerm().Equal(verdict) {
		return nil, nil, e.undefined("analysis_verdict", fmt.Sprintf("wave %d of %s", r.Analysis.Wave, id))
	}
	v, err := decodeVerdict(verdict)
	if err != nil {
		return nil, nil, fmt.Errorf("policy %s: rule analysis_verdict for wave %d of %s: %w", e.bundle.where("analysis_verdict"), r.Analysis.Wave, id, err)
	}
	return a, v, nil
}
