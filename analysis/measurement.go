package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
)

// Provider names, as a policy writes them in Measurement.Provider.
const (
	ProviderPrometheus = "prometheus"
	ProviderWeb        = "web"
)

// Aggregation reduces the points of a Prometheus range query to one value.
type Aggregation string

// The aggregations a range query may name.
const (
	AggregationAvg  Aggregation = "avg"  // arithmetic mean of the points
	AggregationMax  Aggregation = "max"  // the largest point
	AggregationMin  Aggregation = "min"  // the smallest point
	AggregationLast Aggregation = "last" // the latest point
)

// Measurement is one named query a policy declares, taken Count times
// Interval apart.
type Measurement struct {
	// Name identifies the measurement in results and errors.
	Name string
	// Provider is ProviderPrometheus or ProviderWeb.
	Provider string
	// Query is a text/template rendered over the Target (see Render): PromQL
	// for Prometheus, the URL to request for the web provider.
	Query string
	// Rendered: Query is already rendered (rollplan's plan renders every
	// gate's queries with engine.RenderQuery, and the executor hands them
	// over as the plan shows them): it is sent as it is, never rendered
	// again, so what the plan shows is what runs.
	Rendered bool
	// Interval is the time between two measurements; required when Count > 1.
	Interval time.Duration
	// Count is how many times Run measures; at least 1.
	Count int
	// Window is the span of a range query (Prometheus, with an Aggregation)
	// and what {{.Window}} renders to (a PromQL duration, e.g. 5m). Zero
	// means unset: a template using {{.Window}} then fails.
	Window time.Duration
	// Aggregation, when set, makes a Prometheus measurement a range query
	// over [now-Window, now] whose single series is reduced to one value by
	// it. Empty means an instant query at now.
	Aggregation Aggregation
	// Step is the range query's resolution; zero means Window/60, at least
	// one second.
	Step time.Duration
	// Web holds what the web provider needs beyond the URL.
	Web WebRequest
}

// WebRequest is the request and response shape of a web measurement.
type WebRequest struct {
	// Method is GET (the default) or POST.
	Method string
	// Body is a template rendered like Query (values JSON-string-escaped),
	// sent with POST.
	Body string
	// Headers are added to the request, after the provider's own.
	Headers map[string]string
	// JSONPath picks the one number of the response, in kubectl's syntax
	// ({.data.value}; the braces may be left out).
	JSONPath string
}

// Target is what a measurement measures: a workload's wave of pods.
type Target struct {
	Namespace string
	Name      string
	Kind      string
	// Revision is the revision the wave rolls to.
	Revision string
	// Wave is the wave's number, from 1.
	Wave int
	// Pods are the names of the wave's pods.
	Pods []string
}

// Result is one measurement taken: a value, or an error and no value.
type Result struct {
	// Name is the measurement's.
	Name string
	// Query is the rendered query (the URL, for the web provider), so a
	// verdict can name what it read.
	Query string
	// Value is the measured value; zero when Error is set.
	Value float64
	// Values are the points a range query's aggregation reduced, oldest
	// first; empty for instant queries and web requests.
	Values []float64 `json:",omitempty"`
	// Taken is when the measurement was taken (the query's evaluation time).
	Taken time.Time
	// Error says why there is no value; empty when there is one.
	Error string `json:",omitempty"`
}

// Failed reports whether the result has no value.
func (r Result) Failed() bool { return r.Error != "" }

// Provider takes one measurement of a target at a time. Measure never
// returns a value together with an error: a result either has Value (and
// no Error) or Error. It must honour ctx (cancellation and deadline).
type Provider interface {
	Measure(ctx context.Context, m Measurement, t Target, now time.Time) Result
}

// Validate checks what can be checked before anything is measured: the
// fields' ranges and that the templates parse and name only known fields.
func (m Measurement) Validate() error {
	if m.Name == "" {
		return errors.New("measurement without a name")
	}
	var errs []error
	switch m.Provider {
	case ProviderPrometheus, ProviderWeb:
	default:
		errs = append(errs, fmt.Errorf("provider %q: want %q or %q", m.Provider, ProviderPrometheus, ProviderWeb))
	}
	if m.Query == "" {
		errs = append(errs, errors.New("no query"))
	}
	if m.Count < 1 {
		errs = append(errs, fmt.Errorf("count %d: want at least 1", m.Count))
	}
	if m.Count > 1 && m.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval %s with count %d: want a positive interval", m.Interval, m.Count))
	}
	if m.Window < 0 || m.Step < 0 || m.Interval < 0 {
		errs = append(errs, fmt.Errorf("negative duration (interval %s, window %s, step %s)", m.Interval, m.Window, m.Step))
	}
	switch m.Aggregation {
	case "":
	case AggregationAvg, AggregationMax, AggregationMin, AggregationLast:
		if m.Provider != ProviderPrometheus {
			errs = append(errs, fmt.Errorf("aggregation %s: only Prometheus range queries aggregate", m.Aggregation))
		}
		if m.Window <= 0 {
			errs = append(errs, fmt.Errorf("aggregation %s without a window: a range query needs one", m.Aggregation))
		}
	default:
		errs = append(errs, fmt.Errorf("aggregation %q: want avg, max, min or last", m.Aggregation))
	}
	if m.Provider == ProviderWeb {
		switch m.Web.Method {
		case "", "GET", "POST":
		default:
			errs = append(errs, fmt.Errorf("method %q: want GET or POST", m.Web.Method))
		}
		if m.Web.JSONPath == "" {
			errs = append(errs, errors.New("web measurement without a JSONPath"))
		} else if _, err := parseJSONPath(m.Web.JSONPath); err != nil {
			errs = append(errs, err)
		}
	}
	if !m.Rendered {
		if err := engine.CheckTemplate("query", m.Query); err != nil {
			errs = append(errs, err)
		}
	}
	if m.Web.Body != "" {
		if err := engine.CheckTemplate("body", m.Web.Body); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("measurement %q: %w", m.Name, err)
	}
	return nil
}

// step is the range query's resolution.
func (m Measurement) step() time.Duration {
	if m.Step > 0 {
		return m.Step
	}
	return max(m.Window/60, time.Second)
}

// failed is a result with an error and no value.
func failed(m Measurement, query string, now time.Time, err error) Result {
	return Result{Name: m.Name, Query: query, Taken: now, Error: err.Error()}
}

// finite refuses NaN and infinities: a ratio over no traffic (0/0) is NaN,
// and a verdict must not read it as a number.
func finite(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("value %v, want a finite number (a ratio over no samples?)", f)
	}
	return nil
}
