// Command testapp is the application the real node's tests roll
// (test/node): a static HTTP server whose image tags (1.0, 2.0, 3.0,
// broken, errors) differ in TESTAPP_VERSION, TESTAPP_READY and
// TESTAPP_ERROR_RATIO, set in each image's config.
//
//	GET /        "testapp VERSION" (what a rollout changed is visible), or
//	             500 for the share TESTAPP_ERROR_RATIO of requests
//	GET /readyz  200 once serving; 503 forever when TESTAPP_READY=never
//	GET /healthz 200 while the process runs
//	GET /metrics http_requests_total{code} and the histogram
//	             http_request_duration_seconds of the requests to /
//
// It listens on TESTAPP_LISTEN (default :8080) and stops on SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		log.Fatalf("testapp: %v", err)
	}
	addr := os.Getenv("TESTAPP_LISTEN")
	if addr == "" {
		addr = ":8080"
	}
	srv := &http.Server{Addr: addr, Handler: newApp(cfg).handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("testapp %s listening on %s (ready=%v, error ratio %g)", cfg.version, addr, cfg.ready, cfg.errorRatio)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("testapp %s: %v", cfg.version, err)
	}
}

// config is what the image's environment says.
type config struct {
	version    string
	ready      bool
	errorRatio float64 // share of requests to / answered 500, in [0, 1]
}

func configFromEnv(getenv func(string) string) (config, error) {
	c := config{version: getenv("TESTAPP_VERSION"), ready: getenv("TESTAPP_READY") != "never"}
	if c.version == "" {
		c.version = "unknown"
	}
	if s := getenv("TESTAPP_ERROR_RATIO"); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r > 1 {
			return c, fmt.Errorf("TESTAPP_ERROR_RATIO %q: want a number from 0 to 1", s)
		}
		c.errorRatio = r
	}
	return c, nil
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", a.instrument(http.HandlerFunc(a.root)))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.cfg.ready {
			http.Error(w, "testapp "+a.cfg.version+": never ready (TESTAPP_READY=never)", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ready: testapp %s\n", a.cfg.version)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", a.metrics)
	return mux
}

func (a *app) root(w http.ResponseWriter, _ *http.Request) {
	if a.failNext() {
		http.Error(w, fmt.Sprintf("testapp %s: error (TESTAPP_ERROR_RATIO=%g)", a.cfg.version, a.cfg.errorRatio), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "testapp %s\n", a.cfg.version)
}
