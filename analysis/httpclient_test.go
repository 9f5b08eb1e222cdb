package analysis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pki is a CA, a server certificate for prom.test (and 127.0.0.1) and a
// client certificate, written as PEM files.
type pki struct {
	caFile, clientCert, clientKey string
	server                        tls.Certificate
	pool                          *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			DNSNames: dns, IPAddresses: ips,
		}, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p := pki{caFile: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	// The server's certificate names prom.test only: reaching it at
	// 127.0.0.1 needs ServerName (or skipping verification).
	serverDER, serverKey := leaf(2, "prom.test", x509.ExtKeyUsageServerAuth, []string{"prom.test"}, nil)
	p.server = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}
	clientDER, clientKey := leaf(3, "rollplan-client", x509.ExtKeyUsageClientAuth, nil, nil)
	p.clientCert = write("client.pem", "CERTIFICATE", clientDER)
	p.clientKey = write("client-key.pem", "EC PRIVATE KEY", keyDER(clientKey))
	return p
}

// seen is what the canned server saw of a request.
type seen struct {
	auth, tenant, clientCN, method, query string
}

// cannedPrometheus is an https server that answers /api/v1/query like
// Prometheus (one series at 0.25) to requests carrying the token "good",
// or basic auth admin:secret, and 401 to others; it records what it saw.
func cannedPrometheus(t *testing.T, p pki) (*httptest.Server, func() seen) {
	t.Helper()
	var mu sync.Mutex
	var last seen
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		s := seen{auth: r.Header.Get("Authorization"), tenant: r.Header.Get("X-Scope-OrgID"), method: r.Method, query: r.Form.Get("query")}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			s.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Lock()
		last = s
		mu.Unlock()
		user, pass, basic := r.BasicAuth()
		if s.auth != "Bearer good" && !(basic && user == "admin" && pass == "secret") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"unauthorized","error":"bad credentials"}`))
			return
		}
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"app"},"value":[1700000000,"0.25"]}]}}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: p.pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, func() seen { mu.Lock(); defer mu.Unlock(); return last }
}

// The options reach the server as configured: credentials (inline, from
// files read again per request, basic), headers, and TLS both ways.
func TestHTTPOptions(t *testing.T) {
	p := newPKI(t)
	srv, lastSeen := cannedPrometheus(t, p)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	trusted := TLSOptions{CAFile: p.caFile, ServerName: "prom.test"}
	for _, tc := range []struct {
		name     string
		token    string // written to tokenFile first, when set
		opts     HTTPOptions
		wantErr  string // a substring; empty: the value 0.25
		wantSeen seen   // fields set are checked
	}{
		{name: "inline token", opts: HTTPOptions{BearerToken: "good", TLS: trusted}, wantSeen: seen{auth: "Bearer good"}},
		{name: "token file", token: "good\n", opts: HTTPOptions{BearerTokenFile: tokenFile, TLS: trusted}, wantSeen: seen{auth: "Bearer good"}},
		{name: "basic auth, password file", opts: HTTPOptions{BasicAuth: &BasicAuth{Username: "admin", PasswordFile: passwordFile}, TLS: trusted}},
		{name: "basic auth, inline", opts: HTTPOptions{BasicAuth: &BasicAuth{Username: "admin", Password: "secret"}, TLS: trusted}},
		{name: "wrong token", opts: HTTPOptions{BearerToken: "bad", TLS: trusted}, wantErr: `client error: 401: {"status":"error","errorType":"unauthorized","error":"bad credentials"}`},
		{name: "wrong password", opts: HTTPOptions{BasicAuth: &BasicAuth{Username: "admin", Password: "guess"}, TLS: trusted}, wantErr: "client error: 401"},
		{name: "headers", opts: HTTPOptions{BearerToken: "good", TLS: trusted, Headers: map[string]string{"X-Scope-OrgID": "team-a"}}, wantSeen: seen{tenant: "team-a"}},
		{name: "client certificate", opts: HTTPOptions{BearerToken: "good", TLS: TLSOptions{CAFile: p.caFile, ServerName: "prom.test", CertFile: p.clientCert, KeyFile: p.clientKey}}, wantSeen: seen{clientCN: "rollplan-client"}},
		{name: "system roots do not trust the test CA", opts: HTTPOptions{BearerToken: "good", TLS: TLSOptions{ServerName: "prom.test"}}, wantErr: "certificate signed by unknown authority"},
		{name: "the CA without ServerName: the certificate is for prom.test", opts: HTTPOptions{BearerToken: "good", TLS: TLSOptions{CAFile: p.caFile}}, wantErr: "cannot validate certificate for 127.0.0.1"},
		{name: "a wrong ServerName", opts: HTTPOptions{BearerToken: "good", TLS: TLSOptions{CAFile: p.caFile, ServerName: "other.test"}}, wantErr: "not other.test"},
		{name: "insecureSkipVerify", opts: HTTPOptions{BearerToken: "good", TLS: TLSOptions{InsecureSkipVerify: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.token != "" {
				if err := os.WriteFile(tokenFile, []byte(tc.token), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			prom, err := NewPrometheus(PrometheusConfig{Address: srv.URL, HTTP: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			r := prom.Measure(context.Background(), Measurement{Name: "m", Provider: ProviderPrometheus, Query: `x{ns="{{.Namespace}}"}`}, Target{Namespace: "shop"}, time.Now())
			got := lastSeen()
			if tc.wantErr != "" {
				if !r.Failed() || !strings.Contains(r.Error, tc.wantErr) || !strings.Contains(r.Error, srv.URL) {
					t.Errorf("result %+v, want an error naming %s and saying %q", r, srv.URL, tc.wantErr)
				}
				return
			}
			if r.Failed() || r.Value != 0.25 {
				t.Fatalf("result %+v, want 0.25", r)
			}
			if got.query != `x{ns="shop"}` {
				t.Errorf("server saw query %q", got.query)
			}
			for what, pair := range map[string][2]string{
				"authorization": {got.auth, tc.wantSeen.auth},
				"X-Scope-OrgID": {got.tenant, tc.wantSeen.tenant},
				"client CN":     {got.clientCN, tc.wantSeen.clientCN},
			} {
				if pair[1] != "" && pair[0] != pair[1] {
					t.Errorf("server saw %s %q, want %q", what, pair[0], pair[1])
				}
			}
		})
	}
}

// A token file is read again for every request: a rotated token is used
// at once, and a token file gone is an error, not an unauthenticated
// request.
func TestTokenFileRotation(t *testing.T) {
	p := newPKI(t)
	srv, lastSeen := cannedPrometheus(t, p)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("good"), 0o600); err != nil {
		t.Fatal(err)
	}
	prom, err := NewPrometheus(PrometheusConfig{Address: srv.URL, HTTP: HTTPOptions{BearerTokenFile: tokenFile, TLS: TLSOptions{CAFile: p.caFile, ServerName: "prom.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := Measurement{Name: "m", Provider: ProviderPrometheus, Query: "up"}
	for i, step := range []struct {
		token, wantAuth, wantErr string
	}{
		{"good", "Bearer good", ""},
		{"rotated", "Bearer rotated", "client error: 401"},
		{"good\n", "Bearer good", ""},
		{"", "", "bearer token: " + tokenFile + " is empty"},
	} {
		if err := os.WriteFile(tokenFile, []byte(step.token), 0o600); err != nil {
			t.Fatal(err)
		}
		before := lastSeen()
		r := prom.Measure(context.Background(), m, Target{}, time.Now())
		if step.wantErr == "" && r.Failed() || step.wantErr != "" && !strings.Contains(r.Error, step.wantErr) {
			t.Errorf("step %d: result %+v, want error %q", i, r, step.wantErr)
		}
		if step.wantAuth == "" {
			if lastSeen() != before {
				t.Errorf("step %d: a request went out without its token", i)
			}
		} else if got := lastSeen().auth; got != step.wantAuth {
			t.Errorf("step %d: server saw %q, want %q", i, got, step.wantAuth)
		}
	}
}
