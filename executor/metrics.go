package executor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollplan/rollplan/planner/plan"
)

// Metrics are the executor's Prometheus metrics. NewMetrics registers them
// on a registry of the caller's (never the global one).
type Metrics struct {
	// Actions counts the plan's actions by workload kind, action type and
	// outcome (the Outcome* label values).
	Actions *prometheus.CounterVec
	// Steps counts reconcile steps.
	Steps prometheus.Counter
	// Pods: the workload's pods at the last step by state: updated,
	// available, in_flight, held.
	Pods *prometheus.GaugeVec
	// BudgetInUse and BudgetLimit: every budget of the last step's plan.
	BudgetInUse, BudgetLimit *prometheus.GaugeVec
	// StepDuration: how long a step took (read, plan, writes).
	StepDuration prometheus.Histogram
	// AnalysisMeasurements counts the analyses of a gate (its
	// measurements taken and judged) by the policy's verdict (result:
	// pass, fail, inconclusive).
	AnalysisMeasurements *prometheus.CounterVec
	// AnalysisValues counts every value a gate's measurement took (one
	// provider query each) by measurement, provider and result: value, or
	// error (no value: Prometheus down, a query error, no series); and
	// AnalysisQueryDuration how long each took. Together they are the load
	// gates put on the providers and how well those answer.
	AnalysisValues        *prometheus.CounterVec
	AnalysisQueryDuration *prometheus.HistogramVec
}

// Values of the outcome label of rollplan_executor_actions_total.
const (
	outcomeDone          = "done"
	outcomeSkippedBudget = "skipped_budget"
	outcomeSkippedPDB    = "skipped_pdb"
	outcomeConflict      = "conflict" // the pod changed, went or was updated since the plan
	outcomeError         = "error"
	outcomeDryRun        = "dry_run"
	// Node preparation: nothing to write (the node is already as the
	// action wants), or not yet (the node's pods are still going, its
	// daemon pod not updated and available yet).
	outcomeUnchanged = "unchanged"
	outcomeWaiting   = "waiting"
)

// NewMetrics creates the executor's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollplan_executor_actions_total",
			Help: "Actions of the plan the executor carried out or skipped, by workload kind, action and outcome.",
		}, []string{"kind", "action", "outcome"}),
		Steps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollplan_executor_steps_total",
			Help: "Reconcile steps of the executor.",
		}),
		Pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_executor_pods",
			Help: "The workload's pods at the last step, by state (updated, available, in_flight, held).",
		}, []string{"state"}),
		BudgetInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_executor_budget_in_use",
			Help: "How much of each budget of the plan is in use at the last step.",
		}, []string{"budget"}),
		BudgetLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollplan_executor_budget_limit",
			Help: "The limit of each budget of the plan at the last step.",
		}, []string{"budget"}),
		StepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rollplan_executor_step_duration_seconds",
			Help:    "Duration of a reconcile step.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		AnalysisMeasurements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollplan_analysis_measurements_total",
			Help: "Analyses of a wave's gate (its measurements taken and judged by the policy), by verdict: pass, fail, inconclusive.",
		}, []string{"result"}),
		AnalysisValues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollplan_analysis_values_total",
			Help: "Values taken for a gate's measurements (one provider query each), by measurement, provider and result: value, error.",
		}, []string{"measurement", "provider", "result"}),
		AnalysisQueryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rollplan_analysis_query_duration_seconds",
			Help:    "How long a provider took to answer one measurement's query.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 8), // 5ms .. 82s
		}, []string{"provider"}),
	}
	reg.MustRegister(m.Actions, m.Steps, m.Pods, m.BudgetInUse, m.BudgetLimit, m.StepDuration, m.AnalysisMeasurements, m.AnalysisValues, m.AnalysisQueryDuration)
	return m
}

// observe records a step's pod counts and budgets.
func (m *Metrics) observe(s *StepResult) {
	m.Pods.WithLabelValues("updated").Set(float64(s.Updated))
	m.Pods.WithLabelValues("available").Set(float64(s.Available))
	m.Pods.WithLabelValues("in_flight").Set(float64(len(s.InFlight)))
	m.Pods.WithLabelValues("held").Set(float64(s.Held))
	m.BudgetInUse.Reset()
	m.BudgetLimit.Reset()
	for _, b := range s.Plan.Budgets {
		m.BudgetInUse.WithLabelValues(b.Name).Set(float64(b.InUse))
		m.BudgetLimit.WithLabelValues(b.Name).Set(float64(b.Limit))
	}
}

// action counts one action of the plan.
func (m *Metrics) action(kind string, a plan.Action, outcome string) {
	m.Actions.WithLabelValues(kind, a.Type, outcome).Inc()
}
