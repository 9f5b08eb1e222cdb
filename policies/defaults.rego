# METADATA
# title: rollplan default strategy
# description: |
#   The default answers of every decision point of the policy contract
#   (docs/policy-contract.md), reproducing kube-controller-manager v1.36:
#   StatefulSet partition, the ReplicaSet deletion ranking, each kind's
#   int-or-percent rounding (shared/reference/k8s-rollout-semantics.md §1.2),
#   and PDBs as budgets (advisory for rollouts rollplan does not drive).
#   Entry policies (package rollplan.strategy) import this library and build
#   on its answers; Go falls back to it for every rule they leave out.
#
#   Performance: this runs over very large workloads. Per-pod rules are
#   functions that iterate nothing; workload-level collections are complete
#   rules built with comprehensions; nothing sorts pods.
package rollplan.defaults

# ---------------------------------------------------------------------------
# Workload facts shared by the decision points.

kind := input.workload.kind

known_kinds := {"Deployment", "DaemonSet", "StatefulSet"}

strategy_type := input.workload.strategy.type

replicas := input.workload.replicas

default managed := false

# managed: the workload carries rollplan.dev/managed: "true".
managed if input.workload.managed == true

default max_unavailable_statefulset_gate := false

max_unavailable_statefulset_gate if input.featureGates.MaxUnavailableStatefulSet == true

# partition: the StatefulSet partition (an index from ordinals.start).
partition := p if {
	p := input.workload.strategy.partition
	is_number(p)
} else := 0

# ---------------------------------------------------------------------------
# scope: StatefulSet pods below the partition are held; every other pod is in.
# One body and an else: each body tried costs allocations per pod.

scope(pod) := {"in": false, "reason": sprintf("ordinal %d below partition %d", [pod.ordinal, partition])} if {
	input.workload.kind == "StatefulSet"
	pod.index < partition
} else := {"in": true}

# ---------------------------------------------------------------------------
# eligibility: InPlace only when the workload opts in (managed, with an
# in-place pod update policy) and every change can go in place.

in_place_policies := {"InPlaceIfPossible", "InPlaceOnly"}

default in_place_requested := false

in_place_requested if {
	managed
	input.workload.podUpdatePolicy in in_place_policies
}

default in_place_only := false

in_place_only if {
	managed
	input.workload.podUpdatePolicy == "InPlaceOnly"
}

# Every pod of a revision has the same changes, so the answer is computed
# once per revision (input.revisions, listed by Go) and looked up per pod.
# Pods whose revision is not listed (their changes are their own) are
# answered from their own changes.
revision_eligibility := {r.name: eligibility_of(r.changes, r.name) | some r in input.revisions}

eligibility(pod) := e if {
	e := revision_eligibility[pod.revision]
} else := eligibility_of(object.get(pod, "changes", []), pod.revision)

# eligibility_of(changes, revision): `changes[0]` is defined only for a
# non-empty array, and iterating null yields nothing.
eligibility_of(changes, revision) := {"action": "Recreate", "reasons": changed_reasons(changes, revision)} if {
	not in_place_requested
} else := {"action": "InPlace", "reasons": [reason]} if {
	changes[0]
	every c in changes {
		c.inPlace == true
	}
	reason := sprintf("only %s changed", [concat(", ", [c.path | some c in changes])])
} else := {"action": "Recreate", "reasons": reasons} if {
	changes[0]
	reasons := [sprintf("%s changed: %s", [c.path, c.detail]) | some c in changes; not c.inPlace]
} else := {"action": "Recreate", "reasons": changed_reasons(changes, revision)}

changed_reasons(changes, revision) := [sprintf("%s changed", [c.path]) | some c in changes] if {
	changes[0]
} else := [sprintf("revision %s differs from %s", [revision, input.workload.updateRevision])]

# ---------------------------------------------------------------------------
# order: ascending sort key. Unavailable pods first (replacing them costs no
# availability) — except for a native StatefulSet, whose controller goes
# strictly by ordinal; then StatefulSet: highest ordinal first; DaemonSet: by node
# and name. Deployment: exactly upstream's ReplicaSet deletion ranking
# (ActivePodsWithRanks, reference §2.10), which ranks by readiness, not by
# availability: a Ready pod still short of minReadySeconds is not put first.

