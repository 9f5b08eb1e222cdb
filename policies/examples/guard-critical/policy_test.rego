package rollplan.examples.guard_critical_test

import data.rollplan.strategy

workload(labels, max_unavailable) := {
	"kind": "StatefulSet",
	"replicas": 10,
	"labels": labels,
	"managed": true,
	"strategy": {
		"type": "RollingUpdate",
		"maxUnavailable": max_unavailable,
		"maxUnavailableSource": "spec.updateStrategy.rollingUpdate.maxUnavailable",
	},
}

denials(labels, max_unavailable) := d if {
	d := strategy.deny with input as {"workload": workload(labels, max_unavailable), "pods": [], "pdbs": []}
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
}

test_other_tiers_are_not_guarded if {
	count(denials({"tier": "batch"}, "90%")) == 0
	count(denials({}, "90%")) == 0
}

test_no_replicas_is_not_a_division_by_zero if {
	d := strategy.deny with input as {"workload": object.union(workload({"tier": "critical"}, 3), {"replicas": 0}), "pods": [], "pdbs": []}
	count(d) == 0
}
