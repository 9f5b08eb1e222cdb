package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// The Deployment simulator replays upstream's rolloutRolling and
// rolloutRecreate (§2.5, §2.6) sync by sync. Syncs that follow each other
// without waiting are a tick apart; a pod becomes available a fixed estimate
// after it is created. A wave is every sync between two waits.

const tick = 0.001 // seconds between two consecutive syncs

type rsPod struct {
	name        string
	fact        int     // index in facts, -1 for a pod the simulation made up
	availableAt float64 // +Inf: never (an old pod that is not available)
	// Pods without facts: when they are Ready, and their creation order
	// (pods the ReplicaSet creates during the simulation count up from 1;
	// pods taken from a ReplicaSet's status are 0).
	readyAt float64
	seq     int
	// rank: a snapshot pod's position in policy (deletion) order.
	rank int
	// wave: the wave whose scale-up created a pod the simulation made
	// up (0: taken from a ReplicaSet's status).
	wave int
	// n: how many pods this is. A snapshot pod is one; pods the
	// simulation makes up in one scale-up (or takes from a ReplicaSet's
	// status) are one batch, seq the newest's, so that the work never
	// grows with spec.replicas.
	n int
}

type simRS struct {
	name     string
	spec     int
	minReady int // the ReplicaSet's own minReadySeconds (§1.3, §2.3)
	pods     []rsPod
}

func (rs *simRS) avail(t float64) int {
	n := 0
	for _, p := range rs.pods {
		if p.availableAt <= t {
			n += p.n
		}
	}
	return n
}

// count: the ReplicaSet's pods.
func (rs *simRS) count() int {
	n := 0
	for _, p := range rs.pods {
		n += p.n
	}
	return n
}

type deploySim struct {
	r       *facts.Rollout
	d       *engine.Decisions
	o       Options
	D       int
	surge   int
	unavail int
	old     []*simRS // oldest first
	newRS   *simRS
	t       float64
	actions []Action
	created int
	// created0: why the new ReplicaSet was created at 0 replicas, for
	// its first scale-up (scale writes no 0->0 action).
	created0 []string
	// advisory: the budgets the controller does not pace by (PDBs, a
	// policy's own) that the simulation can count: ungrouped unavailable
	// and surge budgets (a new pod's zone or node is the scheduler's).
	advisory      []Budget
	advisoryWaves map[string][]string // budget → waves that break it
	unchecked     []string            // advisory grouped budgets, not checked
	// Per wave: every resolved budget, how each is counted (counted),
	// the most of each in use in the wave so far (use), and what the
	// wave waits for. unavailName, surgeName: the budgets the
	// controller paces by.
	budgets                []Budget
	counted                []int
	use                    []int
	waitsFor               []string
	unavailName, surgeName string
	waves                  int
	prevWait               *Wait
}

// How a Deployment's budget is counted wave by wave.
const (
	uncounted          = iota // per group: the scheduler places the new pods
	countedSurge              // pods beyond the desired replicas
	countedUnavailable        // desired replicas not available (with a PDB's pods elsewhere)
)

