package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/plan"
)

// Table prints a plan for a person: per workload a header with revisions
// and budgets, one line per wave, then held pods, halts and warnings.
//
// A list longer than namedMax (a wave's pods of one action, held or blocked
// pods, halts) names its first namedShown entries and counts the rest, so
// that a 5,000-pod DaemonSet stays readable; Wide (-o wide) names them all.
type Table struct {
	Wide bool
}

// namedMax: lists up to this length print whole; longer ones name their
// first namedShown entries and count the rest.
const (
	namedMax   = 12
	namedShown = 8
)

// named caps a list of names for the narrow table: the first namedShown
// and "+N more" (the lists are in the plan's order: the first to go first).
func (t Table) named(xs []string) []string {
	if t.Wide || len(xs) <= namedMax {
		return xs
	}
	out := append(xs[:namedShown:namedShown], fmt.Sprintf("(+%d more)", len(xs)-namedShown))
	return out
}

// Render implements Renderer.
func (t Table) Render(w io.Writer, p *plan.Plan) error {
	if len(p.Workloads) == 0 {
		_, err := fmt.Fprintln(w, "No Deployment, StatefulSet or DaemonSet in the snapshot: nothing to plan.")
		return err
	}
	if v := p.Metadata.KubernetesVersion; v != "" {
		var gates []string
		for _, name := range slices.Sorted(maps.Keys(p.Metadata.FeatureGates)) {
			gates = append(gates, fmt.Sprintf("%s=%t", name, p.Metadata.FeatureGates[name]))
		}
		fmt.Fprintf(w, "Planned for Kubernetes %s controllers (feature gates: %s)\n", v, strings.Join(gates, ", "))
		for _, r := range p.Metadata.PatchRules {
			fmt.Fprintf(w, "  patch rule: %s\n", r)
		}
		fmt.Fprintln(w)
	}
	for i, wp := range p.Workloads {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := t.workload(w, &wp); err != nil {
			return err
		}
	}
	return nil
}

