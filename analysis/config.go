package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the operator's side of the measurements: where each provider
// is and how to reach it (rollplan apply and controller --analysis-config
// FILE). A policy's measurement names its options by reference
// (engine.Measurement.Options); "" names the provider's own name, so a
// config with one entry "prometheus" serves every Prometheus measurement
// that names none. Policies hold no address or secret.
//
//	providers:
//	  prometheus:                 # the name measurements give as options
//	    type: prometheus          # or web; default: the entry's name
//	    address: https://prometheus.monitoring:9090
//	    bearerTokenFile: /var/run/secrets/tokens/prometheus
//	    tls: {caFile: /etc/prometheus-ca/ca.crt}
//	    timeout: 10s
type Config struct {
	Providers map[string]ProviderConfig `json:"providers"`
}

// ProviderConfig is one named provider's options.
type ProviderConfig struct {
	// Type: prometheus or web; default the entry's name.
	Type string `json:"type,omitempty"`
	// Address: the Prometheus base URL (type prometheus only).
	Address         string            `json:"address,omitempty"`
	BearerTokenFile string            `json:"bearerTokenFile,omitempty"`
	BasicAuth       *BasicAuthConfig  `json:"basicAuth,omitempty"`
	TLS             TLSConfig         `json:"tls,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	// Timeout per request, a Go duration; default 30s.
	Timeout string `json:"timeout,omitempty"`
}

// BasicAuthConfig is basic auth with the password in a file.
type BasicAuthConfig struct {
	Username     string `json:"username"`
	PasswordFile string `json:"passwordFile"`
}

// TLSConfig are TLSOptions as the file spells them.
type TLSConfig struct {
	CAFile             string `json:"caFile,omitempty"`
	CertFile           string `json:"certFile,omitempty"`
	KeyFile            string `json:"keyFile,omitempty"`
	ServerName         string `json:"serverName,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
}

// LoadConfig reads a Config file (YAML or JSON) strictly and builds its
// providers; errors name the file and the entry.
func LoadConfig(path string) (*Resolver, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(path, b)
	if err != nil {
		return nil, err
	}
	r, err := c.Resolver()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ParseConfig decodes a Config (YAML or JSON) strictly, without building
// its providers: the files it names (tokens, CAs) may be where it is
// deployed, not here. name prefixes the errors.
func ParseConfig(name string, b []byte) (*Config, error) {
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w (want providers: {NAME: {type, address, bearerTokenFile, basicAuth, tls, headers, timeout}})", name, err)
	}
	return &c, nil
}

// Resolver builds every provider of c.
func (c *Config) Resolver() (*Resolver, error) {
	r := &Resolver{providers: map[string]Provider{}, kinds: map[string]string{}}
	for name, pc := range c.Providers {
		kind := pc.Type
		if kind == "" {
			kind = name
		}
		h := HTTPOptions{BearerTokenFile: pc.BearerTokenFile, Headers: pc.Headers, TLS: TLSOptions(pc.TLS)}
		if pc.BasicAuth != nil {
			h.BasicAuth = &BasicAuth{Username: pc.BasicAuth.Username, PasswordFile: pc.BasicAuth.PasswordFile}
		}
		if pc.Timeout != "" {
			d, err := time.ParseDuration(pc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("providers[%s].timeout %q: want a positive duration such as 10s", name, pc.Timeout)
			}
			h.Timeout = d
		}
		var (
			p   Provider
			err error
		)
		switch kind {
		case ProviderPrometheus:
			p, err = NewPrometheus(PrometheusConfig{Address: pc.Address, HTTP: h})
		case ProviderWeb:
			if pc.Address != "" {
				err = fmt.Errorf("address %q: the web provider takes its URL from each measurement's query", pc.Address)
			} else {
				p, err = NewWeb(WebConfig{HTTP: h})
			}
		default:
			err = fmt.Errorf("type %q: want %q or %q", kind, ProviderPrometheus, ProviderWeb)
		}
		if err != nil {
			return nil, fmt.Errorf("providers[%s]: %w", name, err)
		}
		r.providers[name], r.kinds[name] = p, kind
	}
	return r, nil
}

// Resolver finds the provider a measurement names.
type Resolver struct {
	providers map[string]Provider
	kinds     map[string]string
}

// NewResolver serves fixed providers by options name (tests, embedding).
func NewResolver(providers map[string]Provider, kinds map[string]string) *Resolver {
	return &Resolver{providers: providers, kinds: kinds}
}

// Provider is the provider configured under options ("" : the provider's
// own name), which must be of kind provider.
func (r *Resolver) Provider(options, provider string) (Provider, error) {
	name := options
	if name == "" {
		name = provider
	}
	if r == nil {
		return nil, fmt.Errorf("provider options %q: no analysis config (--analysis-config FILE)", name)
	}
	p, ok := r.providers[name]
	if !ok {
		names := make([]string, 0, len(r.providers))
		for n := range r.providers {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			names = []string{"none"}
		}
		return nil, fmt.Errorf("provider options %q are not configured (the analysis config has: %s)", name, strings.Join(names, ", "))
	}
	if k := r.kinds[name]; k != provider {
		return nil, fmt.Errorf("provider options %q configure a %s provider, the measurement wants %s", name, k, provider)
	}
	return p, nil
}
