package parity

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
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

// ---- structure, pods, summary ----

func (c *checker) structure() {
	prev := 0.0
	for i, w := range c.wp.Waves {
		if w.Index != i+1 {
			c.add(RuleStructure, i+1, "", "wave index %d at position %d", w.Index, i+1)
		}
		if len(w.Actions) == 0 {
			c.add(RuleStructure, i+1, "", "empty wave")
		}
		d, err := time.ParseDuration(w.Start)
		if err != nil {
			c.add(RuleStructure, i+1, "", "start %q does not parse: %v", w.Start, err)
		}
		t := d.Seconds()
		if t < prev {
			c.add(RuleStructure, i+1, "", "starts at %s, before the previous wave (%gs)", w.Start, prev)
		}
		prev = math.Max(prev, t)
		c.starts = append(c.starts, t)
	}
	w := c.r.Workload
	if len(c.wp.Waves) > 0 {
		switch {
		case len(c.d.Halt) > 0:
			c.add(RuleNoWaves, 0, "", "halted (%s) but %d waves are planned", strings.Join(c.d.Halt, "; "), len(c.wp.Waves))
		case w.Paused && !w.Managed:
			c.add(RuleNoWaves, 0, "", "paused Deployment but %d waves are planned", len(c.wp.Waves))
		case w.Strategy.Type == "OnDelete" && !w.Managed:
			c.add(RuleNoWaves, 0, "", "unmanaged OnDelete %s but %d waves are planned", w.Kind, len(c.wp.Waves))
		}
	}
}

// actionPods lists the pods an action names.
func actionPods(a *plan.Action) []string {
	switch a.Type {
	case plan.ActionScaleRS:
		return a.Pods
	case plan.ActionCordonNode, plan.ActionDrainNode, plan.ActionUncordonNode:
		return nil // node preparation: a node, not a pod of the workload
	}
	return []string{a.Pod}
}

func (c *checker) pods() {
	held := map[string]bool{}
	for _, h := range c.wp.Held {
		held[h.Pod] = true
		i, ok := c.byName[h.Pod]
		if !ok || c.r.Pods[i].Updated || c.d.Pods[i].InScope {
			c.add(RuleHeldList, 0, h.Pod, "listed as held but it is not a pod out of scope that still needs the update")
		}
	}
	for i, p := range c.r.Pods {
		if !p.Updated && !c.d.Pods[i].InScope && !held[p.Name] {
			c.add(RuleHeldList, 0, p.Name, "out of scope (%s) but not listed as held", c.d.Pods[i].HeldReason)
		}
	}
	nodeRuns := map[string]bool{}
	for _, n := range c.r.Nodes {
		nodeRuns[n.Name] = n.ShouldRun
	}
	seen := map[string]int{}
	for wi, w := range c.wp.Waves {
		for ai := range w.Actions {
			a := &w.Actions[ai]
			for _, name := range actionPods(a) {
				if name == "" {
					c.add(RuleStructure, wi+1, "", "%s action names no pod", a.Type)
					continue
				}
				if prev, dup := seen[name]; dup {
					c.add(RuleDuplicatePod, wi+1, name, "already acted on in wave %d", prev)
					continue
				}
				seen[name] = wi + 1
				i, ok := c.byName[name]
				if !ok {
					c.add(RuleUnknownPod, wi+1, name, "%s names a pod the workload does not have", a.Type)
					continue
				}
				p, pd := &c.r.Pods[i], &c.d.Pods[i]
				if !p.Updated && !pd.InScope {
					c.add(RuleHeldTouched, wi+1, name, "%s on a pod held out of the rollout (%s)", a.Type, pd.HeldReason)
				}
				if a.Type == plan.ActionScaleRS {
					if p.Owner != a.ReplicaSet {
						c.add(RuleReplicaSet, wi+1, name, "scaling ReplicaSet %s removes a pod of ReplicaSet %s", a.ReplicaSet, p.Owner)
					}
					if p.Terminating || p.Terminal {
						c.add(RuleNotPending, wi+1, name, "scaling ReplicaSet %s removes a pod that is already terminating or terminal", a.ReplicaSet)
					}
					continue
				}
				if p.Updated {
					c.add(RuleNotPending, wi+1, name, "%s on a pod already at the update revision", a.Type)
				}
				if p.Terminating {
					c.add(RuleNotPending, wi+1, name, "%s on a terminating pod", a.Type)
				}
				c.actionMatches(wi+1, a, p, pd, nodeRuns)
			}
		}
	}
}

// inPlaceClasses: the change classes a running pod may take (reference §5).
var inPlaceClasses = map[string]bool{
	facts.ClassImage: true, facts.ClassInitImage: true, facts.ClassLabels: true,
	facts.ClassAnnotations: true, facts.ClassResources: true,
}

func (c *checker) actionMatches(wave int, a *plan.Action, p *facts.Pod, pd *engine.PodDecision, nodeRuns map[string]bool) {
	ds := c.r.Workload.Kind == "DaemonSet" && len(c.r.Nodes) > 0
	if a.Surge && (a.Type != plan.ActionRecreate || c.r.Workload.Kind != "DaemonSet") {
		c.add(RuleActionDecision, wave, p.Name, "surge %s: only a DaemonSet Recreate surges", a.Type)
	}
	if a.Surge && c.r.Workload.Kind == "DaemonSet" && !c.surgeMode() {
		c.add(RuleActionDecision, wave, p.Name, "surge Recreate of a DaemonSet without a surge budget")
	}
	if a.Surge && c.surgeMode() && !p.Ready {
		c.add(RuleActionDecision, wave, p.Name, "surge Recreate of an old pod that is not Ready: manage deletes it as soon as its replacement exists, without waiting for it to be available (§3.4)")
	}
	replaced, isReplaced := c.replaced[c.byName[p.Name]]
	if isReplaced && a.Type != plan.ActionDelete {
		c.add(RuleActionDecision, wave, p.Name, "%s of an old pod whose node already runs %s at the update revision: with surge, upstream deletes the old pod and creates nothing (§3.4, §3.7)", a.Type, c.r.Pods[replaced].Name)
	}
	switch a.Type {
	case plan.ActionInPlace:
		if pd.Action != engine.InPlace {
			c.add(RuleActionDecision, wave, p.Name, "InPlaceUpdate but the decision is %s", pd.Action)
		}
		w := c.r.Workload
		if !w.Managed || w.PodUpdatePolicy == "Recreate" {
			c.add(RuleInPlace, wave, p.Name, "InPlaceUpdate on a workload that did not opt in (managed %v, podUpdatePolicy %s)", w.Managed, w.PodUpdatePolicy)
		}
		for _, ch := range p.Changes {
			key := strings.TrimSuffix(strings.TrimPrefix(ch.Path, "metadata.annotations["), "]")
			switch {
			case !ch.InPlace:
				c.add(RuleInPlace, wave, p.Name, "InPlaceUpdate but %s (%s) cannot change on a running pod: %s", ch.Path, ch.Class, ch.Detail)
			case !inPlaceClasses[ch.Class]:
				c.add(RuleInPlace, wave, p.Name, "InPlaceUpdate but %s is of class %s, which no running pod may change", ch.Path, ch.Class)
			case ch.Class == facts.ClassAnnotations && (key == "kubernetes.io/config.mirror" || strings.HasPrefix(key, "container.apparmor.security.beta.kubernetes.io/")):
				c.add(RuleInPlace, wave, p.Name, "InPlaceUpdate but annotation %s is immutable on a running pod", key)
			}
		}
		if ds && !nodeRuns[p.Node] {
			c.add(RuleActionDecision, wave, p.Name, "InPlaceUpdate on node %s, which should no longer run the DaemonSet", p.Node)
		}
	case plan.ActionRecreate:
		if pd.Action != engine.Recreate {
			c.add(RuleActionDecision, wave, p.Name, "Recreate but the decision is %s", pd.Action)
		}
		if ds && !nodeRuns[p.Node] {
			c.add(RuleActionDecision, wave, p.Name, "Recreate on node %s, which should no longer run the DaemonSet", p.Node)
		}
	case plan.ActionDelete:
		switch {
		case c.condemned(p):
			// The StatefulSet controller deletes condemned pods (§4.4).
		case isReplaced:
			// Its replacement already runs on the node (surgeReplaced).
		case !ds:
			c.add(RuleActionDecision, wave, p.Name, "Delete outside a DaemonSet with nodes, of a pod that is not a condemned StatefulSet pod")
		case nodeRuns[p.Node]:
			c.add(RuleActionDecision, wave, p.Name, "Delete without replacement on node %s, which should run the DaemonSet", p.Node)
		}
	default:
		c.add(RuleStructure, wave, p.Name, "unknown action type %q", a.Type)
	}
}