func (t Table) workload(out io.Writer, wp *plan.WorkloadPlan) error {
	if wp.Error != "" {
		// Not planned: the others are.
		fmt.Fprintf(out, "%s %s/%s\n  ERROR: %s\n", wp.Kind, wp.Namespace, wp.Name, wp.Error)
		return nil
	}
	s := wp.Summary
	others := ""
	if len(wp.OtherRevisions) > 0 {
		revs := slices.Sorted(maps.Keys(wp.OtherRevisions))
		var on []string
		for _, rev := range revs {
			n := wp.OtherRevisions[rev]
			on = append(on, fmt.Sprintf("%d %s on %s", n, pods(n), rev))
		}
		others = " (also " + strings.Join(on, ", ") + ")"
	}
	fmt.Fprintf(out, "%s %s/%s  %s -> %s%s\n", wp.Kind, wp.Namespace, wp.Name, wp.FromRevision, wp.ToRevision, others)
	mode := "native"
	if wp.Managed {
		mode = "managed by rollplan"
	}
	fmt.Fprintf(out, "  %s: %d updated, %d to update (%s), %d held; %s, pacing %s, %s, est. %s\n",
		plural.Count(s.Pods, "pod", "pods"), s.Updated, s.ToUpdate, toUpdate(s), s.Held, plural.Count(s.Waves, "wave", "waves"), wp.Pacing, mode, wp.EstimatedDuration)
	if len(wp.Budgets) > 0 {
		var bs []string
		for _, b := range wp.Budgets {
			x := fmt.Sprintf("%s %d/%d", b.Name, b.InUse, b.Limit)
			if b.Type != "unavailable" {
				x += " " + b.Type
			}
			if b.GroupBy != "" {
				x += " per " + b.GroupBy
			}
			if b.Advisory {
				x += " (advisory)"
			}
			bs = append(bs, x)
		}
		fmt.Fprintf(out, "  budgets (in use/limit): %s\n", strings.Join(bs, ", "))
	}
	if len(wp.Denied) > 0 {
		fmt.Fprintln(out, "  DENIED by policy (the gate refuses this spec):")
		for _, h := range wp.Denied {
			fmt.Fprintf(out, "    - %s\n", h)
		}
	}
	if len(wp.Halted) > 0 {
		fmt.Fprintf(out, "  HALTED with %d of %s on the old revision:\n", s.Pods-s.Updated, plural.Count(s.Pods, "pod", "pods"))
		for _, h := range t.named(wp.Halted) {
			fmt.Fprintf(out, "    - %s\n", h)
		}
	}
	if rb := wp.Rollback; rb != nil {
		fmt.Fprintf(out, "  ROLLS BACK to %s after wave %d: %s\n", rb.ToRevision, rb.AfterWave, rb.Reason)
	}
	if st := wp.Stalled; st != nil {
		fmt.Fprintf(out, "  STALLED after %s: %s\n", st.After, st.Reason)
	}
	if len(wp.Waves) > 0 {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  WAVE\tSTART\tBOUND BY\tACTIONS")
		for _, wave := range wp.Waves {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", wave.Index, wave.Start, boundBy(&wave), t.actions(wave.Actions))
			if wave.Gate != nil {
				// Under ACTIONS: the last cell of a line sets no column's width.
				fmt.Fprintf(tw, "  \t\t\tthen %s\n", GateLine(wave.Gate))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(wp.Held) > 0 {
		var hs []string
		for _, h := range wp.Held {
			hs = append(hs, fmt.Sprintf("%s (%s)", h.Pod, h.Reason))
		}
		fmt.Fprintf(out, "  held: %s\n", strings.Join(t.named(hs), ", "))
	}
	for _, b := range blocked(wp.Blocked) {
		why := b.reason
		switch {
		case slices.Contains(wp.Notes, why):
			why = "see the note below"
		case wp.Stalled != nil && (strings.HasPrefix(why, "stalled after ") || strings.HasPrefix(why, "the rollout does not complete")):
			why = "see STALLED above"
		}
		fmt.Fprintf(out, "  blocked: %s (%s)\n", strings.Join(t.named(b.pods), ", "), why)
	}
	for _, n := range wp.Notes {
		if wp.Stalled != nil && strings.HasSuffix(n, wp.Stalled.Reason) {
			continue // the STALLED line says it
		}
		fmt.Fprintf(out, "  note: %s\n", n)
	}
	for _, warn := range wp.Warnings {
		fmt.Fprintf(out, "  warning: %s\n", warn)
	}
	return nil
}

// boundBy names what kept the next pods out of a wave, compactly: the
// budget with its use in the wave ("maxUnavailable 2/2"), "(no budget)"
// when something else held them (explain --wave says what), "-" when
// nothing did.
func boundBy(w *plan.Wave) string {
	b := w.Binding
	switch {
	case b == nil || (b.Budget == "" && b.Reason == ""):
		return "-"
	case b.Budget == "":
		return "(no budget)"
	}
	for _, u := range w.Budgets {
		if u.Name == b.Budget {
			return fmt.Sprintf("%s %d/%d", u.Name, u.InUse, u.Limit)
		}
	}
	return b.Budget
}

// toUpdate breaks the pods to update down as the summary counts them: in
// place and recreated always, the other counts when there are any.
func toUpdate(s plan.Summary) string {
	out := fmt.Sprintf("%d in place, %d recreated", s.InPlace, s.Recreate)
	for _, c := range []struct {
		n    int
		what string
	}{{s.Deleted, "deleted"}, {s.Terminating, "terminating"}, {s.Blocked, "blocked"}} {
		if c.n > 0 {
			out += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return out
}

type blockedGroup struct {
	reason string
	pods   []string
}

// blocked groups the blocked pods by reason, in the order each reason
// first appears: most often one reason holds them all.
func blocked(bs []plan.Held) []blockedGroup {
	var out []blockedGroup
	at := map[string]int{}
	for _, b := range bs {
		i, ok := at[b.Reason]
		if !ok {
			i = len(out)
			at[b.Reason] = i
			out = append(out, blockedGroup{reason: b.Reason})
		}
		out[i].pods = append(out[i].pods, b.Pod)
	}
	return out
}

// actions summarises a wave on one line, grouped by action type. A node's
// preparation is one group in the order it happens: "worker-1: cordon,
// drain [evict ns/a], Recreate agent-x, uncordon".
func (t Table) actions(as []plan.Action) string {
	var parts []string
	var group []string
	typ := ""
	flush := func() {
		if len(group) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", typ, strings.Join(t.named(group), " ")))
		}
		group = nil
	}
	for i := 0; i < len(as); i++ {
		a := as[i]
		if nodeAction(a.Type) {
			flush()
			typ = ""
			var steps []string
			for ; i < len(as) && as[i].Node == a.Node; i++ {
				steps = append(steps, nodeStep(as[i]))
			}
			i--
			parts = append(parts, a.Node+": "+strings.Join(steps, ", "))
			continue
		}
		at := a.Type
		if a.Surge {
			at += "(surge)"
		}
		if at != typ {
			flush()
			typ = at
		}
		switch a.Type {
		case plan.ActionScaleRS:
			x := fmt.Sprintf("%s %d->%d", a.ReplicaSet, *a.From, *a.To)
			if len(a.Pods) > 0 {
				x += " [-" + strings.Join(t.named(a.Pods), " -") + "]"
			}
			group = append(group, x)
		default:
			group = append(group, a.Pod)
		}
	}
	flush()
	return strings.Join(t.named(parts), "; ")
}

func nodeAction(t string) bool {
	return t == plan.ActionCordonNode || t == plan.ActionDrainNode || t == plan.ActionUncordonNode
}

// nodeStep is one action of a node's group.
func nodeStep(a plan.Action) string {
	switch a.Type {
	case plan.ActionCordonNode:
		return "cordon"
	case plan.ActionDrainNode:
		if len(a.Pods) == 0 {
			return "drain"
		}
		return "drain [evict " + strings.Join(a.Pods, " ") + "]"
	case plan.ActionUncordonNode:
		return "uncordon"
	}
	t := a.Type
	if a.Surge {
		t += "(surge)"
	}
	return t + " " + a.Pod
}

func pods(n int) string {
	if n == 1 {
		return "pod"
	}
	return "pods"
}
