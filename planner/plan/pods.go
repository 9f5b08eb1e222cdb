package plan

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

// podSim packs pods into waves under every budget, in policy order.
//
// Exceptions to policy order: what a controller does whatever the rollout
// (and whatever the policy's order) is not packed in policy order, and only
// the budgets upstream charges it against count it:
//   - a DaemonSet pod on a node with an untolerated NoExecute taint is
//     deleted by manage() in the first sync, whatever the budget (§3.4); it
//     counts against the budget while it terminates (§3.6 rule 3);
//   - a native surge DaemonSet deletes the available pods of nodes that
//     should no longer run it while more nodes hold an available pod than
//     should run one (§3.7 rule 3), outside any budget;
//   - a surge DaemonSet (native or managed) whose node already holds an
//     old pod and a pod at the update revision deletes the old pod once the
//     new one is available, at once if the old one is not Ready (manage
//     §3.4, rollingUpdate §3.7), outside any budget and whatever the order;
//     until then the node counts as one surge pod in use;
//   - a StatefulSet pod whose ordinal is outside the replicas (condemned by
//     a scale-down) is deleted by processCondemned and never recreated
//     (§4.3, §4.4): Parallel deletes them all in the first sync, OrderedReady
//     one at a time once every replica is available, and a native
//     OrderedReady set updates nothing until they are gone. Condemned pods
//     count against no budget (§4.7 counts the replicas only).
type podSim struct {
	r *facts.Rollout
	d *engine.Decisions
	o Options
	// ledger: the budgets (advisory ones counted too) and what each holds.
	ledger
	items []item
	heap  events
	// Kind rules.
	upstreamSTS bool // StatefulSet: replacing an unavailable pod spends budget too (§4.7)
	dsForced    bool // DaemonSet: unavailable old pods are replaced whatever the budget (§3.6)
	// stsPhase1: a native Parallel RollingUpdate StatefulSet on v1.37+
	// with MaxUnavailableStatefulSet on deletes its unavailable old pods
	// whatever the budget (phase 1 of updateStatefulSetAfterInvariantEstablished,
	// §8); they still count against it.
	stsPhase1 bool
	// stsRecreate: a native StatefulSet with updateStrategy Recreate (v1.37,
	// gate on) deletes every old pod at once, then creates the new ones:
	// all at once (Parallel) or one at a time in ordinal order (OrderedReady).
	stsRecreate bool
	// managedForced: rollplan drives the rollout (managed, any kind): a pod
	// that is unavailable and not at the update revision is replaced first,
	// whatever the budget, as upstream's DaemonSet does (§3.6). Replacing a
	// pod that is down costs no availability, and the crash-looping pods of
	// a broken revision must not hold their own rollback. It still counts
	// against the budget for every other pod.
	managedForced bool
	// recreateRank (stsRecreate, OrderedReady): pod → its place in the
	// order the controller creates the new pods, lowest ordinal first.
	recreateRank map[int]int
	surgeMode    bool  // DaemonSet maxSurge > 0: Recreate creates the new pod first (§3.7)
	extra        []int // per budget: budget spent this wave on already-unavailable pods (upstreamSTS)
	// StatefulSet.
	//   stsAbove: native, Parallel, MaxUnavailableStatefulSet off: the
	//   update loop (§4.5) goes from the highest index down, deletes the
	//   first pod not at the update revision and stops at an unavailable
	//   pod on its way; so only unavailable pods above the one it replaces
	//   hold it, whatever the state of the pods below. above[bi][group]
	//   counts the unavailable items per index (positions in indexes).
	stsAbove  bool
	above     []map[string]*fenwick
	indexes   []int // sorted distinct item indexes (stsAbove)
	monotonic bool  // StatefulSet OrderedReady: condemned pods go one at a time (§4.4)
	condemned []int // items of condemned pods, highest ordinal first
	// replicasDown: unavailable StatefulSet replicas (index in 0..replicas-1).
	replicasDown int
	// runs: the items that are runs of missing replicas (missingReplicas).
	runs []int
	// DaemonSet: nodes that should run the pod, that may keep it, and how
	// many nodes hold an available pod (upstream's availableCount, §3.7).
	nodeRuns, nodeCont map[string]bool
	nodeAvail          map[string]int
	availNodes         int
	// replaced (surge DaemonSet): old pod → the pod at the update revision
	// beside it on its node (surgeReplacements).
	replaced map[int]int
	// prep: node preparation is honoured (a DaemonSet rollplan drives).
	prep bool
	// advisoryWaves: per advisory budget, the waves that break it.
	advisoryWaves map[int][]int
	// done: items completed by completeDue since the wave before (what
	// the next wave waits for); prev: what held the last wave packed;
	// initial: the budgets' use at the start, for a wave of node actions
	// alone (prepareNodes).
	done    []doneEntry
	prev    kept
	initial []WaveBudget
}

