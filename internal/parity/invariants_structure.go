package parity

import (
	"math"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

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