# Keys are built from input and builtins only (to_number(false) = 0 sorts
# before true = 1): a rule reference per key and per pod costs several
# microseconds at 150,000 pods.

phase_ordinals := {"Pending": 0, "Unknown": 1, "Running": 2}

# Keys hold numbers and strings only; except for Deployments and native
# StatefulSets the first is availability (0: unavailable). A pod that lacks a
# fact its kind's key needs gets no key (Go reports the missing answer) rather
# than a silent fallback; only kinds the contract does not know are ordered by
# name.
order(pod) := [
	to_number(pod.scheduled), # 1. unassigned first
	object.get(phase_ordinals, pod.phase, 0), # 2. Pending < Unknown < Running (others 0)
	to_number(pod.ready), # 3. not Ready first
	pod.deletionCost, # 4. lower pod-deletion-cost first
	0 - pod.colocated, # 5. more co-located active siblings first
	pod.readyBucket * to_number(pod.ready), # 6. both Ready: more recently Ready first (log2 buckets)
	0 - pod.restarts, # 7. more restarts first,
	0 - pod.sidecarRestarts, #    then more sidecar restarts
	pod.createdBucket, # 8. newer first (log2 buckets)
	pod.uid, #    equal bucket: UID ascending
] if {
	input.workload.kind == "Deployment"
} else := [0 - pod.ordinal] if {
	# A native StatefulSet is driven by its controller: strictly the highest
	# ordinal first, unavailable pods included (reference §4.5, §4.7).
	# (Facts always carry workload.managed; reading it directly costs a
	# fraction of `not managed` per pod.)
	input.workload.kind == "StatefulSet"
	input.workload.managed != true
} else := [to_number(pod.available), 0 - pod.ordinal] if {
	input.workload.kind == "StatefulSet"
} else := [to_number(pod.available), pod.node, pod.name] if {
	input.workload.kind == "DaemonSet"
} else := [to_number(pod.available), pod.name] if {
	not input.workload.kind in known_kinds
}

# ---------------------------------------------------------------------------
# Int-or-percent scaling (reference §1.1). Values arrive validated: a
# non-negative number, or a string "N%". Integer arithmetic only.

percent(v) := to_number(trim_suffix(v, "%")) if {
	is_string(v)
	endswith(v, "%")
}

div_floor(a, b) := (a - (a % b)) / b

# scaled_up: ints unchanged (never capped); percents ceil(p × total / 100).
scaled_up(v, total) := v if {
	is_number(v)
} else := div_floor((percent(v) * total) + 99, 100)

# scaled_down: ints unchanged (never capped); percents floor(p × total / 100).
scaled_down(v, total) := v if {
	is_number(v)
} else := div_floor(percent(v) * total, 100)

value_or(v, d) := d if {
	v == null
} else := v

# raw(field): a strategy value as Go sent it (null when unset).
raw(field) := object.get(input.workload.strategy, field, null)

# source_path(field, fallback): where Go says the value came from.
source_path(field, fallback) := s if {
	s := object.get(input.workload.strategy, concat("", [field, "Source"]), "")
	is_string(s)
	s != ""
} else := fallback

# describe: how a budget value was resolved, e.g. "<path>=25% of 10 = 2.5,
# floor: 2": the percent as written, the exact product, the rounding and
# the result; "<path> unset: default 1" for null, and for a value Go
# defaulted (a path ending in " (default)", facts.DefaultSuffix).
describe(path, v, total, rounding, dflt) := sprintf("%s unset: default %d", [path, dflt]) if {
	v == null
} else := sprintf("%s unset: default %d", [trim_suffix(path, " (default)"), v]) if {
	is_number(v)
	endswith(path, " (default)")
} else := sprintf("%s=%d", [path, v]) if {
	is_number(v)
} else := sprintf("%s=%s of %d = %s, %s: %d", [path, v, total, hundredths(percent(v) * total), rounding, rounded(v, total, rounding)])

rounded(v, total, "ceil") := scaled_up(v, total)