func simulatePods(r *facts.Rollout, d *engine.Decisions, o Options) *simulation {
	s := &podSim{r: r, d: d, o: o}
	// Advisory budgets are counted like the others but never hold a pod:
	// the plan warns about the waves that break them (advisoryWarnings).
	s.ledger = newLedger(r, ResolveBudgets(r, d.Budgets))
	w := &r.Workload
	s.managedForced = drivenByRollplan(r, d)
	switch w.Kind {
	case "StatefulSet":
		s.upstreamSTS = true
		s.monotonic = w.PodManagementPolicy != "Parallel"
		s.stsAbove = UpdatesFromTheTop(r)
		s.stsPhase1 = ParallelPhase1(r)
		s.stsRecreate = !w.Managed && w.Strategy.Type == "Recreate"
	case "DaemonSet":
		s.dsForced = true
		for _, b := range s.budgets {
			if b.Type == "surge" && b.Limit > 0 && !b.Advisory {
				s.surgeMode = true
			}
		}
		s.nodeRuns, s.nodeCont, s.nodeAvail = map[string]bool{}, map[string]bool{}, map[string]int{}
		for _, n := range r.Nodes {
			s.nodeRuns[n.Name], s.nodeCont[n.Name] = n.ShouldRun, n.ShouldContinueRunning
		}
	}
	n := len(s.budgets)
	s.extra = make([]int, n)
	if s.stsAbove {
		s.above = make([]map[string]*fenwick, n)
		for bi := range s.above {
			s.above[bi] = map[string]*fenwick{}
		}
	}
	sim := &simulation{}
	s.prep = honoursNodePreparation(w)
	s.setup(sim)
	s.run(sim)
	s.prepareNodes(sim)
	return sim
}

func (s *podSim) nodeHasTerminatingPod(node string) bool {
	for _, p := range s.r.Pods {
		if p.Node == node && p.Terminating {
			return true
		}
	}
	return false
}

// replacedReason: whether upstream deletes old pod pi, whose replacement
// runs beside it (surgeReplacements), at time t, and why: its replacement
// is available, or the old pod is not Ready (manage, §3.4).
func (s *podSim) replacedReason(pi int, t float64) (string, bool) {
	p := &s.r.Pods[pi]
	np := &s.r.Pods[s.replaced[pi]]
	switch {
	case p.Terminal:
		return fmt.Sprintf("the pod has terminated (phase %s) and node %s already runs %s at the update revision: the DaemonSet controller deletes it at once, outside any budget, and creates nothing (manage, §3.4)", p.Phase, p.Node, np.Name), true
	case !p.Ready:
		return fmt.Sprintf("the pod is not Ready and node %s already runs %s at the update revision: the DaemonSet controller deletes it at once, outside any budget, and creates nothing (manage with surge, §3.4)", p.Node, np.Name), true
	case !s.available(s.replaced[pi]):
		return "", false
	case t == 0:
		return fmt.Sprintf("node %s already runs %s at the update revision, and it is available: the DaemonSet controller deletes this old pod, outside any budget, and the node takes no surge pod (manage §3.4, rollingUpdate §3.7)", p.Node, np.Name), true
	}
	return fmt.Sprintf("node %s already runs %s at the update revision: the node counted as one surge pod until it became available; now the DaemonSet controller deletes this old pod, outside any budget (manage §3.4, rollingUpdate §3.7)", p.Node, np.Name), true
}

