// Command testapp is the application the real node's tests roll
// (test/node): a static HTTP server whose image tags (1.0, 2.0, 3.0,
// broken) differ in TESTAPP_VERSION and TESTAPP_READY, set in each
// image's config.
//
//	GET /        "testapp VERSION" (what a rollout changed is visible)
//	GET /readyz  200 once serving; 503 forever when TESTAPP_READY=never
//	GET /healthz 200 while the process runs
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
	"syscall"
	"time"
)

func main() {
	version := os.Getenv("TESTAPP_VERSION")
	if version == "" {
		version = "unknown"
	}
	ready := os.Getenv("TESTAPP_READY") != "never"
	addr := os.Getenv("TESTAPP_LISTEN")
	if addr == "" {
		addr = ":8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "testapp %s\n", version)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, "testapp "+version+": never ready (TESTAPP_READY=never)", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ready: testapp %s\n", version)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("testapp %s listening on %s (ready=%v)", version, addr, ready)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("testapp %s: %v", version, err)
	}
}
