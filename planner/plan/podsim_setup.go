package plan

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/facts"
)

// condemned: a StatefulSet pod with a valid ordinal outside the replicas
// (§4.3; pods whose name has no ordinal are ignored upstream).
func condemned(r *facts.Rollout, p *facts.Pod) bool {
	return r.Workload.Kind == "StatefulSet" && p.Ordinal >= 0 && (p.Index < 0 || p.Index >= r.Workload.Replicas)
}

// minReadySeconds is the minReadySeconds the pod's availability is judged
// with (§1.3): an old ReplicaSet's pods by the ReplicaSet's own value; the
// Deployment syncs its value onto the new ReplicaSet (§2.3).
func minReadySeconds(r *facts.Rollout, p *facts.Pod) int {
	if r.Workload.Kind == "Deployment" {
		for _, rs := range r.ReplicaSets {
			if rs.Name == p.Owner && !rs.New {
				return rs.MinReadySeconds
			}
		}
	}
	return r.Workload.MinReadySeconds
}

// availableAgainAt is when a pod unavailable at snapshot time is available
// again by itself: a terminating pod once its replacement is, a Ready pod
// once it has been Ready for minReadySeconds, an updated pod a recreate
// estimate from now; +Inf for any other.
func availableAgainAt(r *facts.Rollout, p *facts.Pod, recreate float64) float64 {
	switch {
	case p.Terminating:
		return recreate
	case p.Ready && p.ReadySeconds >= 0:
		return math.Max(0, float64(int64(minReadySeconds(r, p))-p.ReadySeconds))
	case p.Updated:
		return recreate
	}
	return math.Inf(1)
}

// setup records the pods already unavailable, the DaemonSet's empty nodes
// and the StatefulSet's missing replicas.
func (s *podSim) setup(sim *simulation) {
	r := s.r
	s.items = make([]item, 0, len(r.Pods))
	for i := range r.Pods {
		p := &r.Pods[i]
		ii := s.addItem(s.newItem(i, p, p.Name))
		if condemned(r, p) {
			s.condemned = append(s.condemned, ii)
			if p.Terminating {
				// Going, not replaced.
				s.items[ii].removing = true
				s.markUnavailable(ii, s.duration(ActionDelete))
			}
			continue
		}
		if p.Available {
			continue
		}
		s.markUnavailable(ii, availableAgainAt(r, p, s.duration(ActionRecreate)))
	}
	switch r.Workload.Kind {
	case "DaemonSet":
		paired := map[string]bool{}
		if s.surgeMode {
			s.replaced = surgeReplacements(r)
			for _, o := range sortedKeys(s.replaced) {
				paired[r.Pods[o].Node] = true
			}
		}
		for _, n := range r.Nodes {
			if n.ShouldRun && n.Pods == 0 && !s.nodeHasTerminatingPod(n.Name) {
				p := &facts.Pod{Node: n.Name, Zone: n.Zone, Labels: map[string]string{}}
				s.markUnavailable(s.addItem(s.newItem(-1, p, "node/"+n.Name)), s.duration(ActionRecreate))
				sim.notes = append(sim.notes, fmt.Sprintf("node %s should run a pod and has none: the DaemonSet controller creates it at the update revision; it counts against the budget until available", n.Name))
			}
			if n.Pods > 1 && n.ShouldContinueRunning && !paired[n.Name] {
				sim.notes = append(sim.notes, s.extraPodsNote(n))
			}
		}
		for _, o := range sortedKeys(s.replaced) {
			s.setupReplaced(sim, o, s.replaced[o])
		}
		s.setupPrepared()
	case "StatefulSet":
		s.missingReplicas(sim)
		sort.SliceStable(s.condemned, func(i, j int) bool {
			return r.Pods[s.items[s.condemned[i]].pod].Ordinal > r.Pods[s.items[s.condemned[j]].pod].Ordinal
		})
		s.condemnedNotes(sim)
	}
	if s.stsAbove {
		s.indexes = make([]int, 0, len(s.items))
		for _, it := range s.items {
			s.indexes = append(s.indexes, it.index)
		}
		slices.Sort(s.indexes)
		s.indexes = slices.Compact(s.indexes)
		for ii := range s.items {
			if s.items[ii].unavailable {
				s.countAbove(ii, s.items[ii].weight())
			}
		}
	}
}

// surgeReplacements: for a surge DaemonSet, the nodes that already hold an
// old pod and a pod at the update revision, as old pod → new pod (indexes
// in r.Pods): exactly one non-terminating pod of each (the new one not
// terminal: manage deletes a failed or succeeded pod first) on a node that
// may keep running the DaemonSet (a node with an untolerated NoExecute
// taint loses every pod, §3.4). Upstream keeps both (manage with surge,
// §3.4) and deletes the old pod once the new one is available, at once if
// the old one is not Ready; until then rollingUpdate counts the node as
// one surge pod (§3.7).
func surgeReplacements(r *facts.Rollout) map[int]int {
	cont := map[string]bool{}
	for _, n := range r.Nodes {
		cont[n.Name] = n.ShouldContinueRunning
	}
	olds, news := map[string][]int{}, map[string][]int{}
	for i, p := range r.Pods {
		if p.Node == "" || p.Terminating || (len(r.Nodes) > 0 && !cont[p.Node]) {
			continue
		}
		switch {
		case !p.Updated:
			olds[p.Node] = append(olds[p.Node], i)
		case !p.Terminal:
			news[p.Node] = append(news[p.Node], i)
		}
	}
	out := map[int]int{}
	for node, o := range olds {
		if n := news[node]; len(o) == 1 && len(n) == 1 {
			out[o[0]] = n[0]
		}
	}
	return out
}

