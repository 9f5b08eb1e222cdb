package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
)

// Analysis is the answer of the analysis decision point (per workload):
// what each wave waits for before the next one starts. The default
// strategy declares none (no soak, no measurement): waves follow each
// other as the pacing says.
//
// A wave's gate opens when every pod of the wave is available: the
// rollout waits Soak, then takes each measurement Count times, Interval
// apart, and asks the policy for a verdict over the results (Verdict).
// Pass starts the next wave; fail halts the rollout or rolls it back
// (OnFail); inconclusive measures again, up to MaxInconclusive times, then
// halts. Policies hold no secrets: a measurement names its provider's
// options (address, auth, TLS) by reference.
type Analysis struct {
	// Soak: how long to wait once the wave's pods are available, before
	// the first measurement (a Go duration, "0s" for none).
	Soak string `json:"soak,omitempty"`
	// Measurements, in the policy's order; names are unique.
	Measurements []Measurement `json:"measurements,omitempty"`
	// MaxInconclusive: how many inconclusive verdicts are measured again
	// before the rollout halts (0: the first one halts).
	MaxInconclusive int `json:"maxInconclusive"`
	// OnFail: halt or rollback (AnalysisHalt, AnalysisRollback).
	OnFail string `json:"onFail,omitempty"`
}

// Measurement is one named query taken over a wave.
type Measurement struct {
	Name string `json:"name"`
	// Provider: prometheus or web (Providers).
	Provider string `json:"provider"`
	// Query: a Go text/template over QueryTarget ({{.Namespace}},
	// {{.PodRegex}}, ...): a PromQL expression, or the web provider's URL.
	Query string `json:"query"`
	// Interval between two measurements (Go duration; default 1m).
	Interval string `json:"interval,omitempty"`
	// Count: how many times it is taken (at least 1; default 1).
	Count int `json:"count"`
	// Window: the range a query looks back over ({{.Window}}), a Go
	// duration; "" for an instant query.
	Window string `json:"window,omitempty"`
	// Options: the name of the provider's options (address, auth, TLS)
	// as the operator configures them; "" for the provider's default.
	Options string `json:"options,omitempty"`
}

// Verdict is the answer of the analysis decision point over the results of
// one wave (facts.Rollout.Analysis): pass, fail or inconclusive, with a
// message naming the query and the value that decided it.
type Verdict struct {
	Verdict string `json:"verdict"`
	Message string `json:"message"`
}

// Analysis values.
const (
	VerdictPass         = "pass"
	VerdictFail         = "fail"
	VerdictInconclusive = "inconclusive"

	AnalysisHalt     = "halt"
	AnalysisRollback = "rollback"

	ProviderPrometheus = "prometheus"
	ProviderWeb        = "web"

	// DefaultInterval is a measurement's interval when the policy gives none.
	DefaultInterval = "1m"
)

// Providers are the measurement providers a policy may name.
var Providers = []string{ProviderPrometheus, ProviderWeb}

// Gated reports whether a wave waits on anything: a soak or a measurement.
func (a *Analysis) Gated() bool {
	if a == nil {
		return false
	}
	if len(a.Measurements) > 0 {
		return true
	}
	d, err := time.ParseDuration(a.Soak)
	return err == nil && d > 0
}

// ValidVerdict reports whether v is a verdict.
func ValidVerdict(v string) bool {
	return v == VerdictPass || v == VerdictFail || v == VerdictInconclusive
}