rounded(v, total, "floor") := scaled_down(v, total)

# hundredths(a): a / 100 exactly, without trailing zeros ("2", "2.4",
# "1.98"), as Go's facts.Hundredths prints it. a >= 0.
hundredths(a) := sprintf("%d", [div_floor(a, 100)]) if {
	a % 100 == 0
} else := sprintf("%d.%d", [div_floor(a, 100), (a % 100) / 10]) if {
	a % 10 == 0
} else := sprintf("%d.%02d", [div_floor(a, 100), a % 100])

# ---------------------------------------------------------------------------
# budgets: the strategy's budgets with each kind's upstream rounding, then one
# budget per PodDisruptionBudget.

budgets := array.concat(strategy_budgets, pdb_budgets)

default unmanaged_on_delete := false

unmanaged_on_delete if {
	strategy_type == "OnDelete"
	not managed
}

# Unmanaged OnDelete workloads are not rolled by anyone: no strategy budget.
strategy_budgets := [] if {
	unmanaged_on_delete
} else := deployment_budgets if {
	kind == "Deployment"
} else := daemonset_budgets if {
	kind == "DaemonSet"
} else := statefulset_budgets if {
	kind == "StatefulSet"
} else := [] if {
	not kind in known_kinds
}

# Deployment (reference §2.4 ResolveFenceposts, MaxUnavailable, MaxSurge).
deployment_budgets := [
	{"name": "maxUnavailable", "maxUnavailable": replicas, "source": "spec.strategy.type=Recreate: all pods at once"},
	{"name": "maxSurge", "maxSurge": 0, "source": "spec.strategy.type=Recreate: no surge"},
] if {
	strategy_type == "Recreate"
} else := [
	{"name": "maxUnavailable", "maxUnavailable": max_unavailable, "source": unavailable_source},
	{"name": "maxSurge", "maxSurge": surge, "source": surge_source},
] if {
	strategy_type == "RollingUpdate"
	d := replicas
	raw_surge := raw("maxSurge")
	raw_unavailable := raw("maxUnavailable")
	[surge, unavailable] := resolve_fenceposts(raw_surge, raw_unavailable, d)
	max_unavailable := deployment_max_unavailable(unavailable, d)
	surge_path := source_path("maxSurge", "spec.strategy.rollingUpdate.maxSurge")
	surge_source := describe(surge_path, raw_surge, d, "ceil", 0)
	unavailable_path := source_path("maxUnavailable", "spec.strategy.rollingUpdate.maxUnavailable")
	unavailable_base := describe(unavailable_path, raw_unavailable, d, "floor", 0)
	unavailable_source := deployment_unavailable_source(unavailable_base, raw_surge, raw_unavailable, unavailable, d)
}

# resolve_fenceposts: upstream ResolveFenceposts, [surge, unavailable]. nil
# counts as 0; surge rounds up, unavailable down; 0/0 → unavailable 1.
resolve_fenceposts(max_surge, max_unavailable, d) := [surge, fencepost(surge, unavailable)] if {
	surge := scaled_up(value_or(max_surge, 0), d)
	unavailable := scaled_down(value_or(max_unavailable, 0), d)
}

fencepost(surge, unavailable) := 1 if {
	surge == 0
	unavailable == 0
} else := unavailable

# deployment_max_unavailable: upstream MaxUnavailable for RollingUpdate: 0
# when D = 0, else the resolved value capped at D.
deployment_max_unavailable(unavailable, d) := 0 if {
	d == 0
} else := min([unavailable, d])

deployment_unavailable_source(base, raw_surge, raw_unavailable, unavailable, d) := sprintf("%s; 0 replicas: 0", [base]) if {
	d == 0
} else := sprintf("%s; maxSurge and maxUnavailable both 0: 1", [base]) if {
	scaled_up(value_or(raw_surge, 0), d) == 0
	scaled_down(value_or(raw_unavailable, 0), d) == 0
} else := sprintf("%s; capped at %d replicas", [base, d]) if {
	unavailable > d
} else := base

