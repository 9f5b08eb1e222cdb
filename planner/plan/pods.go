package plan

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// simulation is the outcome of rolling a workload forward.
type simulation struct {
	waves    []Wave
	end      float64
	notes    []string
	warnings []string
}

// item is a pod, or a virtual slot that counts against budgets (a DaemonSet
// node that should run a pod and has none).
type item struct {
	pod         int // index in facts, -1 for a virtual slot
	name        string
	groups      []string // per budget
	relevant    []bool   // per budget
	unavailable bool
	surging     bool
	until       float64
}

type event struct {
	at   float64
	item int
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].item < e[j].item
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// podSim packs pods into waves under every budget, in policy order.
type podSim struct {
	r       *facts.Rollout
	d       *engine.Decisions
	o       Options
	budgets []Budget
	items   []item
	heap    events
	// counters per budget: group → unavailable items (unavailable budgets)
	// or items in flight (group budgets); surge: surge items in flight.
	unavail  []map[string]int
	inFlight []map[string]int
	surge    []int
	// elsewhere: a PDB's unavailable pods outside the workload.
	elsewhere []int
	// Kind rules.
	upstreamSTS bool // StatefulSet: replacing an unavailable pod spends budget too (§4.7)
	dsForced    bool // DaemonSet: unavailable old pods are replaced whatever the budget (§3.6)
	surgeMode   bool // DaemonSet maxSurge > 0: Recreate creates the new pod first (§3.7)
	counts      func(p *facts.Pod) bool
	extra       []int // per budget: budget spent this wave on already-unavailable pods (upstreamSTS)
}

func simulatePods(r *facts.Rollout, d *engine.Decisions, o Options) *simulation {
	s := &podSim{r: r, d: d, o: o, counts: func(*facts.Pod) bool { return true }}
	for _, b := range resolveBudgets(r, d) {
		if !b.Advisory {
			s.budgets = append(s.budgets, b)
		}
	}
	w := &r.Workload
	switch w.Kind {
	case "StatefulSet":
		s.upstreamSTS = true
		gateOff := !r.FeatureGates["MaxUnavailableStatefulSet"] && !w.Managed
		if gateOff && w.PodManagementPolicy == "Parallel" {
			// Gate off, Parallel: only pods at or above the partition block (§4.5).
			s.counts = func(p *facts.Pod) bool { return p.Index >= w.Strategy.Partition }
		}
	case "DaemonSet":
		s.dsForced = true
		for _, b := range s.budgets {
			if b.Type == "surge" && b.Limit > 0 {
				s.surgeMode = true
			}
		}
	}
	n := len(s.budgets)
	s.unavail, s.inFlight, s.surge, s.elsewhere, s.extra = make([]map[string]int, n), make([]map[string]int, n), make([]int, n), make([]int, n), make([]int, n)
	for bi, b := range s.budgets {
		s.unavail[bi], s.inFlight[bi] = map[string]int{}, map[string]int{}
		for _, pdb := range r.PDBs {
			if b.PDB != "" && pdb.Name == b.PDB {
				s.elsewhere[bi] = pdb.UnavailableElsewhere
			}
		}
	}
	sim := &simulation{}
	s.setup(sim)
	s.run(sim)
	return sim
}

func (s *podSim) newItem(pod int, p *facts.Pod, name string) item {
	it := item{pod: pod, name: name, groups: make([]string, len(s.budgets)), relevant: make([]bool, len(s.budgets))}
	for bi, b := range s.budgets {
		it.groups[bi] = engine.GroupKey(p, b.GroupBy)
		it.relevant[bi] = (b.PDB == "" || slices.Contains(p.PDBs, b.PDB)) && (b.Type != "unavailable" || s.counts(p))
	}
	return it
}

func (s *podSim) duration(action string) float64 {
	switch action {
	case ActionInPlace:
		return float64(s.o.InPlaceSeconds + s.r.Workload.MinReadySeconds)
	case ActionDelete:
		return float64(s.o.TerminateSeconds)
	}
	return float64(s.o.RecreateSeconds + s.r.Workload.MinReadySeconds)
}

