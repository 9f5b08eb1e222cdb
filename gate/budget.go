package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
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
	// OtherWorkloads: the unavailable pods of other workloads that a PDB
	// budget counts (plan.UnavailableElsewhere); Elsewhere: their names,
	// when known.
	OtherWorkloads int
	Elsewhere      []string
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
	switch n := s.OtherWorkloads; {
	case n == 0:
	case len(s.Elsewhere) == n:
		parts = append(parts, fmt.Sprintf("%s (other workloads' %s selected by PodDisruptionBudget %s)", strings.Join(s.Elsewhere, ", "), plural(n, "pod", "pods"), s.Budget.PDB))
	default:
		parts = append(parts, fmt.Sprintf("%d pod(s) of other workloads selected by PodDisruptionBudget %s", n, s.Budget.PDB))
	}
	down := "none"
	if len(parts) > 0 {
		down = strings.Join(parts, ", ")
	}
	what := plural(s.Budget.Limit, "pod", "pods") + " unavailable"
	if s.Budget.Type == "groups" {
		what = plural(s.Budget.Limit, "group", "groups") + " (" + s.Budget.GroupBy + ") with pods unavailable"
	}
	if s.Budget.Limit == 0 {
		out := fmt.Sprintf("budget %s allows 0 %s (%s): it admits no disruption of an available pod", s.Budget.Name, what, s.Budget.Source)
		if len(parts) > 0 {
			out += " (already unavailable: " + down + ")"
		}
		return out
	}
	return fmt.Sprintf("budget %s allows %d %s, this would make %d (already unavailable: %s)", s.Budget.Name, s.Budget.Limit, what, s.Use, down)
}

// advice says what to do about the shortfall of a disruption of a pod of
// t: wait for pods to be available again, unless the budget admits none.
func (s *shortfall) advice(t live.Target) string {
	if s.Budget.Limit > 0 {
		return "retry once pods are available again"
	}
	change := fmt.Sprintf("change the budget of %s (%s)", t, s.Budget.Source)
	if s.Budget.PDB != "" {
		change = fmt.Sprintf("change PodDisruptionBudget %s/%s to allow a disruption", t.Namespace, s.Budget.PDB)
	}
	return fmt.Sprintf("retrying will not help: %s, or let the gate admit disruptions of this workload: kubectl annotate --overwrite %s %s -n %s %s=%s (or %s)",
		change, strings.ToLower(t.Kind), t.Name, t.Namespace, AnnEnforcement, Warn, DryRun)
}

// plural: "1 pod", "2 pods".
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// surplus returns what says why a pod of r is one the workload no longer
// wants, which its controller removes whatever the budgets say: a
// StatefulSet pod whose ordinal is outside [ordinals.start,
// ordinals.start+replicas) (a scale-down in progress), or a daemon pod on
// a node that should no longer run it (an untolerated NoExecute taint, a
// node selector or affinity it no longer matches). Upstream counts
// unavailability against the desired replicas, which such a pod is not
// one of: disrupting it costs no budget, and its own unavailability
// costs the others none.
func surplus(r *facts.Rollout) func(*facts.Pod) string {
	switch r.Workload.Kind {
	case "StatefulSet":
		start, end := r.Workload.OrdinalsStart, r.Workload.OrdinalsStart+r.Workload.Replicas
		return func(p *facts.Pod) string {
			if p.Ordinal < 0 || (p.Ordinal >= start && p.Ordinal < end) {
				return ""
			}
			return fmt.Sprintf("its ordinal %d is outside the StatefulSet's ordinals %d to %d (%d %s): the StatefulSet removes it", p.Ordinal, start, end-1, r.Workload.Replicas, plural(r.Workload.Replicas, "replica", "replicas"))
		}
	case "DaemonSet":
		leaving := map[string]bool{}
		for _, n := range r.Nodes {
			if !n.ShouldContinueRunning {
				leaving[n.Name] = true
			}
		}
		return func(p *facts.Pod) string {
			if !leaving[p.Node] {
				return ""
			}
			return fmt.Sprintf("node %s should no longer run it (an untolerated NoExecute taint, or a node selector or affinity it no longer matches): the DaemonSet removes it", p.Node)
		}
	}
	return func(*facts.Pod) string { return "" }
}

