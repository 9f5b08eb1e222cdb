package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The gate's own namespace (its reservations; never gated) is -n, else
// POD_NAMESPACE, else rollplan-system: never the kubeconfig's namespace,
// which from a workstation is "default", and the gate would exempt it.
func TestGateNamespace(t *testing.T) {
	for _, c := range []struct {
		name, flag, env string
		want, from      string
	}{
		{"-n", "gate", "rollplan-system", "gate", "--namespace"},
		{"POD_NAMESPACE", "", "platform", "platform", "POD_NAMESPACE"},
		{"neither", "", "", "rollplan-system", "built-in default"},
	} {
		if ns, from := gateNamespace(c.flag, c.env); ns != c.want || from != c.from {
			t.Errorf("%s: namespace %s (from %s), want %s (from %s)", c.name, ns, from, c.want, c.from)
		}
	}
	// The help says so, and offers the flags.
	cmd := newGateCommand()
	for _, want := range []string{"-n/--namespace when given, else the POD_NAMESPACE", "else rollplan-system", "--shutdown-delay"} {
		if !strings.Contains(cmd.Long, want) {
			t.Errorf("gate --help does not say %q", want)
		}
	}
	for _, flag := range []string{"namespace", "shutdown-delay"} {
		if cmd.Flags().Lookup(flag) == nil {
			t.Errorf("gate has no --%s", flag)
		}
	}
	if f := cmd.Flags().Lookup("shutdown-delay"); f != nil && f.DefValue != "5s" {
		t.Errorf("--shutdown-delay default %s, want 5s", f.DefValue)
	}
}

func TestGateShutdownDelayFlag(t *testing.T) {
	_, line, code := execute(t, "gate", "--shutdown-delay", "-1s")
	if code != exitUsage || !strings.Contains(line, "--shutdown-delay -1s: want a positive duration, or 0 for no delay") {
		t.Errorf("exit %d: %s; want a usage error for a negative --shutdown-delay", code, line)
	}
}

// The gate checks its serving certificate before it reads the kubeconfig:
// a missing or unloadable certificate is the error, named by its flag,
// however broken the kubeconfig.
func TestGateChecksCertificateFirst(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeServingCert(t, cert, key)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM block\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.crt")
	prev := connectCluster
	t.Cleanup(func() { connectCluster = prev })
	connected := false
	connectCluster = func(*kubeFlags) (*cluster, error) {
		connected = true
		return nil, errors.New("kubeconfig /nowhere/config: no such file or directory")
	}
	for _, c := range []struct {
		name, cert, key string
		want            []string // in the error
		connects        bool     // got as far as the kubeconfig
	}{
		{"certificate missing", missing, key, []string{"--tls-cert-file " + missing, "no such file"}, false},
		{"key missing", cert, missing, []string{"--tls-private-key-file " + missing, "no such file"}, false},
		{"certificate not PEM", garbage, key, []string{"serving certificate --tls-cert-file " + garbage, "--tls-private-key-file " + key}, false},
		{"key not PEM", cert, garbage, []string{"serving certificate", "--tls-private-key-file " + garbage}, false},
		{"certificate and key swapped", key, cert, []string{"serving certificate --tls-cert-file " + key}, false},
		{"good pair, then the kubeconfig", cert, key, []string{"kubeconfig /nowhere/config"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			connected = false
			_, line, code := execute(t, "gate", "--tls-cert-file", c.cert, "--tls-private-key-file", c.key, "--kubeconfig", "/nowhere/config")
			if code == 0 {
				t.Fatalf("gate started; want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("error %q does not say %q", line, w)
				}
			}
			if connected != c.connects {
				t.Errorf("read the kubeconfig: %t, want %t (error %q)", connected, c.connects, line)
			}
		})
	}
}

// writeServingCert writes a self-signed ECDSA certificate and its key (PEM).
func writeServingCert(t *testing.T, certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollplan-gate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}