// evicted: a DaemonSet pod on a known node with a NoExecute taint the
// DaemonSet does not tolerate (shouldContinueRunning false, §3.3).
func (s *podSim) evicted(p *facts.Pod) bool {
	cont, known := s.nodeCont[p.Node]
	return s.r.Workload.Kind == "DaemonSet" && known && !cont
}

func (s *podSim) deleteAction(pi int, reason string) Action {
	p := &s.r.Pods[pi]
	a := Action{Type: ActionDelete, Pod: p.Name, Reasons: []string{reason}}
	if s.r.Workload.Kind == "DaemonSet" {
		a.Node = p.Node
	}
	return a
}

func (s *podSim) condemnedReason(p *facts.Pod) string {
	return fmt.Sprintf("ordinal %d is beyond the %s (scale-down): the StatefulSet controller deletes the pod and does not recreate it", p.Ordinal, plural.Count(s.r.Workload.Replicas, "replica", "replicas"))
}

func (s *podSim) run(sim *simulation) {
	r, d := s.r, s.d
	pending, noExecute, replacing := s.queues(sim)
	queue, act := s.condemnedQueue()
	actionable := func() bool {
		for _, ii := range queue {
			if act[ii] {
				return true
			}
		}
		return false
	}
	t := 0.0
	// Every step sees the state at its time: what is due by then (here:
	// pods available again at 0s) is complete before the step starts.
	s.completeDue(t, false)
	s.done = s.done[:0]
	s.initial = s.use()
	var waitsFor []string // what the next wave waits for
	// The waves' actions share one array, sized for one action per pod.
	arena := make([]Action, 0, len(pending)+len(noExecute)+len(queue))
	for step := 0; (step == 0 && len(noExecute) > 0) || len(pending) > 0 || len(replacing) > 0 || actionable(); step++ {
		for bi := range s.extra {
			s.extra[bi] = 0
		}
		actions := arena[len(arena):len(arena):cap(arena)]
		waveEnd := t
		if step == 0 {
			for _, pi := range noExecute {
				waveEnd = math.Max(waveEnd, s.deletePod(pi, t))
				actions = append(actions, s.deleteAction(pi, fmt.Sprintf("node %s has a NoExecute taint the DaemonSet does not tolerate: the controller deletes the pod at once, whatever the budget, and does not recreate it", r.Pods[pi].Node)))
			}
			// Parallel deletes condemned pods all at once, and so does
			// updateStrategy Recreate (recreateDeleteAndWait takes the
			// condemned pods with the replicas).
			if !s.monotonic || s.stsRecreate {
				for _, ii := range queue {
					waveEnd = math.Max(waveEnd, s.deletePod(ii, t))
					if act[ii] {
						actions = append(actions, s.deleteAction(s.items[ii].pod, s.condemnedReason(&r.Pods[s.items[ii].pod])))
					}
				}
				queue = nil
			}
		}
		// Old pods beside an available replacement go first (manage runs
		// before rollingUpdate, §3.2), outside any budget; the surge pods
		// they held are free for this wave.
		var waiting []int
		for _, pi := range replacing {
			if reason, ok := s.replacedReason(pi, t); ok {
				waveEnd = math.Max(waveEnd, s.retire(pi, t))
				actions = append(actions, s.deleteAction(pi, reason))
				if len(sim.waves) > 0 {
					np := &r.Pods[s.replaced[pi]]
					s.wait(sim, r.Pods[pi].Name, &Wait{Wave: len(sim.waves), Reason: fmt.Sprintf("%s, its replacement beside it on node %s, was not available yet: the DaemonSet controller deletes the old pod once it is, outside any budget (§3.4, §3.7)", np.Name, np.Node)})
				}
				continue
			}
			waiting = append(waiting, pi)
		}
		replacing = waiting
		hold := "" // why no pod to update may start
		if s.monotonic && !s.stsRecreate && s.condemnedLeft() {
			deleting := false
			for _, ii := range s.condemned {
				deleting = deleting || (s.items[ii].removing && !s.items[ii].gone)
			}
			if !deleting && len(queue) > 0 && s.replicasDown == 0 {
				ii := queue[0]
				queue = queue[1:]
				end := s.deletePod(ii, t)
				if act[ii] {
					waveEnd = math.Max(waveEnd, end)
					actions = append(actions, s.deleteAction(s.items[ii].pod, s.condemnedReason(&r.Pods[s.items[ii].pod])))
					if len(sim.waves) > 0 {
						s.wait(sim, s.items[ii].name, &Wait{Wave: len(sim.waves), Reason: "an OrderedReady StatefulSet deletes condemned pods one at a time from the highest ordinal, each once every replica is available and the one before is gone (processCondemned, §4.4)"})
					}
				}
			}
			if !r.Workload.Managed {
				hold = "condemned"
			}
		}
		// A native OrderedReady set runs its update step only once every
		// replica is Running, Ready and available (processReplica, §4.4).
		// Recreate deletes the old pods before processReplica runs.
		if hold == "" && s.monotonic && !r.Workload.Managed && !s.stsRecreate && s.replicasDown > 0 {
			hold = "replicas"
		}
		// Filtered in place: each kept pod is written at or before the
		// position the loop reads.
		rest := pending[:0]
		// Surge DaemonSet: replacements of unavailable old pods count as
		// surge pods from the next sync on (upstream's allowed nodes do not
		// count in the sync that creates their pod, §3.7).
		var laterSurge []int
		blocked, blockedPod := "", -1
		held := kept{hold: hold != "", budget: -1, blockedPod: -1}
		if hold != "" {
			held.reason = s.holdReason(hold)
		}
		var phase1 []string // stsPhase1 pods this wave
		downBefore := s.replicasDown
		if hold != "" {
			rest = pending
			pending = nil
		}
		for _, pi := range pending {
			p := &r.Pods[pi]
			pd := &d.Pods[pi]
			it := &s.items[pi]
			forced := (s.dsForced || s.stsPhase1 || s.managedForced) && it.unavailable || s.stsRecreate
			// The StatefulSet controller reaches these in the same sync
			// whatever the pods before them (§8), and rollplan replaces an
			// unavailable old pod first: nothing holds them.
			unheld := forced && (s.upstreamSTS || s.managedForced)
			// A DaemonSet pod on a node that should no longer run it is
			// deleted and not replaced (§3.6); it uses budget while it goes.
			remove := s.r.Workload.Kind == "DaemonSet" && len(r.Nodes) > 0 && !s.nodeRuns[p.Node]
			surge := s.surgeMode && pd.Action == engine.Recreate && !remove
			// Surge DaemonSet, unavailable old pod: its replacement is
			// created whatever the surge budget; manage deletes the old
			// pod at once when it is not Ready, so the node never counts
			// as a surge pod (§3.4, §3.7).
			forcedSurge := forced && surge
			if forcedSurge && !keptBeside(p) {
				surge = false
			}
			// Native surge DaemonSet: an available pod of such a node goes
			// while more nodes hold an available pod than should run one
			// (§3.7 rule 3), outside any budget and whatever the order;
			// until then it waits without holding the others.
			misscheduled := remove && s.surgeMode && !r.Workload.Managed && !forced
			if blocked != "" && !misscheduled && !unheld {
				rest = append(rest, pi)
				continue
			}
			switch {
			case misscheduled:
				if s.availNodes <= r.Workload.Replicas {
					if blocked == "" && held.reason == "" {
						held.reason = fmt.Sprintf("pod %s waits until more nodes hold an available pod (%d now) than should run one (%d): a surge DaemonSet deletes the pod of a node that should no longer run it only then (§3.7 rule 3)", p.Name, s.availNodes, r.Workload.Replicas)
					}
					rest = append(rest, pi)
					continue
				}
			case !forced:
				ok, bi, why := s.fits(pi, surge)
				if !ok {
					blocked, blockedPod = s.budgets[bi].Name, pi
					held.budget, held.blockedPod, held.reason = bi, pi, why
					rest = append(rest, pi)
					continue
				}
			}
			s.waited(sim, pi, misscheduled)
			if s.upstreamSTS && it.unavailable && !unheld {
				for bi := range s.budgets {
					if it.relevant[bi] {
						s.extra[bi]++
					}
				}
			}
			a := s.podAction(pi, remove, misscheduled, surge)
			switch {
			case it.prepared:
				a.Reasons = append([]string{s.preparedReason(p.Node)}, a.Reasons...)
			case forcedSurge && surge:
				a.Reasons = append([]string{"unavailable old pod: upstream creates its replacement whatever the surge budget; the node counts as one surge pod from the next sync until the new pod is available (§3.7)"}, a.Reasons...)
			case forcedSurge:
				a.Reasons = append([]string{"unavailable old pod, not Ready: upstream creates its replacement whatever the surge budget and deletes the old pod at once, so the node takes no surge pod (§3.4, §3.7)"}, a.Reasons...)
			case s.stsRecreate:
				a.Reasons = append([]string{s.recreateReason()}, a.Reasons...)
			case forced && s.stsPhase1:
				a.Reasons = append([]string{"unavailable old pod: the v" + strings.TrimPrefix(r.KubernetesVersion, "v") + " StatefulSet controller (Parallel) deletes every unavailable old pod whatever maxUnavailable (phase 1 of its update), and it counts against the budget"}, a.Reasons...)
				phase1 = append(phase1, p.Name)
			case forced && s.managedForced:
				a.Reasons = append([]string{"unavailable and not at the update revision: replaced first, whatever the budget (replacing a pod that is down costs no availability); it counts against the budget for the other pods"}, a.Reasons...)
			case forced:
				a.Reasons = append([]string{"unavailable old pod: upstream replaces it whatever the budget, and it counts against the budget"}, a.Reasons...)
			}
			var until float64
			switch {
			case remove:
				until = s.deletePod(pi, t)
			case forcedSurge && surge:
				until = t + s.duration(a.Type)
				s.markUnavailable(pi, until)
				laterSurge = append(laterSurge, pi)
			case surge:
				until = t + s.duration(a.Type)
				s.startSurge(pi, until)
			case s.stsRecreate && s.monotonic:
				// OrderedReady creates the new pods one at a time, each
				// once the one before is Ready, lowest ordinal first.
				until = t + float64(s.recreateRank[pi])*s.duration(a.Type)
				s.markUnavailable(pi, until)
			default:
				until = t + s.duration(a.Type)
				s.markUnavailable(pi, until)
			}
			waveEnd = math.Max(waveEnd, until)
			actions = append(actions, a)
		}
		for _, pi := range laterSurge {
			s.addSurge(pi)
		}
		if len(phase1) > 0 {
			sim.notes = append(sim.notes, s.phase1Note(len(sim.waves)+1, phase1, downBefore))
		}
		pending = rest
		if len(actions) <= cap(arena)-len(arena) {
			arena = arena[:len(arena)+len(actions)]
		}
		if len(actions) > 0 {
			wave := Wave{Index: len(sim.waves) + 1, Start: formatDuration(t), Actions: slices.Clip(actions), Budgets: s.use()}
			wave.Binding = s.binding(held, waitsFor)
			s.prev = s.keptRecord(held, wave.Index)
			sim.waves = append(sim.waves, wave)
			s.checkAdvisory(len(sim.waves))
		}
		if len(pending) == 0 && len(replacing) == 0 && !actionable() {
			break
		}
		// Advance time: wave pacing waits for the whole wave; rolling
		// refills at the first completion. Events due now are processed
		// before anything is declared stalled.
		s.scheduleRuns(t)
		next := math.Inf(1)
		quiet := false // see completeDue
		if d.Pacing == engine.PacingWave && len(actions) > 0 {
			next = waveEnd
		} else if s.heap.Len() > 0 {
			next, quiet = s.heap[0].at, true
		}
		if math.IsInf(next, 1) {
			why := s.stallReason(hold, pending, blocked, blockedPod)
			sim.notes = append(sim.notes, fmt.Sprintf("the rollout stalls after %s: %s", formatDuration(t), why))
			sim.stall = fmt.Sprintf("stalled after %s: %s", formatDuration(t), why)
			sim.stalled = &Stall{After: formatDuration(t), Reason: why}
			break
		}
		s.completeDue(next, quiet)
		waitsFor = s.doneNames()
		t = math.Max(t, next)
	}
	// The rollout ends when the last pod in flight is available.
	end := t
	for _, e := range s.heap {
		end = math.Max(end, e.at)
	}
	for _, ii := range s.runs {
		if s.items[ii].unavailable {
			end = math.Max(end, s.items[ii].run.last())
		}
	}
	sim.end = end
	sim.warnings = append(sim.warnings, s.advisoryWarnings()...)
}

