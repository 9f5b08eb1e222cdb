# Tests of the default strategy. Case IDs (D1, S8, T7, P12, ...) refer to
# shared/reference/k8s-rollout-semantics.md §6.
package rollplan.defaults_test

import data.rollplan.defaults

# ---------------------------------------------------------------------------
# Builders

base_pod := {
	"name": "p",
	"uid": "u",
	"revision": "web-1",
	"updated": false,
	"ordinal": -1,
	"index": -1,
	"node": "n1",
	"zone": "z1",
	"phase": "Running",
	"scheduled": true,
	"ready": true,
	"readySeconds": 100,
	"available": true,
	"unavailableSeconds": 0,
	"terminating": false,
	"terminal": false,
	"restarts": 0,
	"sidecarRestarts": 0,
	"owner": "web-1",
	"labels": {},
	"deletionCost": 0,
	"colocated": 1,
	"readyBucket": 36,
	"createdBucket": 40,
	"changes": [],
	"pdbs": [],
}

pod(overrides) := object.union(base_pod, overrides)

base_input := {
	"schemaVersion": "rollplan.dev/facts/v1",
	"now": "2026-11-01T00:00:00Z",
	"featureGates": {"MaxUnavailableStatefulSet": false},
	"workload": {
		"kind": "Deployment",
		"namespace": "default",
		"name": "web",
		"replicas": 10,
		"minReadySeconds": 0,
		"progressDeadlineSeconds": 600,
		"managed": false,
		"podUpdatePolicy": "Recreate",
		"currentRevision": "web-1",
		"updateRevision": "web-2",
		"podManagementPolicy": "",
		"strategy": {
			"type": "RollingUpdate",
			"maxSurge": "25%",
			"maxUnavailable": "25%",
			"maxSurgeSource": "spec.strategy.rollingUpdate.maxSurge",
			"maxUnavailableSource": "spec.strategy.rollingUpdate.maxUnavailable",
			"partition": 0,
		},
	},
	"pods": [],
	"pdbs": [],
}

# with_workload(w): base_input with workload fields replaced (strategy is
# replaced as a whole when given).
with_workload(w) := object.union(
	object.remove(base_input, ["workload"]),
	{"workload": object.union(object.remove(base_input.workload, object.keys(w)), w)},
)

deployment(max_surge, max_unavailable, d) := with_workload({
	"kind": "Deployment",
	"replicas": d,
	"strategy": {"type": "RollingUpdate", "maxSurge": max_surge, "maxUnavailable": max_unavailable},
})

daemonset(max_surge, max_unavailable, desired) := with_workload({
	"kind": "DaemonSet",
	"replicas": desired,
	"strategy": {"type": "RollingUpdate", "maxSurge": max_surge, "maxUnavailable": max_unavailable},
})

statefulset(max_unavailable, n, gate) := object.union(
	with_workload({
		"kind": "StatefulSet",
		"replicas": n,
		"podManagementPolicy": "Parallel",
		"strategy": {"type": "RollingUpdate", "maxUnavailable": max_unavailable, "partition": 0},
	}),
	{"featureGates": {"MaxUnavailableStatefulSet": gate}},
)

# budget(bs, name, field): one field of the budget with that name.
budget(bs, name, field) := b[field] if {
	some b in bs
	b.name == name
}

budgets_of(i) := bs if {
	bs := defaults.budgets with input as i
}

# ---------------------------------------------------------------------------
# Int-or-percent rounding: every cell of the §1.2 table.

ns := [0, 1, 2, 3, 4, 5, 10, 20]

rounding_table := {
	1: {"up": [0, 1, 1, 1, 1, 1, 1, 1], "down": [0, 0, 0, 0, 0, 0, 0, 0]},
	10: {"up": [0, 1, 1, 1, 1, 1, 1, 2], "down": [0, 0, 0, 0, 0, 0, 1, 2]},
	25: {"up": [0, 1, 1, 1, 1, 2, 3, 5], "down": [0, 0, 0, 0, 1, 1, 2, 5]},
	30: {"up": [0, 1, 1, 1, 2, 2, 3, 6], "down": [0, 0, 0, 0, 1, 1, 3, 6]},
	50: {"up": [0, 1, 1, 2, 2, 3, 5, 10], "down": [0, 0, 1, 1, 2, 2, 5, 10]},
	75: {"up": [0, 1, 2, 3, 3, 4, 8, 15], "down": [0, 0, 1, 2, 3, 3, 7, 15]},
	100: {"up": [0, 1, 2, 3, 4, 5, 10, 20], "down": [0, 1, 2, 3, 4, 5, 10, 20]},
}

test_scaled_up_percent_table if {
	bad := [[p, n, want] |
		some p, row in rounding_table
		some i, n in ns
		want := row.up[i]
		not defaults.scaled_up(sprintf("%d%%", [p]), n) == want
	]
	count(bad) == 0
}

test_scaled_down_percent_table if {
	bad := [[p, n, want] |
		some p, row in rounding_table
		some i, n in ns
		want := row.down[i]
		not defaults.scaled_down(sprintf("%d%%", [p]), n) == want
	]
	count(bad) == 0
}

test_scaled_ints_unchanged_and_uncapped if {
	bad := [[v, n] |
		some v in [0, 1, 2, 3, 100]
		some n in ns
		not both_equal(v, n)
	]
	count(bad) == 0
}

both_equal(v, n) if {
	defaults.scaled_up(v, n) == v
	defaults.scaled_down(v, n) == v
}

test_scaled_zero_percent if {
	defaults.scaled_up("0%", 10) == 0
	defaults.scaled_down("0%", 10) == 0
}