func (c *checker) summary() {
	s := c.wp.Summary
	// The sums, as plan.Summary documents them.
	if got := s.Updated + s.Held + s.ToUpdate; got != s.Pods {
		c.add(RuleSummary, 0, "", "updated %d + held %d + toUpdate %d = %d, not the %d pods", s.Updated, s.Held, s.ToUpdate, got, s.Pods)
	}
	if got := s.InPlace + s.Recreate + s.Deleted + s.Terminating + s.Blocked; got != s.ToUpdate {
		c.add(RuleSummary, 0, "", "inPlace %d + recreate %d + deleted %d + terminating %d + blocked %d = %d, not the %d to update", s.InPlace, s.Recreate, s.Deleted, s.Terminating, s.Blocked, got, s.ToUpdate)
	}
	// Each count, from the facts and the waves: every pod to update is
	// acted on, terminating, or blocked.
	want := plan.Summary{Pods: len(c.r.Pods), Held: len(c.wp.Held), Waves: len(c.wp.Waves)}
	acted := map[string]string{}
	for _, w := range c.wp.Waves {
		for _, a := range w.Actions {
			switch a.Type {
			case plan.ActionScaleRS:
				for _, p := range a.Pods {
					acted[p] = plan.ActionRecreate
				}
			case plan.ActionInPlace, plan.ActionRecreate, plan.ActionDelete:
				acted[a.Pod] = a.Type
			}
		}
	}
	listed := map[string]bool{}
	for _, b := range c.wp.Blocked {
		listed[b.Pod] = true
	}
	// A Deployment rolled through ReplicaSets: the ReplicaSet controller
	// first deletes the pods of a ReplicaSet beyond its replicas, outside
	// the plan's actions; they count as deleted. Which ones is upstream's
	// deletion rank: count them per ReplicaSet, within what is possible.
	excess, removed := map[string]int{}, map[string]int{}
	rsPlan := c.r.Workload.Kind == "Deployment" && !c.stopped() && !c.inPlaceDeployment()
	if rsPlan {
		for _, rs := range c.r.ReplicaSets {
			excess[rs.Name] = -rs.Replicas
		}
		for _, p := range c.r.Pods {
			if _, ok := excess[p.Owner]; ok && !p.Terminating && !p.Terminal {
				excess[p.Owner]++
			}
		}
	}
	blocked := map[string]bool{}
	for i, p := range c.r.Pods {
		switch {
		case p.Updated:
			want.Updated++
			continue
		case !c.d.Pods[i].InScope:
			continue
		}
		want.ToUpdate++
		switch acted[p.Name] {
		case plan.ActionInPlace:
			want.InPlace++
		case plan.ActionRecreate:
			want.Recreate++
		case plan.ActionDelete:
			want.Deleted++
		default:
			if p.Terminating {
				want.Terminating++
				continue
			}
			if rsPlan && excess[p.Owner] > 0 && !p.Terminal && !listed[p.Name] {
				want.Deleted++
				removed[p.Owner]++
				continue
			}
			want.Blocked++
			blocked[p.Name] = true
		}
	}
	for rs, n := range removed {
		if n > excess[rs] {
			c.add(RuleSummary, 0, rs, "%d pod(s) of ReplicaSet %s are in no wave and not blocked, but it holds only %d pod(s) beyond its replicas", n, rs, excess[rs])
		}
	}
	if s != want {
		c.add(RuleSummary, 0, "", "summary %+v, the waves give %+v", s, want)
	}
	// The blocked list names exactly the blocked pods, once each, with why.
	seen := map[string]bool{}
	for _, b := range c.wp.Blocked {
		switch {
		case seen[b.Pod]:
			c.add(RuleSummary, 0, b.Pod, "listed as blocked twice")
		case !blocked[b.Pod]:
			c.add(RuleSummary, 0, b.Pod, "listed as blocked (%s), but it is not a pod to update in no wave", b.Reason)
		case b.Reason == "":
			c.add(RuleSummary, 0, b.Pod, "blocked without a reason")
		}
		seen[b.Pod] = true
	}
	for name := range blocked {
		if !seen[name] {
			c.add(RuleSummary, 0, name, "a pod to update in no wave, not listed as blocked")
		}
	}
	// A stopped rollout blocks every pod to update that is not leaving by itself.
	if c.stopped() && want.Blocked != want.ToUpdate-want.Terminating {
		c.add(RuleSummary, 0, "", "stopped, yet %d of %d pods to update are not blocked", want.ToUpdate-want.Terminating-want.Blocked, want.ToUpdate)
	}
}

// ---- order ----