// ParallelPhase1 reports whether the rollout's controller is v1.37's
// StatefulSet controller updating a Parallel set with
// MaxUnavailableStatefulSet on: it then deletes every unavailable old pod
// from the partition up whatever maxUnavailable (phase 1 of
// updateStatefulSetAfterInvariantEstablished, reference §8) before the
// available ones the budget allows. The planner and the gate both follow it.
func ParallelPhase1(r *facts.Rollout) bool {
	w := &r.Workload
	return w.Kind == "StatefulSet" && !w.Managed && w.PodManagementPolicy == "Parallel" && w.Strategy.Type == "RollingUpdate" &&
		r.FeatureGates["MaxUnavailableStatefulSet"] && atLeast137(r)
}

// atLeast137: the rollout is planned for Kubernetes v1.37 or newer.
func atLeast137(r *facts.Rollout) bool {
	v, err := kubeversion.ParseAny(r.KubernetesVersion)
	return err != nil || v.AtLeast(kubeversion.V1_37) // facts always carry one; none means the newest
}

// recreateReason: why a StatefulSet pod goes in the first wave whatever
// the budget under updateStrategy Recreate.
func (s *podSim) recreateReason() string {
	if s.monotonic {
		return "updateStrategy Recreate: the StatefulSet controller deletes every old pod at once, waits until all are gone, then creates the new pods one at a time in ordinal order (OrderedReady)"
	}
	return "updateStrategy Recreate: the StatefulSet controller deletes every old pod at once, waits until all are gone, then creates the new pods all at once (Parallel)"
}