test_scaled_large_totals_are_exact if {
	# 39% of 150000 = 58500 exactly; 33% of 150001 = 49500.33
	defaults.scaled_up("39%", 150000) == 58500
	defaults.scaled_down("39%", 150000) == 58500
	defaults.scaled_up("33%", 150001) == 49501
	defaults.scaled_down("33%", 150001) == 49500
}

test_scaled_invalid_is_undefined if {
	# D3, D4: upstream errors; Go validates first, the policy gives no answer.
	not defaults.scaled_up("oops", 10)
	not defaults.scaled_down("urg", 10)
	not defaults.scaled_up("abc%", 10)
}

# ---------------------------------------------------------------------------
# Deployment: D1-D7 (ResolveFenceposts), D11-D26, the §2.4 grid.

test_resolve_fenceposts_d1_to_d7 if {
	defaults.resolve_fenceposts("0%", "0%", 0) == [0, 1] # D1
	defaults.resolve_fenceposts("39%", "39%", 10) == [4, 3] # D2
	not defaults.resolve_fenceposts("oops", "39%", 10) # D3 (error upstream)
	not defaults.resolve_fenceposts("55%", "urg", 10) # D4 (error upstream)
	defaults.resolve_fenceposts(null, "39%", 10) == [0, 3] # D5
	defaults.resolve_fenceposts("39%", null, 10) == [4, 0] # D6
	defaults.resolve_fenceposts(null, null, 10) == [0, 1] # D7
}

test_deployment_budgets_d1_to_d7 if {
	# budgets are MaxSurge() / MaxUnavailable(): D = 0 → maxUnavailable 0
	bs1 := budgets_of(deployment("0%", "0%", 0))
	budget(bs1, "maxSurge", "maxSurge") == 0
	budget(bs1, "maxUnavailable", "maxUnavailable") == 0
	bs2 := budgets_of(deployment("39%", "39%", 10))
	budget(bs2, "maxSurge", "maxSurge") == 4
	budget(bs2, "maxUnavailable", "maxUnavailable") == 3
	not budgets_of(deployment("oops", "39%", 10))
	not budgets_of(deployment("55%", "urg", 10))
	bs5 := budgets_of(deployment(null, "39%", 10))
	budget(bs5, "maxSurge", "maxSurge") == 0
	budget(bs5, "maxUnavailable", "maxUnavailable") == 3
	bs6 := budgets_of(deployment("39%", null, 10))
	budget(bs6, "maxSurge", "maxSurge") == 4
	budget(bs6, "maxUnavailable", "maxUnavailable") == 0
	bs7 := budgets_of(deployment(null, null, 10))
	budget(bs7, "maxSurge", "maxSurge") == 0
	budget(bs7, "maxUnavailable", "maxUnavailable") == 1
}

# D11-D18 TestMaxUnavailable (maxSurge 1): [D, maxUnavailable, want]
max_unavailable_cases := [
	["D11", 10, 5, 5],
	["D12", 10, 10, 10],
	["D13", 5, 10, 5],
	["D14", 0, 10, 0],
	["D16", 10, "50%", 5],
	["D17", 10, "100%", 10],
	["D18", 5, "100%", 5],
]

test_deployment_max_unavailable_d11_to_d18 if {
	bad := [c |
		some c in max_unavailable_cases
		not budget(budgets_of(deployment(1, c[2], c[1])), "maxUnavailable", "maxUnavailable") == c[3]
	]
	count(bad) == 0
}

# D19-D26 TestMinAvailable (maxSurge 1): MinAvailable = D − maxUnavailable.
min_available_cases := [
	["D19", 10, 5, 5],
	["D20", 10, 10, 0],
	["D21", 5, 10, 0],
	["D22", 0, 10, 0],
	["D24", 10, "60%", 4],
	["D25", 10, "100%", 0],
	["D26", 5, "100%", 0],
]

test_deployment_min_available_d19_to_d26 if {
	bad := [c |
		some c in min_available_cases
		u := budget(budgets_of(deployment(1, c[2], c[1])), "maxUnavailable", "maxUnavailable")
		not c[1] - u == c[3]
	]
	count(bad) == 0
}

recreate_input := with_workload({"replicas": 10, "strategy": {"type": "Recreate", "maxSurge": null, "maxUnavailable": null}})

test_deployment_recreate_d15_d23 if {
	# Upstream's MaxUnavailable() is 0 for Recreate (D15) because Recreate does
	# not use it: it scales every old pod down at once. The plan says so.
	bs := budgets_of(recreate_input)
	bs == [
		{"name": "maxUnavailable", "maxUnavailable": 10, "source": "spec.strategy.type=Recreate: all pods at once"},
		{"name": "maxSurge", "maxSurge": 0, "source": "spec.strategy.type=Recreate: no surge"},
	]

	# D23: MinAvailable 0
	10 - budget(bs, "maxUnavailable", "maxUnavailable") == 0
}

grid_ds := [0, 1, 2, 3, 4, 5, 10]

# §2.4 computed grid: [maxSurge, maxUnavailable, [[MaxSurge(), MaxUnavailable()] per D]]
fencepost_grid := [
	["25%", "25%", [[0, 0], [1, 0], [1, 0], [1, 0], [1, 1], [2, 1], [3, 2]]],
	[0, 1, [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]]],
	[1, 0, [[1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0]]],
	[1, 1, [[1, 0], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1]]],
	[2, 2, [[2, 0], [2, 1], [2, 2], [2, 2], [2, 2], [2, 2], [2, 2]]],
	[0, "25%", [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 2]]],
	["25%", 0, [[0, 0], [1, 0], [1, 0], [1, 0], [1, 0], [2, 0], [3, 0]]],
	["0%", "10%", [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]]],
	["10%", "0%", [[0, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [1, 0]]],
	["30%", "30%", [[0, 0], [1, 0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 3]]],
	["50%", "50%", [[0, 0], [1, 0], [1, 1], [2, 1], [2, 2], [3, 2], [5, 5]]],
	["100%", 0, [[0, 0], [1, 0], [2, 0], [3, 0], [4, 0], [5, 0], [10, 0]]],
	[0, "100%", [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [0, 5], [0, 10]]],
	[0, 0, [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]]],
	["0%", "0%", [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]]],
	[0, "1%", [[0, 0], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]]],
]

