package controller

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"

	"github.com/rollplan/rollplan/executor"
)

// Metrics are the controller's Prometheus metrics, besides the executor's
// action and step counters (rollplan_executor_*), which it shares.
type Metrics struct {
	// Rollouts: managed rollouts by phase (inprogress, complete, halted,
	// paused, waiting), as this replica last stepped them.
	Rollouts *prometheus.GaugeVec
	// RolloutPhase: 1 for each managed rollout, labelled with its
	// workload and its phase at the last step (one series per workload:
	// the series of its previous phase is deleted), so an alert can name
	// the rollout that halted.
	RolloutPhase *prometheus.GaugeVec
	// RolloutProgress: for each rollout in progress, the Unix time of the
	// last step that saw it move (a new revision, wave, or count of pods
	// updated, available or in flight); a rollout whose value grows old is
	// stalled. Only the leader knows it, and a new leader starts the clock
	// again at its first step.
	RolloutProgress *prometheus.GaugeVec
	// Errors: steps that failed and were retried with backoff.
	Errors prometheus.Counter
	// Leader: 1 while this replica leads (drives rollouts), else 0.
	Leader prometheus.Gauge
	// APIRequests: requests to the API server by method and status code
	// (CountRequests), watches and lease renewals included.
	APIRequests *prometheus.CounterVec

	exec  *executor.Metrics
	queue queueMetrics
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Rollouts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_controller_rollouts",
			Help: "Managed rollouts by phase (inprogress, complete, halted, paused, waiting) at their last step.",
		}, []string{"phase"}),
		RolloutPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_controller_rollout_phase",
			Help: "1 for each managed rollout, by workload and its phase (inprogress, complete, halted, paused, waiting) at its last step.",
		}, rolloutLabels("phase")),
		RolloutProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_controller_rollout_last_progress_timestamp_seconds",
			Help: "Unix time of the last step at which a rollout in progress moved (revision, wave, pods updated, available or in flight).",
		}, rolloutLabels()),
		Errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollplan_controller_step_errors_total",
			Help: "Steps that failed and were retried with backoff.",
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollplan_controller_leader",
			Help: "1 while this replica is the leader that drives rollouts, else 0.",
		}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollplan_controller_api_requests_total",
			Help: "Requests to the Kubernetes API server by HTTP method and status code.",
		}, []string{"method", "code"}),
		exec:  executor.NewMetrics(reg),
		queue: newQueueMetrics(),
	}
	reg.MustRegister(m.Rollouts, m.RolloutPhase, m.RolloutProgress, m.Errors, m.Leader, m.APIRequests)
	m.queue.register(reg)
	return m
}

// rolloutLabels name a rollout's workload, then more. Not "namespace":
// Prometheus gives the scraped pod's namespace that name, and would rename
// the workload's to exported_namespace.
func rolloutLabels(more ...string) []string {
	return append([]string{"workload_namespace", "kind", "workload"}, more...)
}

// labels are the rollout labels of the workload k.
func (k key) labels() prometheus.Labels {
	return prometheus.Labels{"workload_namespace": k.Namespace, "kind": k.Kind, "workload": k.Name}
}

// executor is the executor's metrics for one step: the shared counters, and
// per-workload gauges of its own (the shared ones would show whichever
// workload stepped last).
func (m *Metrics) executor() *executor.Metrics {
	x := *m.exec
	x.Pods = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pods"}, []string{"state"})
	x.BudgetInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "in_use"}, []string{"budget"})
	x.BudgetLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "limit"}, []string{"budget"})
	return &x
}

// queueMetrics are the workqueue's metrics (client-go's
// workqueue.MetricsProvider), with the names kube-controller-manager
// gives them (workqueue_depth, ...), labelled by queue name.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = queueMetrics{}

func newQueueMetrics() queueMetrics {
	name := []string{"name"}
	buckets := prometheus.ExponentialBuckets(10e-6, 10, 8)
	return queueMetrics{
		depth:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the workqueue."}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration."}, name),
		longest:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "How long the longest running processor has been running."}, name),
		adds:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the workqueue."}, name),
		retries:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Retries handled by the workqueue."}, name),
		latency:    prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "How long an item stays in the workqueue before being requested.", Buckets: buckets}, name),
		work:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "How long processing an item from the workqueue takes.", Buckets: buckets}, name),
	}
}

func (q queueMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(q.depth, q.unfinished, q.longest, q.adds, q.retries, q.latency, q.work)
}

func (q queueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(n)
}
func (q queueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(n)
}
func (q queueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(n)
}
func (q queueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(n)
}
func (q queueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(n)
}
func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(n)
}
func (q queueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(n)
}

// CountRequests wraps a client transport to count its requests in
// APIRequests (for rest.Config.Wrap).
func (m *Metrics) CountRequests(rt http.RoundTripper) http.RoundTripper {
	return promhttp.InstrumentRoundTripperCounter(m.APIRequests, rt)
}
