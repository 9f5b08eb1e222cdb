package analysis

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricsAPI answers JSON by path, and echoes a POST's body and headers.
func metricsAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/rate":
			// Answers only for the wave's pods, as the URL names them.
			if r.URL.Query().Get("pods") != `web\.0|web-1` || r.URL.Query().Get("ns") != "shop&co" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"unexpected query ` + r.URL.RawQuery + `"}`))
				return
			}
			_, _ = w.Write([]byte(`{"data":{"errorRate":0.02,"p99":"n/a","ok":true,"pods":[{"name":"web-1","rate":0.5},{"name":"web-0","rate":0.1}],"none":null,"nested":{"a":1}}}`))
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			var in map[string]any
			if r.Method != http.MethodPost || json.Unmarshal(body, &in) != nil || r.Header.Get("X-Team") != "a" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			in["method"] = r.Method
			_ = json.NewEncoder(w).Encode(map[string]any{"got": in, "n": len(body)})
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>maintenance</html>"))
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"warming up"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWeb(t *testing.T) {
	srv := metricsAPI(t)
	web, err := NewWeb(WebConfig{HTTP: HTTPOptions{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Namespace: "shop&co", Name: "web", Wave: 1, Pods: []string{"web.0", "web-1"}}
	rate := srv.URL + "/rate?ns={{.Namespace}}&pods={{.PodRegex}}"
	for _, tc := range []struct {
		name     string
		url      string
		req      WebRequest
		want     float64
		wantErrs []string
	}{
		{name: "a number", url: rate, req: WebRequest{JSONPath: "{.data.errorRate}"}, want: 0.02},
		{name: "braces optional", url: rate, req: WebRequest{JSONPath: ".data.errorRate"}, want: 0.02},
		{name: "a filter", url: rate, req: WebRequest{JSONPath: `{.data.pods[?(@.name=="web-1")].rate}`}, want: 0.5},
		{name: "an index", url: rate, req: WebRequest{JSONPath: `{.data.pods[1].rate}`}, want: 0.1},
		{
			name: "POST with a rendered body and headers", url: srv.URL + "/echo",
			req:  WebRequest{Method: "POST", Body: `{"ns":"{{.Namespace}}","wave":{{.Wave}}}`, Headers: map[string]string{"X-Team": "a"}, JSONPath: "{.got.wave}"},
			want: 1,
		},
		{
			name: "a string is not a number", url: rate, req: WebRequest{JSONPath: "{.data.p99}"},
			wantErrs: []string{`GET ` + srv.URL + `/rate?ns=shop%26co&pods=web%5C.0%7Cweb-1`, `jsonpath {.data.p99}: the string "n/a", want a number`},
		},
		{name: "a boolean", url: rate, req: WebRequest{JSONPath: "{.data.ok}"}, wantErrs: []string{"jsonpath {.data.ok}: the boolean true, want a number"}},
		{name: "null", url: rate, req: WebRequest{JSONPath: "{.data.none}"}, wantErrs: []string{"jsonpath {.data.none}: null, want a number"}},
		{name: "an object", url: rate, req: WebRequest{JSONPath: "{.data.nested}"}, wantErrs: []string{"an object, want a number"}},
		{name: "several values", url: rate, req: WebRequest{JSONPath: "{.data.pods[*].rate}"}, wantErrs: []string{"jsonpath {.data.pods[*].rate}: 2 values, want exactly one number"}},
		{name: "no match", url: rate, req: WebRequest{JSONPath: "{.data.missing}"}, wantErrs: []string{"jsonpath {.data.missing}: missing is not found"}},
		{name: "no match in a filter", url: rate, req: WebRequest{JSONPath: `{.data.pods[?(@.name=="web-9")].rate}`}, wantErrs: []string{"0 values, want exactly one number"}},
		{name: "not JSON", url: srv.URL + "/html", req: WebRequest{JSONPath: "{.v}"}, wantErrs: []string{"GET " + srv.URL + "/html: jsonpath {.v}: the body is not JSON", "<html>maintenance</html>"}},
		{name: "non-2xx", url: srv.URL + "/down", req: WebRequest{JSONPath: "{.v}"}, wantErrs: []string{"GET " + srv.URL + `/down: HTTP 503 Service Unavailable: {"error":"warming up"}`}},
		{name: "the server refuses the query", url: srv.URL + "/rate?pods={{.PodRegex}}", req: WebRequest{JSONPath: "{.v}"}, wantErrs: []string{"HTTP 400 Bad Request", "unexpected query"}},
		{name: "not http", url: "file:///etc/passwd", req: WebRequest{JSONPath: "{.v}"}, wantErrs: []string{"GET file:///etc/passwd: want an http(s)://host/... URL"}},
		{name: "a template error", url: srv.URL + "/{{.Podz}}", req: WebRequest{JSONPath: "{.v}"}, wantErrs: []string{`measurement "m": query template: unknown field .Podz`}},
		{name: "a body template error", url: srv.URL + "/echo", req: WebRequest{Method: "POST", Body: `{{.Window}}`, JSONPath: "{.v}"}, wantErrs: []string{`measurement "m": body template`, "no window"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Measurement{Name: "m", Provider: ProviderWeb, Query: tc.url, Count: 1, Web: tc.req}
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			r := web.Measure(context.Background(), m, target, now)
			if r.Name != "m" || !r.Taken.Equal(now) {
				t.Errorf("result %+v: want name m taken at %s", r, now)
			}
			if len(tc.wantErrs) > 0 {
				if !r.Failed() || r.Value != 0 {
					t.Fatalf("result %+v, want an error and no value", r)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(r.Error, w) {
						t.Errorf("error %q does not say %q", r.Error, w)
					}
				}
				return
			}
			if r.Failed() || r.Value != tc.want {
				t.Errorf("result %+v, want %v", r, tc.want)
			}
		})
	}
}

// The web provider shares the HTTP options: here a token, a header and
// TLS against the canned server of the Prometheus tests.
func TestWebHTTPOptions(t *testing.T) {
	p := newPKI(t)
	srv, lastSeen := cannedPrometheus(t, p)
	web, err := NewWeb(WebConfig{HTTP: HTTPOptions{BearerToken: "good", Headers: map[string]string{"X-Scope-OrgID": "t"}, TLS: TLSOptions{CAFile: p.caFile, ServerName: "prom.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := Measurement{Name: "m", Provider: ProviderWeb, Query: srv.URL + "/api/v1/query?query=up", Web: WebRequest{JSONPath: "{.data.result[0].value[0]}"}}
	r := web.Measure(context.Background(), m, Target{}, time.Now())
	if r.Failed() || r.Value != 1700000000 {
		t.Errorf("result %+v, want 1700000000", r)
	}
	if s := lastSeen(); s.auth != "Bearer good" || s.tenant != "t" || s.method != "GET" {
		t.Errorf("server saw %+v", s)
	}
}

// FuzzExtractNumber: any body and path give a finite number or an error,
// never a panic; a number placed at {.v} comes back as itself.
func FuzzExtractNumber(f *testing.F) {
	f.Add([]byte(`{"v":1.5}`), "{.v}", 2.5)
	f.Add([]byte(`{"a":[{"b":1},{"b":2}]}`), `{.a[?(@.b==2)].b}`, 0.0)
	f.Add([]byte(`[1,2,3]`), "{[-1:]}", -1e300)
	f.Add([]byte(`{"v":"1"}`), "{range .*}{.}{end}", 1e-300)
	f.Add([]byte(`{"v":1e999}`), "{..v}", 0.0)
	f.Add([]byte(`not json`), "{.v", 3.0)
	f.Add([]byte(`{"v":{"w":null}}`), `{.v['w']}`, 7.0)
	f.Fuzz(func(t *testing.T, body []byte, path string, x float64) {
		if v, err := extractNumber(body, path); err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("body %q path %q: %v, want a finite number or an error", body, path, v)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		doc := []byte(`{"v":` + strconv.FormatFloat(x, 'g', -1, 64) + `}`)
		if v, err := extractNumber(doc, "{.v}"); err != nil || v != x {
			t.Errorf("%s: %v, %v; want %v", doc, v, err, x)
		}
	})
}

// A server that never answers: an error once the timeout passes.
func TestWebTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	web, err := NewWeb(WebConfig{HTTP: HTTPOptions{Timeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := web.Measure(context.Background(), Measurement{Name: "m", Provider: ProviderWeb, Query: srv.URL, Web: WebRequest{JSONPath: "{.v}"}}, Target{}, start)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s with a timeout of 200ms", took)
	}
	if !r.Failed() || !strings.Contains(r.Error, "GET "+srv.URL) || !strings.Contains(r.Error, "GET "+srv.URL+": timed out after 200ms: ") {
		t.Errorf("result %+v, want a timeout naming the URL", r)
	}
}