func simulateDeployment(r *facts.Rollout, d *engine.Decisions, o Options) *simulation {
	s := &deploySim{r: r, d: d, o: o, D: r.Workload.Replicas, advisoryWaves: map[string][]string{}}
	s.budgets = ResolveBudgets(r, d.Budgets)
	s.counted, s.use = make([]int, len(s.budgets)), make([]int, len(s.budgets))
	for bi, b := range s.budgets {
		switch {
		case b.Name == "maxSurge" && b.Type == "surge" && !b.Advisory:
			s.surge, s.surgeName = b.Limit, b.Name
			s.counted[bi] = countedSurge
		case b.Name == "maxUnavailable" && b.Type == "unavailable" && !b.Advisory:
			s.unavail, s.unavailName = b.Limit, b.Name
			s.counted[bi] = countedUnavailable
		case (b.PDB != "" || b.Advisory) && (b.Type == "unavailable" || b.Type == "surge") && b.GroupBy == "":
			s.advisory = append(s.advisory, b)
			s.counted[bi] = map[string]int{"unavailable": countedUnavailable, "surge": countedSurge}[b.Type]
		case b.Advisory:
			s.unchecked = append(s.unchecked, b.Name)
		}
	}
	sim := &simulation{}
	byRS := map[string][]int{}
	for i, p := range r.Pods {
		if !p.Terminating && !p.Terminal {
			byRS[p.Owner] = append(byRS[p.Owner], i)
		}
	}
	for _, f := range r.ReplicaSets {
		rs := &simRS{name: f.Name, spec: f.Replicas, minReady: f.MinReadySeconds}
		if f.New {
			// The Deployment syncs its minReadySeconds onto the new ReplicaSet only (§2.3).
			rs.minReady = r.Workload.MinReadySeconds
		}
		for k, i := range ordered(r, d, byRS[f.Name]) {
			rs.pods = append(rs.pods, rsPod{name: r.Pods[i].Name, fact: i, availableAt: s.initialAvailability(&r.Pods[i]), rank: k, n: 1})
		}
		if len(byRS[f.Name]) == 0 && f.Replicas > 0 {
			// No pods in the snapshot: take the ReplicaSet's status, the
			// available pods and the others as a batch each.
			if avail := min(max(f.AvailableReplicas, 0), f.Replicas); avail > 0 {
				rs.pods = append(rs.pods, rsPod{name: f.Name + "-<available>", fact: -1, n: avail})
			}
			if rest := f.Replicas - max(f.AvailableReplicas, 0); rest > 0 {
				ready := float64(s.o.RecreateSeconds)
				rs.pods = append(rs.pods, rsPod{name: f.Name + "-<unavailable>", fact: -1, readyAt: ready, availableAt: ready + float64(rs.minReady), n: rest})
			}
		}
		if f.New {
			s.newRS = rs
		} else {
			s.old = append(s.old, rs)
		}
	}
	// The ReplicaSet controller makes pods match spec before anything
	// else: the pods it deletes there take no action of the plan.
	for _, rs := range s.all() {
		var names []string
		for _, p := range s.reconcilePods(rs) {
			if p.fact >= 0 {
				names = append(names, p.name)
			}
		}
		if len(names) > 0 {
			sim.removed = append(sim.removed, names...)
			sim.notes = append(sim.notes, fmt.Sprintf("pod(s) %s: ReplicaSet %s has more pods than its %s: the ReplicaSet controller deletes them first, and nothing replaces them", strings.Join(names, ", "), rs.name, plural.Count(rs.spec, "replica", "replicas")))
		}
	}
	// A finished pod (Failed, Succeeded) of an old ReplicaSet: the
	// ReplicaSet counts active pods only, so no scale-down removes it.
	for _, p := range r.Pods {
		if p.Terminal && !p.Terminating && !p.Updated {
			if sim.blocked == nil {
				sim.blocked = map[string]string{}
			}
			sim.blocked[p.Name] = fmt.Sprintf("phase %s: its ReplicaSet counts active pods only, so no scale-down removes it; it stays until garbage-collected", p.Phase)
		}
	}
	s.run(sim)
	return sim
}

func (s *deploySim) podDuration() float64 {
	return float64(s.o.RecreateSeconds + s.r.Workload.MinReadySeconds)
}

// initialAvailability: when a snapshot pod is available, judged with its
// ReplicaSet's own minReadySeconds (§1.3) as the ReplicaSet's status is.
func (s *deploySim) initialAvailability(p *facts.Pod) float64 {
	if p.Available {
		return 0
	}
	return availableAgainAt(s.r, p, s.podDuration())
}

func (s *deploySim) all() []*simRS {
	out := append([]*simRS(nil), s.old...)
	if s.newRS != nil {
		out = append(out, s.newRS)
	}
	return out
}

