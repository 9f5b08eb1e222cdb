package main

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// app is testapp's state: its request count, for the error share, and its
// metrics.
type app struct {
	cfg      config
	mu       sync.Mutex
	served   uint64 // requests to / so far
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	metrics  http.Handler
}

// newApp registers the metrics in a registry of its own: /metrics shows
// what the analysis queries read (policies/examples/analysis-error-rate),
// not the Go runtime's. client_golang rather than hand exposition: it is
// already rollplan's dependency and what real applications expose with.
func newApp(cfg config) *app {
	reg := prometheus.NewRegistry()
	a := &app{
		cfg: cfg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "Requests to / answered, by HTTP status code.",
		}, []string{"code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to answer a request to /.",
			Buckets: prometheus.DefBuckets,
		}),
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}
	reg.MustRegister(a.requests, a.duration)
	// Both codes from the start: an error ratio over a version without
	// errors is 0, not nothing (PromQL divides an absent series to an
	// empty result, which a gate reads as inconclusive).
	a.requests.WithLabelValues("200")
	a.requests.WithLabelValues("500")
	return a
}

// failNext says whether the next request to / is answered 500: the n-th
// fails when floor(n*ratio) grows, so that errors are spread evenly and
// any n requests hold floor(n*ratio) of them, give or take one.
func (a *app) failNext() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.served++
	n := float64(a.served)
	return math.Floor(n*a.cfg.errorRatio) > math.Floor((n-1)*a.cfg.errorRatio)
}

// instrument counts next's answers by code and times them. Only the
// application's own path: readiness probes and scrapes are not traffic,
// and counting them would dilute the error ratio.
func (a *app) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		a.duration.Observe(time.Since(began).Seconds())
		a.requests.WithLabelValues(strconv.Itoa(rec.code)).Inc()
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