// compareOrder compares two policy sort keys element by element as the
// contract defines them: numbers (numerically) < strings < anything else;
// a shorter key that is a prefix sorts first.
func compareOrder(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareOrderValue(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func orderNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func compareOrderValue(a, b any) int {
	rank := func(v any) int {
		if _, ok := orderNumber(v); ok {
			return 0
		}
		if _, ok := v.(string); ok {
			return 1
		}
		return 2
	}
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case 0:
		x, _ := orderNumber(a)
		y, _ := orderNumber(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	case 1:
		return strings.Compare(a.(string), b.(string))
	case 2:
		// Booleans: false < true (engines reject them today).
		x, xok := a.(bool)
		y, yok := b.(bool)
		if xok && yok && x != y {
			if !x {
				return -1
			}
			return 1
		}
	}
	return 0
}

// podLess: policy order, pod name breaking ties.
func (c *checker) podCompare(i, j int) int {
	if k := compareOrder(c.d.Pods[i].Order, c.d.Pods[j].Order); k != 0 {
		return k
	}
	return strings.Compare(c.r.Pods[i].Name, c.r.Pods[j].Name)
}

// deletionCompare: the order in which a ReplicaSet deletes its pods.
// Upstream ranks first by §2.10 rules 1–4 (unassigned, phase Pending <
// Unknown < Running, not Ready, lower pod-deletion-cost), whatever the
// policy; the policy order decides the rest (the default strategy's order
// is upstream's ranking itself, so for its pods this is podCompare). Pods
// at the update revision have no order decision: only the rules rank them.
func (c *checker) deletionCompare(i, j int) int {
	a, b := &c.r.Pods[i], &c.r.Pods[j]
	for _, d := range [][2]int{
		{b2i(a.Scheduled), b2i(b.Scheduled)},
		{facts.PhaseOrdinal(a.Phase), facts.PhaseOrdinal(b.Phase)},
		{b2i(a.Ready), b2i(b.Ready)},
		{a.DeletionCost, b.DeletionCost},
	} {
		if d[0] != d[1] {
			return d[0] - d[1]
		}
	}
	return c.podCompare(i, j)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *checker) key(i int) string {
	return fmt.Sprintf("%v", c.d.Pods[i].Order)
}

// order: a pod-by-pod plan acts on pods in ascending policy order, across
// waves and inside each. The packer starts, in each wave, a prefix of the
// pods still waiting (once one pod does not fit, every later pod waits, the
// DaemonSet's budget-free replacements of unavailable pods included; with
// the default order those come first anyway), so the concatenation of all
// waves is sorted. The one exception, documented in planner/plan/pods.go,
// is what a controller deletes whatever the rollout (controllerDelete):
// those Deletes are not ordered by the policy; the upstream rules check
// when they happen (dsEvict, the budget replay). Pods whose node rollplan
// already cordoned for the DaemonSet (preparedNode) go first too.
func (c *checker) order() {
	prev := -1
	prevWave := 0
	for wi, w := range c.wp.Waves {
		for ai := range w.Actions {
			a := &w.Actions[ai]
			i, ok := c.byName[a.Pod]
			if !ok || c.controllerDelete(a, &c.r.Pods[i]) || c.preparedNode(&c.r.Pods[i]) {
				continue
			}
			// Phase 1 of a v1.37 Parallel update replaces unavailable old
			// pods in the sync that reaches them, whatever comes before.
			// So does a rollout rollplan drives, whatever the policy's order.
			if (c.stsPhase1() || c.driven()) && !c.r.Pods[i].Available {
				continue
			}
			if prev >= 0 && c.podCompare(prev, i) > 0 {
				c.add(RuleOrder, wi+1, a.Pod, "planned after pod %s (wave %d, order key %s) but its order key %s sorts first", c.r.Pods[prev].Name, prevWave, c.key(prev), c.key(i))
			}
			prev, prevWave = i, wi+1
		}
	}
}

// complete: every pod that needs the update (not updated, in scope, not
// terminating) is in a wave unless the plan says why not.
func (c *checker) complete() {
	placed := map[string]bool{}
	for _, w := range c.wp.Waves {
		for _, a := range w.Actions {
			placed[a.Pod] = true
		}
	}
	var missing []string
	for i, p := range c.r.Pods {
		if !p.Updated && c.d.Pods[i].InScope && !p.Terminating && !placed[p.Name] {
			missing = append(missing, p.Name)
		}
	}
	stalls := c.hasNote("the rollout stalls")
	switch {
	case len(missing) > 0 && !stalls:
		c.add(RuleIncomplete, 0, missing[0], "%d pod(s) that need the update are in no wave (%s) and no note says the rollout stalls", len(missing), strings.Join(missing, ", "))
	case len(missing) == 0 && stalls:
		c.add(RuleIncomplete, 0, "", "the plan says the rollout stalls but every pod is placed")
	}
}

// ---- pod-by-pod replay ----

// slot is a pod (or a DaemonSet node that should run a pod and has none)
// whose availability the replay follows.
type slot struct {
	name        string
	pod         *facts.Pod
	unavailable bool
	surging     bool
	until       float64 // when it is available again; +Inf: not by itself
	// deleting: a Delete (no replacement) is in flight; gone once it completes.
	deleting, gone bool
}

type budgetState struct {
	b         plan.Budget
	elsewhere int // a PDB's unavailable pods outside the workload
}

// relevant: the budget counts the slot. A PDB budget counts only the pods
// the PDB selects. A StatefulSet pod outside the replicas (condemned by a
// scale-down) counts against no budget: the controller deletes it whatever
// the rollout, and upstream counts unavailable replicas only (§4.3, §4.7).
func (c *checker) relevant(b plan.Budget, p *facts.Pod) bool {
	if b.PDB != "" && !slices.Contains(p.PDBs, b.PDB) {
		return false
	}
	return !c.condemned(p)
}

// condemned: a StatefulSet pod with a valid ordinal outside the replicas.
func (c *checker) condemned(p *facts.Pod) bool {
	return c.r.Workload.Kind == "StatefulSet" && p.Ordinal >= 0 && (p.Index < 0 || p.Index >= c.r.Workload.Replicas)
}

// stsAbove: a native StatefulSet with MaxUnavailableStatefulSet off and
// Parallel pod management. Its update loop (reference §4.5) goes from the
// highest index down, deletes the first pod not at the update revision and
// stops at an unavailable pod on its way: a pod to replace is held only by
// unavailable pods above it, never by those below (planner/plan/pods.go).
func (c *checker) stsAbove() bool {
	w := c.r.Workload
	return w.Kind == "StatefulSet" && !c.r.FeatureGates[GateMaxUnavailableStatefulSet] && !w.Managed && w.PodManagementPolicy == "Parallel"
}

// stsPhase1: a native Parallel RollingUpdate StatefulSet on v1.37+ with
// MaxUnavailableStatefulSet on. Its update deletes every unavailable old pod
// at index ≥ partition whatever the budget (phase 1), then available ones
// while maxUnavailable − unavailable (counted before phase 1) allows
// (reference §8, updateStatefulSetAfterInvariantEstablished).
func (c *checker) stsPhase1() bool {
	w := c.r.Workload
	return w.Kind == "StatefulSet" && !w.Managed && w.PodManagementPolicy == "Parallel" && w.Strategy.Type == "RollingUpdate" &&
		c.r.FeatureGates[GateMaxUnavailableStatefulSet] && c.atLeast137()
}

// stsRecreate: a native StatefulSet with updateStrategy Recreate deletes
// every old pod at once, whatever the budget (§8).
func (c *checker) stsRecreate() bool {
	w := c.r.Workload
	return w.Kind == "StatefulSet" && !w.Managed && w.Strategy.Type == "Recreate"
}

func (c *checker) atLeast137() bool {
	v, err := kubeversion.ParseAny(c.r.KubernetesVersion)
	return err != nil || v.AtLeast(kubeversion.V1_37)
}

// against: slot x counts against budget b when pod cand is the one to
// start: relevant, and for stsAbove above cand (or cand itself, inclusive).
func (c *checker) against(b plan.Budget, x, cand *facts.Pod, inclusive bool) bool {
	if !c.relevant(b, x) {
		return false
	}
	if b.Type != "unavailable" || !c.stsAbove() || cand == nil {
		return true
	}
	return x.Index > cand.Index || (inclusive && x == cand)
}

// minReadySeconds: what the pod's availability is judged with (§1.3): an
// old ReplicaSet's pods by the ReplicaSet's own value (the Deployment syncs
// its value onto the new ReplicaSet only, §2.3).
func (c *checker) minReadySeconds(p *facts.Pod) int {
	if c.r.Workload.Kind == "Deployment" {
		for _, rs := range c.r.ReplicaSets {
			if rs.Name == p.Owner && !rs.New {
				return rs.MinReadySeconds
			}
		}
	}
	return c.r.Workload.MinReadySeconds
}

// controllerDelete: a Delete that a controller makes whatever the rollout
// and its order (planner/plan/pods.go): a condemned StatefulSet pod (§4.4),
// a DaemonSet pod on a node with an untolerated NoExecute taint (§3.4), an
// available pod of a node that should no longer run a native surge
// DaemonSet (§3.7 rule 3; the budget replay checks when it may go), an old
// pod of a surge DaemonSet whose replacement already runs on its node
// (surgeReplaced; the budget replay and RuleDSReplaced check when).
// preparedNode: the pod's node is cordoned for its DaemonSet already
// (node preparation, planner/plan/nodes.go): the planner updates it first,
// whatever the order.
func (c *checker) preparedNode(p *facts.Pod) bool {
	w := c.r.Workload
	if w.Kind != "DaemonSet" || !w.Managed || w.Strategy.Type != "OnDelete" {
		return false
	}
	for _, n := range c.r.Nodes {
		if n.Name == p.Node {
			return n.CordonedBy == w.Namespace+"/"+w.Name
		}
	}
	return false
}

func (c *checker) controllerDelete(a *plan.Action, p *facts.Pod) bool {
	if a.Type != plan.ActionDelete {
		return false
	}
	if _, ok := c.replaced[c.byName[p.Name]]; ok {
		return true
	}
	if c.condemned(p) {
		return true
	}
	for _, n := range c.r.Nodes {
		if n.Name == p.Node {
			return !n.ShouldContinueRunning || (c.surgeMode() && c.native())
		}
	}
	return false
}

// surgeMode: a DaemonSet whose non-advisory surge budget is above 0.
func (c *checker) surgeMode() bool {
	if c.r.Workload.Kind != "DaemonSet" {
		return false
	}
	for _, b := range c.wp.Budgets {
		if b.Type == "surge" && !b.Advisory && b.Limit > 0 {
			return true
		}
	}
	return false
}

// keptBeside: with surge, manage keeps an old pod beside its replacement
// until the replacement is available only while the old pod is Ready; it
// deletes a failed or succeeded pod first (§3.4).
func keptBeside(p *facts.Pod) bool {
	return p.Ready && !p.Terminal
}

// dsNode: a DaemonSet node's non-terminating old pods and non-terminating,
// non-terminal pods at the update revision (facts indexes).
type dsNode struct {
	olds, news []int
}

// dsNodes groups a DaemonSet's bound pods by the nodes that may keep the
// DaemonSet: known with shouldContinueRunning (a node with an untolerated
// NoExecute taint loses every pod, §3.4), or any node when the snapshot
// has none.
func (c *checker) dsNodes() map[string]*dsNode {
	cont := map[string]bool{}
	for _, n := range c.r.Nodes {
		cont[n.Name] = n.ShouldContinueRunning
	}
	out := map[string]*dsNode{}
	for i, p := range c.r.Pods {
		if p.Node == "" || p.Terminating || (len(c.r.Nodes) > 0 && !cont[p.Node]) {
			continue
		}
		n := out[p.Node]
		if n == nil {
			n = &dsNode{}
			out[p.Node] = n
		}
		switch {
		case !p.Updated:
			n.olds = append(n.olds, i)
		case !p.Terminal:
			n.news = append(n.news, i)
		}
	}
	return out
}

// surgeReplaced: for a surge DaemonSet, the old pods whose node already
// holds their replacement, old pod → new pod: exactly one of each on a
// node that may keep the DaemonSet. Upstream keeps both (manage with
// surge, §3.4) and deletes the old pod once the new one is available, at
// once when the old one is not kept (keptBeside), outside any budget and
// any order; until then rollingUpdate counts the node as one surge pod
// (§3.7).
func (c *checker) surgeReplaced() map[int]int {
	out := map[int]int{}
	if !c.surgeMode() {
		return out
	}
	for _, n := range c.dsNodes() {
		if len(n.olds) == 1 && len(n.news) == 1 {
			out[n.olds[0]] = n.news[0]
		}
	}
	return out
}

// availableAgain: when a pod is available by the planner's estimates (pods.go
// setup): now if available; a terminating pod (even one that still reports
// Ready) after a replacement's estimated duration; a Ready pod short of
// minReadySeconds (an old ReplicaSet's own, for a Deployment's pod) once it
// has been Ready that long; an updated pod after a replacement's estimated
// duration; any other unavailable pod never by itself (+Inf).
func (c *checker) availableAgain(p *facts.Pod) float64 {
	switch {
	case p.Available:
		return 0
	case p.Terminating:
		return c.duration(plan.ActionRecreate)
	case p.Ready && p.ReadySeconds >= 0:
		return math.Max(0, float64(int64(c.minReadySeconds(p))-p.ReadySeconds))
	case p.Updated:
		return c.duration(plan.ActionRecreate)
	}
	return math.Inf(1)
}

func (c *checker) duration(action string) float64 {
	m := c.r.Workload.MinReadySeconds
	switch action {
	case plan.ActionInPlace:
		return float64(c.o.InPlaceSeconds + m)
	case plan.ActionDelete:
		return float64(c.o.TerminateSeconds)
	}
	return float64(c.o.RecreateSeconds + m)
}

// initialSlots: every pod, unavailable ones as the planner counts them at
// snapshot time (pods.go setup) until availableAgain. A DaemonSet pod the
// plan does not act on, on a node with an untolerated NoExecute taint, is
// deleted by manage() at once (§3.4): unavailable while it terminates, then
// gone. A DaemonSet node that should run a pod and has none (and no
// terminating pod) counts as one unavailable slot until its pod is created.
// A surge DaemonSet's pod at the update revision that is not available yet,
// beside a kept old pod (surgeReplaced), is a surge pod too until then.
func (c *checker) initialSlots() []slot {
	r := c.r
	evicted := map[string]bool{}
	for _, n := range r.Nodes {
		evicted[n.Name] = r.Workload.Kind == "DaemonSet" && !n.ShouldContinueRunning
	}
	var slots []slot
	for i := range r.Pods {
		p := &r.Pods[i]
		s := slot{name: p.Name, pod: p, until: math.Inf(1)}
		switch {
		case evicted[p.Node] && !p.Terminating && (p.Updated || !c.d.Pods[i].InScope):
			// manage() deletes it in its first sync (§3.4), not the plan:
			// unavailable while it terminates, then gone.
			s.unavailable, s.deleting, s.until = true, true, c.duration(plan.ActionDelete)
		case !p.Available:
			s.unavailable, s.until = true, c.availableAgain(p)
		}
		slots = append(slots, s)
	}
	for o, n := range c.replaced {
		if keptBeside(&r.Pods[o]) && !r.Pods[n].Available {
			slots[n].surging = true
		}
	}
	if r.Workload.Kind == "DaemonSet" {
		terminating := map[string]bool{}
		for _, p := range r.Pods {
			if p.Terminating {
				terminating[p.Node] = true
			}
		}
		for _, n := range r.Nodes {
			if n.ShouldRun && n.Pods == 0 && !terminating[n.Name] {
				p := &facts.Pod{Name: "node/" + n.Name, Node: n.Name, Zone: n.Zone, Labels: map[string]string{}, Index: -1, Ordinal: -1}
				slots = append(slots, slot{name: p.Name, pod: p, unavailable: true, until: c.duration(plan.ActionRecreate)})
			}
		}
	}
	return slots
}

// podReplay rolls the waves forward in time and checks every budget each
// time an action starts. Whatever the packer decided, the property is: an
// action that adds to a budget's consumption (a pod newly unavailable in
// its group, a new surge pod, a group newly in flight) leaves it within the
// limit — except that a DaemonSet replaces an unavailable old pod whatever
// the budget (reference §3.6, §3.7: budget-free, though it keeps counting).
// StatefulSets add upstream's rule that deleting a pod, even an unavailable
// one, needs unavailable < budget first (§4.7).
func (c *checker) podReplay() {
	var budgets []budgetState
	for _, b := range c.wp.Budgets {
		if b.Advisory {
			continue
		}
		bs := budgetState{b: b}
		for _, pdb := range c.r.PDBs {
			if b.PDB != "" && pdb.Name == b.PDB {
				bs.elsewhere = pdb.UnavailableElsewhere
			}
		}
		budgets = append(budgets, bs)
	}
	slots := c.initialSlots()
	kind := c.r.Workload.Kind
	// Replicas the StatefulSet controller creates first: unavailable until
	// a created pod could be (the planner's recreate estimate, the earliest
	// they can be). They are not in the planner's counts, so only the
	// StatefulSet rule (RuleSTSMissing) reads them.
	var missing []slot
	if c.stsCountsMissing() {
		for _, idx := range c.stsMissing() {
			missing = append(missing, slot{name: fmt.Sprintf("ordinal %d", idx+c.r.Workload.OrdinalsStart), unavailable: true, until: c.duration(plan.ActionRecreate)})
		}
	}
	noExecute, runs := map[string]bool{}, map[string]bool{}
	for _, n := range c.r.Nodes {
		noExecute[n.Name], runs[n.Name] = !n.ShouldContinueRunning, n.ShouldRun
	}
	// counts of the current state; unavail counts against pod cand (see against)
	unavail := func(bs budgetState, g string, cand *facts.Pod, inclusive bool) int {
		n := 0
		for _, s := range slots {
			if s.unavailable && c.against(bs.b, s.pod, cand, inclusive) && engine.GroupKey(s.pod, bs.b.GroupBy) == g {
				n++
			}
		}
		return n + bs.elsewhere
	}
	// availableNodes: nodes holding an available pod (upstream's
	// availableCount of a surge DaemonSet, §3.7).
	availableNodes := func() int {
		nodes := map[string]bool{}
		for _, s := range slots {
			if !s.unavailable && !s.gone {
				nodes[s.pod.Node] = true
			}
		}
		return len(nodes)
	}
	surging := func(bs budgetState) int {
		n := 0
		for _, s := range slots {
			if s.surging && c.relevant(bs.b, s.pod) {
				n++
			}
		}
		return n
	}
	inFlight := func(bs budgetState) map[string]bool {
		m := map[string]bool{}
		for _, s := range slots {
			if (s.unavailable || s.surging) && c.relevant(bs.b, s.pod) {
				m[engine.GroupKey(s.pod, bs.b.GroupBy)] = true
			}
		}
		return m
	}
	prevEnd := math.Inf(-1)
	for wi, w := range c.wp.Waves {
		t := c.starts[wi]
		// Pods in flight are available again once their estimate has
		// passed. The planner applies what is due by a step's time before
		// the step, the first one at 0s included (a Ready pod whose
		// minReadySeconds has passed by the planner's estimate counts as
		// available then).
		for i := range slots {
			if slots[i].until <= t {
				slots[i].unavailable, slots[i].surging = false, false
				slots[i].until = math.Inf(1)
				slots[i].gone = slots[i].gone || slots[i].deleting
			}
		}
		for i := range missing {
			if missing[i].until <= t {
				missing[i].unavailable = false
			}
		}
		if c.d.Pacing == engine.PacingWave && wi > 0 && t < prevEnd {
			c.add(RulePacing, wi+1, "", "pacing wave, but the wave starts at %s, before every pod of wave %d is available (%gs)", w.Start, wi, prevEnd)
		}
		waveEnd := t
		// Surge DaemonSet: the replacement of an unavailable old pod is
		// created whatever the surge budget and counts as a surge pod only
		// from the next sync on (upstream's allowed nodes, §3.7).
		var laterSurge []int
		for _, a := range w.Actions {
			i, ok := c.byName[a.Pod]
			if !ok {
				continue
			}
			s := &slots[i]
			wasUnavailable, wasInFlight := s.unavailable, s.unavailable || s.surging
			// Surge DaemonSet: an old pod beside its replacement goes once the
			// replacement is available, at once when the old pod is not kept
			// (§3.4, §3.7); the node is served by the new pod, so the deletion
			// counts against nothing. Earlier it is an ordinary Delete.
			if n, ok := c.replaced[i]; ok && a.Type == plan.ActionDelete && (!keptBeside(s.pod) || (!slots[n].unavailable && !slots[n].gone)) {
				s.unavailable, s.surging, s.deleting, s.gone = false, false, true, true
				s.until = t + c.duration(plan.ActionDelete)
				waveEnd = math.Max(waveEnd, s.until)
				continue
			}
			// DaemonSet: an unavailable old pod is replaced whatever the
			// budget (§3.6, §3.7), manage() deletes pods of nodes with an
			// untolerated NoExecute taint whatever the budget (§3.4), and a
			// native surge DaemonSet deletes the available pods of nodes
			// that should no longer run it while more nodes hold an
			// available pod than should run one (§3.7 rule 3).
			misscheduled := a.Type == plan.ActionDelete && c.surgeMode() && c.native() && !runs[s.pod.Node] && availableNodes() > c.r.Workload.Replicas
			forced := kind == "DaemonSet" && (wasUnavailable || (a.Type == plan.ActionDelete && noExecute[s.pod.Node]) || misscheduled)
			// StatefulSet: phase 1 of a v1.37 Parallel update and
			// updateStrategy Recreate delete whatever the budget (§8).
			forced = forced || (c.stsPhase1() && wasUnavailable) || c.stsRecreate()
			// A rollout rollplan drives replaces an unavailable old pod
			// first, whatever the budget, for every kind.
			forced = forced || (c.driven() && wasUnavailable)
			for _, bs := range budgets {
				if !c.relevant(bs.b, s.pod) {
					continue
				}
				g := engine.GroupKey(s.pod, bs.b.GroupBy)
				if kind == "StatefulSet" && bs.b.Type == "unavailable" && !forced {
					cur := unavail(bs, g, s.pod, false)
					var pending []string
					if bs.b.PDB == "" && bs.b.GroupBy == "" {
						for _, m := range missing {
							if m.unavailable {
								pending = append(pending, m.name)
							}
						}
					}
					switch {
					case cur >= bs.b.Limit:
						c.add(RuleStatefulSetBudget, wi+1, a.Pod, "%s while budget %s%s already has %d unavailable of %d: upstream deletes nothing once unavailable ≥ maxUnavailable", a.Type, bs.b.Name, groupSuffix(bs.b, g), cur, bs.b.Limit)
					case cur+len(pending) >= bs.b.Limit:
						c.add(RuleSTSMissing, wi+1, a.Pod, "%s while budget %s (limit %d) has %d unavailable pod(s) plus missing replica(s) %s that the controller creates first and that are not available before %gs (upstream counts them, §4.3/§4.4/§4.7)", a.Type, bs.b.Name, bs.b.Limit, cur, strings.Join(pending, ", "), c.duration(plan.ActionRecreate))
					}
				}
			}
			fresh := map[int]bool{}
			groupsBefore := map[int]map[string]bool{}
			for bi, bs := range budgets {
				if bs.b.Type == "groups" {
					groupsBefore[bi] = inFlight(bs)
				}
				if g := engine.GroupKey(s.pod, bs.b.GroupBy); bs.b.Type == "groups" && !groupsBefore[bi][g] {
					fresh[bi] = true
				}
			}
			dur := c.duration(a.Type)
			switch {
			case a.Surge && kind == "DaemonSet" && wasUnavailable:
				laterSurge = append(laterSurge, i)
			case a.Surge:
				s.surging = true
			default:
				s.unavailable = true
			}
			s.deleting = a.Type == plan.ActionDelete
			s.until = t + dur
			waveEnd = math.Max(waveEnd, s.until)
			if forced {
				continue
			}
			for bi, bs := range budgets {
				if !c.relevant(bs.b, s.pod) {
					continue
				}
				g := engine.GroupKey(s.pod, bs.b.GroupBy)
				switch bs.b.Type {
				case "unavailable":
					if !a.Surge && !wasUnavailable {
						if n := unavail(bs, g, s.pod, true); n > bs.b.Limit {
							c.add(RuleBudgetUnavailable, wi+1, a.Pod, "%s makes %d pod(s) unavailable under budget %s%s, limit %d", a.Type, n, bs.b.Name, groupSuffix(bs.b, g), bs.b.Limit)
						}
					}
				case "surge":
					if a.Surge {
						if n := surging(bs); n > bs.b.Limit {
							c.add(RuleBudgetSurge, wi+1, a.Pod, "surge replacement makes %d surge pod(s) under budget %s, limit %d", n, bs.b.Name, bs.b.Limit)
						}
					}
				case "groups":
					if !wasInFlight && fresh[bi] {
						if n := len(inFlight(bs)); n > bs.b.Limit {
							c.add(RuleBudgetGroups, wi+1, a.Pod, "%s brings %s %q in flight: %d groups in flight under budget %s, limit %d", a.Type, bs.b.GroupBy, g, n, bs.b.Name, bs.b.Limit)
						}
					}
				}
			}
		}
		for _, i := range laterSurge {
			slots[i].surging = true
		}
		prevEnd = waveEnd
	}
	c.checkStall(slots, budgets, missing)
}

var stallNote = regexp.MustCompile(`the rollout stalls after (\S+): pod (\S+) cannot start`)

// checkStall: a stall the plan claims is real. At the stall time every
// slot due by then is available again; the first pod still waiting, in
// policy order, must then break some budget (or the StatefulSet rule) if it
// started. A DaemonSet pod that is unavailable would start whatever the
// budget, so it never stalls a plan.
func (c *checker) checkStall(slots []slot, budgets []budgetState, missing []slot) {
	var at float64
	found := false
	for _, n := range c.wp.Notes {
		if m := stallNote.FindStringSubmatch(n); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				return
			}
			at, found = d.Seconds(), true
		}
	}
	if !found {
		return
	}
	for i := range slots {
		if slots[i].until <= at {
			slots[i].unavailable, slots[i].surging = false, false
		}
	}
	pendingMissing := 0
	for _, m := range missing {
		if m.until > at {
			pendingMissing++
		}
	}
	placed := map[string]bool{}
	for _, w := range c.wp.Waves {
		for _, a := range w.Actions {
			placed[a.Pod] = true
		}
	}
	next := -1
	for i, p := range c.r.Pods {
		// Condemned StatefulSet pods do not wait in policy order: the
		// controller deletes them (see controllerDelete).
		if p.Updated || p.Terminating || !c.d.Pods[i].InScope || placed[p.Name] || c.condemned(&p) {
			continue
		}
		if next < 0 || c.podCompare(i, next) < 0 {
			next = i
		}
	}
	if next < 0 {
		return
	}
	p := &c.r.Pods[next]
	s := &slots[next]
	kind := c.r.Workload.Kind
	if kind == "DaemonSet" && s.unavailable {
		c.add(RuleStall, 0, p.Name, "the plan says the rollout stalls after %gs, but %s is an unavailable DaemonSet pod, which is replaced whatever the budget", at, p.Name)
		return
	}
	nodeRuns := map[string]bool{}
	for _, n := range c.r.Nodes {
		nodeRuns[n.Name] = n.ShouldRun
	}
	remove := kind == "DaemonSet" && len(c.r.Nodes) > 0 && !nodeRuns[p.Node]
	surgeMode := false
	for _, bs := range budgets {
		if bs.b.Type == "surge" && bs.b.Limit > 0 {
			surgeMode = kind == "DaemonSet"
		}
	}
	surge := surgeMode && !remove && c.d.Pods[next].Action != engine.InPlace
	count := func(pred func(*slot) bool) int {
		n := 0
		for k := range slots {
			if pred(&slots[k]) {
				n++
			}
		}
		return n
	}
	for _, bs := range budgets {
		if !c.relevant(bs.b, p) {
			continue
		}
		g := engine.GroupKey(p, bs.b.GroupBy)
		inGroup := func(x *slot) bool { return c.relevant(bs.b, x.pod) && engine.GroupKey(x.pod, bs.b.GroupBy) == g }
		switch bs.b.Type {
		case "unavailable":
			u := count(func(x *slot) bool { return x.unavailable && inGroup(x) && c.against(bs.b, x.pod, p, false) }) + bs.elsewhere
			if kind == "StatefulSet" && (u >= bs.b.Limit || (bs.b.PDB == "" && bs.b.GroupBy == "" && u+pendingMissing >= bs.b.Limit)) {
				return
			}
			// An unavailable pod adds nothing, but the planner touches
			// nothing while a budget is already over its limit: a real stall.
			if add := 1; !surge {
				if s.unavailable {
					add = 0
				}
				if u+add > bs.b.Limit {
					return
				}
			}
		case "surge":
			if surge && count(func(x *slot) bool { return x.surging && c.relevant(bs.b, x.pod) })+1 > bs.b.Limit {
				return
			}
		case "groups":
			groups := map[string]bool{}
			for k := range slots {
				if x := &slots[k]; (x.unavailable || x.surging) && c.relevant(bs.b, x.pod) {
					groups[engine.GroupKey(x.pod, bs.b.GroupBy)] = true
				}
			}
			if !groups[g] && len(groups)+1 > bs.b.Limit {
				return
			}
		}
	}
	c.add(RuleStall, 0, p.Name, "the plan says the rollout stalls after %gs, but by then every pod due is available again and %s, next in policy order, fits every budget (the planner's own estimates)", at, p.Name)
}