// reconcilePods is the ReplicaSet controller: delete the first pods in
// deletion order, or create missing ones.
func (s *deploySim) reconcilePods(rs *simRS) []rsPod {
	var removed []rsPod
	if have := rs.count(); have > rs.spec {
		sort.SliceStable(rs.pods, func(i, j int) bool { return s.deletedBefore(rs.pods[i], rs.pods[j]) })
		n := have - rs.spec
		k := 0 // batches deleted whole
		for ; k < len(rs.pods) && rs.pods[k].n <= n; k++ {
			n -= rs.pods[k].n
		}
		removed = append(removed, rs.pods[:k]...)
		rs.pods = rs.pods[k:]
		if n > 0 {
			// Part of a batch: its newest pods go first (§2.10).
			b := &rs.pods[0]
			removed = append(removed, rsPod{name: b.name, fact: -1, n: n})
			b.n -= n
			b.seq -= n
		}
	} else if have < rs.spec {
		k := rs.spec - have
		s.created += k
		ready := s.t + float64(s.o.RecreateSeconds)
		rs.pods = append(rs.pods, rsPod{name: fmt.Sprintf("%s-new-%d", rs.name, s.created), fact: -1, readyAt: ready, availableAt: ready + float64(rs.minReady), seq: s.created, wave: s.waves + 1, n: k})
	}
	return removed
}

// rankPrefix is the start of upstream's deletion rank (§2.10 rules 1–4):
// unassigned first, then phase (Pending < Unknown < Running), not Ready,
// lower pod-deletion-cost. A snapshot pod has its facts; a pod the
// simulation made up is unassigned and Pending until Ready, then a Running
// Ready pod without a deletion cost.
func (s *deploySim) rankPrefix(p rsPod) [4]int {
	if p.fact >= 0 {
		f := &s.r.Pods[p.fact]
		return [4]int{b2i(f.Scheduled), facts.PhaseOrdinal(f.Phase), b2i(f.Ready), f.DeletionCost}
	}
	if p.readyAt <= s.t {
		return [4]int{1, 2, 1, 0}
	}
	return [4]int{0, 0, 0, 0}
}

// deletedBefore orders a ReplicaSet's pods for deletion (a strict weak
// order: a lexicographic key). Upstream's ReplicaSet ranks by readiness, not
// availability: the rank prefix first; within it, pods the simulation made
// up before snapshot pods (they are newer and, once Ready, more recently
// Ready: §2.10 rules 6, 8), newest first; snapshot pods keep the policy
// order, the default strategy's being upstream's ranking itself.
func (s *deploySim) deletedBefore(a, b rsPod) bool {
	if pa, pb := s.rankPrefix(a), s.rankPrefix(b); pa != pb {
		for k := range pa {
			if pa[k] != pb[k] {
				return pa[k] < pb[k]
			}
		}
	}
	if (a.fact < 0) != (b.fact < 0) {
		return a.fact < 0
	}
	if a.fact >= 0 {
		return a.rank < b.rank
	}
	return a.seq > b.seq
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *deploySim) scale(rs *simRS, to int, reason string) {
	from := rs.spec
	if from == to {
		// Nothing to scale (the new ReplicaSet created with 0 replicas:
		// no room within maxSurge): no action; its first scale says it
		// was created.
		s.created0 = append(s.created0, reason)
		return
	}
	s.measure()
	defer s.measure()
	rs.spec = to
	reasons := []string{reason}
	if rs == s.newRS && len(s.created0) > 0 {
		reasons = append(s.created0, reason)
		s.created0 = nil
	}
	a := Action{Type: ActionScaleRS, ReplicaSet: rs.name, From: intp(from), To: intp(to), Reasons: reasons}
	// The plan names the snapshot's pods; pods the simulation made up have no name to give.
	for _, p := range s.reconcilePods(rs) {
		if p.fact >= 0 {
			a.Pods = append(a.Pods, p.name)
		}
	}
	s.actions = append(s.actions, a)
}

func intp(v int) *int { return &v }

func sumSpec(rss []*simRS) int {
	n := 0
	for _, rs := range rss {
		n += rs.spec
	}
	return n
}

