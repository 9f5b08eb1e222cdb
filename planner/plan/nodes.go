package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// Node preparation (decision point node_preparation): a DaemonSet that
// rollplan drives may have each node cordoned (and drained) before its
// daemon pod is updated, and uncordoned once the pod is available again.
// The simulation packs pods as usual; prepareNodes then adds the node
// actions around each pod action, in its wave. Preparation takes no time
// in the estimates.

// honoursNodePreparation: only rollplan apply prepares nodes, and it
// drives managed OnDelete DaemonSets; no upstream controller cordons.
func honoursNodePreparation(w *facts.Workload) bool {
	return w.Kind == "DaemonSet" && w.Managed && w.Strategy.Type == "OnDelete"
}

// nodePreparationWarnings: a node preparation answer that this workload
// does not honour is a warning, not an error: one policy serves every kind.
func nodePreparationWarnings(r *facts.Rollout, d *engine.Decisions) []string {
	w := &r.Workload
	if d.NodePreparation == "" || d.NodePreparation == engine.NodePrepNone || honoursNodePreparation(w) {
		return nil
	}
	if w.Kind != "DaemonSet" {
		return []string{fmt.Sprintf("the policy answers node_preparation %q, but only DaemonSets prepare nodes: ignored for this %s", d.NodePreparation, w.Kind)}
	}
	return []string{fmt.Sprintf("the policy answers node_preparation %q, but nodes are prepared only by rollplan apply, which drives DaemonSets with updateStrategy OnDelete annotated %s=\"true\"; the DaemonSet controller prepares none: ignored", d.NodePreparation, facts.AnnManaged)}
}

// cordonedBy is the AnnCordonedBy value rollplan writes for this workload.
func cordonedBy(r *facts.Rollout) string {
	return r.Workload.Namespace + "/" + r.Workload.Name
}

// setupPrepared marks the pods to update whose node rollplan has already
// cordoned for this DaemonSet (a run of apply stopped between the cordon
// and the pod's update, or waiting for a drain): they have been in flight
// since the cordon, so they count against the budgets from the start and
// go first, whatever the budget, as apply carries them out.
func (s *podSim) setupPrepared() {
	if !s.prep {
		return
	}
	ours := map[string]bool{}
	for _, n := range s.r.Nodes {
		if n.CordonedBy == cordonedBy(s.r) {
			ours[n.Name] = true
		}
	}
	if len(ours) == 0 {
		return
	}
	for i := range s.r.Pods {
		p := &s.r.Pods[i]
		_, replaced := s.replaced[i]
		if p.Updated || p.Terminating || !s.d.Pods[i].InScope || !ours[p.Node] || !s.nodeRuns[p.Node] || s.evicted(p) || replaced {
			continue
		}
		s.items[i].prepared = true
		if !s.items[i].unavailable {
			s.markUnavailable(i, math.Inf(1))
		}
	}
}

func (s *podSim) preparedReason(node string) string {
	return fmt.Sprintf("node %s is already cordoned for this DaemonSet (annotation %s=%s): its pod has been in flight since, so it goes first, whatever the budget", node, facts.AnnCordonedBy, cordonedBy(s.r))
}

