// Package certs makes the gate's TLS material for a quick install or a
// test: a self-signed CA and a serving certificate it signs. Production
// installs should let cert-manager issue and rotate these instead.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CACommonName is the subject common name of the generated CA.
const CACommonName = "rollplan-gate-ca"

// backdate starts the validity an hour before now, so that a cluster
// whose clocks lag the generating machine's still accepts the certificate.
const backdate = time.Hour

// Generate returns a new CA and a serving certificate it signs, valid for
// the in-cluster names of the Service service in namespace (DNSNames), from
// an hour before now to now+validFor. All three are PEM; the key is PKCS #8
// ("PRIVATE KEY"), ECDSA P-256.
func Generate(service, namespace string, validFor time.Duration, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	if service == "" || namespace == "" {
		return nil, nil, nil, errors.New("certs: service and namespace must be set")
	}
	return ForHosts(DNSNames(service, namespace), nil, validFor, now)
}

// DNSNames are the names a client in the cluster may reach the Service
// service in namespace by; the API server uses service.namespace.svc.
func DNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// ForHosts is Generate for arbitrary DNS names and IP addresses, e.g. a
// test server on 127.0.0.1.
func ForHosts(hosts []string, ips []net.IP, validFor time.Duration, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 && len(ips) == 0 {
		return nil, nil, nil, errors.New("certs: no host names or IP addresses")
	}
	if validFor <= 0 {
		return nil, nil, nil, fmt.Errorf("certs: validity %s is not positive", validFor)
	}
	notBefore, notAfter := now.Add(-backdate), now.Add(validFor)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: CA key: %w", err)
	}
	caSerial, err := serial()
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: CACommonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// It signs the one serving certificate, never another CA.
		MaxPathLenZero: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: serving key: %w", err)
	}
	certSerial, err := serial()
	if err != nil {
		return nil, nil, nil, err
	}
	var cn string
	if len(hosts) > 0 {
		cn = hosts[0]
	} else {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber: certSerial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     hosts,
		IPAddresses:  ips,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		// ECDSA keys sign; there is no key encipherment to allow.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		nil
}

// serial is a random 128-bit serial number, as RFC 5280 allows (at most
// 20 octets, positive).
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