// newRSNewReplicas is upstream NewRSNewReplicas for RollingUpdate.
func (s *deploySim) newRSNewReplicas(newSpec int) int {
	current := sumSpec(s.old) + newSpec
	ceiling := s.D + s.surge
	if current >= ceiling {
		return newSpec
	}
	return newSpec + min(ceiling-current, s.D-newSpec)
}

// syncRolling is one rolloutRolling sync; it reports whether it wrote.
func (s *deploySim) syncRolling() bool {
	wrote := false
	if s.newRS == nil {
		n := s.newRSNewReplicas(0)
		s.newRS = &simRS{name: s.r.Workload.UpdateRevision, minReady: s.r.Workload.MinReadySeconds}
		s.scale(s.newRS, n, fmt.Sprintf("create ReplicaSet %s at the update revision with %s (maxSurge %d over %d desired)", s.newRS.name, plural.Count(n, "replica", "replicas"), s.surge, s.D))
		wrote = true // creating is not a scale-up: the same sync goes on to the old ReplicaSets
	} else {
		switch spec := s.newRS.spec; {
		case spec > s.D:
			s.scale(s.newRS, s.D, "scale the new ReplicaSet down to the desired replicas")
			return true
		case spec < s.D:
			if n := s.newRSNewReplicas(spec); n != spec {
				s.scale(s.newRS, n, fmt.Sprintf("scale up within maxSurge: %s in all, at most %d", plural.Count(sumSpec(s.all()), "pod", "pods"), s.D+s.surge))
				return true
			}
		}
	}
	var active []*simRS
	for _, rs := range s.old {
		if rs.spec > 0 {
			active = append(active, rs)
		}
	}
	if sumSpec(active) == 0 {
		return wrote
	}
	allPods := sumSpec(active) + s.newRS.spec
	minAvailable := s.D - s.unavail
	newUnavailable := s.newRS.spec - s.newRS.avail(s.t)
	maxScaledDown := allPods - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return wrote
	}
	// availTotal before cleanup: upstream reads status, which (c) does not change.
	availTotal := s.newRS.avail(s.t)
	for _, rs := range active {
		availTotal += rs.avail(s.t)
	}
	// (c) cleanupUnhealthyReplicas, oldest first.
	done := 0
	for _, rs := range active {
		if done >= maxScaledDown {
			break
		}
		av := rs.avail(s.t)
		if rs.spec == 0 || rs.spec == av {
			continue
		}
		k := min(maxScaledDown-done, rs.spec-av)
		s.scale(rs, rs.spec-k, fmt.Sprintf("clean up %d unavailable old replica(s)", k))
		done += k
		wrote = true
	}
	// (d) scaleDownOldReplicaSetsForRollingUpdate, oldest first.
	if availTotal > minAvailable {
		want := availTotal - minAvailable
		got := 0
		for _, rs := range active {
			if got >= want {
				break
			}
			if rs.spec == 0 {
				continue
			}
			k := min(rs.spec, want-got)
			s.scale(rs, rs.spec-k, fmt.Sprintf("scale down within maxUnavailable: %d available, at least %d must stay", availTotal-got, minAvailable))
			got += k
			wrote = true
		}
	}
	return wrote
}

// syncRecreate is one rolloutRecreate sync.
func (s *deploySim) syncRecreate() bool {
	wrote := false
	for _, rs := range s.old {
		if rs.spec > 0 {
			s.scale(rs, 0, "Recreate: scale every old ReplicaSet to 0 before creating new pods")
			wrote = true
		}
	}
	if wrote {
		return true
	}
	if s.newRS == nil {
		s.newRS = &simRS{name: s.r.Workload.UpdateRevision, minReady: s.r.Workload.MinReadySeconds}
		s.scale(s.newRS, s.D, fmt.Sprintf("Recreate: create ReplicaSet %s with all %s once the old pods are gone", s.newRS.name, plural.Count(s.D, "replica", "replicas")))
		return true
	}
	if s.newRS.spec != s.D {
		s.scale(s.newRS, s.D, "Recreate: scale the new ReplicaSet to the desired replicas")
		return true
	}
	return false
}