test_deployment_fencepost_grid if {
	bad := [[row[0], row[1], d, want] |
		some row in fencepost_grid
		some i, d in grid_ds
		want := row[2][i]
		bs := budgets_of(deployment(row[0], row[1], d))
		not [budget(bs, "maxSurge", "maxSurge"), budget(bs, "maxUnavailable", "maxUnavailable")] == want
	]
	count(bad) == 0
}

# hundredths prints p × total / 100 exactly, as Go's facts.Hundredths.
test_hundredths if {
	cases := [
		[0, "0"], [300, "3"], [250, "2.5"], [240, "2.4"], [198, "1.98"],
		[5, "0.05"], [90, "0.9"], [100005, "1000.05"], [5850039, "58500.39"],
	]
	bad := [c | some c in cases; defaults.hundredths(c[0]) != c[1]]
	count(bad) == 0
}

# A percentage's source says what was rounded: as written, the exact
# share, the rounding and the result.
test_percent_sources_show_rounding if {
	budget(budgets_of(deployment("33%", "1%", 6)), "maxSurge", "source") == "spec.strategy.rollingUpdate.maxSurge=33% of 6 = 1.98, ceil: 2"
	budget(budgets_of(deployment("33%", "1%", 6)), "maxUnavailable", "source") == "spec.strategy.rollingUpdate.maxUnavailable=1% of 6 = 0.06, floor: 0"
	budget(budgets_of(statefulset("45%", 6, true)), "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable=45% of 6 = 2.7, floor: 2"
}

test_deployment_sources if {
	bs := budgets_of(deployment("25%", "25%", 10))
	budget(bs, "maxUnavailable", "source") == "spec.strategy.rollingUpdate.maxUnavailable=25% of 10 = 2.5, floor: 2"
	budget(bs, "maxSurge", "source") == "spec.strategy.rollingUpdate.maxSurge=25% of 10 = 2.5, ceil: 3"

	bs_int := budgets_of(deployment(3, 12, 10))
	budget(bs_int, "maxSurge", "source") == "spec.strategy.rollingUpdate.maxSurge=3"
	budget(bs_int, "maxUnavailable", "source") == "spec.strategy.rollingUpdate.maxUnavailable=12; capped at 10 replicas"

	bs_zero := budgets_of(deployment(0, "10%", 5))
	budget(bs_zero, "maxUnavailable", "source") == "spec.strategy.rollingUpdate.maxUnavailable=10% of 5 = 0.5, floor: 0; maxSurge and maxUnavailable both 0: 1"

	bs_empty := budgets_of(deployment("25%", "25%", 0))
	budget(bs_empty, "maxUnavailable", "source") == "spec.strategy.rollingUpdate.maxUnavailable=25% of 0 = 0, floor: 0; 0 replicas: 0"

	bs_unset := budgets_of(deployment(null, 2, 10))
	budget(bs_unset, "maxSurge", "source") == "spec.strategy.rollingUpdate.maxSurge unset: default 0"
}

test_deployment_sources_from_go if {
	i := with_workload({"strategy": {
		"type": "RollingUpdate",
		"maxSurge": 1,
		"maxUnavailable": "40%",
		"maxSurgeSource": "metadata.annotations[rollplan.dev/max-surge]",
		"maxUnavailableSource": "metadata.annotations[rollplan.dev/max-unavailable]",
	}})
	bs := budgets_of(i)
	budget(bs, "maxUnavailable", "source") == "metadata.annotations[rollplan.dev/max-unavailable]=40% of 10 = 4, floor: 4"
	budget(bs, "maxSurge", "source") == "metadata.annotations[rollplan.dev/max-surge]=1"
}

# A value Go defaulted (its source ends in " (default)", facts.DefaultSuffix)
# is worded as unset.
test_defaulted_source_reads_unset if {
	i := with_workload({"strategy": {
		"type": "RollingUpdate",
		"maxSurge": 0,
		"maxUnavailable": 1,
		"maxUnavailableSource": "annotation rollplan.dev/max-unavailable (default)",
	}})
	budget(budgets_of(i), "maxUnavailable", "source") == "annotation rollplan.dev/max-unavailable unset: default 1"
}

# ---------------------------------------------------------------------------
# DaemonSet: S1-S8 (updatedDesiredNodeCounts). [id, desired, maxSurge, maxUnavailable, surge, unavailable]

daemonset_cases := [
	["S1", 0, null, 0, 0, 0],
	["S2", 2, null, 1, 0, 1],
	["S3", 2, null, 0, 0, 1],
	["S4", 2, 0, 0, 0, 1],
	["S5", 2, null, "50%", 0, 1],
	["S6", 2, "50%", 0, 1, 0],
	["S7", 2, "100%", 0, 2, 0],
	["S8", 3, null, "50%", 0, 2],
	["3.5 25% of 5", 5, null, "25%", 0, 2],
	["3.5 1% of 1", 1, null, "1%", 0, 1],
	["3.5 30% of 4", 4, null, "30%", 0, 2],
	["int not capped", 2, null, 5, 0, 5],
]

test_daemonset_budgets_s1_to_s8 if {
	bad := [c |
		some c in daemonset_cases
		bs := budgets_of(daemonset(c[2], c[3], c[1]))
		not [budget(bs, "maxSurge", "maxSurge"), budget(bs, "maxUnavailable", "maxUnavailable")] == [c[4], c[5]]
	]
	count(bad) == 0
}

test_daemonset_sources if {
	bs := budgets_of(daemonset(null, "50%", 3))
	budget(bs, "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable=50% of 3 = 1.5, ceil: 2"
	budget(bs, "maxSurge", "source") == "spec.updateStrategy.rollingUpdate.maxSurge unset: default 0"
	bs0 := budgets_of(daemonset(0, 0, 2))
	budget(bs0, "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable=0; maxSurge and maxUnavailable both 0: 1"
}

test_daemonset_managed_on_delete if {
	i := with_workload({
		"kind": "DaemonSet",
		"replicas": 8,
		"managed": true,
		"strategy": {
			"type": "OnDelete",
			"maxSurge": null,
			"maxUnavailable": "25%",
			"maxUnavailableSource": "metadata.annotations[rollplan.dev/max-unavailable]",
		},
	})
	bs := budgets_of(i)
	budget(bs, "maxUnavailable", "maxUnavailable") == 2
	budget(bs, "maxUnavailable", "source") == "metadata.annotations[rollplan.dev/max-unavailable]=25% of 8 = 2, ceil: 2"
	budget(bs, "maxSurge", "maxSurge") == 0
}

# ---------------------------------------------------------------------------
# StatefulSet: T1-T10 (getStatefulSetMaxUnavailable), T21-T32, the gate.

# [id, maxUnavailable, replicas, want]
statefulset_cases := [
	["T1", null, 10, 1],
	["T2", 3, 10, 3],
	["T3", 3, 0, 3],
	["T4", 0, 0, 1],
	["T5", "10%", 25, 2],
	["T6", "100%", 5, 5],
	["T7", "50%", 5, 2],
	["T8", "10%", 5, 1],
	["T9", "1%", 0, 1],
	["T10", "0%", 0, 1],
	["T21", 2, 5, 2],
	["T22", "20%", 10, 2],
	["T23", 3, 6, 3],
	["T24", 1, 4, 1],
	["T25", "25%", 8, 2],
	["T26", "80%", 5, 4],
	["T27", 1, 2, 1],
	["T28", 1, 1, 1],
	["T31", null, 5, 1],
	["T32", null, 6, 1],
	["DESIGN 40% of 6", "40%", 6, 2],
]

test_statefulset_gate_on_t1_to_t32 if {
	bad := [c |
		some c in statefulset_cases
		bs := budgets_of(statefulset(c[1], c[2], true))
		not bs == [{"name": "maxUnavailable", "maxUnavailable": c[3], "source": bs[0].source}]
	]
	count(bad) == 0
}

test_statefulset_gate_off_one_at_a_time if {
	bad := [c |
		some c in statefulset_cases
		bs := budgets_of(statefulset(c[1], c[2], false))
		not bs == [{"name": "maxUnavailable", "maxUnavailable": 1, "source": "MaxUnavailableStatefulSet off: one pod at a time"}]
	]
	count(bad) == 0
}

test_statefulset_gate_missing_is_off if {
	i := object.union(statefulset("50%", 6, false), {"featureGates": null})
	budgets_of(i) == [{"name": "maxUnavailable", "maxUnavailable": 1, "source": "MaxUnavailableStatefulSet off: one pod at a time"}]
}

# updateStrategy Recreate (v1.37, gate StatefulSetRecreateStrategy):
# every old pod at once, whatever maxUnavailable and MaxUnavailableStatefulSet.
test_statefulset_recreate_takes_every_pod if {
	every gate in [true, false] {
		i := object.union(statefulset("25%", 6, gate), {"workload": {"strategy": {"type": "Recreate"}}})
		budgets_of(i) == [{"name": "maxUnavailable", "maxUnavailable": 6, "source": "spec.updateStrategy.type=Recreate: every old pod at once"}]
	}
}

test_statefulset_sources if {
	budget(budgets_of(statefulset("40%", 6, true)), "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable=40% of 6 = 2.4, floor: 2"
	budget(budgets_of(statefulset("10%", 5, true)), "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable=10% of 5 = 0.5, floor: 0; at least 1"
	budget(budgets_of(statefulset(null, 5, true)), "maxUnavailable", "source") == "spec.updateStrategy.rollingUpdate.maxUnavailable unset: default 1"
}

managed_statefulset := with_workload({
	"kind": "StatefulSet",
	"replicas": 6,
	"managed": true,
	"podManagementPolicy": "OrderedReady",
	"strategy": {
		"type": "OnDelete",
		"maxUnavailable": "50%",
		"maxUnavailableSource": "metadata.annotations[rollplan.dev/max-unavailable]",
		"partition": 2,
		"partitionSource": "metadata.annotations[rollplan.dev/partition]",
	},
})

test_statefulset_managed_ignores_gate if {
	# T29/T30: OnDelete; rollplan drives it, so the budget applies gate off too.
	bs := budgets_of(managed_statefulset)
	bs == [{
		"name": "maxUnavailable",
		"maxUnavailable": 3,
		"source": "metadata.annotations[rollplan.dev/max-unavailable]=50% of 6 = 3, floor: 3",
	}]
}

test_unmanaged_on_delete_has_no_strategy_budget if {
	bad := [k |
		some k in ["Deployment", "DaemonSet", "StatefulSet"]
		i := with_workload({"kind": k, "strategy": {"type": "OnDelete", "maxSurge": null, "maxUnavailable": null}})
		not budgets_of(i) == []
	]
	count(bad) == 0
}

test_unknown_kind_budgets_and_order if {
	i := with_workload({"kind": "CronJob"})
	budgets_of(i) == []
	defaults.order(pod({"name": "x", "available": false})) == [0, "x"] with input as i
}

# ---------------------------------------------------------------------------
# PDBs

pdbs := [
	{"name": "web", "maxUnavailable": 1, "expectedPods": 10, "unavailableElsewhere": 0, "source": "spec.minAvailable=90% of 10, up"},
	{"name": "all", "maxUnavailable": 0, "expectedPods": 30, "unavailableElsewhere": 2, "source": "spec.maxUnavailable=2"},
]

test_pdb_budgets_advisory_when_unmanaged if {
	bs := budgets_of(object.union(base_input, {"pdbs": pdbs}))
	count(bs) == 4
	array.slice(bs, 2, 4) == [
		{"name": "pdb/web", "maxUnavailable": 1, "pdb": "web", "advisory": true, "source": "spec.minAvailable=90% of 10, up"},
		{"name": "pdb/all", "maxUnavailable": 0, "pdb": "all", "advisory": true, "source": "spec.maxUnavailable=2"},
	]
}

test_pdb_budgets_enforced_when_managed if {
	i := object.union(with_workload({"managed": true}), {"pdbs": pdbs})
	bs := budgets_of(i)
	budget(bs, "pdb/web", "advisory") == false
	budget(bs, "pdb/all", "advisory") == false
	budget(bs, "pdb/all", "pdb") == "all"
}

test_pdb_null_or_missing if {
	count(budgets_of(object.union(base_input, {"pdbs": null}))) == 2
	count(budgets_of(object.remove(base_input, ["pdbs"]))) == 2
}

# ---------------------------------------------------------------------------
# pacing

test_pacing if {
	defaults.pacing == "rolling" with input as base_input
	defaults.pacing == "wave" with input as managed_statefulset
	defaults.pacing == "rolling" with input as statefulset(1, 3, false)
	defaults.pacing == "rolling" with input as daemonset(null, 1, 3)
}

test_deny_none_by_default if {
	defaults.deny == [] with input as base_input
	defaults.deny == [] with input as managed_statefulset
}

# ---------------------------------------------------------------------------
# node_preparation

test_node_preparation_is_none if {
	defaults.node_preparation == "none" with input as base_input
	defaults.node_preparation == "none" with input as daemonset(null, 1, 3)
}

# ---------------------------------------------------------------------------
# analysis

judged(measurements) := object.union(base_input, {"analysis": {"wave": 1, "attempt": 1, "pods": ["web-4"], "measurements": measurements}})

measured(name, results) := {"name": name, "provider": "prometheus", "query": sprintf("q_%s", [name]), "results": results}

test_analysis_declares_nothing if {
	defaults.analysis == {"soak": "0s", "measurements": [], "maxInconclusive": 0, "onFail": "halt"} with input as base_input
}

test_analysis_verdict_passes_nothing_measured if {
	defaults.analysis_verdict == {"verdict": "pass", "message": "nothing is measured"} with input as judged([])
}

test_analysis_verdict_never_passes_what_it_did_not_judge if {
	v := defaults.analysis_verdict with input as judged([measured("err", [{"value": 0.1, "taken": "t", "error": ""}])])
	v.verdict == "inconclusive"
	contains(v.message, "no verdict rule judges measurement(s) err")
}

test_analysis_verdict_unreadable_is_inconclusive if {
	v := defaults.analysis_verdict with input as judged([
		measured("none", []),
		measured("down", [{"value": 0, "taken": "t", "error": "connection refused"}]),
	])
	v == {"verdict": "inconclusive", "message": "measurement none: no result for query q_none; measurement down: query q_down: connection refused"}
}

test_analysis_values_and_queries if {
	facts := judged([measured("err", [{"value": 0.1, "taken": "t1", "error": ""}, {"value": 0.3, "taken": "t2", "error": ""}])])
	defaults.analysis_values == {"err": [0.1, 0.3]} with input as facts
	defaults.analysis_query == {"err": "q_err"} with input as facts
}

# ---------------------------------------------------------------------------
# scope

partitioned := with_workload({
	"kind": "StatefulSet",
	"replicas": 6,
	"strategy": {"type": "RollingUpdate", "maxUnavailable": null, "partition": 3},
})

test_scope_partition if {
	defaults.scope(pod({"ordinal": 2, "index": 2})) == {"in": false, "reason": "ordinal 2 below partition 3"} with input as partitioned
	defaults.scope(pod({"ordinal": 0, "index": 0})) == {"in": false, "reason": "ordinal 0 below partition 3"} with input as partitioned
	defaults.scope(pod({"ordinal": 3, "index": 3})) == {"in": true} with input as partitioned
	defaults.scope(pod({"ordinal": 5, "index": 5})) == {"in": true} with input as partitioned
}

test_scope_partition_is_an_index if {
	# ordinals.start 10: the partition counts from it (index = ordinal − start).
	i := object.union(partitioned, {"workload": {"ordinalsStart": 10}})
	defaults.scope(pod({"ordinal": 12, "index": 2})) == {"in": false, "reason": "ordinal 12 below partition 3"} with input as i
	defaults.scope(pod({"ordinal": 13, "index": 3})) == {"in": true} with input as i
}

test_scope_partition_zero_and_beyond_replicas if {
	defaults.scope(pod({"ordinal": 0, "index": 0})) == {"in": true} with input as statefulset(1, 3, false)
	i := object.union(partitioned, {"workload": {"strategy": {"partition": 9}}})
	defaults.scope(pod({"ordinal": 5, "index": 5})).in == false with input as i
}

test_scope_partition_unset if {
	i := object.union(partitioned, {"workload": {"strategy": {"partition": null}}})
	defaults.partition == 0 with input as i
	defaults.scope(pod({"ordinal": 0, "index": 0})) == {"in": true} with input as i
}

test_scope_other_kinds_all_in if {
	defaults.scope(pod({})) == {"in": true} with input as base_input
	defaults.scope(pod({})) == {"in": true} with input as daemonset(null, 1, 3)
}

# ---------------------------------------------------------------------------
# eligibility

image_change := {"path": "spec.containers[app].image", "class": "image", "inPlace": true, "detail": ""}

label_change := {"path": "metadata.labels", "class": "labels", "inPlace": true, "detail": ""}

env_change := {
	"path": "spec.containers[app].env",
	"class": "env",
	"inPlace": false,
	"detail": "env cannot change on a running container",
}

in_place(policy) := with_workload({"managed": true, "podUpdatePolicy": policy})

test_eligibility_in_place_image_only if {
	p := pod({"changes": [image_change]})
	want := {"action": "InPlace", "reasons": ["only spec.containers[app].image changed"]}
	defaults.eligibility(p) == want with input as in_place("InPlaceIfPossible")
	defaults.eligibility(p) == want with input as in_place("InPlaceOnly")
}

test_eligibility_in_place_several_changes if {
	p := pod({"changes": [image_change, label_change]})
	defaults.eligibility(p) == {
		"action": "InPlace",
		"reasons": ["only spec.containers[app].image, metadata.labels changed"],
	} with input as in_place("InPlaceIfPossible")
}

test_eligibility_env_change_blocks if {
	p := pod({"changes": [image_change, env_change]})
	defaults.eligibility(p) == {
		"action": "Recreate",
		"reasons": ["spec.containers[app].env changed: env cannot change on a running container"],
	} with input as in_place("InPlaceIfPossible")
}

test_eligibility_unmanaged_recreates if {
	p := pod({"changes": [image_change, env_change]})
	i := with_workload({"managed": false, "podUpdatePolicy": "InPlaceIfPossible"})
	defaults.eligibility(p) == {
		"action": "Recreate",
		"reasons": ["spec.containers[app].image changed", "spec.containers[app].env changed"],
	} with input as i
}

test_eligibility_recreate_policy if {
	p := pod({"changes": [image_change]})
	defaults.eligibility(p) == {
		"action": "Recreate",
		"reasons": ["spec.containers[app].image changed"],
	} with input as in_place("Recreate")
}

test_eligibility_no_changes if {
	want := {"action": "Recreate", "reasons": ["revision web-1 differs from web-2"]}
	defaults.eligibility(pod({"changes": []})) == want with input as base_input
	defaults.eligibility(pod({"changes": null})) == want with input as in_place("InPlaceIfPossible")
	defaults.eligibility(object.remove(pod({}), ["changes"])) == want with input as in_place("InPlaceOnly")
}

# ---------------------------------------------------------------------------
# order

sort_names(pods) := [x[1] | some x in sort([[defaults.order(p), p.name] | some p in pods])]

test_order_statefulset_highest_ordinal_first if {
	pods := [
		pod({"name": "db-0", "ordinal": 0, "index": 0}),
		pod({"name": "db-1", "ordinal": 1, "index": 1}),
		pod({"name": "db-2", "ordinal": 2, "index": 2, "available": false, "ready": false}),
		pod({"name": "db-10", "ordinal": 10, "index": 10}),
	]

	# Native: the controller goes strictly by ordinal, unavailable pods included.
	sort_names(pods) == ["db-10", "db-2", "db-1", "db-0"] with input as partitioned
	defaults.order(pods[3]) == [-10] with input as partitioned

	# Managed by rollplan: unavailable pods first.
	managed_input := object.union(partitioned, {"workload": {"managed": true}})
	sort_names(pods) == ["db-2", "db-10", "db-1", "db-0"] with input as managed_input
	defaults.order(pods[3]) == [1, -10] with input as managed_input
}

test_eligibility_unlisted_revision_per_pod if {
	# Pods of a revision Go does not list (not in the snapshot: facts diff
	# each pod's own spec) are answered from their own changes.
	i := in_place("InPlaceIfPossible")
	defaults.eligibility(pod({"revision": "web-x", "changes": [image_change]})).action == "InPlace" with input as i
	defaults.eligibility(pod({"revision": "web-x", "changes": [env_change]})).action == "Recreate" with input as i
}

test_eligibility_memoized_per_revision if {
	# A revision listed by Go answers every pod of it from one evaluation.
	i := object.union(in_place("InPlaceIfPossible"), {"revisions": [{"name": "web-1", "changes": [image_change]}]})
	defaults.eligibility(pod({"revision": "web-1", "changes": [env_change]})).action == "InPlace" with input as i
	defaults.eligibility(pod({"revision": "web-9", "changes": [env_change]})).action == "Recreate" with input as i
}

test_order_daemonset_by_node if {
	pods := [
		pod({"name": "ds-c", "node": "b"}),
		pod({"name": "ds-a", "node": "c"}),
		pod({"name": "ds-b", "node": "a"}),
		pod({"name": "ds-d", "node": "z", "available": false}),
	]
	sort_names(pods) == ["ds-d", "ds-b", "ds-c", "ds-a"] with input as daemonset(null, 1, 4)
	defaults.order(pods[0]) == [1, "b", "ds-c"] with input as daemonset(null, 1, 4)
}

test_order_keys_are_numbers_or_strings if {
	bad := [[kind, k] |
		some kind in ["Deployment", "DaemonSet", "StatefulSet"]
		some p in [pod({}), pod({"scheduled": false, "ready": false, "available": false})]
		key := defaults.order(p) with input as with_workload({"kind": kind})
		some k in key
		not is_number(k)
		not is_string(k)
	]
	count(bad) == 0
}

test_order_deployment_key if {
	p := pod({
		"uid": "uid-1",
		"deletionCost": -5,
		"colocated": 2,
		"readyBucket": 35,
		"restarts": 4,
		"sidecarRestarts": 1,
		"createdBucket": 47,
	})
	defaults.order(p) == [1, 2, 1, -5, -2, 35, -4, -1, 47, "uid-1"] with input as base_input
	q := pod({"phase": "Failed", "ready": false, "available": false, "scheduled": false, "uid": "uid-2"})
	defaults.order(q) == [0, 0, 0, 0, -1, 0, 0, 0, 40, "uid-2"] with input as base_input
}

test_order_deployment_missing_fact_is_undefined if {
	not defaults.order(object.remove(pod({}), ["deletionCost"])) with input as base_input
}

# §6.2 "Computed — ActivePodsWithRanks sort": each node holds two of the
# pods (rank 2), the unscheduled one has rank 1. Buckets: Ready 1 min → 35,
# Ready 48 h → 47. UIDs are chosen so that UID order would give another order.
ranked_pods := [
	pod({"name": "a-ready-old", "uid": "1", "node": "n1", "colocated": 2, "readyBucket": 47}),
	pod({"name": "b-ready-new", "uid": "2", "node": "n1", "colocated": 2, "readyBucket": 35}),
	pod({"name": "c-notready", "uid": "3", "node": "n2", "colocated": 2, "ready": false, "available": false, "readyBucket": -2}),
	pod({"name": "d-pending", "uid": "4", "node": "n2", "colocated": 2, "phase": "Pending", "ready": false, "available": false, "readyBucket": -2}),
	pod({"name": "e-unsched", "uid": "5", "node": "", "scheduled": false, "colocated": 1, "phase": "Pending", "ready": false, "available": false, "readyBucket": -2}),
	pod({"name": "f-cost-neg", "uid": "6", "node": "n3", "colocated": 2, "readyBucket": 47, "deletionCost": -100}),
	pod({"name": "g-cost-pos", "uid": "7", "node": "n3", "colocated": 2, "readyBucket": 47, "deletionCost": 100}),
	pod({"name": "h-restarts", "uid": "8", "node": "n4", "colocated": 2, "readyBucket": 47, "restarts": 5}),
	pod({"name": "i-unknown", "uid": "9", "node": "n4", "colocated": 2, "phase": "Unknown", "ready": false, "available": false, "readyBucket": -2}),
]

test_order_active_pods_with_ranks_table if {
	sort_names(ranked_pods) == [
		"e-unsched",
		"d-pending",
		"i-unknown",
		"c-notready",
		"f-cost-neg",
		"b-ready-new",
		"h-restarts",
		"a-ready-old",
		"g-cost-pos",
	] with input as base_input
}

# P2-P18 TestSortingActivePodsWithRanks: [id, lesser, greater].
# Buckets: now → -1, no LTT → -2, 2 h → 42, 5 h → 44, 1 month → 51.
unscheduled := {"node": "", "scheduled": false, "phase": "Pending", "ready": false, "available": false}

scheduled_pending := {"phase": "Pending", "ready": false, "available": false}

unknown_phase := {"phase": "Unknown", "ready": false, "available": false}

running_not_ready := {"ready": false, "available": false}

ready_now := {"readyBucket": -1, "createdBucket": 51}

ready_no_ltt := {"readyBucket": -2, "createdBucket": 51}

ready_month := {"readyBucket": 51, "createdBucket": 51}

rank(r) := {"colocated": r}

ranked_pairs := [
	["P2", object.union(unscheduled, rank(1)), object.union(scheduled_pending, rank(2))],
	["P3", object.union(unscheduled, rank(2)), object.union(scheduled_pending, rank(1))],
	["P4", object.union(scheduled_pending, rank(1)), object.union(unknown_phase, rank(2))],
	["P5", object.union(unknown_phase, rank(1)), object.union(running_not_ready, rank(2))],
	["P6", object.union(running_not_ready, rank(1)), object.union(ready_no_ltt, rank(1))],
	["P7", object.union(ready_no_ltt, rank(1)), object.union(ready_now, rank(1))],
	["P8", object.union(ready_now, rank(2)), object.union(ready_no_ltt, rank(1))],
	["P9", object.union(ready_now, rank(1)), object.union(ready_month, rank(1))],
	["P10", object.union(ready_now, rank(2)), object.union(ready_month, rank(1))],
	["P11", object.union(ready_now, {"colocated": 1, "restarts": 9001}), object.union(ready_now, rank(1))],
	[
		"P12",
		object.union(ready_now, {"colocated": 1, "restarts": 9001, "sidecarRestarts": 9001}),
		object.union(ready_now, {"colocated": 1, "restarts": 9001}),
	],
	["P13", object.union(ready_now, rank(2)), object.union(ready_now, {"colocated": 1, "restarts": 9001})],
	["P14", object.union(ready_now, {"colocated": 1, "createdBucket": -1}), object.union(ready_now, rank(1))],
	["P15", object.union(ready_now, rank(2)), object.union(ready_now, {"colocated": 1, "createdBucket": -1})],
	["P16", {"colocated": 2, "deletionCost": 10}, {"colocated": 1, "deletionCost": 100}],
	["P18", {"colocated": 1, "readyBucket": 42}, {"colocated": 1, "readyBucket": 44}],
]

test_order_ranked_pairs_p2_to_p18 if {
	bad := [c[0] |
		some c in ranked_pairs
		not strictly_less(pod(c[1]), pod(c[2]))
	]
	count(bad) == 0
}

strictly_less(a, b) if {
	defaults.order(a) < defaults.order(b) with input as base_input
	not defaults.order(b) < defaults.order(a) with input as base_input
}

test_order_equal_p28_p29 if {
	# same log2 bucket and empty UIDs: equal keys
	p28a := pod(object.union(unscheduled, {"uid": "", "createdBucket": 44}))
	p28b := pod(object.union(unscheduled, {"uid": "", "createdBucket": 44}))
	defaults.order(p28a) == defaults.order(p28b) with input as base_input
	p29a := pod({"uid": "", "readyBucket": 44})
	p29b := pod({"uid": "", "readyBucket": 44})
	defaults.order(p29a) == defaults.order(p29b) with input as base_input
}

test_order_deployment_ranks_by_readiness_not_availability if {
	# Upstream's ReplicaSet ranks Ready pods by deletion cost, rank, Ready
	# time… whether or not minReadySeconds has passed (§2.10): a Ready pod
	# still short of minReadySeconds is not deleted first.
	warming := pod({"name": "warming", "available": false, "deletionCost": 100})
	cheap := pod({"name": "cheap", "deletionCost": -100})
	sort_names([cheap, warming]) == ["cheap", "warming"] with input as base_input

	# Same key but availability: equal keys (the name breaks the tie).
	defaults.order(pod({"available": false})) == defaults.order(pod({})) with input as base_input

	# A not-Ready pod still goes before Ready ones (rule 3).
	unready := pod({"name": "unready", "ready": false, "available": false, "deletionCost": 100})
	sort_names([cheap, unready]) == ["unready", "cheap"] with input as base_input
}

# ---------------------------------------------------------------------------
# halt

halting_input(pods) := object.union(base_input, {"pods": pods})

test_halt_progress_deadline if {
	pods := [
		pod({"name": "late", "updated": true, "available": false, "ready": false, "unavailableSeconds": 601}),
		pod({"name": "at-deadline", "updated": true, "available": false, "ready": false, "unavailableSeconds": 600}),
		pod({"name": "old", "updated": false, "available": false, "ready": false, "unavailableSeconds": 5000}),
		pod({"name": "going", "updated": true, "available": false, "terminating": true, "unavailableSeconds": 5000}),
		pod({"name": "fine", "updated": true}),
	]
	defaults.halt == ["pod late at the update revision has not been available for 601s (progress deadline 600s)"] with input as halting_input(pods)
}

test_halt_progress_deadline_from_workload if {
	i := object.union(
		halting_input([pod({"name": "w", "updated": true, "available": false, "unavailableSeconds": 61})]),
		{"workload": {"progressDeadlineSeconds": 60}},
	)
	defaults.halt == ["pod w at the update revision has not been available for 61s (progress deadline 60s)"] with input as i
}

test_halt_crash_loop if {
	pods := [
		pod({"name": "crashy", "updated": true, "restarts": 3}),
		pod({"name": "bumpy", "updated": true, "restarts": 2}),
		pod({"name": "old-crashy", "updated": false, "restarts": 10}),
	]
	defaults.crash_loop_restarts == 3
	defaults.halt == ["pod crashy is crash-looping since the update (3 restarts)"] with input as halting_input(pods)
}

test_halt_both_reasons_sorted if {
	pods := [
		pod({"name": "b", "updated": true, "restarts": 7}),
		pod({"name": "a", "updated": true, "available": false, "unavailableSeconds": 900, "restarts": 4}),
	]
	defaults.halt == [
		"pod a at the update revision has not been available for 900s (progress deadline 600s)",
		"pod a is crash-looping since the update (4 restarts)",
		"pod b is crash-looping since the update (7 restarts)",
	] with input as halting_input(pods)
}

test_halt_none if {
	defaults.halt == [] with input as base_input
	defaults.halt == [] with input as halting_input([pod({}), pod({"name": "q", "updated": true})])
}

in_place_only_pods := [
	pod({"name": "blocked", "changes": [image_change, env_change]}),
	pod({"name": "ok", "changes": [image_change]}),
	pod({"name": "done", "updated": true}),
]

test_halt_in_place_only if {
	i := object.union(in_place("InPlaceOnly"), {"pods": in_place_only_pods})
	defaults.halt == ["InPlaceOnly: pod blocked cannot be updated in place: spec.containers[app].env"] with input as i
}

test_halt_in_place_only_lists_every_blocking_path if {
	resources := {
		"path": "spec.containers[app].resources",
		"class": "resources",
		"inPlace": false,
		"detail": "QoS class changes",
	}
	p := pod({"name": "x", "changes": [env_change, image_change, resources]})
	i := object.union(in_place("InPlaceOnly"), {"pods": [p]})
	defaults.halt == ["InPlaceOnly: pod x cannot be updated in place: spec.containers[app].env, spec.containers[app].resources"] with input as i
}

test_halt_in_place_if_possible_or_unmanaged_does_not if {
	defaults.halt == [] with input as object.union(in_place("InPlaceIfPossible"), {"pods": in_place_only_pods})
	unmanaged := with_workload({"managed": false, "podUpdatePolicy": "InPlaceOnly"})
	defaults.halt == [] with input as object.union(unmanaged, {"pods": in_place_only_pods})
}
