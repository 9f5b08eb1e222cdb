package plan

import (
	"fmt"
	"strings"
)

// Why each wave is cut where it is, and why a pod waits for a later one.
// Both come from the simulation that packs the waves, at the moment it
// packs them: the budgets a wave uses (Wave.Budgets) are the ledger once
// every action of the wave has started, the budget that binds
// (Wave.Binding) is the one the first pod kept out did not fit in.

// Wait says why a pod the plan places in wave N > 1 is not in wave N-1
// (Detail.Waited; `rollplan explain` prints it).
type Wait struct {
	// Wave: the wave the pod was kept out of, N-1.
	Wave int `json:"wave"`
	// Budget: the budget that was full; "" when something other than a
	// budget held the pod (Reason says what).
	Budget string `json:"budget,omitempty"`
	// Reason: what held it, with the budget's numbers: the wave's
	// Binding.Reason, or the pod's own reason.
	Reason string `json:"reason"`
	// Behind: the pod that did not fit, when it is not this one: pods go
	// in policy order, so every pod after it waits too.
	Behind string `json:"behind,omitempty"`
}

// kept is what held the pods left out of a wave of the pod simulator: a
// hold, the first pod that did not fit (blockedPod, the budget at index
// budget, why), or a misscheduled pod waiting for nodes.
type kept struct {
	hold       bool
	budget     int // index in the ledger's budgets, -1 for none
	reason     string
	blockedPod int // fact index, -1 for none
	// self and behind: the Wait of the blocked pod, and of the pods after
	// it (shared by every pod of the wave).
	self, behind *Wait
}

// binding makes a wave's Binding from what held it and what it waited
// for; nil when neither.
func (s *podSim) binding(k kept, waitsFor []string) *Binding {
	b := &Binding{Reason: k.reason, WaitsFor: waitsFor}
	if k.budget >= 0 {
		b.Budget = s.budgets[k.budget].Name
	}
	if b.Budget == "" && b.Reason == "" && len(b.WaitsFor) == 0 {
		return nil
	}
	return b
}

// keptRecord completes k for wave (its index) once the wave is packed:
// the waits of the pods it kept out.
func (s *podSim) keptRecord(k kept, wave int) kept {
	if k.blockedPod >= 0 {
		name := s.r.Pods[k.blockedPod].Name
		budget := ""
		if k.budget >= 0 {
			budget = s.budgets[k.budget].Name
		}
		k.self = &Wait{Wave: wave, Budget: budget, Reason: k.reason}
		k.behind = &Wait{Wave: wave, Budget: budget, Reason: k.reason, Behind: name}
	} else if k.reason != "" {
		k.self = &Wait{Wave: wave, Reason: k.reason}
		k.behind = k.self
	}
	return k
}

// waited records why pod pi, started in the wave being packed, was kept
// out of the wave before (s.prev); misscheduled: it waited for nodes.
func (s *podSim) waited(sim *simulation, pi int, misscheduled bool) {
	if len(sim.waves) == 0 {
		return
	}
	var w *Wait
	switch prev := &s.prev; {
	case prev.hold:
		w = prev.self
	case misscheduled:
		w = &Wait{Wave: len(sim.waves), Reason: "it waited until more nodes hold an available pod than should run one: a surge DaemonSet deletes the pod of a node that should no longer run it only then (§3.7 rule 3)"}
	case prev.blockedPod == pi:
		w = prev.self
	default:
		w = prev.behind
	}
	s.wait(sim, s.r.Pods[pi].Name, w)
}

// wait records w for pod name (nothing when w is nil).
func (s *podSim) wait(sim *simulation, name string, w *Wait) {
	if w == nil {
		return
	}
	if sim.waited == nil {
		sim.waited = map[string]*Wait{}
	}
	sim.waited[name] = w
}

// holdReason: why a hold kept every pod to update out of a wave.
func (s *podSim) holdReason(hold string) string {
	if hold == "replicas" {
		return fmt.Sprintf("replica(s) %s are not available, and an OrderedReady StatefulSet updates nothing until every replica is (processReplica, §4.4)", strings.Join(s.unavailableReplicas(), ", "))
	}
	return "condemned pod(s) go first, one at a time, each once every replica is available, and an OrderedReady StatefulSet updates nothing before they are gone (processCondemned, §4.4)"
}

// doneNames: the items completed since the last call that freed
// something (available again, or gone), by name.
func (s *podSim) doneNames() []string {
	if len(s.done) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.done))
	for _, e := range s.done {
		if m := s.items[e.item].run; m != nil {
			out = append(out, s.runNames(m, e.from, e.to)...)
			continue
		}
		out = append(out, s.items[e.item].name)
	}
	s.done = s.done[:0]
	return out
}
