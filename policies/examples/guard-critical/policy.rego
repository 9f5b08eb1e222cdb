# Example policy "guard critical": the default strategy, plus a guard rail
# the admission gate (rollplan gate) enforces on every workload create and
# update: a workload labelled tier=critical may not allow more than 25% of
# its pods unavailable at once. `rollplan plan` reports the same denial.
package rollplan.strategy

import data.rollplan.defaults

# deny: the default's guard rails (none), and this one.
deny := array.concat(defaults.deny, [msg |
	input.workload.labels.tier == "critical"
	pct := unavailable_percent
	pct > 25
	msg := sprintf("tier=critical allows at most 25%% of pods unavailable; %s says %v (%.0f%% of %d pods)", [
		input.workload.strategy.maxUnavailableSource,
		input.workload.strategy.maxUnavailable,
		pct,
		input.workload.replicas,
	])
])

# unavailable_percent: the budget as a share of the replicas, whichever way
# it is written ("30%" or 3).
unavailable_percent := to_number(trim_suffix(input.workload.strategy.maxUnavailable, "%")) if {
	is_string(input.workload.strategy.maxUnavailable)
	endswith(input.workload.strategy.maxUnavailable, "%")
} else := (input.workload.strategy.maxUnavailable * 100) / input.workload.replicas if {
	is_number(input.workload.strategy.maxUnavailable)
	input.workload.replicas > 0
} else := 0
