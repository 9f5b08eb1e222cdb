package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/plan"
)

// Markdown prints a plan as a pull-request comment (GitHub-flavoured
// Markdown): what fails first (denied, halted, stalled, not planned) in a
// callout at the top, then per workload the revisions, the pods and waves
// in one small table, what changes in the pod template and whether pods
// take it in place or are recreated (and why), the budgets, a table of the
// waves, held and blocked pods, notes and warnings.
//
// It stays short at any scale: lists are capped as the table caps them
// (namedMax, namedShown), and a plan of more than namedMax waves shows its
// first namedShown waves, a row counting the others and the last wave.
type Markdown struct{}

// templateNote starts the note plan --change adds with the fields of the
// pod template the change touches; it is shown as "What changes".
const templateNote = "pod template changes: "

// Render implements Renderer.
func (m Markdown) Render(w io.Writer, p *plan.Plan) error {
	var b strings.Builder
	n := len(p.Workloads)
	fmt.Fprintf(&b, "## rollplan plan: %d %s\n\n", n, plural.Noun(n, "workload", "workloads"))
	m.attention(&b, p)
	if v := p.Metadata.KubernetesVersion; v != "" {
		var gates []string
		for _, name := range slices.Sorted(maps.Keys(p.Metadata.FeatureGates)) {
			gates = append(gates, fmt.Sprintf("%s=%t", name, p.Metadata.FeatureGates[name]))
		}
		fmt.Fprintf(&b, "Planned for Kubernetes %s controllers (feature gates: %s), engine %s, at %s.\n\n", v, code(strings.Join(gates, ", ")), p.Metadata.Engine, p.Metadata.Now)
		for _, r := range p.Metadata.PatchRules {
			fmt.Fprintf(&b, "- Patch rule: %s\n", r)
		}
		if len(p.Metadata.PatchRules) > 0 {
			b.WriteString("\n")
		}
	}
	if n == 0 {
		b.WriteString("No Deployment, StatefulSet or DaemonSet to plan: nothing rolls out.\n\n")
	}
	for i := range p.Workloads {
		m.workload(&b, &p.Workloads[i])
	}
	if len(p.Metadata.Warnings) > 0 {
		b.WriteString("### Warnings about the input\n\n")
		for _, x := range named(p.Metadata.Warnings) {
			fmt.Fprintf(&b, "- %s\n", text(x))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// attention is the callout at the top: every workload that is denied,
// halted, stalled or could not be planned, else one line saying all is well.
func (m Markdown) attention(b *strings.Builder, p *plan.Plan) {
	var lines []string
	counts := map[string]int{}
	for _, wp := range p.Workloads {
		id := code(fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name))
		if wp.Error != "" {
			counts["not planned"]++
			lines = append(lines, fmt.Sprintf("**Not planned** %s: %s", id, text(wp.Error)))
			continue
		}
		for _, d := range wp.Denied {
			counts["denied"]++
			lines = append(lines, fmt.Sprintf("**Denied** %s: %s", id, text(d)))
		}
		if len(wp.Halted) > 0 {
			counts["halted"]++
			lines = append(lines, fmt.Sprintf("**Halted** %s: %s", id, text(strings.Join(named(wp.Halted), "; "))))
		}
		if rb := wp.Rollback; rb != nil {
			counts["rolled back"]++
			lines = append(lines, fmt.Sprintf("**Rolls back** %s to %s after wave %d: %s", id, code(rb.ToRevision), rb.AfterWave, text(rb.Reason)))
		}
		if st := wp.Stalled; st != nil {
			counts["stalled"]++
			lines = append(lines, fmt.Sprintf("**Stalled** %s after %s: %s", id, st.After, text(st.Reason)))
		}
	}
	if len(lines) == 0 {
		if len(p.Workloads) > 0 {
			b.WriteString("> [!NOTE]\n> Every rollout completes within its budgets: nothing denied, halted or stalled.\n\n")
		}
		return
	}
	var head []string
	for _, k := range []string{"denied", "halted", "rolled back", "stalled", "not planned"} {
		if counts[k] > 0 {
			head = append(head, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	fmt.Fprintf(b, "> [!CAUTION]\n> **%s**\n>\n", strings.Join(head, ", "))
	for _, l := range named(lines) {
		fmt.Fprintf(b, "> - %s\n", l)
	}
	b.WriteString("\n")
}

func (m Markdown) workload(b *strings.Builder, wp *plan.WorkloadPlan) {
	id := fmt.Sprintf("%s %s", wp.Kind, code(wp.Namespace+"/"+wp.Name))
	if wp.Error != "" {
		fmt.Fprintf(b, "### %s: not planned\n\n%s\n\n", id, text(wp.Error))
		return
	}
	rev := code(wp.ToRevision)
	if wp.FromRevision != wp.ToRevision {
		rev = code(wp.FromRevision) + " → " + code(wp.ToRevision)
	}
	fmt.Fprintf(b, "### %s: %s\n\n", id, rev)
	s := wp.Summary
	driver := "the " + wp.Kind + " controller (native)"
	if wp.Managed {
		driver = "rollplan (managed), pod update policy " + wp.PodUpdatePolicy
	}
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(b, "| Pods | %d: %d updated, %d to update (%s), %d held |\n", s.Pods, s.Updated, s.ToUpdate, toUpdate(s), s.Held)
	fmt.Fprintf(b, "| Waves | %d, pacing %s, estimated %s |\n", len(wp.Waves), wp.Pacing, wp.EstimatedDuration)
	fmt.Fprintf(b, "| Driven by | %s |\n", driver)
	for _, bu := range wp.Budgets {
		x := fmt.Sprintf("%s %d/%d in use", bu.Name, bu.InUse, bu.Limit)
		if bu.Type != "unavailable" {
			x += " (" + bu.Type + ")"
		}
		if bu.GroupBy != "" {
			x += " per " + bu.GroupBy
		}
		if bu.Advisory {
			x += " (advisory)"
		}
		fmt.Fprintf(b, "| Budget | %s: %s |\n", cell(x), cell(bu.Source))
	}
	b.WriteString("\n")
	var notes []string
	for _, n := range wp.Notes {
		if fields, ok := strings.CutPrefix(n, templateNote); ok {
			b.WriteString("**What changes in the pod template**\n\n")
			for _, f := range strings.Split(fields, "; ") {
				fmt.Fprintf(b, "- %s\n", text(f))
			}
			b.WriteString("\n")
			continue
		}
		notes = append(notes, n)
	}
	if s.ToUpdate > 0 {
		fmt.Fprintf(b, "**In place or recreate:** %s.\n\n", toUpdate(s))
		why := reasons(wp)
		switch {
		case s.Recreate == 0:
		case !wp.Managed:
			why = append(why, fmt.Sprintf("recreated: the %s controller replaces pods (upstream controllers never update in place; rollplan updates in place only a workload annotated rollplan.dev/managed: \"true\" with a pod update policy InPlaceIfPossible or InPlaceOnly)", wp.Kind))
		case wp.PodUpdatePolicy == "Recreate":
			why = append(why, "recreated: the pod update policy is Recreate (annotation rollplan.dev/pod-update-policy)")
		}
		for _, r := range why {
			fmt.Fprintf(b, "- %s\n", text(r))
		}
		if len(why) > 0 {
			b.WriteString("\n")
		}
	}
	if len(wp.Waves) > 0 {
		b.WriteString("| Wave | Start | Bound by | Actions |\n|---:|---|---|---|\n")
		waves := wp.Waves
		if len(waves) > namedMax {
			for _, wave := range waves[:namedShown] {
				waveRow(b, wave)
			}
			rest := waves[namedShown : len(waves)-1]
			fmt.Fprintf(b, "| … | %s–%s | | %d more %s (`-o table` or `-o json` lists every wave) |\n", rest[0].Start, rest[len(rest)-1].Start, len(rest), plural.Noun(len(rest), "wave", "waves"))
			waveRow(b, waves[len(waves)-1])
		} else {
			for _, wave := range waves {
				waveRow(b, wave)
			}
		}
		b.WriteString("\n")
	}
	if len(wp.Held) > 0 {
		var hs []string
		for _, h := range wp.Held {
			hs = append(hs, fmt.Sprintf("%s (%s)", h.Pod, h.Reason))
		}
		fmt.Fprintf(b, "**Held:** %s\n\n", text(strings.Join(named(hs), ", ")))
	}
	for _, g := range blocked(wp.Blocked) {
		fmt.Fprintf(b, "**Blocked:** %s (%s)\n\n", text(strings.Join(named(g.pods), ", ")), text(g.reason))
	}
	list(b, "Notes", notes)
	list(b, "Warnings", wp.Warnings)
}

// reasons are the distinct reasons of the pod actions (in place,
// recreated, deleted), most frequent first, with their counts: why the
// pods go the way they go.
func reasons(wp *plan.WorkloadPlan) []string {
	count := map[string]int{}
	var order []string
	for _, wave := range wp.Waves {
		for _, a := range wave.Actions {
			if a.Pod == "" || nodeAction(a.Type) {
				continue
			}
			for _, r := range a.Reasons {
				k := a.Type + ": " + r
				if count[k] == 0 {
					order = append(order, k)
				}
				count[k]++
			}
		}
	}
	slices.SortStableFunc(order, func(a, b string) int { return count[b] - count[a] })
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf("%d × %s", count[k], k)
	}
	return named(out)
}

// waveRow is a wave as the table prints it: start, what bound it (the
// table's BOUND BY), its actions.
func waveRow(b *strings.Builder, wave plan.Wave) {
	fmt.Fprintf(b, "| %d | %s | %s | %s |\n", wave.Index, wave.Start, cell(boundBy(&wave)), cell(Table{}.actions(wave.Actions)))
	if wave.Gate != nil {
		fmt.Fprintf(b, "| | | | then %s |\n", cell(GateLine(wave.Gate)))
	}
}

func list(b *strings.Builder, title string, xs []string) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(b, "**%s**\n\n", title)
	for _, x := range named(xs) {
		fmt.Fprintf(b, "- %s\n", text(x))
	}
	b.WriteString("\n")
}

// named caps a list as the narrow table does.
func named(xs []string) []string { return Table{}.named(xs) }

// code is inline code; backticks inside become quotes.
func code(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

// text keeps a message on its line and from opening HTML or a link.
func text(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("<", "&lt;", "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`).Replace(s)
}

// cell is text fit for a table cell.
func cell(s string) string { return strings.ReplaceAll(text(s), "|", `\|`) }
