package parity

import (
	"math"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

type rsPod struct {
	name    string
	fact    int     // facts index; -1 for a pod the snapshot does not name
	availAt float64 // +Inf: never by itself
	exact   bool    // availAt is exact (not a pod created mid-plan, whose time has sync ticks)
	created bool    // created by the ReplicaSet during the plan (not a pod from the snapshot or its status)
}

type rsState struct {
	name  string
	spec  int
	isNew bool
	pods  []rsPod
}

// availableAt reports whether the pod is available at t for sure
// (certain) and possibly (maybe): pods the plan creates become available an
// estimate after their wave's start plus a few milliseconds of sync ticks,
// which the rounded start times hide.
func (p rsPod) availableAt(t float64) (certain, maybe bool) {
	if p.exact {
		return p.availAt <= t, p.availAt <= t
	}
	return p.availAt < t, p.availAt <= t
}

// replicaSets replays a Deployment's ScaleReplicaSet steps and checks
// upstream's bounds step by step: a scale-up never takes Σ spec.replicas
// past replicas + maxSurge nor the new ReplicaSet past replicas; a
// scale-down that removes an available pod never leaves fewer than
// replicas − maxUnavailable available (pod availability as the planner
// estimates it: snapshot pods from their state, created pods an estimated
// duration after their wave starts); a scale-down removes its ReplicaSet's
// pods in deletion order (deletionCompare); the plan ends at new = replicas, old = 0
// unless it says the rollout does not complete.
func (c *checker) replicaSets() {
	r := c.r
	dReplicas := r.Workload.Replicas
	surge, maxUnavail := 0, 0
	for _, b := range c.wp.Budgets {
		switch {
		case b.Name == "maxSurge" && b.Type == "surge":
			surge = b.Limit
		case b.Name == "maxUnavailable" && b.Type == "unavailable":
			maxUnavail = b.Limit
		}
	}
	minAvailable := dReplicas - maxUnavail
	podDur := c.duration(plan.ActionRecreate)
	initAvail := func(p *facts.Pod) float64 {
		switch {
		case p.Available:
			return 0
		case p.Ready && p.ReadySeconds >= 0:
			return math.Max(0, float64(int64(c.minReadySeconds(p))-p.ReadySeconds))
		case p.Updated:
			return podDur
		}
		return math.Inf(1)
	}
	var sets []*rsState
	byName := map[string]*rsState{}
	for _, f := range r.ReplicaSets {
		rs := &rsState{name: f.Name, spec: f.Replicas, isNew: f.New}
		var idx []int
		for i, p := range r.Pods {
			if p.Owner == f.Name && !p.Terminating && !p.Terminal {
				idx = append(idx, i)
			}
		}
		sort.SliceStable(idx, func(a, b int) bool { return c.deletionCompare(idx[a], idx[b]) < 0 })
		for _, i := range idx {
			rs.pods = append(rs.pods, rsPod{name: r.Pods[i].Name, fact: i, availAt: initAvail(&r.Pods[i]), exact: true})
		}
		if len(idx) == 0 {
			for k := 0; k < f.Replicas; k++ {
				at := 0.0
				if k >= f.AvailableReplicas {
					at = podDur
				}
				rs.pods = append(rs.pods, rsPod{fact: -1, availAt: at, exact: true})
			}
		}
		// The ReplicaSet controller first makes the pods match spec: it
		// removes the first pods in deletion order, or creates the missing ones.
		if n := len(rs.pods) - rs.spec; n > 0 {
			rs.pods = rs.pods[n:]
		}
		for len(rs.pods) < rs.spec {
			rs.pods = append(rs.pods, rsPod{fact: -1, availAt: podDur, exact: true, created: true})
		}
		sets = append(sets, rs)
		byName[rs.name] = rs
	}
	total := func() int {
		n := 0
		for _, rs := range sets {
			n += rs.spec
		}
		return n
	}
	available := func(t float64) (certain, maybe int) {
		for _, rs := range sets {
			for _, p := range rs.pods {
				cc, mm := p.availableAt(t)
				if cc {
					certain++
				}
				if mm {
					maybe++
				}
			}
		}
		return
	}
	for wi, w := range c.wp.Waves {
		t := c.starts[wi]
		for _, a := range w.Actions {
			if a.Type != plan.ActionScaleRS {
				c.add(RuleReplicaSet, wi+1, a.Pod, "%s in a Deployment plan that rolls ReplicaSets", a.Type)
				continue
			}
			if a.From == nil || a.To == nil {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "ScaleReplicaSet without from/to")
				continue
			}
			from, to := *a.From, *a.To
			rs := byName[a.ReplicaSet]
			if rs == nil {
				if a.ReplicaSet != r.Workload.UpdateRevision {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales a ReplicaSet that is neither in the snapshot nor the update revision %s", r.Workload.UpdateRevision)
				}
				rs = &rsState{name: a.ReplicaSet, isNew: a.ReplicaSet == r.Workload.UpdateRevision}
				sets = append(sets, rs)
				byName[rs.name] = rs
			}
			if from != rs.spec {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales from %d but the ReplicaSet is at %d replicas by then", from, rs.spec)
				rs.spec = from
				for len(rs.pods) < from {
					rs.pods = append(rs.pods, rsPod{fact: -1, availAt: math.Inf(1), exact: true})
				}
				if len(rs.pods) > from {
					rs.pods = rs.pods[len(rs.pods)-from:]
				}
			}
			if to < 0 {
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales to %d", to)
				continue
			}
			switch {
			case to == from:
				c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales from %d to %d: a no-op", from, to)
			case to > from:
				if !rs.isNew {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "scales old ReplicaSet up from %d to %d", from, to)
				}
				if len(a.Pods) > 0 {
					c.add(RuleReplicaSet, wi+1, a.ReplicaSet, "a scale-up lists pods %v", a.Pods)
				}
				for k := from; k < to; k++ {
					rs.pods = append(rs.pods, rsPod{fact: -1, availAt: t + podDur, created: true})
				}
				rs.spec = to
				if n := total(); n > dReplicas+surge {
					c.add(RuleRSSurge, wi+1, a.ReplicaSet, "scaling up from %d to %d makes %d pods in all, above replicas %d + maxSurge %d", from, to, n, dReplicas, surge)
				}
				if rs.isNew && to > dReplicas {
					c.add(RuleRSSurge, wi+1, a.ReplicaSet, "scales the new ReplicaSet up to %d, above replicas %d", to, dReplicas)
				}
			case to < from:
				c.scaleDown(wi+1, t, rs, &a, minAvailable, dReplicas, maxUnavail, available)
			}
		}
	}
	if c.hasNote("does not complete") {
		return
	}
	for _, rs := range sets {
		switch {
		case rs.isNew && rs.spec != dReplicas:
			c.add(RuleRSFinal, 0, rs.name, "the plan ends with the new ReplicaSet at %d replicas, not %d, and does not say the rollout does not complete", rs.spec, dReplicas)
		case !rs.isNew && rs.spec != 0:
			c.add(RuleRSFinal, 0, rs.name, "the plan ends with old ReplicaSet %s at %d replicas and does not say the rollout does not complete", rs.name, rs.spec)
		}
	}
	if dReplicas > 0 {
		found := false
		for _, rs := range sets {
			found = found || rs.isNew
		}
		if !found {
			c.add(RuleRSFinal, 0, r.Workload.UpdateRevision, "the plan never creates the new ReplicaSet and does not say the rollout does not complete")
		}
	}
}