# DaemonSet (reference §3.5 updatedDesiredNodeCounts): both round up; both 0
# with desired > 0 → maxUnavailable 1. Managed OnDelete DaemonSets get
# maxUnavailable from rollplan.dev/max-unavailable (filled in by Go).
daemonset_budgets := [
	{"name": "maxUnavailable", "maxUnavailable": max_unavailable, "source": unavailable_source},
	{"name": "maxSurge", "maxSurge": surge, "source": surge_source},
] if {
	strategy_type in {"RollingUpdate", "OnDelete"}
	desired := replicas
	raw_surge := raw("maxSurge")
	raw_unavailable := raw("maxUnavailable")
	surge := scaled_up(value_or(raw_surge, 0), desired)
	unavailable := scaled_up(value_or(raw_unavailable, 0), desired)
	max_unavailable := daemonset_max_unavailable(surge, unavailable, desired)
	surge_path := source_path("maxSurge", "spec.updateStrategy.rollingUpdate.maxSurge")
	surge_source := describe(surge_path, raw_surge, desired, "ceil", 0)
	unavailable_path := source_path("maxUnavailable", "spec.updateStrategy.rollingUpdate.maxUnavailable")
	unavailable_base := describe(unavailable_path, raw_unavailable, desired, "ceil", 0)
	unavailable_source := daemonset_unavailable_source(unavailable_base, surge, unavailable, desired)
}

daemonset_max_unavailable(surge, unavailable, desired) := 1 if {
	desired > 0
	surge == 0
	unavailable == 0
} else := unavailable

daemonset_unavailable_source(base, surge, unavailable, desired) := sprintf("%s; maxSurge and maxUnavailable both 0: 1", [base]) if {
	desired > 0
	surge == 0
	unavailable == 0
} else := base

# StatefulSet (reference §4.5, §4.7, §8): updateStrategy Recreate (v1.37,
# gate StatefulSetRecreateStrategy) deletes every old pod at once. With
# MaxUnavailableStatefulSet off (the default through v1.36) the controller
# updates one pod at a time and ignores maxUnavailable. Managed sets
# (rollplan drives them) and the gate on (the v1.37 default): round down,
# nil → 1, at least 1.
statefulset_budgets := [{"name": "maxUnavailable", "maxUnavailable": replicas, "source": "spec.updateStrategy.type=Recreate: every old pod at once"}] if {
	strategy_type == "Recreate"
} else := [{"name": "maxUnavailable", "maxUnavailable": 1, "source": "MaxUnavailableStatefulSet off: one pod at a time"}] if {
	not max_unavailable_statefulset_gate
	not managed
	strategy_type == "RollingUpdate"
} else := [{"name": "maxUnavailable", "maxUnavailable": max([unavailable, 1]), "source": unavailable_source}] if {
	raw_unavailable := raw("maxUnavailable")
	unavailable := scaled_down(value_or(raw_unavailable, 1), replicas)
	unavailable_path := source_path("maxUnavailable", "spec.updateStrategy.rollingUpdate.maxUnavailable")
	unavailable_base := describe(unavailable_path, raw_unavailable, replicas, "floor", 1)
	unavailable_source := statefulset_unavailable_source(unavailable_base, unavailable)
}

statefulset_unavailable_source(base, unavailable) := sprintf("%s; at least 1", [base]) if {
	unavailable < 1
} else := base

# PDBs: enforced for managed rollouts (rollplan evicts through the Eviction
# API); advisory otherwise (upstream controllers ignore PDBs).
pdb_budgets := [budget |
	some p in input.pdbs
	budget := {
		"name": concat("", ["pdb/", p.name]),
		"maxUnavailable": p.maxUnavailable,
		"pdb": p.name,
		"advisory": pdb_advisory,
		"source": p.source,
	}
]

pdb_advisory := false if {
	managed
} else := true

# ---------------------------------------------------------------------------
# pacing: an OrderedReady StatefulSet waits for each wave; the rest refill
# freed slots at once.

pacing := "wave" if {
	kind == "StatefulSet"
	input.workload.podManagementPolicy == "OrderedReady"
} else := "rolling"

