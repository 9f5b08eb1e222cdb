package analysis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// PrometheusConfig is where a Prometheus (or a server speaking its HTTP
// API: Thanos, Mimir, VictoriaMetrics) is and how to reach it.
type PrometheusConfig struct {
	// Address is the server's base URL, http(s)://host:port[/prefix].
	Address string
	HTTP    HTTPOptions
}

// Prometheus measures with PromQL over the Prometheus HTTP API. It is safe
// for concurrent use.
type Prometheus struct {
	address string
	timeout time.Duration
	api     promv1.API
}

// NewPrometheus returns a provider for the server c names.
func NewPrometheus(c PrometheusConfig) (*Prometheus, error) {
	u, err := url.Parse(c.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("prometheus address %q: want http(s)://host:port", c.Address)
	}
	hc, err := c.HTTP.client()
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", c.Address, err)
	}
	client, err := api.NewClient(api.Config{Address: c.Address, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", c.Address, err)
	}
	return &Prometheus{address: c.Address, timeout: c.HTTP.timeout(), api: promv1.NewAPI(client)}, nil
}

// Measure renders m's query over t and evaluates it at now: an instant
// query, or with an Aggregation a range query over [now-Window, now]
// reduced by it.
func (p *Prometheus) Measure(ctx context.Context, m Measurement, t Target, now time.Time) Result {
	query, err := RenderQuery(m, t)
	if err != nil {
		return failed(m, "", now, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var r Result
	if m.Aggregation == "" {
		r, err = p.instant(ctx, query, now)
	} else {
		r, err = p.rangeQuery(ctx, m, query, now)
	}
	if err != nil {
		return failed(m, query, now, fmt.Errorf("measurement %q: prometheus %s: query %s: %w", m.Name, p.address, query, err))
	}
	r.Name, r.Query, r.Taken = m.Name, query, now
	return r
}

func (p *Prometheus) instant(ctx context.Context, query string, now time.Time) (Result, error) {
	v, _, _, err := p.api.Query(ctx, query, now, promv1.WithTimeout(p.timeout))
	if err != nil {
		return Result{}, p.queryError(ctx, err)
	}
	var f model.SampleValue
	switch v := v.(type) {
	case *model.Scalar:
		f = v.Value
	case model.Vector:
		if len(v) != 1 {
			return Result{}, fmt.Errorf("%d series%s, want exactly one", len(v), seriesList(vectorLabels(v)))
		}
		f = v[0].Value
	default:
		return Result{}, fmt.Errorf("result type %s, want a scalar or a vector of one series", v.Type())
	}
	if err := finite(float64(f)); err != nil {
		return Result{}, err
	}
	return Result{Value: float64(f)}, nil
}

func (p *Prometheus) rangeQuery(ctx context.Context, m Measurement, query string, now time.Time) (Result, error) {
	r := promv1.Range{Start: now.Add(-m.Window), End: now, Step: m.step()}
	v, _, _, err := p.api.QueryRange(ctx, query, r, promv1.WithTimeout(p.timeout))
	if err != nil {
		return Result{}, p.queryError(ctx, err)
	}
	matrix, ok := v.(model.Matrix)
	if !ok {
		return Result{}, fmt.Errorf("result type %s, want a matrix", v.Type())
	}
	if len(matrix) != 1 {
		labels := make([]model.Metric, len(matrix))
		for i, s := range matrix {
			labels[i] = s.Metric
		}
		return Result{}, fmt.Errorf("%d series over %s%s, want exactly one", len(matrix), model.Duration(m.Window), seriesList(labels))
	}
	points := matrix[0].Values
	if len(points) == 0 {
		return Result{}, fmt.Errorf("no points over %s", model.Duration(m.Window))
	}
	values := make([]float64, len(points))
	for i, pt := range points {
		values[i] = float64(pt.Value)
		if err := finite(values[i]); err != nil {
			return Result{}, fmt.Errorf("point at %s: %w", pt.Timestamp.Time().UTC().Format(time.RFC3339), err)
		}
	}
	f, err := aggregate(m.Aggregation, values)
	if err != nil {
		return Result{}, err
	}
	return Result{Value: f, Values: values}, nil
}

// queryError says why a query failed, naming a timeout as such.
func (p *Prometheus) queryError(ctx context.Context, err error) error {
	if timedOut(ctx, err) {
		return fmt.Errorf("timed out after %s: %w", p.timeout, err)
	}
	// For a status other than Prometheus's own errors (401 from a proxy,
	// 404 from a wrong prefix) the client says only the status; the body
	// says why.
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) && apiErr.Detail != "" {
		return fmt.Errorf("%w: %s", err, excerpt([]byte(apiErr.Detail)))
	}
	return err
}

// aggregate reduces a range query's points (oldest first) to one value.
func aggregate(a Aggregation, values []float64) (float64, error) {
	switch a {
	case AggregationAvg:
		var sum float64
		for _, v := range values {
			sum += v
		}
		return sum / float64(len(values)), nil
	case AggregationMax:
		return slices.Max(values), nil
	case AggregationMin:
		return slices.Min(values), nil
	case AggregationLast:
		return values[len(values)-1], nil
	}
	return 0, fmt.Errorf("aggregation %q: want avg, max, min or last", a)
}

func vectorLabels(v model.Vector) []model.Metric {
	out := make([]model.Metric, len(v))
	for i, s := range v {
		out[i] = s.Metric
	}
	return out
}

// seriesList names the first few series of a result that has too many.
func seriesList(labels []model.Metric) string {
	if len(labels) == 0 {
		return ""
	}
	const most = 3
	var names []string
	for i, l := range labels {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(labels)-most))
			break
		}
		names = append(names, l.String())
	}
	return " (" + strings.Join(names, ", ") + ")"
}