func (c *checker) minReadyZero() bool {
	if c.r.Workload.MinReadySeconds != 0 {
		return false
	}
	for _, rs := range c.r.ReplicaSets {
		if rs.MinReadySeconds != 0 {
			return false
		}
	}
	return true
}

func (c *checker) scaleDown(wave int, t float64, rs *rsState, a *plan.Action, minAvailable, dReplicas, maxUnavail int, available func(float64) (int, int)) {
	from, to := *a.From, *a.To
	removed := from - to
	if len(a.Pods) > removed {
		c.add(RuleReplicaSet, wave, rs.name, "scaling from %d to %d removes %d pods but lists %d", from, to, removed, len(a.Pods))
	}
	beforeCertain, _ := available(t)
	// Named pods: in this ReplicaSet, and the first ones in deletion order
	// among its named pods still there.
	var named []int // positions in rs.pods
	for _, name := range a.Pods {
		pos := -1
		for k, p := range rs.pods {
			if p.fact >= 0 && p.name == name {
				pos = k
			}
		}
		if pos < 0 {
			c.add(RuleReplicaSet, wave, name, "scaling ReplicaSet %s down removes a pod it does not hold at that point", rs.name)
			continue
		}
		named = append(named, pos)
	}
	removedNamed := map[int]bool{}
	for _, k := range named {
		removedNamed[k] = true
	}
	for _, k := range named {
		for j, p := range rs.pods {
			if p.fact >= 0 && !removedNamed[j] && c.deletionCompare(p.fact, rs.pods[k].fact) < 0 {
				c.add(RuleOrder, wave, rs.pods[k].name, "scaling ReplicaSet %s down removes it while pod %s (order key %s), earlier in deletion order, stays (its key %s)", rs.name, p.name, c.key(p.fact), c.key(rs.pods[k].fact))
				break
			}
		}
	}
	var readyRemoved []string
	for _, k := range named {
		if p := c.r.Pods[rs.pods[k].fact]; p.Ready && p.Scheduled && p.Phase == "Running" {
			readyRemoved = append(readyRemoved, p.Name)
		}
	}
	removedAvailable := []string{}
	for _, k := range named {
		if cc, _ := rs.pods[k].availableAt(t); cc {
			removedAvailable = append(removedAvailable, rs.pods[k].name)
		}
	}
	// Unnamed pods: the plan cannot name them; take the least available
	// first, which leaves the most pods available (the checker stays on the
	// safe side of what it cannot see).
	anon := removed - len(named)
	var rest []rsPod
	for k, p := range rs.pods {
		if !removedNamed[k] {
			rest = append(rest, p)
		}
	}
	if anon > 0 {
		var unnamed []int
		for k, p := range rest {
			if p.fact < 0 {
				unnamed = append(unnamed, k)
			}
		}
		if len(unnamed) < anon {
			c.add(RuleReplicaSet, wave, rs.name, "scaling from %d to %d removes %d pods; it names %d and only %d others exist", from, to, removed, len(named), len(unnamed))
			anon = len(unnamed)
		}
		sort.SliceStable(unnamed, func(x, y int) bool { return rest[unnamed[x]].availAt > rest[unnamed[y]].availAt })
		drop := map[int]bool{}
		for _, k := range unnamed[:anon] {
			drop[k] = true
			if cc, _ := rest[k].availableAt(t); cc {
				removedAvailable = append(removedAvailable, "(unnamed pod)")
			}
		}
		var kept []rsPod
		for k, p := range rest {
			if !drop[k] {
				kept = append(kept, p)
			}
		}
		rest = kept
	}
	rs.pods = rest
	rs.spec = to
	// Deletion rank against pods the plan cannot name (deployment.go: "not-
	// yet-available simulated pods first, as upstream ranks unready pods
	// first"; reference §2.10 rules 1–3: unassigned, Pending and not-Ready
	// pods go before Ready ones): a Ready pod is never removed while a pod
	// the ReplicaSet created is certainly not Ready yet (created pods are
	// Ready a recreate estimate after their creation, the planner's model).
	if len(readyRemoved) > 0 {
		for _, p := range rest {
			if readyAt := p.availAt - float64(c.r.Workload.MinReadySeconds); p.created && readyAt > t {
				c.add(RuleRSRank, wave, readyRemoved[0], "scaling ReplicaSet %s from %d to %d removes Ready pod(s) %s while a pod the ReplicaSet created at %gs, not Ready before %gs, stays (upstream deletes unassigned, pending and unready pods first)", rs.name, from, to, strings.Join(readyRemoved, ", "), p.availAt-c.duration(plan.ActionRecreate), readyAt)
				break
			}
		}
	}
	// Upstream keeps replicas − maxUnavailable available exactly when the
	// ReplicaSet's deletion rank (Ready-based) agrees with availability,
	// that is with minReadySeconds 0 everywhere; with minReadySeconds the
	// rank may delete a Ready pod that is available before one that is
	// Ready but not yet available, so the bound is not upstream's.
	if !c.minReadyZero() {
		return
	}
	_, afterMaybe := available(t)
	if len(removedAvailable) > 0 && afterMaybe < minAvailable && afterMaybe < beforeCertain {
		c.add(RuleRSAvailable, wave, rs.name, "scaling from %d to %d removes available pod(s) %s and leaves at most %d available, below replicas %d − maxUnavailable %d = %d", from, to, strings.Join(removedAvailable, ", "), afterMaybe, dReplicas, maxUnavail, minAvailable)
	}
}
