package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"

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
	fact        int     // index in facts, -1 for a pod the simulation created
	availableAt float64 // +Inf: never (an old pod that is not available)
}

type simRS struct {
	name string
	spec int
	pods []rsPod
}

func (rs *simRS) avail(t float64) int {
	n := 0
	for _, p := range rs.pods {
		if p.availableAt <= t {
			n++
		}
	}
	return n
}

type deploySim struct {
	r        *facts.Rollout
	d        *engine.Decisions
	o        Options
	D        int
	surge    int
	unavail  int
	old      []*simRS // oldest first
	newRS    *simRS
	t        float64
	actions  []Action
	created  int
	pdbs     []Budget
	pdbWaves map[string][]string // PDB budget → waves that break it
}

func simulateDeployment(r *facts.Rollout, d *engine.Decisions, o Options) *simulation {
	s := &deploySim{r: r, d: d, o: o, D: r.Workload.Replicas, pdbWaves: map[string][]string{}}
	for _, b := range resolveBudgets(r, d) {
		switch {
		case b.Name == "maxSurge" && b.Type == "surge":
			s.surge = b.Limit
		case b.Name == "maxUnavailable" && b.Type == "unavailable":
			s.unavail = b.Limit
		case b.PDB != "" && b.Type == "unavailable":
			s.pdbs = append(s.pdbs, b)
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
		rs := &simRS{name: f.Name, spec: f.Replicas}
		for _, i := range ordered(r, d, byRS[f.Name]) {
			rs.pods = append(rs.pods, rsPod{name: r.Pods[i].Name, fact: i, availableAt: s.initialAvailability(&r.Pods[i])})
		}
		if len(byRS[f.Name]) == 0 && f.Replicas > 0 {
			// No pods in the snapshot: take the ReplicaSet's status.
			for k := 0; k < f.Replicas; k++ {
				at := 0.0
				if k >= f.AvailableReplicas {
					at = s.podDuration()
				}
				rs.pods = append(rs.pods, rsPod{name: fmt.Sprintf("%s-<%d>", f.Name, k), fact: -1, availableAt: at})
			}
		}
		if f.New {
			s.newRS = rs
		} else {
			s.old = append(s.old, rs)
		}
	}
	// The ReplicaSet controller makes pods match spec before anything else.
	for _, rs := range s.all() {
		s.reconcilePods(rs)
	}
	s.run(sim)
	return sim
}

func (s *deploySim) podDuration() float64 {
	return float64(s.o.RecreateSeconds + s.r.Workload.MinReadySeconds)
}

func (s *deploySim) initialAvailability(p *facts.Pod) float64 {
	switch {
	case p.Available:
		return 0
	case p.Ready && p.ReadySeconds >= 0:
		return math.Max(0, float64(int64(s.r.Workload.MinReadySeconds)-p.ReadySeconds))
	case p.Updated:
		return s.podDuration()
	}
	return math.Inf(1)
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
	if len(rs.pods) > rs.spec {
		// Pods are kept in policy (deletion) order: not-yet-available
		// simulated pods first, as upstream ranks unready pods first.
		sort.SliceStable(rs.pods, func(i, j int) bool {
			ai, aj := rs.pods[i].availableAt > s.t, rs.pods[j].availableAt > s.t
			if ai != aj && (rs.pods[i].fact < 0 || rs.pods[j].fact < 0) {
				return ai
			}
			return false
		})
		n := len(rs.pods) - rs.spec
		removed = append(removed, rs.pods[:n]...)
		rs.pods = rs.pods[n:]
	}
	for len(rs.pods) < rs.spec {
		s.created++
		rs.pods = append(rs.pods, rsPod{name: fmt.Sprintf("%s-new-%d", rs.name, s.created), fact: -1, availableAt: s.t + s.podDuration()})
	}
	return removed
}

func (s *deploySim) scale(rs *simRS, to int, reason string) {
	from := rs.spec
	rs.spec = to
	a := Action{Type: ActionScaleRS, ReplicaSet: rs.name, From: intp(from), To: intp(to), Reasons: []string{reason}}
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
		s.newRS = &simRS{name: s.r.Workload.UpdateRevision}
		s.scale(s.newRS, n, fmt.Sprintf("create ReplicaSet %s at the update revision with %d replicas (maxSurge %d over %d desired)", s.newRS.name, n, s.surge, s.D))
		wrote = true // creating is not a scale-up: the same sync goes on to the old ReplicaSets
	} else {
		switch spec := s.newRS.spec; {
		case spec > s.D:
			s.scale(s.newRS, s.D, "scale the new ReplicaSet down to the desired replicas")
			return true
		case spec < s.D:
			if n := s.newRSNewReplicas(spec); n != spec {
				s.scale(s.newRS, n, fmt.Sprintf("scale up within maxSurge: %d pods in all, at most %d", sumSpec(s.all()), s.D+s.surge))
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
		s.newRS = &simRS{name: s.r.Workload.UpdateRevision}
		s.scale(s.newRS, s.D, fmt.Sprintf("Recreate: create ReplicaSet %s with all %d replicas once the old pods are gone", s.newRS.name, s.D))
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
		sim.waves = append(sim.waves, Wave{Index: len(sim.waves) + 1, Start: formatDuration(waveStart), Actions: s.actions})
		s.checkPDBs(sim, len(sim.waves))
		s.actions, waveStart = nil, -1
	}
	for i := 0; i < 100000; i++ {
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
	}
	closeWave()
	for _, b := range s.pdbs {
		if waves := s.pdbWaves[b.Name]; len(waves) > 0 {
			sim.warnings = append(sim.warnings, fmt.Sprintf("wave(s) %s leave more pods selected by PodDisruptionBudget %s unavailable than its limit of %d: the Deployment controller does not honour PDBs (annotate %s=\"true\" to let rollplan pace the rollout by it)", strings.Join(waves, ", "), b.PDB, b.Limit, facts.AnnManaged))
		}
	}
	sim.end = s.t
	if s.newRS == nil || s.newRS.spec != s.D || sumSpec(s.old) != 0 || s.newRS.avail(math.Inf(1)) < s.D {
		sim.notes = append(sim.notes, "the rollout does not complete: pods that never become available hold it (upstream keeps waiting; see halt rules)")
	}
	// Drop the ticks' milliseconds from the estimate.
	sim.end = math.Floor(sim.end + 0.5)
}

// checkPDBs warns when the pods of a PDB would be more unavailable than it
// allows after a wave's actions: upstream rollouts ignore PDBs.
func (s *deploySim) checkPDBs(sim *simulation, wave int) {
	for _, b := range s.pdbs {
		available := 0
		for _, rs := range s.all() {
			available += rs.avail(s.t)
		}
		unavailable := max(0, s.D-available)
		for _, pdb := range s.r.PDBs {
			if pdb.Name == b.PDB {
				unavailable += pdb.UnavailableElsewhere
			}
		}
		if unavailable > b.Limit {
			s.pdbWaves[b.Name] = append(s.pdbWaves[b.Name], fmt.Sprintf("%d (%d unavailable)", wave, unavailable))
		}
	}
}
