package gate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
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
		parts = append(parts, fmt.Sprintf("%s (other workloads' %s selected by PodDisruptionBudget %s)", strings.Join(s.Elsewhere, ", "), plural.Noun(n, "pod", "pods"), s.Budget.PDB))
	default:
		parts = append(parts, fmt.Sprintf("%d pod(s) of other workloads selected by PodDisruptionBudget %s", n, s.Budget.PDB))
	}
	down := "none"
	if len(parts) > 0 {
		down = strings.Join(parts, ", ")
	}
	what := plural.Noun(s.Budget.Limit, "pod", "pods") + " unavailable"
	if s.Budget.Type == "groups" {
		what = plural.Noun(s.Budget.Limit, "group", "groups") + " (" + s.Budget.GroupBy + ") with pods unavailable"
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
			return fmt.Sprintf("its ordinal %d is outside the StatefulSet's ordinals %d to %d (%d %s): the StatefulSet removes it", p.Ordinal, start, end-1, r.Workload.Replicas, plural.Noun(r.Workload.Replicas, "replica", "replicas"))
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
	target := factPod(r, pod)
	if target != nil && leaving(target) != "" {
		return nil
	}
	prep := preparing(r)
	count := plan.Count{
		Down:              func(p *facts.Pod) bool { return p.Name == pod || extra[p.Name] || prep[p.Name] != "" },
		Surplus:           func(p *facts.Pod) bool { return leaving(p) != "" },
		Missing:           true,
		HoleOnly:          true,
		GroupsByPDB:       true,
		AgainstDesired:    true,
		Pod:               target,
		ReservedElsewhere: elsewhere,
	}
	available, missing := count.Present(r)
	if available >= r.Workload.Replicas {
		return nil // extra pods cover it
	}
	for _, b := range budgets {
		if b.Type != "unavailable" && b.Type != "groups" {
			continue
		}
		if count.Use(r, b) <= b.Limit {
			continue
		}
		use, names := count.Held(r, b)
		return &shortfall{Budget: b, Use: use, Down: without(names, pod), Reserved: extra, Missing: missing, Preparing: prep,
			OtherWorkloads: plan.UnavailableElsewhere(r, b.PDB) + elsewhere[b.PDB]}
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