// phase1Note says which pods phase 1 of a v1.37 Parallel StatefulSet
// update replaced whatever the budget, and where that goes past
// maxUnavailable (a v1.36 controller waits there instead).
func (s *podSim) phase1Note(wave int, pods []string, down int) string {
	limit := -1
	for _, b := range s.budgets {
		if b.Name == "maxUnavailable" && b.Type == "unavailable" && b.PDB == "" && b.GroupBy == "" {
			limit = b.Limit
		}
	}
	note := fmt.Sprintf("wave %d: pod(s) %s are unavailable at the old revision: the %s StatefulSet controller (Parallel) deletes them whatever the budget (phase 1 of its update, §8)", wave, strings.Join(pods, ", "), s.r.KubernetesVersion)
	if limit >= 0 && down >= limit {
		note += fmt.Sprintf(", although %d replica(s) are unavailable against maxUnavailable %d; Kubernetes v1.36 would wait instead", down, limit)
	}
	return note
}

// queues sorts the pods to update: pending, in policy order (those on a
// node prepared for them first); noExecute, the pods the DaemonSet
// controller deletes at once whatever the rollout; replacing, old pods of
// a surge DaemonSet whose replacement already runs beside them, deleted
// once it is available (see podSim). Pods on a NoExecute node that the
// plan does not act on (updated, held) are deleted from the start.
func (s *podSim) queues(sim *simulation) (pending, noExecute, replacing []int) {
	r, d := s.r, s.d
	for i, p := range r.Pods {
		if p.Updated || !d.Pods[i].InScope || p.Terminating || condemned(r, &p) {
			continue
		}
		if s.evicted(&p) {
			noExecute = append(noExecute, i)
			continue
		}
		if _, ok := s.replaced[i]; ok {
			replacing = append(replacing, i)
			continue
		}
		pending = append(pending, i)
	}
	pending = ordered(r, d, pending)
	if s.stsRecreate && s.monotonic {
		byIndex := slices.Clone(pending)
		slices.SortStableFunc(byIndex, func(a, b int) int { return r.Pods[a].Index - r.Pods[b].Index })
		s.recreateRank = make(map[int]int, len(byIndex))
		for k, pi := range byIndex {
			s.recreateRank[pi] = k + 1
		}
	}
	// Prepared pods go first, whatever the order: their nodes wait cordoned.
	sort.SliceStable(pending, func(i, j int) bool { return s.items[pending[i]].prepared && !s.items[pending[j]].prepared })
	replacing = ordered(r, d, replacing)
	// Pods on a NoExecute node that the plan does not act on (updated) go too.
	for i, p := range r.Pods {
		if s.evicted(&p) && !p.Terminating && (p.Updated || !d.Pods[i].InScope) {
			s.deletePod(i, 0)
			sim.notes = append(sim.notes, fmt.Sprintf("pod %s: node %s has a NoExecute taint the DaemonSet does not tolerate: the controller deletes the pod in its first sync", p.Name, p.Node))
		}
	}
	return pending, noExecute, replacing
}

