package parity

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// Rules the checker enforces. Each Violation names one.
const (
	// RuleStructure: waves are numbered 1…n, none is empty, start times
	// parse and never go back, details align with workloads.
	RuleStructure = "structure"
	// RuleUnknownPod: an action names a pod the workload does not have.
	RuleUnknownPod = "unknown-pod"
	// RuleDuplicatePod: a pod appears in more than one action.
	RuleDuplicatePod = "duplicate-pod"
	// RuleHeldTouched: a pod held out of the rollout (out of scope) is acted on.
	RuleHeldTouched = "held-touched"
	// RuleHeldList: plan.held is exactly the pods not updated and out of scope.
	RuleHeldList = "held-list"
	// RuleNotPending: a pod action on a pod that is already at the update
	// revision, or terminating.
	RuleNotPending = "not-pending"
	// RuleActionDecision: the action type disagrees with the eligibility
	// decision (after Go's feasibility override), or with the node (DaemonSet
	// Delete only where the node should no longer run the pod, or of an old
	// pod of a surge DaemonSet whose replacement already runs on its node;
	// surge only on a surge DaemonSet, and not for an old pod that is not
	// Ready, which manage deletes as soon as its replacement exists, §3.4).
	RuleActionDecision = "action-decision"
	// RuleInPlace: an InPlaceUpdate on a pod with a change a running pod
	// cannot take (only images, labels and annotations other than the
	// mirror-pod and AppArmor keys, and cpu/memory resizes keeping the QoS
	// class, that is changes facts marks inPlace), or on a workload that did
	// not opt in (managed with an in-place pod update policy).
	RuleInPlace = "in-place"
	// RuleBudgetUnavailable, RuleBudgetSurge, RuleBudgetGroups: starting an
	// action took a non-advisory budget past its limit.
	RuleBudgetUnavailable = "budget-unavailable"
	RuleBudgetSurge       = "budget-surge"
	RuleBudgetGroups      = "budget-groups"
	// RuleStatefulSetBudget: a StatefulSet pod was deleted while its budget
	// was already spent (upstream §4.7: unavailable ≥ budget ends the sync;
	// replacing an unavailable pod spends budget too).
	RuleStatefulSetBudget = "sts-budget"
	// RulePacing: with pacing "wave", a wave starts before every pod of the
	// previous wave is available.
	RulePacing = "pacing"
	// RuleOrder: pods are not acted on in ascending policy order.
	RuleOrder = "order"
	// RuleIncomplete: a pod that should be updated is in no wave, and the
	// plan does not say the rollout stalls; or the plan says it stalls and
	// every pod is placed.
	RuleIncomplete = "incomplete"
	// RuleStall: the plan says the rollout stalls after T on a pod, but at
	// T, with every pod due by then available again (the planner's own
	// estimates), the next pod in policy order fits every budget.
	RuleStall = "stall"
	// RuleNoWaves: a halted workload, an unmanaged paused Deployment or an
	// unmanaged OnDelete workload has waves.
	RuleNoWaves = "no-waves"
	// RuleSummary: the summary does not count what the waves do, or does
	// not add up: pods = updated + held + toUpdate, toUpdate = inPlace +
	// recreate + deleted + terminating + blocked, and plan.blocked lists
	// exactly the pods to update that no wave places and are not
	// terminating, each with a reason (plan.Summary).
	RuleSummary = "summary"
	// RuleReplicaSet: a ScaleReplicaSet step is inconsistent (unknown
	// ReplicaSet, from ≠ the replica count reached so far, from = to, pods
	// that are not the ReplicaSet's, an old ReplicaSet scaled up, mixed
	// action kinds).
	RuleReplicaSet = "rs-step"
	// RuleRSSurge: after a scale-up, Σ spec.replicas > replicas + maxSurge,
	// or the new ReplicaSet above replicas (upstream NewRSNewReplicas).
	RuleRSSurge = "rs-surge"
	// RuleRSAvailable: a scale-down removes an available pod and leaves
	// fewer than replicas − maxUnavailable available (upstream §2.5 (c)/(d)).
	RuleRSAvailable = "rs-available"
	// RuleRSRank: a scale-down removes a Ready, Running pod while a pod the
	// ReplicaSet created is not Ready yet (upstream's deletion rank, §2.10
	// rules 1–3, puts unassigned, Pending and not-Ready pods first).
	RuleRSRank = "rs-rank"
	// RuleRSFinal: a Deployment plan ends short of new = replicas, old = 0
	// without saying the rollout does not complete.
	RuleRSFinal = "rs-final"
)

// Violation is one broken invariant, with the workload, wave and pod it is
// about.
type Violation struct {
	Workload string // "Kind namespace/name"
	Wave     int    // 1-based; 0 when the rule is not about one wave
	Pod      string // the pod (or ReplicaSet) concerned, "" if none
	Rule     string
	Message  string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: rule %s", v.Workload, v.Rule)
	if v.Wave > 0 {
		fmt.Fprintf(&b, ", wave %d", v.Wave)
	}
	if v.Pod != "" {
		fmt.Fprintf(&b, ", pod %s", v.Pod)
	}
	return b.String() + ": " + v.Message
}