// prepareNodes adds the node actions to the simulated waves: before the
// first InPlaceUpdate or Recreate of a node in a wave a CordonNode (and,
// for drain, a DrainNode), after its last an UncordonNode, unless someone
// else cordoned the node (it stays cordoned). A node rollplan cordoned
// for this DaemonSet gets its UncordonNode whatever the answer now; one
// with no pod action left (its pod updated, held or gone) gets it in the
// first wave, which rollplan apply carries out once the node's daemon pods
// run the update revision and are available.
func (s *podSim) prepareNodes(sim *simulation) {
	if !s.prep {
		return
	}
	r, prep := s.r, s.d.NodePreparation
	if prep == "" {
		prep = engine.NodePrepNone
	}
	by := cordonedBy(r)
	nodes := map[string]*facts.Node{}
	for i := range r.Nodes {
		nodes[r.Nodes[i].Name] = &r.Nodes[i]
	}
	podAction := func(a *Action) bool {
		return (a.Type == ActionInPlace || a.Type == ActionRecreate) && a.Node != ""
	}
	acted := map[string]bool{}
	for wi := range sim.waves {
		w := &sim.waves[wi]
		last := map[string]int{}
		for ai := range w.Actions {
			if a := &w.Actions[ai]; podAction(a) {
				last[a.Node] = ai
			}
		}
		var out []Action
		prepared := map[string]bool{} // nodes prepared in this wave
		for ai, a := range w.Actions {
			if !podAction(&a) {
				out = append(out, a)
				continue
			}
			n := nodes[a.Node]
			ours := n != nil && n.CordonedBy == by
			if prep == engine.NodePrepNone && !ours {
				out = append(out, a)
				continue
			}
			if !prepared[a.Node] {
				prepared[a.Node] = true
				if prep != engine.NodePrepNone {
					out = append(out, s.cordonAction(n, a, prep, ours))
				}
				if prep == engine.NodePrepDrain {
					out = append(out, s.drainAction(n, a))
				}
			}
			acted[a.Node] = true
			out = append(out, a)
			if last[a.Node] == ai && (ours || n == nil || !n.Unschedulable) {
				out = append(out, Action{Type: ActionUncordonNode, Node: a.Node, Reasons: []string{
					fmt.Sprintf("uncordon node %s once its daemon pod runs the update revision and is available: spec.unschedulable=false, annotation %s removed", a.Node, facts.AnnCordonedBy)}})
			}
		}
		w.Actions = out
	}
	var leftover []Action
	names := make([]string, 0, len(nodes))
	for name, n := range nodes {
		if n.CordonedBy == by && !acted[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		leftover = append(leftover, Action{Type: ActionUncordonNode, Node: name, Reasons: []string{s.leftoverReason(name)}})
	}
	if len(leftover) == 0 {
		return
	}
	if len(sim.waves) == 0 {
		sim.waves = []Wave{{Index: 1, Start: formatDuration(0), Actions: leftover, Budgets: s.initial}}
		return
	}
	sim.waves[0].Actions = append(leftover, sim.waves[0].Actions...)
}

func (s *podSim) cordonAction(n *facts.Node, a Action, prep string, ours bool) Action {
	c := Action{Type: ActionCordonNode, Node: a.Node}
	switch {
	case ours && n.Unschedulable:
		c.Reasons = []string{fmt.Sprintf("node %s is already cordoned for this DaemonSet (annotation %s=%s): nothing to write", a.Node, facts.AnnCordonedBy, cordonedBy(s.r))}
	case n != nil && n.Unschedulable:
		c.Reasons = []string{fmt.Sprintf("node %s is already cordoned, not by rollplan for this DaemonSet: it counts as prepared, nothing is written, and it stays cordoned after the update", a.Node)}
	default:
		c.Reasons = []string{fmt.Sprintf("policy node_preparation %q: cordon node %s before pod %s is updated: spec.unschedulable=true and annotation %s=%s", prep, a.Node, a.Pod, facts.AnnCordonedBy, cordonedBy(s.r))}
	}
	return c
}

func (s *podSim) drainAction(n *facts.Node, a Action) Action {
	d := Action{Type: ActionDrainNode, Node: a.Node}
	why := fmt.Sprintf("policy node_preparation \"drain\": before pod %s is updated, evict (Eviction API, PodDisruptionBudgets honoured) every pod on node %s that no DaemonSet owns and that is not a mirror pod, and wait until they are gone", a.Pod, a.Node)
	switch {
	case n == nil:
		why += "; the snapshot has no Node objects, so which pods run there is unknown: rollplan apply lists the node's pods when it drains"
	case len(n.DrainPods) == 0:
		why += "; the snapshot holds none on this node, but it may not hold every pod of the node: rollplan apply lists the node's pods when it drains"
	default:
		d.Pods = append([]string(nil), n.DrainPods...)
		why += fmt.Sprintf("; the snapshot holds %d (listed), but it may not hold every pod of the node: rollplan apply lists the node's pods when it drains", len(n.DrainPods))
	}
	d.Reasons = []string{why}
	return d
}

// leftoverReason: why a node rollplan cordoned for this DaemonSet, with no
// pod action in the plan, is uncordoned, and when (apply's condition:
// every daemon pod on it at the update revision and available).
func (s *podSim) leftoverReason(node string) string {
	r := s.r
	head := fmt.Sprintf("node %s is still cordoned for this DaemonSet (annotation %s=%s)", node, facts.AnnCordonedBy, cordonedBy(r))
	var held, waiting, done []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Node != node || p.Terminating || p.Terminal {
			continue
		}
		switch {
		case !p.Updated && !s.d.Pods[i].InScope:
			held = append(held, fmt.Sprintf("%s (%s)", p.Name, s.d.Pods[i].HeldReason))
		case !p.Updated || !p.Available:
			waiting = append(waiting, p.Name)
		default:
			done = append(done, p.Name)
		}
	}
	switch {
	case len(held) > 0:
		return fmt.Sprintf("%s, but its pod is held out of the rollout: %s: uncordon it", head, strings.Join(held, ", "))
	case len(waiting) > 0:
		return fmt.Sprintf("%s: uncordon it once pod %s runs the update revision and is available", head, strings.Join(waiting, ", "))
	case len(done) > 0:
		return fmt.Sprintf("%s, and pod %s runs the update revision and is available: uncordon it", head, strings.Join(done, ", "))
	case s.nodeRuns[node]:
		return fmt.Sprintf("%s and has no daemon pod yet: uncordon it once the pod the DaemonSet controller creates there is available", head)
	}
	return fmt.Sprintf("%s, and the DaemonSet should no longer run there: uncordon it", head)
}