// keptBeside: upstream keeps an old pod beside its replacement until the
// replacement is available only while the old pod is Ready (manage, §3.4);
// a failed or succeeded pod is deleted first.
func keptBeside(p *facts.Pod) bool {
	return p.Ready && !p.Terminal
}

func sortedKeys(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// setupReplaced: a node holding old pod o beside its replacement nw counts
// as one surge pod while o is kept and nw is not available (§3.7).
func (s *podSim) setupReplaced(sim *simulation, o, nw int) {
	r := s.r
	op, np := &r.Pods[o], &r.Pods[nw]
	if keptBeside(op) && !np.Available {
		s.addSurge(nw)
		sim.notes = append(sim.notes, fmt.Sprintf("node %s holds old pod %s beside %s at the update revision, not available yet: the node counts as one surge pod until it is, then the DaemonSet controller deletes %s (§3.4, §3.7)", op.Node, op.Name, np.Name, op.Name))
	}
	if !s.d.Pods[o].InScope && !r.Workload.Managed {
		sim.notes = append(sim.notes, fmt.Sprintf("pod %s is held out of the rollout, but node %s already runs %s at the update revision: the DaemonSet controller deletes %s once %s is available (at once if it is not Ready), whatever the plan (§3.4, §3.7)", op.Name, op.Node, np.Name, op.Name, np.Name))
	}
}

// extraPodsNote: what upstream does with a node holding more than one pod
// (manage, §3.4), beyond an old pod beside its replacement (setupReplaced).
func (s *podSim) extraPodsNote(n facts.Node) string {
	if s.surgeMode {
		return fmt.Sprintf("node %s holds %d pods: in its first sync the DaemonSet controller deletes the failed or succeeded ones, then keeps the oldest pod at the update revision and the oldest other pod and deletes the rest (manage, §3.4); while they are all there, its rolling update counts the node as one surge pod (§3.7)", n.Name, n.Pods)
	}
	return fmt.Sprintf("node %s holds %d pods: in its first sync the DaemonSet controller deletes the failed or succeeded ones, then keeps the oldest and deletes the others (manage, §3.4), whatever their revision; while they are all there, its rolling update counts the node as unavailable (§3.6)", n.Name, n.Pods)
}

// missingReplicas: replicas without a pod are created by the controller
// first (§4.3 placeholders, §4.4): all at once (Parallel) or one at a time,
// each once the previous is available (OrderedReady). They count as
// unavailable until available (§4.7; OrderedReady stops at them).
func (s *podSim) missingReplicas(sim *simulation) {
	r := s.r
	w := &r.Workload
	// The indexes pods hold, sorted: the gaps between them are the runs
	// of missing replicas (never one item per replica: spec.replicas may
	// be two billion with two pods).
	var held []int
	for _, p := range r.Pods {
		if p.Index >= 0 && p.Index < w.Replicas {
			held = append(held, p.Index)
		}
	}
	slices.Sort(held)
	held = slices.Compact(held)
	d := s.duration(ActionRecreate)
	var names []string
	k, total := 0, 0 // missing replicas before the run, in all
	addRun := func(lo, n int) {
		m := &missingRun{lo: lo, n: n, first: d}
		if s.monotonic {
			// One at a time, each once the previous is available.
			m.first, m.step = d*float64(k+1), d
		}
		ordinal := lo + w.OrdinalsStart
		p := &facts.Pod{Name: fmt.Sprintf("%s-%d", w.Name, ordinal), Ordinal: ordinal, Index: lo, Labels: map[string]string{}, PDBs: []string{}}
		it := s.newItem(-1, p, p.Name)
		it.run = m
		ii := s.addItem(it)
		s.runs = append(s.runs, ii)
		s.markUnavailable(ii, math.Inf(1))
		if len(names) <= runNamesShown {
			names = append(names, s.runNames(m, 0, n)...)
		}
		k += n
		total += n
	}
	next := 0
	for _, h := range held {
		if h > next {
			addRun(next, h-next)
		}
		next = h + 1
	}
	if next < w.Replicas {
		addRun(next, w.Replicas-next)
	}
	if total > 0 {
		how := "all at once (Parallel)"
		if s.monotonic {
			how = "one at a time, each once the previous is available (OrderedReady)"
		}
		list := strings.Join(names, ", ")
		if len(names) > runNamesShown {
			list = strings.Join(names[:runNamesShown], ", ") + ", …"
		}
		if total > runNamesShown {
			list += fmt.Sprintf(" (%d replicas)", total)
		}
		sim.notes = append(sim.notes, fmt.Sprintf("replica(s) %s have no pod: the StatefulSet controller creates them first, %s; they count as unavailable until available", list, how))
	}
}

func (s *podSim) condemnedNotes(sim *simulation) {
	if len(s.condemned) == 0 {
		return
	}
	var names []string
	for _, ii := range s.condemned {
		names = append(names, s.items[ii].name)
	}
	how := "all in its first sync (Parallel)"
	if s.monotonic {
		how = "one at a time from the highest ordinal, each once every replica is available (OrderedReady)"
		if !s.r.Workload.Managed {
			how += "; nothing is updated before they are gone"
		}
	}
	sim.notes = append(sim.notes, fmt.Sprintf("pod(s) %s are beyond the %s (condemned by a scale-down): the StatefulSet controller deletes them and never recreates them, %s; they count against no budget", strings.Join(names, ", "), plural.Count(s.r.Workload.Replicas, "replica", "replicas"), how))
}