// Check verifies every workload plan of a result, assuming the default
// per-action duration estimates (plan.DefaultOptions).
func Check(res *plan.Result) []Violation {
	return CheckOptions(res, plan.DefaultOptions)
}

// CheckOptions verifies a result planned with the given duration estimates.
func CheckOptions(res *plan.Result, o plan.Options) []Violation {
	if res == nil || res.Plan == nil {
		return []Violation{{Rule: RuleStructure, Message: "no plan"}}
	}
	if len(res.Details) != len(res.Plan.Workloads) {
		return []Violation{{Rule: RuleStructure, Message: fmt.Sprintf("%d workload plans but %d details", len(res.Plan.Workloads), len(res.Details))}}
	}
	var out []Violation
	for i := range res.Plan.Workloads {
		out = append(out, CheckWorkload(&res.Plan.Workloads[i], res.Details[i], o)...)
	}
	return out
}

// CheckWorkload verifies one workload plan against the facts and decisions
// behind it (det.Planned: the answers the waves were planned from, after
// Go's controller and feasibility overrides).
func CheckWorkload(wp *plan.WorkloadPlan, det *plan.Detail, o plan.Options) []Violation {
	c := &checker{wp: wp, o: o, id: fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name)}
	if det == nil || det.Facts == nil || det.Decisions == nil {
		c.add(RuleStructure, 0, "", "no facts or decisions behind the plan")
		return c.out
	}
	c.r, c.d = det.Facts, det.Decisions
	if det.Planned != nil {
		c.d = det.Planned // what the waves were planned from
	}
	if len(c.d.Pods) != len(c.r.Pods) {
		c.add(RuleStructure, 0, "", "%d pod decisions for %d pods", len(c.d.Pods), len(c.r.Pods))
		return c.out
	}
	c.byName = map[string]int{}
	for i, p := range c.r.Pods {
		c.byName[p.Name] = i
	}
	c.replaced = c.surgeReplaced()
	c.structure()
	c.pods()
	c.summary()
	if c.stopped() {
		return c.out
	}
	if c.r.Workload.Kind == "Deployment" && !c.inPlaceDeployment() {
		c.replicaSets()
	} else {
		for wi, w := range c.wp.Waves {
			for _, a := range w.Actions {
				if a.Type == plan.ActionScaleRS {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "ScaleReplicaSet in a pod-by-pod plan")
				}
			}
		}
		c.podReplay()
		c.order()
		c.complete()
		c.upstream()
	}
	return c.out
}

// stopped: nothing may be planned (halt, paused Deployment, OnDelete
// workload rollplan does not drive); RuleNoWaves covers these.
func (c *checker) stopped() bool {
	w := c.r.Workload
	// A managed Deployment is kept paused by rollplan (its resting state,
	// docs/deployment-in-place.md): it is planned like any other.
	return len(c.d.Halt) > 0 || (w.Strategy.Type == "OnDelete" && !w.Managed) || (w.Paused && !w.Managed)
}

// inPlaceDeployment: the documented condition under which a Deployment's
// pods are patched pod by pod instead of rolled through ReplicaSets: the
// workload opted in (managed, in-place pod update policy) and every pod
// still to update and in scope goes in place (after Go's feasibility
// override); the Deployment has pods; and at most one ReplicaSet has
// replicas or pods.
func (c *checker) inPlaceDeployment() bool {
	w := c.r.Workload
	active := 0
	for _, rs := range c.r.ReplicaSets {
		if rs.Replicas > 0 || rs.Pods > 0 {
			active++
		}
	}
	if !w.Managed || w.PodUpdatePolicy == "Recreate" || active > 1 {
		return false
	}
	for i, p := range c.r.Pods {
		if p.Updated || !c.d.Pods[i].InScope {
			continue
		}
		if c.d.Pods[i].Action != engine.InPlace {
			return false
		}
	}
	// Every pod updated (in place, its ReplicaSet not given the template
	// yet): nothing left but completing it.
	return len(c.r.Pods) > 0
}

type checker struct {
	wp     *plan.WorkloadPlan
	r      *facts.Rollout
	d      *engine.Decisions
	o      plan.Options
	id     string
	byName map[string]int
	starts []float64 // parsed wave start times, seconds
	// replaced: old pod → its replacement on the same node (surgeReplaced).
	replaced map[int]int
	out      []Violation
}

func (c *checker) add(rule string, wave int, pod string, format string, args ...any) {
	c.out = append(c.out, Violation{Workload: c.id, Wave: wave, Pod: pod, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) hasNote(sub string) bool {
	for _, n := range c.wp.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}
