package facts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Analysis is the wave the analysis decision point judges, with what was
// measured over it: the input of the verdict (docs/policy-contract.md,
// "analysis"). Wave 0 means no wave is being judged (planning without
// results): Measurements is then empty and no verdict is asked for.
type Analysis struct {
	// Wave: the wave whose pods are available and whose measurements are
	// judged (from 1); the next wave waits for the verdict.
	Wave int `json:"wave"`
	// Attempt: which try this is (1, then one more per inconclusive
	// verdict the policy's maxInconclusive retries).
	Attempt int `json:"attempt"`
	// Pods: the wave's pods, sorted (the names they have once updated, when
	// known; see engine.QueryTarget).
	Pods []string `json:"pods"`
	// Measurements: every measurement the policy declares, in its order,
	// with the results recorded for the wave (none: not measured).
	Measurements []MeasurementResults `json:"measurements"`
}

// MeasurementResults are one measurement's results over the judged wave.
type MeasurementResults struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Query: the query template rendered for the workload and the wave.
	Query   string   `json:"query"`
	Results []Result `json:"results"`
}

// Result is one measurement taken: a value, or the error that kept it from
// being taken (then Value is 0 and must not be read).
type Result struct {
	Value float64 `json:"value"`
	// Taken: when it was taken, RFC 3339.
	Taken string `json:"taken"`
	// Error: why no value could be taken ("" for a value): the provider's
	// error, naming the query.
	Error string `json:"error"`
}

// Results kinds: a recorded-results document (rollplan plan
// --analysis-results, RolloutPolicyTest analysisResults).
const (
	ResultsAPIVersion = "rollplan.dev/v1alpha1"
	ResultsKind       = "AnalysisResults"
)

// AnalysisResults are recorded measurement results, by workload and wave:
// what `plan --analysis-results FILE` feeds into the facts so that the plan
// shows the policy's verdicts without a Prometheus (tests, goldens).
type AnalysisResults struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Workloads by KIND/NAMESPACE/NAME.
	Workloads map[string][]WaveResults `json:"workloads"`
}

// WaveResults are the results recorded for one wave of a workload.
type WaveResults struct {
	Wave int `json:"wave"`
	// Attempt (default 1): see Analysis.Attempt.
	Attempt int `json:"attempt,omitempty"`
	// Measurements: results by measurement name.
	Measurements map[string][]Result `json:"measurements"`
}

// ParseAnalysisResults decodes a recorded-results document (YAML or JSON)
// strictly; errors name what (the file) and the field.
func ParseAnalysisResults(what string, data []byte) (*AnalysisResults, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out AnalysisResults
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w (want apiVersion %s, kind %s, workloads: {KIND/NAMESPACE/NAME: [{wave, attempt, measurements: {NAME: [{value, taken, error}]}}]})", what, err, ResultsAPIVersion, ResultsKind)
	}
	if out.APIVersion != ResultsAPIVersion || out.Kind != ResultsKind {
		return nil, fmt.Errorf("%s: want apiVersion %s, kind %s; got apiVersion %q, kind %q", what, ResultsAPIVersion, ResultsKind, out.APIVersion, out.Kind)
	}
	return &out, out.Check(what)
}

// Check validates the keys, waves and times; errors start with what.
func (a *AnalysisResults) Check(what string) error {
	keys := make([]string, 0, len(a.Workloads))
	for k := range a.Workloads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts := strings.Split(k, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return fmt.Errorf("%s: workloads[%s]: want KIND/NAMESPACE/NAME, e.g. StatefulSet/default/web", what, k)
		}
		seen := map[int]bool{}
		for i, w := range a.Workloads[k] {
			field := fmt.Sprintf("%s: workloads[%s][%d]", what, k, i)
			if w.Wave < 1 {
				return fmt.Errorf("%s.wave: %d: waves are numbered from 1", field, w.Wave)
			}
			if seen[w.Wave] {
				return fmt.Errorf("%s.wave: wave %d is recorded twice", field, w.Wave)
			}
			seen[w.Wave] = true
			if w.Attempt < 0 {
				return fmt.Errorf("%s.attempt: %d: attempts are numbered from 1", field, w.Attempt)
			}
			for name, rs := range w.Measurements {
				for j, r := range rs {
					if _, err := time.Parse(time.RFC3339, r.Taken); err != nil {
						return fmt.Errorf("%s.measurements[%s][%d].taken: %q: want an RFC 3339 time", field, name, j, r.Taken)
					}
				}
			}
		}
	}
	return nil
}

// Wave returns the results recorded for a workload's wave, nil if none.
func (a *AnalysisResults) Wave(kind, namespace, name string, wave int) *WaveResults {
	if a == nil {
		return nil
	}
	for i, w := range a.Workloads[kind+"/"+namespace+"/"+name] {
		if w.Wave == wave {
			return &a.Workloads[kind+"/"+namespace+"/"+name][i]
		}
	}
	return nil
}
