package gate

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the gate's Prometheus metrics.
type Metrics struct {
	Requests *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

// NewMetrics registers the gate's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollplan_gate_requests_total",
			Help: "Admission requests answered, by operation (resource[/subresource] OPERATION) and decision (allow, deny, would-deny, error).",
		}, []string{"operation", "decision"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rollplan_gate_request_duration_seconds",
			Help: "Time to answer an admission request, from the decoded request to the encoded response.",
			// Admission budgets are milliseconds: resolve the low end.
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"operation", "decision"}),
	}
	reg.MustRegister(m.Requests, m.Duration)
	return m
}
