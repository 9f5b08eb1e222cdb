package rollplan.examples.analysis_error_rate_test

import data.rollplan.strategy

# facts of wave 1 of StatefulSet web, with each measurement's results.
judged(err, p99) := {
	"workload": {"kind": "StatefulSet", "namespace": "default", "name": "web", "managed": true},
	"pods": [],
	"analysis": {
		"wave": 1,
		"attempt": 1,
		"pods": ["web-3", "web-4"],
		"measurements": [
			{"name": "error-rate", "provider": "prometheus", "query": "q_err", "results": err},
			{"name": "latency-p99", "provider": "prometheus", "query": "q_p99", "results": p99},
		],
	},
}

ok(v) := {"value": v, "taken": "2026-03-01T12:04:00Z", "error": ""}

down := {"value": 0, "taken": "2026-03-01T12:04:00Z", "error": "connection refused"}

test_declares_two_measurements_and_rolls_back if {
	a := strategy.analysis
	a.soak == "2m"
	a.onFail == "rollback"
	a.maxInconclusive == 1
	[m.name | some m in a.measurements] == ["error-rate", "latency-p99"]
}

test_within_limits_passes if {
	v := strategy.analysis_verdict with input as judged([ok(0.002), ok(0.004)], [ok(0.21), ok(0.25)])
	v == {"verdict": "pass", "message": "error-rate at most 0.004, limit 0.01; latency-p99 at most 0.25, limit 0.5"}
}

test_a_value_above_its_limit_fails_naming_the_query if {
	v := strategy.analysis_verdict with input as judged([ok(0.002), ok(0.042)], [ok(0.21), ok(0.7)])
	v == {"verdict": "fail", "message": "error-rate = 0.042, above 0.01 (query q_err); latency-p99 = 0.7, above 0.5 (query q_p99)"}
}

test_prometheus_down_is_inconclusive if {
	v := strategy.analysis_verdict with input as judged([down], [ok(0.2)])
	v == {"verdict": "inconclusive", "message": "measurement error-rate: query q_err: connection refused"}
}

test_no_result_is_inconclusive_never_a_pass if {
	v := strategy.analysis_verdict with input as judged([], [ok(0.9)])
	v.verdict == "inconclusive"
	v.message == "measurement error-rate: no result for query q_err"
}
