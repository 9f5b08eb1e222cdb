package plan

import (
	"container/heap"
	"fmt"
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
	// err: the workload cannot be planned within rollplan's bounds.
	err error
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
	// run: a run of missing StatefulSet replicas counted as one item (nil
	// for a pod), so that the work never grows with spec.replicas.
	run *missingRun
}

// missingRun: consecutive StatefulSet replica indexes lo..lo+n-1 that no
// pod holds. The controller creates them; unit j (0-based) is available
// at first+j*step (step 0: all at once, Parallel). Until then each unit
// counts as one unavailable replica. The item's until is the next time
// the run can change what the packing decides (nextRunEvent), not every
// unit's time: a run of two billion replicas costs a few events.
type missingRun struct {
	lo, n int
	first float64
	step  float64
	done  int // units available so far
}

// due: how many of the run's units are available by t.
func (m *missingRun) due(t float64) int {
	switch {
	case t < m.first:
		return 0
	case m.step == 0:
		return m.n
	}
	return min(m.n, int((t-m.first)/m.step)+1)
}

// dueBefore: how many of the run's units are available before t.
func (m *missingRun) dueBefore(t float64) int {
	k := m.due(t)
	// Units are due at exact products of integers: at most one unit (or,
	// all at once, the whole run) is due at t itself.
	if k > 0 && m.at(k-1) >= t {
		if m.step == 0 {
			return 0
		}
		k--
	}
	return k
}

// at: when unit j is available.
func (m *missingRun) at(j int) float64 { return m.first + float64(j)*m.step }

// last: when the run's last unit is available.
func (m *missingRun) last() float64 { return m.at(m.n - 1) }

// weight: the units an item counts for while unavailable: a pod counts
// one, a run of missing replicas the units not yet available.
func (it *item) weight() int {
	if it.run != nil {
		return it.run.n - it.run.done
	}
	return 1
}

// doneEntry: what completeDue freed, for the next wave's waitsFor: an
// item, or units from..to-1 of a run of missing replicas.
type doneEntry struct {
	item     int
	from, to int
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
		w := it.weight()
		s.down(it.groups, it.relevant, w)
		if s.stsAbove && s.indexes != nil {
			s.countAbove(ii, w)
		}
		if s.isReplica(ii) {
			s.replicasDown += w
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
	w := 0
	if it.unavailable {
		w = it.weight()
	}
	s.ledger.release(it.groups, it.relevant, w, it.surging)
	if w > 0 && s.stsAbove {
		s.countAbove(ii, -w)
	}
	if w > 0 && s.isReplica(ii) {
		s.replicasDown -= w
	}
}

// completeDue completes every item whose event is due by t, and the units
// of every run of missing replicas available by t, in the order of their
// times (at the same time, pods first: the runs' items come after theirs).
//
// A unit has no event of its own (scheduleRuns), but its time was a step
// of the simulation all the same, and a step names in done only what
// became available since the step before. quiet: t is the next event, so
// every unit due before t was a step where nothing could start; only the
// units due at t are named, as those steps would have left it. Otherwise
// (t is the end of a wave the simulation waits for) every unit due by t
// is named.
func (s *podSim) completeDue(t float64, quiet bool) {
	for s.heap.Len() > 0 && s.heap[0].at <= t {
		s.settleRuns(s.heap[0].at, true, quiet, t)
		e := heap.Pop(&s.heap).(event)
		if it := &s.items[e.item]; it.until == e.at {
			if it.run != nil {
				s.settleRuns(e.at, false, quiet, t)
				continue
			}
			if it.unavailable || it.surging {
				s.done = append(s.done, doneEntry{item: e.item})
			}
			s.complete(e.item)
		}
	}
	s.settleRuns(t, false, quiet, t)
}

// settleRuns settles every run, in item order, up to at (strict: the units
// due before at).
func (s *podSim) settleRuns(at float64, strict, quiet bool, t float64) {
	for _, ii := range s.runs {
		s.settleRun(ii, at, strict, quiet, t)
	}
}

// settleRun makes the run's units available by at available (strict:
// before at), naming in done those due at t when quiet (see completeDue).
func (s *podSim) settleRun(ii int, at float64, strict, quiet bool, t float64) {
	it := &s.items[ii]
	m := it.run
	due := m.due(at)
	if strict {
		due = m.dueBefore(at)
	}
	k := due - m.done
	if k <= 0 || !it.unavailable {
		return
	}
	if from := m.done; quiet {
		from = max(from, m.dueBefore(t))
		if from < due {
			s.done = append(s.done, doneEntry{item: ii, from: from, to: due})
		}
	} else {
		s.done = append(s.done, doneEntry{item: ii, from: from, to: due})
	}
	s.ledger.release(it.groups, it.relevant, k, false)
	if s.stsAbove {
		s.countAbove(ii, -k)
	}
	if s.isReplica(ii) {
		s.replicasDown -= k
	}
	m.done += k
	if m.done == m.n {
		it.unavailable = false
	}
}

// scheduleRuns sets each run's next event: the run's end (the last replica
// available: an OrderedReady set waits for every replica, and a grouped
// budget frees the run's group only then), or, sooner, the time enough of
// its units are available for an unavailability budget that is full in
// the run's group to take one more pod. Between those times the units
// change nothing the packing decides, so they need no step of their own.
func (s *podSim) scheduleRuns(t float64) {
	for _, ii := range s.runs {
		it := &s.items[ii]
		if !it.unavailable {
			continue
		}
		m := it.run
		next := m.last()
		for bi, b := range s.budgets {
			if !it.relevant[bi] || b.Type != "unavailable" {
				continue
			}
			cur := s.unavailableIn(bi, it.groups[bi])
			if s.stsAbove {
				// Only replicas above a pod hold it (§4.5): a run holds
				// the pods below it until it is gone.
				continue
			}
			if free := cur - (b.Limit - 1); free > 0 && free < m.n-m.done {
				next = math.Min(next, m.at(m.done+free-1))
			}
		}
		next = math.Max(next, t)
		if next != it.until {
			it.until = next
			heap.Push(&s.heap, event{at: next, item: ii})
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
			if it.run != nil {
				out = append(out, s.runNames(it.run, it.run.done, it.run.n)...)
				continue
			}
			out = append(out, it.name)
		}
	}
	return out
}

// runNames names units from..to-1 of a run of missing replicas: each
// name for a few, else the first and the last with the count, so that no
// list grows with spec.replicas.
func (s *podSim) runNames(m *missingRun, from, to int) []string {
	name := func(j int) string {
		return fmt.Sprintf("%s-%d", s.r.Workload.Name, m.lo+j+s.r.Workload.OrdinalsStart)
	}
	if to-from <= runNamesShown {
		out := make([]string, 0, to-from)
		for j := from; j < to; j++ {
			out = append(out, name(j))
		}
		return out
	}
	return []string{fmt.Sprintf("%s … %s", name(from), name(to-1))}
}

// runNamesShown: a run of missing replicas up to this long is named
// replica by replica.
const runNamesShown = 5

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
