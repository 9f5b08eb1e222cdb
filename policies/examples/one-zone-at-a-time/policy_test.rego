package rollplan.examples.one_zone_at_a_time_test

import data.rollplan.defaults
import data.rollplan.strategy

sts_input := {
	"featureGates": {"MaxUnavailableStatefulSet": false},
	"workload": {
		"kind": "StatefulSet",
		"replicas": 6,
		"managed": true,
		"podUpdatePolicy": "Recreate",
		"podManagementPolicy": "Parallel",
		"progressDeadlineSeconds": 600,
		"updateRevision": "db-2",
		"strategy": {
			"type": "OnDelete",
			"maxUnavailable": 2,
			"maxUnavailableSource": "metadata.annotations[rollplan.dev/max-unavailable]",
			"partition": 0,
		},
	},
	"pods": [],
	"pdbs": [{"name": "db", "maxUnavailable": 1, "source": "spec.maxUnavailable=1"}],
}

member(ordinal, zone, available) := {
	"name": sprintf("db-%d", [ordinal]),
	"ordinal": ordinal,
	"index": ordinal,
	"zone": zone,
	"available": available,
}

test_budgets_extend_the_defaults if {
	bs := strategy.budgets with input as sts_input
	defaults_bs := defaults.budgets with input as sts_input
	count(defaults_bs) == 2
	array.slice(bs, 0, 2) == defaults_bs
	bs[2] == {
		"name": "one-zone-at-a-time",
		"groupBy": "zone",
		"maxGroups": 1,
		"source": "policy one-zone-at-a-time: at most one zone with pods in flight",
	}
}

test_order_zone_by_zone_unavailable_first if {
	pods := [
		member(0, "a", true),
		member(1, "b", true),
		member(2, "c", true),
		member(3, "a", true),
		member(4, "b", false),
		member(5, "c", true),
	]
	sorted := sort([[k, p.name] | some p in pods; k := strategy.order(p) with input as sts_input])
	[x[1] | some x in sorted] == ["db-4", "db-3", "db-0", "db-1", "db-5", "db-2"]
}

test_order_keeps_the_default_keys if {
	p := member(3, "a", true)
	strategy.order(p) == [1, "a", -3] with input as sts_input
	defaults.order(p) == [1, -3] with input as sts_input
}
