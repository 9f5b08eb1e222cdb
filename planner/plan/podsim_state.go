package plan

import (
	"container/heap"
	"math"

	"github.com/rollplan/rollplan/planner/facts"
)

// simulation is the outcome of rolling a workload forward.
type simulation struct {
	waves    []Wave
	end      float64
	notes    []string
	warnings []string
	// stall: why the pods left to update are in no wave, when the
	// simulated rollout stops short ("" when it completes); blocked: why
	// a particular pod is in no wave, when that is something else.
	stall string
	// stalled: the same as the plan says it (WorkloadPlan.Stalled).
	stalled *Stall
	blocked map[string]string
	// waited: why each pod placed in wave N > 1 was not in wave N-1
	// (Detail.Waited).
	waited map[string]*Wait
	// removed: pods to update that a controller deletes outside the
	// plan's actions, and nothing replaces (a ReplicaSet holding more
	// pods than its replicas).
	removed []string
}

// item is a pod, or a virtual slot that counts against budgets: a DaemonSet
// node that should run a pod and has none, or a StatefulSet replica without
// a pod (the controller creates both first).
type item struct {
	pod      int // index in facts, -1 for a virtual slot
	name     string
	node     string
	index    int // StatefulSet: replica index (ordinal − start) of pods and missing replicas; -1 otherwise
	groups   []string
	relevant []bool // per budget
	// unavailable: counts against the unavailable budgets until `until`;
	// surging: the new pod is on its way, the old one still serves.
	unavailable bool
	surging     bool
	// removing: the pod is deleted and not replaced; gone once that completes.
	removing bool
	gone     bool
	until    float64
	// prepared: a DaemonSet pod to update on a node rollplan already
	// cordoned for this rollout (setupPrepared): in flight since then.
	prepared bool
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

func (s *podSim) newItem(pod int, p *facts.Pod, name string) item {
	it := item{pod: pod, name: name, node: p.Node, index: -1, groups: make([]string, len(s.budgets)), relevant: make([]bool, len(s.budgets))}
	if s.r.Workload.Kind == "StatefulSet" {
		it.index = p.Index
	}
	s.place(p, pod >= 0 && condemned(s.r, p), it.groups, it.relevant)
	return it
}

func (s *podSim) addItem(it item) int {
	s.items = append(s.items, it)
	ii := len(s.items) - 1
	s.trackNode(ii, false)
	return ii
}

// trackNode keeps availNodes (DaemonSet) in step with an item's state; was
// is whether the item counted as available before the change.
func (s *podSim) trackNode(ii int, was bool) {
	if s.nodeAvail == nil {
		return
	}
	it := &s.items[ii]
	now := !it.unavailable && !it.gone
	switch {
	case now && !was:
		if s.nodeAvail[it.node]++; s.nodeAvail[it.node] == 1 {
			s.availNodes++
		}
	case was && !now:
		if s.nodeAvail[it.node]--; s.nodeAvail[it.node] == 0 {
			s.availNodes--
		}
	}
}

func (s *podSim) available(ii int) bool {
	return !s.items[ii].unavailable && !s.items[ii].gone
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

func (s *podSim) markUnavailable(ii int, until float64) {
	it := &s.items[ii]
	was := s.available(ii)
	if !it.unavailable {
		it.unavailable = true
		s.down(it.groups, it.relevant)
		if s.stsAbove && s.indexes != nil {
			s.countAbove(ii, 1)
		}
		if s.isReplica(ii) {
			s.replicasDown++
		}
	}
	it.until = until
	s.trackNode(ii, was)
	if !math.IsInf(until, 1) {
		heap.Push(&s.heap, event{at: until, item: ii})
	}
}

func (s *podSim) startSurge(ii int, until float64) {
	s.addSurge(ii)
	s.items[ii].until = until
	heap.Push(&s.heap, event{at: until, item: ii})
}

// addSurge: an unavailable pod at the update revision beside the old pod
// it replaces is a surge pod too until it is available (§3.7); complete
// ends both.
func (s *podSim) addSurge(ii int) {
	it := &s.items[ii]
	if it.surging {
		return
	}
	it.surging = true
	s.ledger.surging(it.groups, it.relevant, it.unavailable)
}

// retire deletes an old pod whose node its replacement serves (a surge
// DaemonSet, see surgeReplacements): it counts against nothing from now on
// (upstream ignores deleting pods, §3.6) and is gone once terminated.
func (s *podSim) retire(ii int, t float64) float64 {
	it := &s.items[ii]
	was := s.available(ii)
	s.release(ii)
	it.unavailable, it.surging = false, false
	it.removing, it.gone = true, true
	s.trackNode(ii, was)
	it.until = t + s.duration(ActionDelete)
	heap.Push(&s.heap, event{at: it.until, item: ii})
	return it.until
}

// complete: the item's pod is available again (at the update revision), or
// gone for good when it was deleted without replacement.
func (s *podSim) complete(ii int) {
	it := &s.items[ii]
	was := s.available(ii)
	s.release(ii)
	it.unavailable, it.surging = false, false
	if it.removing {
		it.gone = true
	}
	s.trackNode(ii, was)
}

// release takes the item out of the counts it is in (unavailable, in
// flight, surge).
func (s *podSim) release(ii int) {
	it := &s.items[ii]
	s.ledger.release(it.groups, it.relevant, it.unavailable, it.surging)
	if it.unavailable && s.stsAbove {
		s.countAbove(ii, -1)
	}
	if it.unavailable && s.isReplica(ii) {
		s.replicasDown--
	}
}

// completeDue completes every item whose event is due by t.
func (s *podSim) completeDue(t float64) {
	for s.heap.Len() > 0 && s.heap[0].at <= t {
		e := heap.Pop(&s.heap).(event)
		if it := &s.items[e.item]; it.until == e.at {
			if it.unavailable || it.surging {
				s.done = append(s.done, e.item)
			}
			s.complete(e.item)
		}
	}
}

// isReplica: a StatefulSet pod or missing replica with an index in
// 0..replicas-1.
func (s *podSim) isReplica(ii int) bool {
	it := &s.items[ii]
	return s.upstreamSTS && it.index >= 0 && it.index < s.r.Workload.Replicas
}

// unavailableReplicas: the StatefulSet replicas (any index, missing ones
// included) that are unavailable: processReplica stops a monotonic sync at
// the first (§4.4). replicasDown counts them.
func (s *podSim) unavailableReplicas() []string {
	var out []string
	for i := range s.items {
		if it := &s.items[i]; it.unavailable && it.index >= 0 && it.index < s.r.Workload.Replicas {
			out = append(out, it.name)
		}
	}
	return out
}

// condemnedLeft: condemned pods still there (OrderedReady waits for them).
func (s *podSim) condemnedLeft() bool {
	for _, ii := range s.condemned {
		if !s.items[ii].gone {
			return true
		}
	}
	return false
}

// deletePod starts deleting a pod that is not replaced.
func (s *podSim) deletePod(ii int, t float64) float64 {
	until := t + s.duration(ActionDelete)
	s.items[ii].removing = true
	s.markUnavailable(ii, until)
	return until
}
