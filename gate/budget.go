package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// shortfall is why a disruption does not fit a budget.
type shortfall struct {
	Budget plan.Budget
	// Use: what the budget would hold with the disruption.
	Use int
	// Down: the pods that already count against it (unavailable, or
	// reserved by a disruption admitted moments ago: Reserved).
	Down     []string
	Reserved map[string]bool
	// Missing: pods the workload should have that do not exist (deleted,
	// not replaced yet).
	Missing int
	// Preparing: daemon pods being updated (preparing), by node.
	Preparing map[string]string
}

func (s *shortfall) String() string {
	var parts []string
	for _, p := range s.Down {
		switch {
		case s.Reserved[p]:
			p += " (disruption admitted, not yet seen)"
		case s.Preparing[p] != "":
			p += fmt.Sprintf(" (being updated: node %s cordoned by rollplan for it)", s.Preparing[p])
		}
		parts = append(parts, p)
	}
	if s.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d pod(s) missing (deleted, not replaced yet)", s.Missing))
	}
	down := "none"
	if len(parts) > 0 {
		down = strings.Join(parts, ", ")
	}
	what := "pods unavailable"
	if s.Budget.Type == "groups" {
		what = "groups (" + s.Budget.GroupBy + ") with pods unavailable"
	}
	return fmt.Sprintf("budget %s allows %d %s, this would make %d (already unavailable: %s)", s.Budget.Name, s.Budget.Limit, what, s.Use, down)
}

// fits checks a disruption of pod on top of the live state and the pods
// reserved by disruptions admitted before (extra). It answers nil when
// every enforced budget keeps room, else the first budget it breaks.
//
// Counting is relative to the desired replicas. Pods the workload has
// beyond them (a surge pod, a scale-down in progress) are surplus: while
// the available pods other than this one still reach the desired count,
// disrupting it costs no budget. Otherwise a budget holds the pods that are
// not available (terminating ones only through the hole they leave:
// desired minus the pods not terminating), per group for a grouped budget,
// plus a PDB's unavailable pods elsewhere; a Deployment's ungrouped budget
// holds no more than desired minus available, as upstream counts it, so a
// surge pod still starting does not count.
// Every budget is enforced, advisory ones too: an advisory PDB budget only
// means upstream controllers do not pace by it, and the gate speaks for
// the PDB on deletes the Eviction API never sees.
func fits(r *facts.Rollout, budgets []plan.Budget, pod string, extra map[string]bool) *shortfall {
	prep := preparing(r)
	down := func(p *facts.Pod) bool { return !p.Available || p.Name == pod || extra[p.Name] || prep[p.Name] != "" }
	available, active := 0, 0
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Terminating || p.Terminal {
			continue
		}
		active++
		if !down(p) {
			available++
		}
	}
	if available >= r.Workload.Replicas {
		return nil // surplus
	}
	missing := max(0, r.Workload.Replicas-active)
	for _, b := range budgets {
		if b.Type != "unavailable" && b.Type != "groups" {
			continue
		}
		use, names := budgetUse(r, b, down, missing)
		if plan.CountsAgainstDesired(r, b.Type, b.GroupBy, b.PDB) {
			// Upstream counts a Deployment's unavailability against its
			// desired replicas (desired − available, §2): a surge pod that
			// is still starting costs nothing while the others cover it.
			use = min(use, max(0, r.Workload.Replicas-available)+plan.UnavailableElsewhere(r, b.PDB))
		}
		if use > b.Limit {
			return &shortfall{Budget: b, Use: use, Down: without(names, pod), Reserved: extra, Missing: missing, Preparing: prep}
		}
	}
	return nil
}

// preparing returns the daemon pods whose node rollplan apply cordoned for
// their DaemonSet and that do not run the update revision yet, by node.
// apply counts such a pod in flight from the cordon on (its update is
// under way, whatever the budget says by then), so the gate counts it too:
// otherwise it could admit another disruption into the room apply has
// spent, and then deny apply's own restart of the pod.
func preparing(r *facts.Rollout) map[string]string {
	if r.Workload.Kind != "DaemonSet" {
		return nil
	}
	by := r.Workload.Namespace + "/" + r.Workload.Name
	cordoned := map[string]bool{}
	for _, n := range r.Nodes {
		if n.CordonedBy == by {
			cordoned[n.Name] = true
		}
	}
	if len(cordoned) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range r.Pods {
		if cordoned[p.Node] && !p.Updated && !p.Terminating && !p.Terminal {
			out[p.Name] = p.Node
		}
	}
	return out
}

// budgetUse: what budget b holds when the pods down() says are unavailable,
// and those pods' names (the disrupted pod left out).
func budgetUse(r *facts.Rollout, b plan.Budget, down func(*facts.Pod) bool, missing int) (int, []string) {
	var names []string
	counted := func(p *facts.Pod) bool {
		if p.Terminating || p.Terminal || !down(p) {
			return false
		}
		return b.PDB == "" || slices.Contains(p.PDBs, b.PDB)
	}
	if b.Type == "groups" {
		groups := map[string]bool{}
		for i := range r.Pods {
			if p := &r.Pods[i]; counted(p) {
				groups[engine.GroupKey(p, b.GroupBy)] = true
				names = append(names, p.Name)
			}
		}
		n := len(groups)
		if missing > 0 {
			n++ // a pod that is not there is in a group we cannot know
		}
		return n, names
	}
	n := missing + plan.UnavailableElsewhere(r, b.PDB)
	perGroup := map[string][]string{}
	for i := range r.Pods {
		if p := &r.Pods[i]; counted(p) {
			k := engine.GroupKey(p, b.GroupBy)
			perGroup[k] = append(perGroup[k], p.Name)
		}
	}
	best := []string{}
	for _, g := range sortedKeys(perGroup) {
		if len(perGroup[g]) > len(best) {
			best = perGroup[g]
		}
	}
	return n + len(best), slices.Clone(best)
}

func without(names []string, drop string) []string {
	out := names[:0:0]
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