func (s *deploySim) run(sim *simulation) {
	recreate := s.r.Workload.Strategy.Type == "Recreate"
	waveStart := -1.0 // time of the current wave's first action; -1 before it
	closeWave := func() {
		if len(s.actions) == 0 {
			return
		}
		wave := Wave{Index: len(sim.waves) + 1, Start: formatDuration(waveStart), Actions: s.actions, Budgets: s.waveBudgets()}
		wave.Binding = s.binding(recreate)
		s.waited(sim, &wave)
		sim.waves = append(sim.waves, wave)
		s.waves = len(sim.waves)
		s.checkAdvisory(len(sim.waves))
		s.actions, waveStart = nil, -1
	}
	// Bounded work: the syncs grow with the pods the snapshot holds, never
	// with spec.replicas alone (pods the simulation makes up are batches).
	maxSyncs := 10000 + 10*len(s.r.Pods)
	for i := 0; ; i++ {
		if i == maxSyncs {
			sim.err = fmt.Errorf("the simulated rollout takes more than %d controller syncs (%s so far, spec.replicas %d, maxSurge %d, maxUnavailable %d): rollplan stops there rather than plan without bound; plan it with larger maxSurge or maxUnavailable, or fewer replicas", maxSyncs, plural.Count(len(sim.waves), "wave", "waves"), s.D, s.surge, s.unavail)
			return
		}
		var wrote bool
		if recreate {
			wrote = s.syncRecreate()
		} else {
			wrote = s.syncRolling()
		}
		if wrote {
			if waveStart < 0 {
				waveStart = s.t
			}
			s.t += tick
			continue
		}
		closeWave()
		next := math.Inf(1)
		for _, rs := range s.all() {
			for _, p := range rs.pods {
				if p.availableAt > s.t && p.availableAt < next {
					next = p.availableAt
				}
			}
		}
		if math.IsInf(next, 1) {
			break
		}
		s.t = next
		s.waitsFor = s.availableAt(next)
	}
	closeWave()
	for _, b := range s.advisory {
		if waves := s.advisoryWaves[b.Name]; len(waves) > 0 {
			sim.warnings = append(sim.warnings, advisoryWarning(waves, b, "Deployment"))
		}
	}
	if len(s.unchecked) > 0 {
		sim.notes = append(sim.notes, fmt.Sprintf("advisory budget(s) %s are per group: the plan does not check a Deployment's waves against them (the scheduler places the new pods)", strings.Join(s.unchecked, ", ")))
	}
	sim.end = s.t
	stalls := s.newRS == nil || s.newRS.spec != s.D || sumSpec(s.old) != 0 || s.newRS.avail(math.Inf(1)) < s.D
	if stalls {
		sim.notes = append(sim.notes, "the rollout does not complete: pods that never become available hold it (upstream keeps waiting; see halt rules)")
		sim.stall = "the rollout does not complete: pods that never become available hold it"
	}
	// Drop the ticks' milliseconds from the estimate.
	sim.end = math.Floor(sim.end + 0.5)
	if stalls {
		sim.stalled = &Stall{After: formatDuration(sim.end), Reason: "pods that never become available hold it (upstream keeps waiting; see halt rules)"}
	}
}

// checkAdvisory records the advisory budgets a wave's actions break:
// upstream rollouts pace by neither PDBs nor a policy's own budgets.
func (s *deploySim) checkAdvisory(wave int) {
	available, pods := 0, 0
	for _, rs := range s.all() {
		available += rs.avail(s.t)
		pods += rs.count()
	}
	for _, b := range s.advisory {
		use := max(0, pods-s.D) // surge
		if b.Type == "unavailable" {
			use = max(0, s.D-available)
			for _, pdb := range s.r.PDBs {
				if b.PDB != "" && pdb.Name == b.PDB {
					use += pdb.UnavailableElsewhere
				}
			}
		}
		if use > b.Limit {
			s.advisoryWaves[b.Name] = append(s.advisoryWaves[b.Name], fmt.Sprintf("%d (%d %s)", wave, use, map[string]string{"unavailable": "unavailable", "surge": "surge"}[b.Type]))
		}
	}
}

