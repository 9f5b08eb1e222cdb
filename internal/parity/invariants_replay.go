package parity

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
)

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
