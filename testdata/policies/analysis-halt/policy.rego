# Test policy (scenario analysis-failed-halt): each wave soaks 1 minute,
# then the error rate and the p99 latency are measured once; a value above
# its limit halts the rollout (onFail halt) instead of rolling it back.
package rollplan.strategy

import data.rollplan.defaults

limits := {"error-rate": 0.01, "latency-p99": 0.5}

analysis := {
	"soak": "1m",
	"onFail": "halt",
	"measurements": [
		{"name": "error-rate", "provider": "prometheus", "query": `sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}",code=~"5.."}[1m])) / sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"}[1m]))`},
		{"name": "latency-p99", "provider": "web", "query": "http://latency.monitoring/p99?namespace={{.Namespace}}&pods={{.PodRegex}}"},
	],
}

analysis_verdict := {"verdict": "inconclusive", "message": concat("; ", defaults.analysis_unreadable)} if {
	count(defaults.analysis_unreadable) > 0
} else := {"verdict": "fail", "message": concat("; ", failures)} if {
	count(failures) > 0
} else := {"verdict": "pass", "message": "every value within its limit"}

failures := [sprintf("%s = %v, above %v (query %s)", [m.name, worst, limits[m.name], m.query]) |
	some m in input.analysis.measurements
	worst := max([r.value | some r in m.results])
	worst > limits[m.name]
]
