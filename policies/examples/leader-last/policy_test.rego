package rollplan.examples.leader_last_test

import data.rollplan.defaults
import data.rollplan.strategy

sts_input := {
	"featureGates": {"MaxUnavailableStatefulSet": false},
	"workload": {
		"kind": "StatefulSet",
		"replicas": 3,
		"managed": false,
		"podUpdatePolicy": "Recreate",
		"podManagementPolicy": "OrderedReady",
		"progressDeadlineSeconds": 600,
		"updateRevision": "db-2",
		"strategy": {"type": "RollingUpdate", "maxUnavailable": null, "partition": 0},
	},
	"pods": [],
	"pdbs": [],
}

member(ordinal, labels, available) := {
	"name": sprintf("db-%d", [ordinal]),
	"ordinal": ordinal,
	"index": ordinal,
	"labels": labels,
	"available": available,
}

sorted_names(pods) := [x[1] | some x in sort([[k, p.name] | some p in pods; k := strategy.order(p) with input as sts_input])]

test_leader_goes_last if {
	pods := [
		member(0, {"role": "follower"}, true),
		member(1, {"app": "db"}, true),
		member(2, {"role": "leader"}, true),
	]

	# the default would take db-2 first (highest ordinal)
	sorted_names(pods) == ["db-1", "db-0", "db-2"]
}

test_leader_last_even_when_unavailable if {
	pods := [
		member(0, {}, true),
		member(1, {"role": "leader"}, false),
		member(2, {}, false),
	]
	sorted_names(pods) == ["db-2", "db-0", "db-1"]
}

test_missing_or_null_labels_are_not_leaders if {
	strategy.leader_key(member(0, null, true)) == 0
	strategy.leader_key({"name": "db-0"}) == 0
	strategy.leader_key(member(0, {"role": "leader"}, true)) == 1
}

test_order_prefixes_the_default if {
	p := member(2, {"role": "leader"}, true)
	strategy.order(p) == array.concat([1], defaults.order(p)) with input as sts_input

	# A native StatefulSet: the default key is the ordinal alone.
	strategy.order(p) == [1, -2] with input as sts_input
}

test_other_rules_are_left_to_the_defaults if {
	# Go falls back to data.rollplan.defaults for these.
	not strategy.budgets
	not strategy.pacing
}