// fits checks a disruption of pod on top of the live state and the pods
// reserved by disruptions admitted before (extra). It answers nil when
// every enforced budget keeps room, else the first budget it breaks.
//
// Counting is relative to the desired replicas. A pod the workload no
// longer wants (surplus: its controller removes it anyway) costs nothing,
// and counts neither as unavailable nor as covering for another. Other
// pods beyond the desired replicas (a surge pod, a Deployment's
// scale-down in progress) cover: while the available pods other than this
// one still reach the desired count, disrupting it costs no budget.
// Otherwise a budget holds the pods that are not available (terminating
// ones only through the hole they leave: desired minus the pods not
// terminating), per group for a grouped budget, plus a PDB's unavailable
// pods elsewhere; a Deployment's ungrouped budget holds no more than
// desired minus available, as upstream counts it, so a surge pod still
// starting does not count; a native Parallel StatefulSet's own budget
// (MaxUnavailableStatefulSet off) counts the replicas above the pod only,
// as its controller and the planner do.
// Every budget is enforced, advisory ones too: an advisory PDB budget only
// means upstream controllers do not pace by it, and the gate speaks for
// the PDB on deletes the Eviction API never sees.
//
// elsewhere: per PDB, the disruptions of other workloads' pods it selects
// that were admitted and that the facts do not count yet (sharedPDB).
func fits(r *facts.Rollout, budgets []plan.Budget, pod string, extra map[string]bool, elsewhere map[string]int) *shortfall {
	leaving := surplus(r)
	if p := factPod(r, pod); p != nil && leaving(p) != "" {
		return nil
	}
	prep := preparing(r)
	down := func(p *facts.Pod) bool {
		return leaving(p) == "" && (!p.Available || p.Name == pod || extra[p.Name] || prep[p.Name] != "")
	}
	available, active := 0, 0
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Terminating || p.Terminal || leaving(p) != "" {
			continue
		}
		active++
		if !down(p) {
			available++
		}
	}
	if available >= r.Workload.Replicas {
		return nil // extra pods cover it
	}
	missing := max(0, r.Workload.Replicas-active)
	target := factPod(r, pod)
	above := target != nil && target.Index >= 0 && statefulSetAbove(r)
	for _, b := range budgets {
		if b.Type != "unavailable" && b.Type != "groups" {
			continue
		}
		use, names := budgetUse(r, b, down, missing)
		if above && !b.Advisory && b.Type == "unavailable" && b.GroupBy == "" && b.PDB == "" {
			// The controller replaces a pod whenever no replica above it
			// is unavailable, whatever the pods below (§4.5): its own
			// budget counts the same way, as the planner does.
			use, names = unavailableAbove(r, target, down)
		}
		if plan.CountsAgainstDesired(r, b.Type, b.GroupBy, b.PDB) {
			// Upstream counts a Deployment's unavailability against its
			// desired replicas (desired − available, §2): a surge pod that
			// is still starting costs nothing while the others cover it.
			use = min(use, max(0, r.Workload.Replicas-available)+plan.UnavailableElsewhere(r, b.PDB))
		}
		if b.PDB != "" {
			use += elsewhere[b.PDB]
		}
		if use > b.Limit {
			return &shortfall{Budget: b, Use: use, Down: without(names, pod), Reserved: extra, Missing: missing, Preparing: prep,
				OtherWorkloads: plan.UnavailableElsewhere(r, b.PDB) + elsewhere[b.PDB]}
		}
	}
	return nil
}

// statefulSetAbove: a StatefulSet its controller rolls with Parallel pod
// management and MaxUnavailableStatefulSet off. That controller deletes the
// highest out-of-date ordinal unless a replica above it is unavailable, and
// waits for nothing else (§4.5; the planner's stsAbove).
func statefulSetAbove(r *facts.Rollout) bool {
	w := &r.Workload
	return w.Kind == "StatefulSet" && !w.Managed && w.PodManagementPolicy == "Parallel" && !r.FeatureGates["MaxUnavailableStatefulSet"]
}

// unavailableAbove: the replicas above target (index greater, missing ones
// included) that down() counts, plus target itself, and their names.
func unavailableAbove(r *facts.Rollout, target *facts.Pod, down func(*facts.Pod) bool) (int, []string) {
	n, seen := 1, map[int]bool{}
	var names []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Index < 0 || p.Index >= r.Workload.Replicas {
			continue
		}
		seen[p.Index] = true
		if p.Index > target.Index && (p.Terminating || p.Terminal || down(p)) {
			n++
			names = append(names, p.Name)
		}
	}
	for i := target.Index + 1; i < r.Workload.Replicas; i++ {
		if !seen[i] {
			n++ // missing, not replaced yet
		}
	}
	return n, names
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
