package gate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/gate/certs"
)

func TestServeHTTP(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, Options{Metrics: NewMetrics(reg)}, statefulSet(3)...)
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  evict("db-0", false),
	})
	cases := []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"an eviction review", http.MethodPost, string(review), 200, `"uid":"req-db-0","allowed":true`},
		{"not a POST", http.MethodGet, "", 405, "POST an admission.k8s.io/v1 AdmissionReview"},
		{"not JSON", http.MethodPost, "{", 400, "decode AdmissionReview"},
		{"no request", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "AdmissionReview without request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.gate.ServeHTTP(w, httptest.NewRequest(c.method, "/validate", strings.NewReader(c.body)))
			if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body.String(), c.code, c.want)
			}
		})
	}
	if n := testutil.ToFloat64(f.gate.opts.Metrics.Requests.WithLabelValues("pods/eviction CREATE", Allowed)); n != 1 {
		t.Errorf("rollplan_gate_requests_total{pods/eviction CREATE, allow} = %v, want 1", n)
	}
}

// The decision log line: its duration in milliseconds (a number, as the
// duration metric measures it), and dry runs marked, however the request
// says so.
func TestDecisionLog(t *testing.T) {
	for _, c := range []struct {
		name   string
		req    *admissionv1.AdmissionRequest
		dryRun bool
	}{
		{"eviction", evict("db-0", false), false},
		{"request dryRun", evict("db-0", true), true},
		{"Eviction deleteOptions.dryRun", evictObject("db-0", "policy/v1", []string{metav1.DryRunAll}), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			f := newFixture(t, Options{Log: slog.New(slog.NewJSONHandler(&log, nil))}, statefulSet(3)...)
			review, _ := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: c.req})
			f.gate.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(review)))
			var line map[string]any
			if err := json.Unmarshal(log.Bytes(), &line); err != nil {
				t.Fatalf("decision log %q: %v", log.String(), err)
			}
			if ms, ok := line["durationMs"].(float64); !ok || ms <= 0 || ms > 60_000 {
				t.Errorf("durationMs %v (%T), want milliseconds", line["durationMs"], line["durationMs"])
			}
			if _, ok := line["duration"]; ok {
				t.Errorf("decision log still has duration %v", line["duration"])
			}
			if got := line["dryRun"] == true; got != c.dryRun {
				t.Errorf("dryRun %v in %s, want %v", line["dryRun"], log.String(), c.dryRun)
			}
		})
	}
}

// TestServer: TLS with the given certificate, /readyz follows the caches,
// and Run returns cleanly when its context ends, the webhook closed.
func TestServer(t *testing.T) {
	f := newFixture(t, Options{}, statefulSet(3)...)
	ca, cert, key, err := certs.ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(certFile, cert, 0o600)
	_ = os.WriteFile(keyFile, key, 0o600)
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	health := hl.Addr().String()
	hl.Close()
	ready := errors.New("informer caches: not synced yet")
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{Gate: f.gate, Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, HealthAddr: health,
		Ready: func() error { return ready }, Listening: func(a string) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	webhook := <-addr
	get := func(path string) int {
		for range 50 {
			resp, err := http.Get("http://" + health + path)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("GET %s: no answer", path)
		return 0
	}
	if c := get("/readyz"); c != 503 {
		t.Errorf("/readyz before the caches sync: %d, want 503", c)
	}
	ready = nil
	if c := get("/readyz"); c != 200 {
		t.Errorf("/readyz: %d, want 200", c)
	}
	if c := get("/healthz"); c != 200 {
		t.Errorf("/healthz: %d, want 200", c)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	review, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: evict("db-1", true)})
	resp, err := client.Post(fmt.Sprintf("https://%s/validate", webhook), "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatalf("POST over TLS verified by the CA: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"allowed":true`) {
		t.Errorf("response %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, err := client.Post(fmt.Sprintf("https://%s/validate", webhook), "application/json", bytes.NewReader(review)); err == nil {
		t.Error("server still answers after shutdown")
	}
}

// TestServerShutdownDelay: once the context ends (SIGTERM), /readyz fails
// at once while /validate keeps answering for the delay, so the API
// servers, told by the endpoints, stop calling first; then the server
// shuts down.
func TestServerShutdownDelay(t *testing.T) {
	const delay = 600 * time.Millisecond
	f := newFixture(t, Options{}, statefulSet(3)...)
	ca, cert, key, err := certs.ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(certFile, cert, 0o600)
	_ = os.WriteFile(keyFile, key, 0o600)
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	health := hl.Addr().String()
	hl.Close()
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &Server{Gate: f.gate, Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, HealthAddr: health,
		ShutdownDelay: delay, Listening: func(a string) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	webhook := <-addr
	readyz := func() int {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(5 * time.Second); readyz() != 200; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never answered 200")
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	review, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: evict("db-1", true)})
	validate := func() error {
		resp, err := client.Post(fmt.Sprintf("https://%s/validate", webhook), "application/json", bytes.NewReader(review))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"allowed":true`) {
			return fmt.Errorf("response %s", body)
		}
		return nil
	}

	stopped := time.Now()
	cancel()
	time.Sleep(50 * time.Millisecond)
	if c := readyz(); c != 503 {
		t.Errorf("/readyz right after SIGTERM: %d, want 503", c)
	}
	if err := validate(); err != nil {
		t.Errorf("/validate during the shutdown delay: %v", err)
	}
	if time.Since(stopped) >= delay {
		t.Fatalf("the checks took longer than the %s delay: make it longer", delay)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v within the shutdown delay", err)
	default:
	}
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if took := time.Since(stopped); took < delay {
		t.Errorf("Run returned %s after the context ended, want at least the %s delay", took, delay)
	}
	if validate() == nil {
		t.Error("/validate still answers after shutdown")
	}
}
