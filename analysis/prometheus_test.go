package analysis

import (
	"context"
	"math"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	promtest "github.com/rollplan/rollplan/test/prometheus"
)

// exporter serves, per pod label, a request counter and an in-flight
// gauge, as the pods of a wave would. "webx0" is there to be left out by a
// regex for "web.0" that forgot to quote its dot.
func exporter(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "app_requests_total", Help: "Requests."}, []string{"pod"})
	inflight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "app_inflight", Help: "Requests in flight."}, []string{"pod"})
	reg.MustRegister(requests, inflight)
	for pod, n := range map[string]float64{"web-0": 3, "web-1": 4, "web-2": 5, "web.0": 10, "webx0": 100} {
		requests.WithLabelValues(pod).Add(n * 10)
		inflight.WithLabelValues(pod).Set(n)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A real Prometheus scrapes the exporter; instant and range queries,
// rendered over a wave, read what it scraped.
func TestPrometheusReal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus")
	}
	s := promtest.Start(t, promtest.Config{Targets: []promtest.Target{{Addr: exporter(t), Labels: map[string]string{"job": "app", "namespace": "shop"}}}})
	if _, err := s.Wait(`app_inflight{pod="webx0"}`, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := NewPrometheus(PrometheusConfig{Address: s.URL, HTTP: HTTPOptions{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	two := Target{Namespace: "shop", Name: "web", Wave: 1, Pods: []string{"web-0", "web-1"}}
	// Whole seconds, so a range query's steps fall on known times, and
	// after the sample Wait saw.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	now := time.Now().Truncate(time.Second)
	for _, tc := range []struct {
		name     string
		m        Measurement
		target   Target
		want     float64
		wantN    int      // for range queries, how many points
		wantErrs []string // substrings of the error
	}{
		{
			name:   "instant: the wave's pods, summed",
			m:      Measurement{Query: `sum(app_inflight{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"})`},
			target: two, want: 7,
		},
		{
			name:   "instant: a scalar",
			m:      Measurement{Query: `scalar(sum(app_requests_total{pod=~"{{.PodRegex}}"})) / {{.Wave}}`},
			target: Target{Wave: 2, Pods: []string{"web-2"}}, want: 25,
		},
		{
			name:   "a dot in a pod name matches itself only",
			m:      Measurement{Query: `sum(app_inflight{pod=~"{{.PodRegex}}"})`},
			target: Target{Pods: []string{"web.0"}}, want: 10,
		},
		{
			name:     "no series",
			m:        Measurement{Query: `app_inflight{pod=~"{{.PodRegex}}"}`},
			target:   Target{Pods: []string{"web-9"}},
			wantErrs: []string{`query app_inflight{pod=~"web-9"}: 0 series, want exactly one`},
		},
		{
			name:     "several series, named",
			m:        Measurement{Query: `app_inflight{pod=~"{{.PodRegex}}"}`},
			target:   two,
			wantErrs: []string{"2 series (", `pod="web-0"`, `pod="web-1"`, "want exactly one"},
		},
		{
			name:     "NaN",
			m:        Measurement{Query: `sum(app_inflight{pod="web-0"}) * 0 / 0`},
			wantErrs: []string{"value NaN, want a finite number"},
		},
		{
			name:     "+Inf",
			m:        Measurement{Query: `sum(app_inflight{pod="web-0"}) / 0`},
			wantErrs: []string{"value +Inf, want a finite number"},
		},
		{
			name:     "a syntax error names the query",
			m:        Measurement{Query: `sum(rate(app_requests_total[{{.Window}}])`, Window: time.Minute},
			wantErrs: []string{`measurement "m": prometheus ` + s.URL + `: query sum(rate(app_requests_total[1m]): bad_data`, "parse error"},
		},
		{
			// time() at each step: points now-10s .. now, one a second.
			name:  "range: avg",
			m:     Measurement{Query: `time()`, Window: 10 * time.Second, Step: time.Second, Aggregation: AggregationAvg},
			want:  float64(now.Unix()) - 5,
			wantN: 11,
		},
		{
			name:  "range: max",
			m:     Measurement{Query: `time()`, Window: 10 * time.Second, Step: time.Second, Aggregation: AggregationMax},
			want:  float64(now.Unix()),
			wantN: 11,
		},
		{
			name:  "range: min, default step (1s)",
			m:     Measurement{Query: `time()`, Window: 10 * time.Second, Aggregation: AggregationMin},
			want:  float64(now.Unix()) - 10,
			wantN: 11,
		},
		{
			name:   "range: last, step 5s",
			m:      Measurement{Query: `time() - {{.Wave}}`, Window: 10 * time.Second, Step: 5 * time.Second, Aggregation: AggregationLast},
			target: Target{Wave: 3},
			want:   float64(now.Unix()) - 3,
			wantN:  3,
		},
		{
			name:   "range: scraped series",
			m:      Measurement{Query: `sum(app_inflight{pod=~"{{.PodRegex}}"})`, Window: 2 * time.Second, Step: time.Second, Aggregation: AggregationMax},
			target: two, want: 7,
		},
		{
			name:     "range: several series",
			m:        Measurement{Query: `app_inflight{pod=~"{{.PodRegex}}"}`, Window: 5 * time.Second, Aggregation: AggregationAvg},
			target:   two,
			wantErrs: []string{"2 series over 5s (", "want exactly one"},
		},
		{
			name:     "range: a NaN point",
			m:        Measurement{Query: `time() * 0 / 0`, Window: 5 * time.Second, Aggregation: AggregationAvg},
			wantErrs: []string{"point at ", "value NaN"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			m.Name, m.Provider, m.Count = "m", ProviderPrometheus, 1
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			r := p.Measure(context.Background(), m, tc.target, now)
			if r.Name != "m" || !r.Taken.Equal(now) || r.Query == "" {
				t.Errorf("result %+v: want name m, taken at %s, its query", r, now)
			}
			if len(tc.wantErrs) > 0 {
				if !r.Failed() || r.Value != 0 {
					t.Fatalf("result %+v, want an error and no value", r)
				}
				t.Log(r.Error)
				for _, w := range tc.wantErrs {
					if !strings.Contains(r.Error, w) {
						t.Errorf("error %q does not say %q", r.Error, w)
					}
				}
				return
			}
			if r.Failed() {
				t.Fatal(r.Error)
			}
			if math.Abs(r.Value-tc.want) > 1e-9 {
				t.Errorf("value %v, want %v (points %v)", r.Value, tc.want, r.Values)
			}
			if tc.wantN > 0 && len(r.Values) != tc.wantN {
				t.Errorf("%d points %v, want %d", len(r.Values), r.Values, tc.wantN)
			}
			if m.Aggregation == "" && r.Values != nil {
				t.Errorf("an instant query with points %v", r.Values)
			}
		})
	}
}

// Prometheus down, or hung: an error result that says so, never a value.
func TestPrometheusUnreachable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	// Accepts connections and never answers.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	m := Measurement{Name: "errors", Provider: ProviderPrometheus, Query: "up", Count: 1}
	for _, tc := range []struct {
		name, addr string
		timeout    time.Duration
		wantErrs   []string
	}{
		{"connection refused", closedAddr, time.Second, []string{`measurement "errors": prometheus http://` + closedAddr + ": query up:", "connection refused"}},
		{"timeout", hung.Addr().String(), 300 * time.Millisecond, []string{"query up: timed out after 300ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPrometheus(PrometheusConfig{Address: "http://" + tc.addr, HTTP: HTTPOptions{Timeout: tc.timeout}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := p.Measure(context.Background(), m, Target{}, start)
			if took := time.Since(start); took > tc.timeout+5*time.Second {
				t.Errorf("took %s with a timeout of %s", took, tc.timeout)
			}
			if !r.Failed() || r.Value != 0 {
				t.Fatalf("result %+v, want an error and no value", r)
			}
			t.Log(r.Error)
			for _, w := range tc.wantErrs {
				if !strings.Contains(r.Error, w) {
					t.Errorf("error %q does not say %q", r.Error, w)
				}
			}
		})
	}
	// A cancelled context is an error too, not a value.
	p, err := NewPrometheus(PrometheusConfig{Address: "http://" + hung.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := p.Measure(ctx, m, Target{}, time.Now()); !r.Failed() || !strings.Contains(r.Error, "context canceled") {
		t.Errorf("cancelled: %+v, want a context canceled error", r)
	}
}

func TestNewPrometheusRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       PrometheusConfig
		wantErr string
	}{
		{"no address", PrometheusConfig{}, `prometheus address ""`},
		{"no scheme", PrometheusConfig{Address: "prom:9090"}, "want http(s)://host:port"},
		{"token and token file", PrometheusConfig{Address: "http://p", HTTP: HTTPOptions{BearerToken: "a", BearerTokenFile: "/f"}}, "set one"},
		{"basic auth and token", PrometheusConfig{Address: "http://p", HTTP: HTTPOptions{BearerToken: "a", BasicAuth: &BasicAuth{Username: "u"}}}, "set one"},
		{"missing token file", PrometheusConfig{Address: "http://p", HTTP: HTTPOptions{BearerTokenFile: "/nonexistent/token"}}, "bearer token: open /nonexistent/token"},
		{"missing CA file", PrometheusConfig{Address: "https://p", HTTP: HTTPOptions{TLS: TLSOptions{CAFile: "/nonexistent/ca.pem"}}}, "tls: CA file"},
		{"cert without key", PrometheusConfig{Address: "https://p", HTTP: HTTPOptions{TLS: TLSOptions{CertFile: "/c.pem"}}}, "both a cert file and a key file"},
		{"negative timeout", PrometheusConfig{Address: "http://p", HTTP: HTTPOptions{Timeout: -time.Second}}, "timeout -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPrometheus(tc.c); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
