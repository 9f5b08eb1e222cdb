package gate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves a Gate over HTTPS at /validate, with /healthz and /readyz
// on a plain health address.
type Server struct {
	Gate *Gate
	// Handler, when set, serves /validate instead of Gate: several gates
	// behind one address (tests of replicas), or a no-op webhook served
	// the same way (benchmarks).
	Handler http.Handler
	// Addr of the webhook (TLS); CertFile and KeyFile are re-read when they
	// change on disk (a renewed Secret), checked at most every 10s.
	Addr, CertFile, KeyFile string
	// HealthAddr serves /healthz (the process is alive) and /readyz (Ready
	// and not shutting down: 503 with the reason otherwise); "" for none.
	HealthAddr string
	// Ready says why the gate cannot do its job (see Readiness.Err), nil
	// when it can; nil Ready: always ready.
	Ready func() error
	Log   *slog.Logger
	// Listening, when set, receives the webhook's address once it listens.
	Listening func(addr string)
	// ShutdownDelay: how long /validate keeps serving after ctx ends while
	// /readyz already fails, so that the endpoints controller and every
	// API server stop sending before the listener closes; 0: none.
	ShutdownDelay time.Duration

	stopping atomic.Bool
}

// Run serves until ctx ends, then shuts down gracefully: /readyz fails at
// once so the Service stops sending, /validate keeps answering for
// ShutdownDelay (requests still routed here), then requests in flight
// finish (up to 10s).
func (s *Server) Run(ctx context.Context) error {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	certs := &certLoader{certFile: s.CertFile, keyFile: s.KeyFile}
	if _, err := certs.get(nil); err != nil {
		return err
	}
	mux := http.NewServeMux()
	var h http.Handler = s.Gate
	if s.Handler != nil {
		h = s.Handler
	}
	mux.Handle("/validate", h)
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("--bind-address %s: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}}
	servers := []*http.Server{srv}
	errs := make(chan error, 2)
	go func() { errs <- srv.ServeTLS(l, "", "") }()
	s.Log.Info("serving admission reviews", "address", "https://"+l.Addr().String()+"/validate")
	if s.Listening != nil {
		s.Listening(l.Addr().String())
	}
	if s.HealthAddr != "" {
		hl, err := net.Listen("tcp", s.HealthAddr)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("--health-probe-bind-address %s: %w", s.HealthAddr, err)
		}
		hmux := http.NewServeMux()
		hmux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		hmux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if s.stopping.Load() {
				http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
				return
			}
			if s.Ready != nil {
				if err := s.Ready(); err != nil {
					http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			_, _ = w.Write([]byte("ok"))
		})
		hs := &http.Server{Handler: hmux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, hs)
		go func() { errs <- hs.Serve(hl) }()
	}
	select {
	case err := <-errs:
		for _, x := range servers {
			_ = x.Close()
		}
		return fmt.Errorf("gate server: %w", err)
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	if s.ShutdownDelay > 0 {
		s.Log.Info("shutting down: /readyz fails, still serving admission reviews until the endpoints drop this replica", "delay", s.ShutdownDelay.String())
		select {
		case <-time.After(s.ShutdownDelay):
		case err := <-errs:
			for _, x := range servers {
				_ = x.Close()
			}
			return fmt.Errorf("gate server: %w", err)
		}
	}
	s.Log.Info("shutting down: finishing the requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first error
	for _, x := range servers {
		if err := x.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
		}
	}
	return first
}

// certLoader re-reads the serving certificate when its files change.
type certLoader struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	mod               time.Time
	checked           time.Time
}

func (c *certLoader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < 10*time.Second {
		return c.cert, nil
	}
	c.checked = time.Now()
	mod := time.Time{}
	for _, f := range []string{c.certFile, c.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			if c.cert != nil {
				return c.cert, nil // keep serving the last good one
			}
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		if st.ModTime().After(mod) {
			mod = st.ModTime()
		}
	}
	if c.cert != nil && !mod.After(c.mod) {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, fmt.Errorf("serving certificate --tls-cert-file %s, --tls-private-key-file %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.mod = &cert, mod
	return c.cert, nil
}