// condemnedQueue: the condemned pods not yet deleting (queue), and which
// of them are the plan's own actions (act: still to update and in scope);
// the controller deletes the others all the same (see the note).
func (s *podSim) condemnedQueue() (queue []int, act map[int]bool) {
	r, d := s.r, s.d
	act = map[int]bool{}
	for _, ii := range s.condemned {
		p := &r.Pods[s.items[ii].pod]
		if p.Terminating {
			continue
		}
		queue = append(queue, ii)
		act[ii] = !p.Updated && d.Pods[s.items[ii].pod].InScope
	}
	return queue, act
}

// podAction is the action that starts pod pi: a delete when its node
// should no longer run it (remove; misscheduled: a native surge DaemonSet
// deletes it while more nodes hold an available pod than should run one),
// else the policy's in-place update or recreate (surge: create the new pod
// first), with the policy's reasons.
func (s *podSim) podAction(pi int, remove, misscheduled, surge bool) Action {
	r := s.r
	p, pd := &r.Pods[pi], &s.d.Pods[pi]
	a := Action{Reasons: append([]string(nil), pd.Reasons...)}
	switch {
	case remove:
		a.Type = ActionDelete
		a.Reasons = []string{fmt.Sprintf("node %s should no longer run this DaemonSet (selector, affinity or an untolerated taint): the pod is deleted and not recreated", p.Node)}
		if misscheduled {
			a.Reasons = append(a.Reasons, fmt.Sprintf("surge: deleted while more nodes hold an available pod (%d) than should run one (%d)", s.availNodes, r.Workload.Replicas))
		}
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
	return a
}

// stallReason says why nothing in flight lets the rollout go on: what
// holds every pod (hold), or the pod blocked first and the budget it
// would break (blockedPod, blocked; -1 when a pod waits for nodes).
func (s *podSim) stallReason(hold string, pending []int, blocked string, blockedPod int) string {
	r := s.r
	switch {
	case hold == "replicas":
		return fmt.Sprintf("replica(s) %s are not available, and an OrderedReady StatefulSet updates nothing until every replica is (processReplica); nothing in flight makes them so", strings.Join(s.unavailableReplicas(), ", "))
	case hold != "" || len(pending) == 0:
		return "condemned pod(s) are deleted only once every replica is available (processCondemned), and nothing in flight makes them so"
	case blockedPod < 0:
		return fmt.Sprintf("pod %s waits for more nodes to hold an available pod than should run one, and nothing in flight brings that", r.Pods[pending[0]].Name)
	default:
		return fmt.Sprintf("pod %s cannot start without exceeding budget %s, and nothing in flight frees it", r.Pods[blockedPod].Name, blocked)
	}
}