func groupSuffix(b plan.Budget, g string) string {
	if b.GroupBy == "" {
		return ""
	}
	return fmt.Sprintf(" (%s %q)", b.GroupBy, g)
}

// ---- Deployment ReplicaSet replay ----

type rsPod struct {
	name    string
	fact    int     // facts index; -1 for a pod the snapshot does not name
	availAt float64 // +Inf: never by itself
	exact   bool    // availAt is exact (not a pod created mid-plan, whose time has sync ticks)
	created bool    // created by the ReplicaSet during the plan (not a pod from the snapshot or its status)
}

type rsState struct {
	name  string
	spec  int
	isNew bool
	pods  []rsPod
}

// availableAt reports whether the pod is available at t for sure
// (certain) and possibly (maybe): pods the plan creates become available an
// estimate after their wave's start plus a few milliseconds of sync ticks,
// which the rounded start times hide.
func (p rsPod) availableAt(t float64) (certain, maybe bool) {
	if p.exact {
		return p.availAt <= t, p.availAt <= t
	}
	return p.availAt < t, p.availAt <= t
}

// replicaSets replays a Deployment's ScaleReplicaSet steps and checks
// upstream's bounds step by step: a scale-up never takes Σ spec.replicas
// past replicas + maxSurge nor the new ReplicaSet past replicas; a
// scale-down that removes an available pod never leaves fewer than
// replicas − maxUnavailable available (pod availability as the planner
// estimates it: snapshot pods from their state, created pods an estimated
// duration after their wave starts); a scale-down removes its ReplicaSet's
// pods in deletion order (deletionCompare); the plan ends at new = replicas, old = 0
// unless it says the rollout does not complete.
func (c *checker) replicaSets() {
	r := c.r
	dReplicas := r.Workload.Replicas
	surge, maxUnavail := 0, 0
	for _, b := range c.wp.Budgets {
		switch {
		case b.Name == "maxSurge" && b.Type == "surge":
			surge = b.Limit
		case b.Name == "maxUnavailable" && b.Type == "unavailable":
			maxUnavail = b.Limit
		}
	}
	minAvailable := dReplicas - maxUnavail
	podDur := c.duration(plan.ActionRecreate)
	initAvail := func(p *facts.Pod) float64 {
		switch {
		case p.Available:
			return 0
		case p.Ready && p.ReadySeconds >= 0:
			return math.Max(0, float64(int64(c.minReadySeconds(p))-p.ReadySeconds))
		case p.Updated:
			return podDur
		}
		return math.Inf(1)
	}
	var sets []*rsState
	byName := map[string]*rsState{}
	for _, f := range r.ReplicaSets {
		rs := &rsState{name: f.Name, spec: f.Replicas, isNew: f.New}
		var idx []int
		for i, p := range r.Pods {
			if p.Owner == f.Name && !p.Terminating && !p.Terminal {
				idx = append(idx, i)
			}
		}
		sort.SliceStable(idx, func(a, b int) bool { return c.deletionCompare(idx[a], idx[b]) < 0 })
		for _, i := range idx {
			rs.pods = append(rs.pods, rsPod{name: r.Pods[i].Name, fact: i, availAt: initAvail(&r.Pods[i]), exact: true})
		}
		if len(idx) == 0 {
			for k := 0; k < f.Replicas; k++ {
				at := 0.0
				if k >= f.AvailableReplicas {
					at = podDur
				}
				rs.pods = append(rs.pods, rsPod{fact: -1, availAt: at, exact: true})
			}
		}
		// The ReplicaSet controller first makes the pods match spec: it
		// removes the first pods in deletion order, or creates the missing ones.
		if n := len(rs.pods) - rs.spec; n > 0 {
			rs.pods = rs.pods[n:]
		}
		for len(rs.pods) < rs.spec {
			rs.pods = append(rs.pods, rsPod{fact: -1, availAt: podDur, exact: true, created: true})
		}
		sets = append(sets, rs)
		byName[rs.name] = rs
	}
	total := func() int {
		n := 0
		for _, rs := range sets {
			n += rs.spec
		}
		return n
	}
	available := func(t float64) (certain, maybe int) {
		for _, rs := range sets {
			for _, p := range rs.pods {
				cc, mm := p.availableAt(t)
				if cc {
					certain++
				}
				if mm {
					maybe++
				}
			}
		}
		return
	}
	for wi, w := range c.wp.Waves {
		t := c.starts[wi]
		for _, a := range w.Actions {
			if a.Type != plan.ActionScaleRS {
				c.add(RuleReplicaSet, wi+1, a.Pod, "%s in a Deployment plan that rolls ReplicaSets", a.Type)
				continue
			}
			if a.From == nil || a.To == nil {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "ScaleReplicaSet without from/to")
				continue
			}
			from, to := *a.From, *a.To
			rs := byName[a.ReplicaSet]
			if rs == nil {
				if a.ReplicaSet != r.Workload.UpdateRevision {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales a ReplicaSet that is neither in the snapshot nor the update revision %s", r.Workload.UpdateRevision)
				}
				rs = &rsState{name: a.ReplicaSet, isNew: a.ReplicaSet == r.Workload.UpdateRevision}
				sets = append(sets, rs)
				byName[rs.name] = rs
			}
			if from != rs.spec {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales from %d but the ReplicaSet is at %d replicas by then", from, rs.spec)
				rs.spec = from
				for len(rs.pods) < from {
					rs.pods = append(rs.pods, rsPod{fact: -1, availAt: math.Inf(1), exact: true})
				}
				if len(rs.pods) > from {
					rs.pods = rs.pods[len(rs.pods)-from:]
				}
			}
			if to < 0 {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales to %d", to)
				continue
			}
			switch {
			case to == from:
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales from %d to %d: a no-op", from, to)
			case to > from:
				if !rs.isNew {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales old ReplicaSet up from %d to %d", from, to)
				}
				if len(a.Pods) > 0 {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "a scale-up lists pods %v", a.Pods)
				}
				for k := from; k < to; k++ {
					rs.pods = append(rs.pods, rsPod{fact: -1, availAt: t + podDur, created: true})
				}
				rs.spec = to
				if n := total(); n > dReplicas+surge {
					c.add(RuleRSSurge, wi+1, a.ReplicaSet, "scaling up from %d to %d makes %d pods in all, above replicas %d + maxSurge %d", from, to, n, dReplicas, surge)
				}
				if rs.isNew && to > dReplicas {
					c.add(RuleRSSurge, wi+1, a.ReplicaSet, "scales the new ReplicaSet up to %d, above replicas %d", to, dReplicas)
				}
			case to < from:
				c.scaleDown(wi+1, t, rs, &a, minAvailable, dReplicas, maxUnavail, available)
			}
		}
	}
	if c.hasNote("does not complete") {
		return
	}
	for _, rs := range sets {
		switch {
		case rs.isNew && rs.spec != dReplicas:
			c.add(RuleRSFinal, 0, rs.name, "the plan ends with the new ReplicaSet at %d replicas, not %d, and does not say the rollout does not complete", rs.spec, dReplicas)
		case !rs.isNew && rs.spec != 0:
			c.add(RuleRSFinal, 0, rs.name, "the plan ends with old ReplicaSet %s at %d replicas and does not say the rollout does not complete", rs.name, rs.spec)
		}
	}
	if dReplicas > 0 {
		found := false
		for _, rs := range sets {
			found = found || rs.isNew
		}
		if !found {
			c.add(RuleRSFinal, 0, r.Workload.UpdateRevision, "the plan never creates the new ReplicaSet and does not say the rollout does not complete")
		}
	}
}

