package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func parse(t *testing.T, what string, pemBytes []byte) *x509.Certificate {
	t.Helper()
	b, rest := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("%s: want one CERTIFICATE PEM block, got %q", what, pemBytes)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

func TestGenerate(t *testing.T) {
	const validFor = 30 * 24 * time.Hour
	caPEM, certPEM, keyPEM, err := Generate("rollplan-gate", "rollplan-system", validFor, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert := parse(t, "CA", caPEM), parse(t, "serving certificate", certPEM)

	if !ca.IsCA || ca.Subject.CommonName != CACommonName || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA %v, CN %q, key usage %v", ca.IsCA, ca.Subject.CommonName, ca.KeyUsage)
	}
	if cert.IsCA || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("serving certificate: IsCA %v, ext key usage %v", cert.IsCA, cert.ExtKeyUsage)
	}
	wantNames := []string{"rollplan-gate", "rollplan-gate.rollplan-system", "rollplan-gate.rollplan-system.svc", "rollplan-gate.rollplan-system.svc.cluster.local"}
	if !slices.Equal(cert.DNSNames, wantNames) {
		t.Errorf("DNS names %v, want %v", cert.DNSNames, wantNames)
	}
	for _, c := range []*x509.Certificate{ca, cert} {
		if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(validFor)) {
			t.Errorf("%s: valid %s to %s, want %s to %s", c.Subject.CommonName, c.NotBefore, c.NotAfter, now.Add(-time.Hour), now.Add(validFor))
		}
		if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", c.Subject.CommonName, c.PublicKey)
		}
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	verify := func(name string, at time.Time) error {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at})
		return err
	}
	for _, name := range wantNames {
		if err := verify(name, now); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	for _, c := range []struct {
		name string
		at   time.Time
	}{
		{"rollplan-gate.default.svc", now},
		{"rollplan-gate.rollplan-system.svc", now.Add(-2 * time.Hour)},
		{"rollplan-gate.rollplan-system.svc", now.Add(validFor + time.Second)},
	} {
		if err := verify(c.name, c.at); err == nil {
			t.Errorf("verify %s at %s: want an error", c.name, c.at)
		}
	}

	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("key: want a PKCS #8 PRIVATE KEY block")
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("X509KeyPair: %v", err)
	}

	// Two calls make two CAs: a leaked key is never shared between installs.
	ca2PEM, _, _, err := Generate("rollplan-gate", "rollplan-system", validFor, now)
	if err != nil {
		t.Fatal(err)
	}
	other := x509.NewCertPool()
	other.AddCert(parse(t, "second CA", ca2PEM))
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "rollplan-gate.rollplan-system.svc", Roots: other, CurrentTime: now}); err == nil {
		t.Error("serving certificate verifies against another call's CA")
	}
}

// ForHosts with 127.0.0.1 gives a TLS server a client trusting only the CA
// talks to.
func TestForHostsServesTLS(t *testing.T) {
	caPEM, certPEM, keyPEM, err := ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("body %q", body)
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		name     string
		generate func() error
	}{
		{"no service", func() error { _, _, _, err := Generate("", "ns", time.Hour, now); return err }},
		{"no namespace", func() error { _, _, _, err := Generate("svc", "", time.Hour, now); return err }},
		{"zero validity", func() error { _, _, _, err := Generate("svc", "ns", 0, now); return err }},
		{"no hosts", func() error { _, _, _, err := ForHosts(nil, nil, time.Hour, now); return err }},
	} {
		if err := c.generate(); err == nil {
			t.Errorf("%s: want an error", c.name)
		}
	}
}