# ---------------------------------------------------------------------------
# node_preparation: what is done to a node before its daemon pod is updated:
# "none", "cordon" (cordon it, uncordon once the pod is available again) or
# "drain" (cordon, and evict its other pods). Only DaemonSets that rollplan
# drives honour it; upstream controllers prepare no node.

node_preparation := "none"

# ---------------------------------------------------------------------------
# analysis: what each wave waits for before the next one starts: a soak once
# its pods are available, then named measurements (provider, query template,
# interval, count, window, provider options by reference name), judged by
# analysis_verdict; inconclusive verdicts are measured again up to
# maxInconclusive times, and a failed one halts the rollout or rolls it back
# (onFail). Upstream controllers wait for nothing: the default declares none.

analysis := {"soak": "0s", "measurements": [], "maxInconclusive": 0, "onFail": "halt"}

# analysis_verdict: asked while a wave is judged (input.analysis.wave > 0),
# over input.analysis.measurements and their results; answers
# {"verdict": "pass" | "fail" | "inconclusive", "message": "..."}. A policy
# that declares measurements writes its own and builds on the helpers below;
# this one never passes a measurement it did not judge.

analysis_verdict := {"verdict": "inconclusive", "message": concat("; ", analysis_unreadable)} if {
	count(analysis_unreadable) > 0
} else := {"verdict": "inconclusive", "message": msg} if {
	count(analysis_measured) > 0
	msg := sprintf("no verdict rule judges measurement(s) %s: define analysis_verdict in package rollplan.strategy", [concat(", ", analysis_measured)])
} else := {"verdict": "pass", "message": "nothing is measured"}

analysis_measured := [m.name | some m in input.analysis.measurements]

# analysis_unreadable: one message per measurement whose results cannot be
# judged: none was taken, or the provider could not take one (its error
# names the query). A verdict over them is inconclusive, never a pass.
analysis_unreadable := [msg | some m in input.analysis.measurements; msg := unreadable(m)]

unreadable(m) := sprintf("measurement %s: no result for query %s", [m.name, m.query]) if {
	count(m.results) == 0
} else := sprintf("measurement %s: query %s: %s", [m.name, m.query, errs[0]]) if {
	errs := [r.error | some r in m.results; r.error != ""]
	count(errs) > 0
}

# analysis_values[name]: a measurement's values, in the order taken.
analysis_values[m.name] := [r.value | some r in m.results] if some m in input.analysis.measurements

# analysis_query[name]: a measurement's query as rendered for the wave.
analysis_query[m.name] := m.query if some m in input.analysis.measurements

# ---------------------------------------------------------------------------
# halt: stop the rollout when an updated pod does not become available within
# the progress deadline or crash-loops, or (InPlaceOnly) when a pod cannot be
# updated in place.

crash_loop_restarts := 3

halt := sort(updated_pod_halts | in_place_only_halts)

updated_pod_checks := ["deadline", "crash-loop"]

updated_pod_halts := {msg |
	some p in input.pods
	p.updated == true

	# cheap prefilter, one expression: unavailable or crash-looping
	[p.available, p.restarts >= crash_loop_restarts] != [true, false]
	some check in updated_pod_checks
	msg := updated_pod_halt(check, p)
}

updated_pod_halt("deadline", p) := msg if {
	not p.available
	not p.terminating
	deadline := input.workload.progressDeadlineSeconds
	p.unavailableSeconds > deadline
	msg := sprintf(
		"pod %s at the update revision has not been available for %ds (progress deadline %ds)",
		[p.name, p.unavailableSeconds, deadline],
	)
}

updated_pod_halt("crash-loop", p) := msg if {
	p.restarts >= crash_loop_restarts
	msg := sprintf("pod %s is crash-looping since the update (%d restarts)", [p.name, p.restarts])
}

in_place_only_halts := {msg |
	in_place_only
	some p in input.pods
	not p.updated
	blocking := [c.path | some c in p.changes; not c.inPlace]
	blocking[0]
	msg := sprintf("InPlaceOnly: pod %s cannot be updated in place: %s", [p.name, concat(", ", blocking)])
}

# ---------------------------------------------------------------------------
# deny: guard rails against a workload's spec (the gate refuses such an
# update). Upstream has none; organisations add theirs in the entry policy.

deny := []