// setup records the pods already unavailable and the DaemonSet's empty nodes.
func (s *podSim) setup(sim *simulation) {
	r := s.r
	for i := range r.Pods {
		p := &r.Pods[i]
		it := s.newItem(i, p, p.Name)
		s.items = append(s.items, it)
		if p.Available {
			continue
		}
		until := math.Inf(1)
		switch {
		case p.Ready && p.ReadySeconds >= 0:
			until = math.Max(0, float64(int64(r.Workload.MinReadySeconds)-p.ReadySeconds))
		case p.Terminating || p.Updated:
			until = s.duration(ActionRecreate)
		}
		s.markUnavailable(len(s.items)-1, until)
	}
	if r.Workload.Kind == "DaemonSet" {
		for _, n := range r.Nodes {
			if n.ShouldRun && n.Pods == 0 && !s.nodeHasTerminatingPod(n.Name) {
				p := &facts.Pod{Node: n.Name, Zone: n.Zone, Labels: map[string]string{}}
				s.items = append(s.items, s.newItem(-1, p, "node/"+n.Name))
				s.markUnavailable(len(s.items)-1, s.duration(ActionRecreate))
				sim.notes = append(sim.notes, fmt.Sprintf("node %s should run a pod and has none: the DaemonSet controller creates it at the update revision; it counts against the budget until available", n.Name))
			}
			if n.Pods > 1 {
				sim.notes = append(sim.notes, fmt.Sprintf("node %s holds %d pods: upstream counts it as unavailable until the controller removes the extra pods", n.Name, n.Pods))
			}
		}
	}
}

func (s *podSim) nodeHasTerminatingPod(node string) bool {
	for _, p := range s.r.Pods {
		if p.Node == node && p.Terminating {
			return true
		}
	}
	return false
}

func (s *podSim) markUnavailable(ii int, until float64) {
	it := &s.items[ii]
	if !it.unavailable {
		it.unavailable = true
		for bi := range s.budgets {
			if !it.relevant[bi] {
				continue
			}
			s.unavail[bi][it.groups[bi]]++
			s.inFlight[bi][it.groups[bi]]++
		}
	}
	it.until = until
	if !math.IsInf(until, 1) {
		heap.Push(&s.heap, event{at: until, item: ii})
	}
}

func (s *podSim) startSurge(ii int, until float64) {
	it := &s.items[ii]
	it.surging, it.until = true, until
	for bi := range s.budgets {
		if !it.relevant[bi] {
			continue
		}
		s.inFlight[bi][it.groups[bi]]++
		if s.budgets[bi].Type == "surge" {
			s.surge[bi]++
		}
	}
	heap.Push(&s.heap, event{at: until, item: ii})
}

// complete: the item's pod is available again (at the update revision).
func (s *podSim) complete(ii int) {
	it := &s.items[ii]
	for bi := range s.budgets {
		if !it.relevant[bi] {
			continue
		}
		if it.unavailable {
			s.unavail[bi][it.groups[bi]]--
		}
		if it.unavailable || it.surging {
			s.inFlight[bi][it.groups[bi]]--
			if s.inFlight[bi][it.groups[bi]] == 0 {
				delete(s.inFlight[bi], it.groups[bi])
			}
		}
		if it.surging && s.budgets[bi].Type == "surge" {
			s.surge[bi]--
		}
	}
	it.unavailable, it.surging = false, false
}

// fits reports whether starting the item now keeps every budget, and if
// not, which budget binds.
func (s *podSim) fits(ii int, surge bool) (bool, string) {
	it := &s.items[ii]
	for bi, b := range s.budgets {
		if !it.relevant[bi] {
			continue
		}
		g := it.groups[bi]
		switch b.Type {
		case "unavailable":
			if surge {
				continue
			}
			cur := s.unavail[bi][g] + s.elsewhere[bi]
			add := 1
			if it.unavailable {
				add = 0
				if s.upstreamSTS {
					add = 1 + s.extra[bi]
				}
			}
			if cur+add > b.Limit {
				return false, b.Name
			}
		case "surge":
			if surge && s.surge[bi]+1 > b.Limit {
				return false, b.Name
			}
		case "groups":
			if s.inFlight[bi][g] == 0 && len(s.inFlight[bi])+1 > b.Limit {
				return false, b.Name
			}
		}
	}
	return true, ""
}

