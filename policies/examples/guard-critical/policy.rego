# Example policy "guard critical": the default strategy, plus a guard rail
# the admission gate (rollplan gate) enforces on every workload create and
# update: a workload labelled tier=critical may not allow more than 25% of
# its pods unavailable at once. `rollplan plan` reports the same denial.
package rollplan.strategy

import data.rollplan.defaults

# deny: the default's guard rails (none), and this one.
deny := array.concat(defaults.deny, [msg |
	input.workload.labels.tier == "critical"
	unavailable_tenths > 250
	msg := sprintf("tier=critical allows at most 25%% of pods unavailable; %s says %v (%s%% of %d pods)", [
		input.workload.strategy.maxUnavailableSource,
		input.workload.strategy.maxUnavailable,
		percent_text,
		input.workload.replicas,
	])
])

# unavailable_tenths: the budget as a share of the replicas in tenths of a
# percent, rounded up, whichever way it is written ("30%" or 3): 300 for
# "30%", 429 for 3 of 7 pods. Rounding up keeps "more than 25%" exact: the
# share is above 25% exactly when its tenths, rounded up, are above 250.
unavailable_tenths := ceil(to_number(trim_suffix(input.workload.strategy.maxUnavailable, "%")) * 10) if {
	is_string(input.workload.strategy.maxUnavailable)
	endswith(input.workload.strategy.maxUnavailable, "%")
} else := ceil((input.workload.strategy.maxUnavailable * 1000) / input.workload.replicas) if {
	is_number(input.workload.strategy.maxUnavailable)
	input.workload.replicas > 0
} else := 0

# percent_text writes the share for the message with integer arithmetic
# only (sprintf's %f takes no integer, and a whole share is an integer):
# "50" for 500 tenths, "42.9" for 429.
percent_text := format_int(unavailable_tenths / 10, 10) if {
	unavailable_tenths % 10 == 0
} else := sprintf("%s.%d", [format_int(unavailable_tenths / 10, 10), unavailable_tenths % 10])