// measure counts the budgets the plan can count in the simulation's
// state now, keeping the most of each in the wave (use).
func (s *deploySim) measure() {
	available, pods := 0, 0
	for _, rs := range s.all() {
		available += rs.avail(s.t)
		pods += rs.count()
	}
	for bi, b := range s.budgets {
		n := 0
		switch s.counted[bi] {
		case countedSurge:
			n = max(0, pods-s.D)
		case countedUnavailable:
			n = max(0, s.D-available) + UnavailableElsewhere(s.r, b.PDB)
		}
		s.use[bi] = max(s.use[bi], n)
	}
}

// waveBudgets: the budgets' use in the wave that closes, and a fresh
// count for the next.
func (s *deploySim) waveBudgets() []WaveBudget {
	out := make([]WaveBudget, len(s.budgets))
	for bi, b := range s.budgets {
		out[bi] = WaveBudget{Name: b.Name, Limit: b.Limit, InUse: s.use[bi], Uncounted: s.counted[bi] == uncounted}
		s.use[bi] = 0
	}
	return out
}

// binding: what keeps the wave that closes from going further (the
// old ReplicaSets cannot scale down: maxUnavailable is full, and maxSurge
// too when the new one cannot scale up), and what it waited for.
func (s *deploySim) binding(recreate bool) *Binding {
	b := &Binding{WaitsFor: s.waitsFor}
	if !recreate && sumSpec(s.old) > 0 {
		available := 0
		for _, rs := range s.all() {
			available += rs.avail(s.t)
		}
		b.Budget = s.unavailName
		b.Reason = fmt.Sprintf("maxUnavailable %d/%d: %d of %d desired pods available and at least %d must stay, so no old pod can go until a new one is available", max(0, s.D-available), s.unavail, available, s.D, s.D-s.unavail)
		if all := sumSpec(s.all()); s.newRS != nil && s.newRS.spec < s.D && all >= s.D+s.surge {
			b.Reason += fmt.Sprintf("; maxSurge %d/%d: %s, at most %d, so no new pod can be created either", all-s.D, s.surge, plural.Count(all, "pod", "pods"), s.D+s.surge)
		}
	}
	if b.Budget == "" && b.Reason == "" && len(b.WaitsFor) == 0 {
		return nil
	}
	return b
}

// waited records, for the snapshot pods a scale-down of wave removes
// (wave 2 on), what held them in the wave before; and keeps what holds
// this wave's for the next.
func (s *deploySim) waited(sim *simulation, wave *Wave) {
	if w := s.prevWait; w != nil {
		for _, a := range wave.Actions {
			for _, p := range a.Pods {
				if sim.waited == nil {
					sim.waited = map[string]*Wait{}
				}
				sim.waited[p] = w
			}
		}
	}
	s.prevWait = nil
	if b := wave.Binding; b != nil && b.Reason != "" {
		s.prevWait = &Wait{Wave: wave.Index, Budget: b.Budget, Reason: b.Reason}
	}
}

// availableAt: the pods that become available at t, as the next wave
// names what it waits for: a snapshot pod by name, pods the simulation
// made up by ReplicaSet and the wave that created them.
func (s *deploySim) availableAt(t float64) []string {
	var out []string
	for _, rs := range s.all() {
		made := map[int]int{}
		for _, p := range rs.pods {
			switch {
			case p.availableAt != t:
			case p.fact >= 0:
				out = append(out, p.name)
			default:
				made[p.wave] += p.n
			}
		}
		waves := make([]int, 0, len(made))
		for w := range made {
			waves = append(waves, w)
		}
		sort.Ints(waves)
		for _, w := range waves {
			if w == 0 {
				out = append(out, fmt.Sprintf("%d pod(s) of ReplicaSet %s (from its status)", made[w], rs.name))
				continue
			}
			out = append(out, fmt.Sprintf("%d new pod(s) of ReplicaSet %s (wave %d)", made[w], rs.name, w))
		}
	}
	return out
}
