package rollplan.examples.guard_critical_test

import data.rollplan.strategy

source := "spec.updateStrategy.rollingUpdate.maxUnavailable"

workload(labels, max_unavailable) := workload_of(labels, max_unavailable, 10)

workload_of(labels, max_unavailable, replicas) := {
	"kind": "StatefulSet",
	"replicas": replicas,
	"labels": labels,
	"managed": true,
	"strategy": {
		"type": "RollingUpdate",
		"maxUnavailable": max_unavailable,
		"maxUnavailableSource": source,
	},
}

denials(labels, max_unavailable) := denials_of(labels, max_unavailable, 10)

denials_of(labels, max_unavailable, replicas) := d if {
	d := strategy.deny with input as {"workload": workload_of(labels, max_unavailable, replicas), "pods": [], "pdbs": []}
}

# The exact message for every way the budget is written: a whole-number
# percentage, a count that is a whole share, a count that is not (rounded up
# to a tenth, so that a share just above 25% never reads as 25%).
test_denial_messages if {
	cases := [
		["50%", 10, "50%", "50"],
		["30%", 10, "30%", "30"],
		[5, 10, "5", "50"],
		[3, 10, "3", "30"],
		[3, 7, "3", "42.9"],
		[2, 7, "2", "28.6"],
		[251, 1000, "251", "25.1"],
		[2501, 10000, "2501", "25.1"],
	]
	every c in cases {
		denials_of({"tier": "critical"}, c[0], c[1]) == [sprintf(
			"tier=critical allows at most 25%% of pods unavailable; %s says %s (%s%% of %d pods)",
			[source, c[2], c[3], c[1]],
		)]
	}
}

test_critical_over_25_percent_is_denied if {
	d := denials({"tier": "critical"}, "30%")
	count(d) == 1
	contains(d[0], "tier=critical allows at most 25%")
	contains(d[0], "30%")
}

test_critical_count_over_25_percent_is_denied if {
	count(denials({"tier": "critical"}, 3)) == 1
}

test_critical_at_25_percent_is_allowed if {
	count(denials({"tier": "critical"}, "25%")) == 0
	count(denials({"tier": "critical"}, 2)) == 0
	count(denials_of({"tier": "critical"}, 250, 1000)) == 0
	count(denials_of({"tier": "critical"}, 1, 4)) == 0
}

test_other_tiers_are_not_guarded if {
	count(denials({"tier": "batch"}, "90%")) == 0
	count(denials({}, "90%")) == 0
}

test_no_replicas_is_not_a_division_by_zero if {
	d := strategy.deny with input as {"workload": object.union(workload({"tier": "critical"}, 3), {"replicas": 0}), "pods": [], "pdbs": []}
	count(d) == 0
}
