package rollplan.examples.cordon_nodes_test

import data.rollplan.defaults
import data.rollplan.strategy

workload(kind, labels) := {
	"featureGates": {"MaxUnavailableStatefulSet": false},
	"workload": {
		"kind": kind,
		"labels": labels,
		"replicas": 3,
		"managed": true,
		"podUpdatePolicy": "Recreate",
		"strategy": {"type": "OnDelete", "maxUnavailable": 1},
	},
	"pods": [],
	"pdbs": [],
}

test_daemonsets_are_cordoned if {
	strategy.node_preparation == "cordon" with input as workload("DaemonSet", {"app": "agent"})
	strategy.node_preparation == "cordon" with input as workload("DaemonSet", {"node-preparation": "cordon"})
}

test_drain_label_drains if {
	strategy.node_preparation == "drain" with input as workload("DaemonSet", {"node-preparation": "drain"})
}

test_missing_or_null_labels_cordon if {
	strategy.node_preparation == "cordon" with input as workload("DaemonSet", null)
	strategy.node_preparation == "cordon" with input as json.remove(workload("DaemonSet", {}), ["workload/labels"])
}

test_other_kinds_keep_the_default if {
	strategy.node_preparation == "none" with input as workload("StatefulSet", {"node-preparation": "drain"})
	strategy.node_preparation == "none" with input as workload("Deployment", {})
	strategy.node_preparation == defaults.node_preparation with input as workload("Deployment", {})
}

test_other_rules_are_left_to_the_defaults if {
	# Go falls back to data.rollplan.defaults for these.
	not strategy.budgets
	not strategy.pacing
}