func (s *podSim) run(sim *simulation) {
	r, d := s.r, s.d
	nodeRuns := map[string]bool{}
	for _, n := range r.Nodes {
		nodeRuns[n.Name] = n.ShouldRun
	}
	var pending []int
	for i, p := range r.Pods {
		if !p.Updated && d.Pods[i].InScope && !p.Terminating {
			pending = append(pending, i)
		}
	}
	pending = ordered(r, d, pending)
	t := 0.0
	for step := 0; len(pending) > 0; step++ {
		for bi := range s.extra {
			s.extra[bi] = 0
		}
		var actions []Action
		waveEnd := t
		var rest []int
		blocked := ""
		for _, pi := range pending {
			if blocked != "" {
				rest = append(rest, pi)
				continue
			}
			p := &r.Pods[pi]
			pd := &d.Pods[pi]
			it := &s.items[pi]
			forced := s.dsForced && it.unavailable
			// A DaemonSet pod on a node that should no longer run it is
			// deleted and not replaced (§3.6); it uses budget while it goes.
			remove := s.r.Workload.Kind == "DaemonSet" && len(r.Nodes) > 0 && !nodeRuns[p.Node]
			surge := s.surgeMode && pd.Action == engine.Recreate && !remove
			if !forced {
				ok, binding := s.fits(pi, surge)
				if !ok {
					blocked = binding
					rest = append(rest, pi)
					continue
				}
			}
			if s.upstreamSTS && it.unavailable {
				for bi := range s.budgets {
					if it.relevant[bi] {
						s.extra[bi]++
					}
				}
			}
			a := Action{Reasons: append([]string(nil), pd.Reasons...)}
			switch {
			case remove:
				a.Type = ActionDelete
				a.Reasons = []string{fmt.Sprintf("node %s should no longer run this DaemonSet (selector, affinity or an untolerated taint): the pod is deleted and not recreated", p.Node)}
			case pd.Action == engine.InPlace:
				a.Type = ActionInPlace
			default:
				a.Type = ActionRecreate
				a.Surge = surge
			}
			a.Pod = p.Name
			if r.Workload.Kind == "DaemonSet" {
				a.Node = p.Node
			}
			if forced {
				a.Reasons = append([]string{"unavailable old pod: upstream replaces it whatever the budget, and it counts against the budget"}, a.Reasons...)
			}
			until := t + s.duration(a.Type)
			if surge {
				s.startSurge(pi, until)
			} else {
				s.markUnavailable(pi, until)
			}
			waveEnd = math.Max(waveEnd, until)
			actions = append(actions, a)
		}
		pending = rest
		if len(actions) > 0 {
			sim.waves = append(sim.waves, Wave{Index: len(sim.waves) + 1, Start: formatDuration(t), Actions: actions})
		}
		if len(pending) == 0 {
			break
		}
		// Advance time: wave pacing waits for the whole wave; rolling
		// refills at the first completion.
		next := math.Inf(1)
		if d.Pacing == engine.PacingWave && len(actions) > 0 {
			next = waveEnd
		} else if s.heap.Len() > 0 {
			next = s.heap[0].at
		}
		if math.IsInf(next, 1) || next <= t && len(actions) == 0 {
			sim.notes = append(sim.notes, fmt.Sprintf("the rollout stalls after %s: pod %s cannot start without exceeding budget %s, and nothing in flight frees it", formatDuration(t), r.Pods[pending[0]].Name, blocked))
			break
		}
		for s.heap.Len() > 0 && s.heap[0].at <= next {
			e := heap.Pop(&s.heap).(event)
			if s.items[e.item].until == e.at {
				s.complete(e.item)
			}
		}
		t = next
	}
	// The rollout ends when the last pod in flight is available.
	end := t
	for _, e := range s.heap {
		end = math.Max(end, e.at)
	}
	sim.end = end
}