// ValidateAnalysis checks an analysis answer as every engine must return it
// (after filling its defaults: interval 1m, count 1, onFail halt). Errors
// name the field (soak, measurements[i].count, ...); the engine adds the
// policy file, the rule and the workload.
func ValidateAnalysis(a *Analysis) error {
	if a == nil {
		return nil
	}
	if err := nonNegativeDuration("soak", a.Soak, true); err != nil {
		return err
	}
	if a.MaxInconclusive < 0 {
		return fmt.Errorf("maxInconclusive %d: want 0 or more", a.MaxInconclusive)
	}
	if a.OnFail != AnalysisHalt && a.OnFail != AnalysisRollback {
		return fmt.Errorf("onFail %q: want %q or %q", a.OnFail, AnalysisHalt, AnalysisRollback)
	}
	seen := map[string]int{}
	for i, m := range a.Measurements {
		field := fmt.Sprintf("measurements[%d]", i)
		if m.Name == "" {
			return fmt.Errorf("%s.name is empty: name every measurement", field)
		}
		field = fmt.Sprintf("measurements[%d] (%s)", i, m.Name)
		if j, dup := seen[m.Name]; dup {
			return fmt.Errorf("%s: name %q is also measurements[%d]'s: names must be unique", field, m.Name, j)
		}
		seen[m.Name] = i
		if m.Provider != ProviderPrometheus && m.Provider != ProviderWeb {
			return fmt.Errorf("%s.provider %q: unknown provider: want %s", field, m.Provider, quoteList(Providers))
		}
		if strings.TrimSpace(m.Query) == "" {
			return fmt.Errorf("%s.query is empty", field)
		}
		if _, err := RenderQuery(m, NewQueryTarget("StatefulSet", "default", "web", "web-1", 1, []string{"web-0"})); err != nil {
			return fmt.Errorf("%s.query: %w (the template reads %s)", field, errors.Unwrap(err), templateFields)
		}
		if err := nonNegativeDuration(field+".interval", m.Interval, false); err != nil {
			return err
		}
		if m.Count < 1 {
			return fmt.Errorf("%s.count %d: want at least 1", field, m.Count)
		}
		if m.Window != "" {
			if err := nonNegativeDuration(field+".window", m.Window, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// templateFields names what a query template may read, for messages.
const templateFields = "{{.Kind}}, {{.Namespace}}, {{.Name}}, {{.Revision}}, {{.Wave}}, {{.Pods}}, {{.PodRegex}}, {{.Window}}, {{.Interval}}"

// Declared is a, or nil when it gates nothing (no soak, no measurement):
// every engine answers "no analysis" as nil.
func Declared(a *Analysis) *Analysis {
	if !a.Gated() {
		return nil
	}
	return a
}

func nonNegativeDuration(field, v string, zeroOK bool) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s %q: want a duration such as 30s or 5m", field, v)
	}
	if d < 0 || (d == 0 && !zeroOK) {
		return fmt.Errorf("%s %q: want a duration greater than 0", field, v)
	}
	return nil
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, " or ")
}

// ValidateVerdict checks a verdict answer: a known verdict and a message.
func ValidateVerdict(v *Verdict) error {
	if !ValidVerdict(v.Verdict) {
		return fmt.Errorf("verdict %q: want %q, %q or %q", v.Verdict, VerdictPass, VerdictFail, VerdictInconclusive)
	}
	if strings.TrimSpace(v.Message) == "" {
		return errors.New("the message is empty: say which query and value decided the verdict")
	}
	return nil
}

// QueryTarget is what a measurement's query template reads: the workload,
// the update revision and the wave.
type QueryTarget struct {
	Kind, Namespace, Name string
	// Revision: the update revision (a Deployment's new ReplicaSet name,
	// else the ControllerRevision name).
	Revision string
	// Wave: the wave measured (from 1).
	Wave int
	// Pods: the wave's pods by the names they have once updated, when the
	// plan knows them (pods updated in place, a StatefulSet's pods); empty
	// otherwise (a recreated Deployment or DaemonSet pod gets a new name).
	Pods []string
	// PodRegex matches the wave's pods: their names when known, else the
	// update revision's pods by name prefix (a Deployment's new
	// ReplicaSet) or the workload's pods (a DaemonSet: read its revision
	// label to tell new from old). Regex metacharacters are quoted.
	PodRegex string
	// Window and Interval: the measurement's, as the policy wrote them.
	Window, Interval string
}

// NewQueryTarget fills PodRegex from the pods or, without them, from
// the kind's naming.
func NewQueryTarget(kind, namespace, name, revision string, wave int, pods []string) QueryTarget {
	t := QueryTarget{Kind: kind, Namespace: namespace, Name: name, Revision: revision, Wave: wave, Pods: pods}
	switch {
	case len(pods) > 0:
		q := make([]string, len(pods))
		for i, p := range pods {
			q[i] = regexp.QuoteMeta(p)
		}
		t.PodRegex = strings.Join(q, "|")
	case kind == "Deployment":
		t.PodRegex = regexp.QuoteMeta(revision) + "-.*"
	default:
		t.PodRegex = regexp.QuoteMeta(name) + "-.*"
	}
	return t
}

// RenderQuery renders a measurement's query template for a target, its
// values escaped for the provider (RenderTemplate). The template is
// checked when the policy answers (ValidateAnalysis); a field QueryTarget
// does not have is an error naming it.
func RenderQuery(m Measurement, t QueryTarget) (string, error) {
	t.Window, t.Interval = m.Window, m.Interval
	out, err := RenderTemplate("query", m.Query, t, EscapeFor(m.Provider))
	if err != nil {
		return "", fmt.Errorf("measurement %s: %w", m.Name, err)
	}
	return out, nil
}

// DefaultVerdict is the default strategy's verdict over a judged wave
// (rule analysis_verdict of policies/defaults.rego): inconclusive while a
// measurement has no result or an error (never a pass over what was not
// read), inconclusive when something is measured that no rule of the
// policy judged (hint says how to add one), pass when nothing is measured.
func DefaultVerdict(a *facts.Analysis, hint string) *Verdict {
	var unreadable, measured []string
	for _, m := range a.Measurements {
		measured = append(measured, m.Name)
		if len(m.Results) == 0 {
			unreadable = append(unreadable, fmt.Sprintf("measurement %s: no result for query %s", m.Name, m.Query))
			continue
		}
		for _, r := range m.Results {
			if r.Error != "" {
				unreadable = append(unreadable, fmt.Sprintf("measurement %s: query %s: %s", m.Name, m.Query, r.Error))
				break
			}
		}
	}
	switch {
	case len(unreadable) > 0:
		return &Verdict{Verdict: VerdictInconclusive, Message: strings.Join(unreadable, "; ")}
	case len(measured) > 0:
		return &Verdict{Verdict: VerdictInconclusive, Message: fmt.Sprintf("no verdict rule judges measurement(s) %s: %s", strings.Join(measured, ", "), hint)}
	}
	return &Verdict{Verdict: VerdictPass, Message: "nothing is measured"}
}
