package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(b)
}

// scrape parses /metrics as Prometheus does (the text format).
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	code, body := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
				for _, b := range m.GetHistogram().GetBucket() {
					out[key+"_bucket{le="+model.SampleValue(b.GetUpperBound()).String()+"}"] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

func TestErrorShareAndMetrics(t *testing.T) {
	for _, tc := range []struct {
		ratio      float64
		n, wantErr int
	}{
		{0, 20, 0},
		{0.5, 20, 10},
		{0.25, 20, 5},
		{0.3, 10, 3},
		{1, 7, 7},
	} {
		a := newApp(config{version: "v", ready: true, errorRatio: tc.ratio})
		h := a.handler()
		errs := 0
		for range tc.n {
			code, body := get(t, h, "/")
			switch code {
			case http.StatusOK:
				if body != "testapp v\n" {
					t.Errorf("ratio %g: GET / 200 %q, want the version", tc.ratio, body)
				}
			case http.StatusInternalServerError:
				errs++
			default:
				t.Errorf("ratio %g: GET / answered %d", tc.ratio, code)
			}
		}
		if errs != tc.wantErr {
			t.Errorf("ratio %g: %d of %d requests answered 500, want %d", tc.ratio, errs, tc.n, tc.wantErr)
		}
		// Probes are not traffic: they do not count.
		for _, p := range []string{"/readyz", "/healthz", "/metrics"} {
			get(t, h, p)
		}
		m := scrape(t, h)
		want := map[string]float64{
			"http_requests_total{code=200}":                 float64(tc.n - tc.wantErr),
			"http_requests_total{code=500}":                 float64(tc.wantErr),
			"http_request_duration_seconds_count":           float64(tc.n),
			"http_request_duration_seconds_bucket{le=+Inf}": float64(tc.n),
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("ratio %g: %s = %v (present %v), want %v", tc.ratio, k, got, ok, v)
			}
		}
	}
}

// A fresh app already exposes both codes at 0: an error ratio over it is
// 0, not an empty result.
func TestMetricsBeforeTraffic(t *testing.T) {
	m := scrape(t, newApp(config{version: "v", ready: true}).handler())
	for _, k := range []string{"http_requests_total{code=200}", "http_requests_total{code=500}", "http_request_duration_seconds_count"} {
		if v, ok := m[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", k, v, ok)
		}
	}
}

func TestReadiness(t *testing.T) {
	if code, _ := get(t, newApp(config{version: "v", ready: false}).handler(), "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("TESTAPP_READY=never: /readyz %d, want 503", code)
	}
	if code, _ := get(t, newApp(config{version: "v", ready: true, errorRatio: 1}).handler(), "/readyz"); code != http.StatusOK {
		t.Errorf("errors only on /: /readyz %d, want 200 (ready, failing its requests)", code)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := configFromEnv(env(map[string]string{"TESTAPP_VERSION": "errors", "TESTAPP_ERROR_RATIO": "0.5"}))
	if err != nil || c.version != "errors" || !c.ready || c.errorRatio != 0.5 {
		t.Errorf("configFromEnv: %+v, %v", c, err)
	}
	c, err = configFromEnv(env(map[string]string{"TESTAPP_READY": "never"}))
	if err != nil || c.version != "unknown" || c.ready || c.errorRatio != 0 {
		t.Errorf("configFromEnv: %+v, %v", c, err)
	}
	for _, bad := range []string{"1.5", "-0.1", "half"} {
		if _, err := configFromEnv(env(map[string]string{"TESTAPP_ERROR_RATIO": bad})); err == nil || !strings.Contains(err.Error(), "TESTAPP_ERROR_RATIO") {
			t.Errorf("TESTAPP_ERROR_RATIO=%s: %v, want an error naming it", bad, err)
		}
	}
}