func (c *checker) minReadyZero() bool {
	if c.r.Workload.MinReadySeconds != 0 {
		return false
	}
	for _, rs := range c.r.ReplicaSets {
		if rs.MinReadySeconds != 0 {
			return false
		}
	}
	return true
}

func (c *checker) scaleDown(wave int, t float64, rs *rsState, a *plan.Action, minAvailable, dReplicas, maxUnavail int, available func(float64) (int, int)) {
	from, to := *a.From, *a.To
	removed := from - to
	if len(a.Pods) > removed {
		c.add(RuleReplicaSet, wave, rs.name, "scaling from %d to %d removes %d pods but lists %d", from, to, removed, len(a.Pods))
	}
	beforeCertain, _ := available(t)
	// Named pods: in this ReplicaSet, and the first ones in deletion order
	// among its named pods still there.
	var named []int // positions in rs.pods
	for _, name := range a.Pods {
		pos := -1
		for k, p := range rs.pods {
			if p.fact >= 0 && p.name == name {
				pos = k
			}
		}
		if pos < 0 {
			c.add(RuleReplicaSet, wave, name, "scaling ReplicaSet %s down removes a pod it does not hold at that point", rs.name)
			continue
		}
		named = append(named, pos)
	}
	removedNamed := map[int]bool{}
	for _, k := range named {
		removedNamed[k] = true
	}
	for _, k := range named {
		for j, p := range rs.pods {
			if p.fact >= 0 && !removedNamed[j] && c.deletionCompare(p.fact, rs.pods[k].fact) < 0 {
				c.add(RuleOrder, wave, rs.pods[k].name, "scaling ReplicaSet %s down removes it while pod %s (order key %s), earlier in deletion order, stays (its key %s)", rs.name, p.name, c.key(p.fact), c.key(rs.pods[k].fact))
				break
			}
		}
	}
	var readyRemoved []string
	for _, k := range named {
		if p := c.r.Pods[rs.pods[k].fact]; p.Ready && p.Scheduled && p.Phase == "Running" {
			readyRemoved = append(readyRemoved, p.Name)
		}
	}
	removedAvailable := []string{}
	for _, k := range named {
		if cc, _ := rs.pods[k].availableAt(t); cc {
			removedAvailable = append(removedAvailable, rs.pods[k].name)
		}
	}
	// Unnamed pods: the plan cannot name them; take the least available
	// first, which leaves the most pods available (the checker stays on the
	// safe side of what it cannot see).
	anon := removed - len(named)
	var rest []rsPod
	for k, p := range rs.pods {
		if !removedNamed[k] {
			rest = append(rest, p)
		}
	}
	if anon > 0 {
		var unnamed []int
		for k, p := range rest {
			if p.fact < 0 {
				unnamed = append(unnamed, k)
			}
		}
		if len(unnamed) < anon {
			c.add(RuleReplicaSet, wave, rs.name, "scaling from %d to %d removes %d pods; it names %d and only %d others exist", from, to, removed, len(named), len(unnamed))
			anon = len(unnamed)
		}
		sort.SliceStable(unnamed, func(x, y int) bool { return rest[unnamed[x]].availAt > rest[unnamed[y]].availAt })
		drop := map[int]bool{}
		for _, k := range unnamed[:anon] {
			drop[k] = true
			if cc, _ := rest[k].availableAt(t); cc {
				removedAvailable = append(removedAvailable, "(unnamed pod)")
			}
		}
		var kept []rsPod
		for k, p := range rest {
			if !drop[k] {
				kept = append(kept, p)
			}
		}
		rest = kept
	}
	rs.pods = rest
	rs.spec = to
	// Deletion rank against pods the plan cannot name (deployment.go: "not-
	// yet-available simulated pods first, as upstream ranks unready pods
	// first"; reference §2.10 rules 1–3: unassigned, Pending and not-Ready
	// pods go before Ready ones): a Ready pod is never removed while a pod
	// the ReplicaSet created is certainly not Ready yet (created pods are
	// Ready a recreate estimate after their creation, the planner's model).
	if len(readyRemoved) > 0 {
		for _, p := range rest {
			if readyAt := p.availAt - float64(c.r.Workload.MinReadySeconds); p.created && readyAt > t {
				c.add(RuleRSRank, wave, readyRemoved[0], "scaling ReplicaSet %s from %d to %d removes Ready pod(s) %s while a pod the ReplicaSet created at %gs, not Ready before %gs, stays (upstream deletes unassigned, pending and unready pods first)", rs.name, from, to, strings.Join(readyRemoved, ", "), p.availAt-c.duration(plan.ActionRecreate), readyAt)
				break
			}
		}
	}
	// Upstream keeps replicas − maxUnavailable available exactly when the
	// ReplicaSet's deletion rank (Ready-based) agrees with availability,
	// that is with minReadySeconds 0 everywhere; with minReadySeconds the
	// rank may delete a Ready pod that is available before one that is
	// Ready but not yet available, so the bound is not upstream's.
	if !c.minReadyZero() {
		return
	}
	_, afterMaybe := available(t)
	if len(removedAvailable) > 0 && afterMaybe < minAvailable && afterMaybe < beforeCertain {
		c.add(RuleRSAvailable, wave, rs.name, "scaling from %d to %d removes available pod(s) %s and leaves at most %d available, below replicas %d − maxUnavailable %d = %d", from, to, strings.Join(removedAvailable, ", "), afterMaybe, dReplicas, maxUnavail, minAvailable)
	}
}
