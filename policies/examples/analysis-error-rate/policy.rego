# Example policy "analysis error rate".
#
# Gates every wave on its own pods' metrics: once the wave's pods are
# available the rollout soaks 2 minutes, then measures, three times 30s
# apart, the share of HTTP requests answered 5xx and the 99th percentile
# latency over the wave's pods (Prometheus, options by reference: no
# address or secret here). The next wave starts only on pass. Any value
# above its limit fails the wave and the rollout rolls back; a measurement
# without a result or with an error (Prometheus down) is inconclusive,
# measured again once, then the rollout halts: never a silent pass.
# Everything else is the default strategy.
package rollplan.strategy

import data.rollplan.defaults

# limits: the highest value each measurement may take.
limits := {"error-rate": 0.01, "latency-p99": 0.5}

analysis := {
	"soak": "2m",
	"maxInconclusive": 1,
	"onFail": "rollback",
	"measurements": [
		{
			"name": "error-rate",
			"provider": "prometheus",
			"query": `sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}",code=~"5.."}[{{.Window}}])) / sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"}[{{.Window}}]))`,
			"interval": "30s",
			"count": 3,
			"window": "1m",
			"options": "prometheus",
		},
		{
			"name": "latency-p99",
			"provider": "prometheus",
			"query": `histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"}[{{.Window}}])))`,
			"interval": "30s",
			"count": 3,
			"window": "1m",
			"options": "prometheus",
		},
	],
}

# The verdict: inconclusive while a measurement cannot be read, fail on the
# first value above its limit (named with its query), pass otherwise.
analysis_verdict := {"verdict": "inconclusive", "message": concat("; ", defaults.analysis_unreadable)} if {
	count(defaults.analysis_unreadable) > 0
} else := {"verdict": "fail", "message": concat("; ", failures)} if {
	count(failures) > 0
} else := {"verdict": "pass", "message": concat("; ", passes)}

# failures: per measurement, its highest value when above the limit.
failures := [msg |
	some m in input.analysis.measurements
	worst := max([r.value | some r in m.results])
	worst > limits[m.name]
	msg := sprintf("%s = %v, above %v (query %s)", [m.name, worst, limits[m.name], m.query])
]

passes := [msg |
	some m in input.analysis.measurements
	worst := max([r.value | some r in m.results])
	msg := sprintf("%s at most %v, limit %v", [m.name, worst, limits[m.name]])
]
