package analysis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultTimeout bounds one measurement's request when HTTPOptions.Timeout
// is zero.
const DefaultTimeout = 30 * time.Second

// HTTPOptions are how a provider reaches its server, in the forms a
// Prometheus scrape config or Grafana datasource uses.
type HTTPOptions struct {
	// BearerToken is sent as "Authorization: Bearer TOKEN".
	BearerToken string
	// BearerTokenFile holds the token; it is read again for every request,
	// so a rotated token (a projected service-account token) is picked up.
	BearerTokenFile string
	// BasicAuth, when set, is sent instead of a bearer token.
	BasicAuth *BasicAuth
	// TLS configures https:// servers.
	TLS TLSOptions
	// Headers are added to every request.
	Headers map[string]string
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
}

// BasicAuth is HTTP basic authentication.
type BasicAuth struct {
	Username string
	Password string
	// PasswordFile holds the password, read again for every request.
	PasswordFile string
}

// TLSOptions configure the client side of TLS.
type TLSOptions struct {
	// CAFile is a PEM bundle of the CAs to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM), read
	// again for every handshake so a rotated certificate is picked up.
	CertFile, KeyFile string
	// ServerName is the name to verify the server's certificate against,
	// when it differs from the address's host.
	ServerName string
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool
}

// timeout is the effective request timeout.
func (o HTTPOptions) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// client builds the HTTP client of o. What it reads now (the CA file, a
// first read of the secrets' files) fails here rather than at the first
// measurement.
func (o HTTPOptions) client() (*http.Client, error) {
	if o.BearerToken != "" && o.BearerTokenFile != "" {
		return nil, errors.New("both a bearer token and a bearer token file: set one")
	}
	if o.BasicAuth != nil && (o.BearerToken != "" || o.BearerTokenFile != "") {
		return nil, errors.New("both basic auth and a bearer token: set one")
	}
	if b := o.BasicAuth; b != nil && b.Password != "" && b.PasswordFile != "" {
		return nil, errors.New("basic auth: both a password and a password file: set one")
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s: want a positive duration", o.Timeout)
	}
	tlsConfig, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	rt := &authRoundTripper{opts: o, next: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}}
	if _, err := rt.credentials(); err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: o.timeout()}, nil
}

func (t TLSOptions) config() (*tls.Config, error) {
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA file %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, fmt.Errorf("tls: a client certificate needs both a cert file and a key file (cert %q, key %q)", t.CertFile, t.KeyFile)
	}
	if t.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls: client certificate: %w", err)
			}
			return &cert, nil
		}
	}
	return c, nil
}

// authRoundTripper adds the headers and credentials to every request,
// reading the credentials' files each time.
type authRoundTripper struct {
	opts HTTPOptions
	next http.RoundTripper
}

func (rt *authRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	set, err := rt.credentials()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change its request
	for k, v := range rt.opts.Headers {
		req.Header.Set(k, v)
	}
	set(req)
	return rt.next.RoundTrip(req)
}

// credentials reads the secrets and returns what sets them on a request.
func (rt *authRoundTripper) credentials() (func(*http.Request), error) {
	o := rt.opts
	if b := o.BasicAuth; b != nil {
		password := b.Password
		if b.PasswordFile != "" {
			p, err := readSecret(b.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("basic auth password: %w", err)
			}
			password = p
		}
		return func(r *http.Request) { r.SetBasicAuth(b.Username, password) }, nil
	}
	token := o.BearerToken
	if o.BearerTokenFile != "" {
		t, err := readSecret(o.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("bearer token: %w", err)
		}
		token = t
	}
	if token == "" {
		return func(*http.Request) {}, nil
	}
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, nil
}

// readSecret reads a secret's file, without the trailing newline editors
// and `kubectl create secret --from-file` leave.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// timedOut reports whether err is a request's timeout, ctx's or the
// client's: their words for it ("context deadline exceeded", which either
// may say) do not say whose deadline or how long it was.
func timedOut(ctx context.Context, err error) bool {
	var timeout interface{ Timeout() bool }
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &timeout) && timeout.Timeout()
}
