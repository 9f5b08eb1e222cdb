package plan

import (
	"slices"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// ResolveBudgets turns the engine's budgets into the plan's: one Budget per
// limit (unavailable, surge, groups), with what is in use at snapshot
// time. The gate resolves budgets through it too, from the budgets decision
// point alone.
func ResolveBudgets(r *facts.Rollout, budgets []engine.Budget) []Budget {
	out := []Budget{}
	for _, b := range budgets {
		add := func(limit int, typ string) {
			out = append(out, Budget{Name: b.Name, Limit: limit, Type: typ, GroupBy: b.GroupBy, PDB: b.PDB, Advisory: b.Advisory, Source: b.Source, InUse: inUse(r, b, typ)})
		}
		if b.MaxUnavailable != nil {
			add(*b.MaxUnavailable, "unavailable")
		}
		if b.MaxSurge != nil {
			add(*b.MaxSurge, "surge")
		}
		if b.MaxGroups != nil {
			add(*b.MaxGroups, "groups")
		}
	}
	return out
}

// inUse counts the budget's consumption at snapshot time.
func inUse(r *facts.Rollout, b engine.Budget, typ string) int {
	if typ == "surge" && r.Workload.Kind == "Deployment" {
		active := 0
		for _, p := range r.Pods {
			if !p.Terminating && !p.Terminal {
				active++
			}
		}
		return max(0, active-r.Workload.Replicas)
	}
	if CountsAgainstDesired(r, typ, b.GroupBy, b.PDB) {
		available := 0
		for _, p := range r.Pods {
			if p.Available && !p.Terminating && !p.Terminal {
				available++
			}
		}
		return max(0, r.Workload.Replicas-available) + UnavailableElsewhere(r, b.PDB)
	}
	switch typ {
	case "surge":
		// A surge DaemonSet counts each node whose old pod is kept beside
		// a replacement that is not available yet (§3.7).
		if r.Workload.Kind == "DaemonSet" && b.MaxSurge != nil && *b.MaxSurge > 0 {
			return surgeInUse(r)
		}
		return 0
	case "groups":
		groups := map[string]bool{}
		for _, p := range r.Pods {
			if !p.Available {
				groups[engine.GroupKey(&p, b.GroupBy)] = true
			}
		}
		return len(groups)
	}
	n := UnavailableElsewhere(r, b.PDB)
	perGroup := map[string]int{}
	for _, p := range r.Pods {
		if p.Available || (b.PDB != "" && !slices.Contains(p.PDBs, b.PDB)) {
			continue
		}
		perGroup[engine.GroupKey(&p, b.GroupBy)]++
	}
	best := 0
	for _, c := range perGroup {
		best = max(best, c)
	}
	if r.Workload.Kind == "StatefulSet" && b.GroupBy == "" && b.PDB == "" {
		// A replica with no pod at all (deleted, not recreated yet) is
		// unavailable too, as upstream counts replicas (§4.7).
		best += missingReplicas(r)
	}
	return n + best
}

// missingReplicas: a StatefulSet's indexes 0..replicas-1 that no pod holds.
func missingReplicas(r *facts.Rollout) int {
	held := map[int]bool{}
	for _, p := range r.Pods {
		if p.Index >= 0 && p.Index < r.Workload.Replicas {
			held[p.Index] = true
		}
	}
	return r.Workload.Replicas - len(held)
}

// CountsAgainstDesired: a budget of type typ counts as upstream counts a
// Deployment's unavailability, desired replicas minus available pods (§2),
// so a surge pod still starting costs nothing: an ungrouped unavailability
// budget of a Deployment, or a PDB budget whose PDB selects every pod of
// the Deployment (its expected count is then the Deployment's replicas).
func CountsAgainstDesired(r *facts.Rollout, typ, groupBy, pdb string) bool {
	if r.Workload.Kind != "Deployment" || typ != "unavailable" || groupBy != "" {
		return false
	}
	for _, p := range r.Pods {
		if pdb != "" && !slices.Contains(p.PDBs, pdb) {
			return false
		}
	}
	return true
}

// UnavailableElsewhere: the unavailable pods PodDisruptionBudget pdb
// selects outside the workload (0 without one).
func UnavailableElsewhere(r *facts.Rollout, pdb string) int {
	n := 0
	if pdb != "" {
		for _, x := range r.PDBs {
			if x.Name == pdb {
				n += x.UnavailableElsewhere
			}
		}
	}
	return n
}

// surgeInUse: the nodes a surge DaemonSet counts as surge pods at snapshot
// time: an old pod kept beside a replacement that is not available yet.
func surgeInUse(r *facts.Rollout) int {
	n := 0
	for o, nw := range surgeReplacements(r) {
		if keptBeside(&r.Pods[o]) && !r.Pods[nw].Available {
			n++
		}
	}
	return n
}

// countAbove adds d to the item's index in the per-index counts (stsAbove).
func (s *podSim) countAbove(ii int, d int) {
	it := &s.items[ii]
	pos, _ := slices.BinarySearch(s.indexes, it.index)
	for bi, b := range s.budgets {
		if !it.relevant[bi] || b.Type != "unavailable" {
			continue
		}
		f := s.above[bi][it.groups[bi]]
		if f == nil {
			f = &fenwick{n: len(s.indexes), t: map[int]int{}}
			s.above[bi][it.groups[bi]] = f
		}
		f.add(pos, d)
	}
}

// unavailableAbove: unavailable items of the budget's group whose index is
// above the item's (stsAbove).
func (s *podSim) unavailableAbove(bi int, ii int) int {
	it := &s.items[ii]
	f := s.above[bi][it.groups[bi]]
	if f == nil {
		return 0
	}
	pos, _ := slices.BinarySearch(s.indexes, it.index)
	return f.sum(len(s.indexes)-1) - f.sum(pos)
}

// fits reports whether starting the item now keeps every budget, and if
// not, which budget binds.
func (s *podSim) fits(ii int, surge bool) (bool, string) {
	it := &s.items[ii]
	for bi, b := range s.budgets {
		if !it.relevant[bi] || b.Advisory {
			continue
		}
		g := it.groups[bi]
		switch b.Type {
		case "unavailable":
			if surge {
				continue
			}
			if s.stsAbove {
				// §4.5: the pod goes when nothing above it is unavailable.
				if s.unavailableAbove(bi, ii)+s.elsewhere[bi]+1 > b.Limit {
					return false, b.Name
				}
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

// fenwick counts per position 0..n-1 (a binary indexed tree, sparse).
type fenwick struct {
	n int
	t map[int]int
}

func (f *fenwick) add(pos, d int) {
	for i := pos + 1; i <= f.n; i += i & -i {
		f.t[i] += d
	}
}

// sum of positions 0..pos.
func (f *fenwick) sum(pos int) int {
	n := 0
	for i := pos + 1; i > 0; i -= i & -i {
		n += f.t[i]
	}
	return n
}
