package explain

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/plan"
)

// WaveExplanation is why a wave of a workload's plan starts when it does:
// what of the earlier waves it waits for, the budget that kept its pods
// out of the wave before, and what keeps the next pods out of it.
type WaveExplanation struct {
	Workload Workload `json:"workload"`
	// Wave: its index, of Of waves; Start, its estimated start as an
	// offset from the beginning of the rollout; Pacing, the workload's.
	Wave   int    `json:"wave"`
	Of     int    `json:"of"`
	Start  string `json:"start"`
	Pacing string `json:"pacing"`
	// WaitsFor: what of the earlier waves had to become available (or be
	// gone) for this wave to start; empty for a wave that starts at once.
	WaitsFor []string `json:"waitsFor,omitempty"`
	// HeldBack: why this wave's pods were not in the wave before: what
	// bound that wave. Absent for the first wave.
	HeldBack *Bound `json:"heldBack,omitempty"`
	// Binds: what keeps the next pods out of this wave; absent when
	// nothing does (the last wave).
	Binds *Bound `json:"binds,omitempty"`
	// Budgets: each budget's use in this wave against its limit.
	Budgets []plan.WaveBudget `json:"budgets"`
	// Actions: the wave's actions, as the plan has them.
	Actions []plan.Action `json:"actions"`
	// After: the gate of the wave before, which this wave waits for (its
	// analysis); Gate: this wave's, which the next waits for. Absent
	// when the policy declares no analysis.
	After *plan.Gate `json:"after,omitempty"`
	Gate  *plan.Gate `json:"gate,omitempty"`
}

// Bound is what bound a wave: a budget at its limit, or something else.
type Bound struct {
	// Wave: the wave it bound.
	Wave int `json:"wave"`
	// Budget: the budget that was full, with its limit and its use in
	// that wave; "" when something other than a budget held the pods.
	Budget string `json:"budget,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	InUse  int    `json:"inUse,omitempty"`
	// Reason: the sentence, with the numbers of the check that failed.
	Reason string `json:"reason"`
}

// FindWorkload finds the workload of kind and name in res, in namespace
// ("" for any, when only one namespace has one), and returns its index.
func FindWorkload(res *plan.Result, kind, namespace, name string) (int, error) {
	var found []int
	var all []string
	for i, wp := range res.Plan.Workloads {
		all = append(all, fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name))
		if wp.Kind == kind && wp.Name == name && (namespace == "" || wp.Namespace == namespace) {
			found = append(found, i)
		}
	}
	where := "the snapshot"
	if namespace != "" {
		where = fmt.Sprintf("namespace %q of the snapshot", namespace)
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		var nss []string
		for _, i := range found {
			nss = append(nss, res.Plan.Workloads[i].Namespace)
		}
		return -1, fmt.Errorf("%s %s is in namespaces %s: pass -n NAMESPACE", kind, name, strings.Join(nss, ", "))
	case len(all) == 0:
		return -1, fmt.Errorf("%s %s is not in %s: the snapshot has no Deployment, StatefulSet or DaemonSet", kind, name, where)
	}
	return -1, fmt.Errorf("%s %s is not in %s: it has %s", kind, name, where, strings.Join(all, ", "))
}

// ExplainWave explains wave (1-based) of workload workloadIndex in res; an
// error names the workload and the waves it has when wave is out of range.
func ExplainWave(res *plan.Result, workloadIndex, wave int) (WaveExplanation, error) {
	wp := &res.Plan.Workloads[workloadIndex]
	name := fmt.Sprintf("%s %s/%s", wp.Kind, wp.Namespace, wp.Name)
	switch {
	case wp.Error != "":
		return WaveExplanation{}, fmt.Errorf("%s could not be planned: %s", name, wp.Error)
	case len(wp.Waves) == 0:
		why := "nothing to update"
		if len(wp.Halted) > 0 {
			why = "halted: " + strings.Join(wp.Halted, "; ")
		} else if len(wp.Notes) > 0 {
			why = strings.Join(wp.Notes, "; ")
		}
		return WaveExplanation{}, fmt.Errorf("%s has no wave (%s)", name, why)
	case wave < 1 || wave > len(wp.Waves):
		return WaveExplanation{}, fmt.Errorf("%s has %s: want --wave 1 to %d, not %d", name, plural.Count(len(wp.Waves), "wave", "waves"), len(wp.Waves), wave)
	}
	w := &wp.Waves[wave-1]
	e := WaveExplanation{
		Workload: Workload{Kind: wp.Kind, Namespace: wp.Namespace, Name: wp.Name},
		Wave:     wave, Of: len(wp.Waves), Start: w.Start, Pacing: wp.Pacing,
		Budgets: w.Budgets, Actions: w.Actions,
	}
	if w.Binding != nil {
		e.WaitsFor = w.Binding.WaitsFor
	}
	e.Binds = bound(w)
	e.Gate = w.Gate
	if wave > 1 {
		e.HeldBack = bound(&wp.Waves[wave-2])
		e.After = wp.Waves[wave-2].Gate
	}
	return e, nil
}

// bound: what bound wave w, nil when nothing did.
func bound(w *plan.Wave) *Bound {
	b := w.Binding
	if b == nil || b.Reason == "" {
		return nil
	}
	out := &Bound{Wave: w.Index, Budget: b.Budget, Reason: b.Reason}
	for _, u := range w.Budgets {
		if b.Budget != "" && u.Name == b.Budget {
			out.Limit, out.InUse = u.Limit, u.InUse
			break
		}
	}
	return out
}

// WriteText prints the wave's explanation for a person, as `rollplan
// explain --wave N KIND/NAME` prints it.
func (e WaveExplanation) WriteText(w io.Writer) error {
	out := bufio.NewWriter(w)
	fmt.Fprintf(out, "wave %d of %d of %s, starting at %s, pacing %s\n", e.Wave, e.Of, e.Workload, e.Start, e.Pacing)
	switch {
	case len(e.WaitsFor) > 0:
		fmt.Fprintf(out, "  waits for:   %s to become available (or be gone)\n", strings.Join(e.WaitsFor, ", "))
	case e.Wave == 1:
		fmt.Fprintln(out, "  waits for:   nothing: the first wave starts at once")
	}
	if g := e.After; g != nil {
		fmt.Fprintf(out, "  after:       wave %d's analysis: %s\n", e.Wave-1, gateText(g))
	}
	if b := e.HeldBack; b != nil {
		fmt.Fprintf(out, "  held back:   %s\n", boundText(b, "wave %d was full: %s", "kept out of wave %d: %s"))
	}
	fmt.Fprintln(out, "  actions:")
	for _, a := range e.Actions {
		fmt.Fprintf(out, "    - %s\n", describe(a))
	}
	fmt.Fprintln(out, "  budgets (in use/limit in this wave):")
	for _, b := range e.Budgets {
		use := fmt.Sprintf("%d/%d", b.InUse, b.Limit)
		if b.Uncounted {
			use = fmt.Sprintf("not counted wave by wave (per group; the scheduler places the new pods), limit %d", b.Limit)
		}
		fmt.Fprintf(out, "    - %s: %s\n", b.Name, use)
	}
	if b := e.Binds; b != nil {
		fmt.Fprintf(out, "  binds:       the next pods wait for a later wave: %s\n", b.Reason)
	} else {
		fmt.Fprintln(out, "  binds:       nothing: no pod waits for a later wave because of this one")
	}
	if g := e.Gate; g != nil {
		fmt.Fprintf(out, "  then:        the next wave waits for this one's analysis: %s\n", gateText(g))
	}
	return out.Flush()
}

// boundText words b with full (a budget was full) or other.
func boundText(b *Bound, full, other string) string {
	if b.Budget != "" {
		return fmt.Sprintf(full, b.Wave, b.Reason)
	}
	return fmt.Sprintf(other, b.Wave, b.Reason)
}

// describe prints an action on one line.
func describe(a plan.Action) string {
	s := a.Type
	if a.Surge {
		s += " (surge)"
	}
	switch {
	case a.ReplicaSet != "":
		s += fmt.Sprintf(" %s %d->%d", a.ReplicaSet, *a.From, *a.To)
		if len(a.Pods) > 0 {
			s += " removing " + strings.Join(a.Pods, ", ")
		}
	case a.Pod != "":
		s += " " + a.Pod
		if a.Node != "" {
			s += " on " + a.Node
		}
	case a.Node != "":
		s += " " + a.Node
		if len(a.Pods) > 0 {
			s += " evicting " + strings.Join(a.Pods, ", ")
		}
	}
	return s
}

// gateText words a gate on several lines: the wait, each measurement
// with its query, and the status with the verdict's message.
func gateText(g *plan.Gate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s once the wave's pods are available", g.Soak)
	for _, m := range g.Measurements {
		fmt.Fprintf(&b, "\n                 - %s (%s, %dx every %s", m.Name, m.Provider, m.Count, m.Interval)
		if m.Window != "" {
			fmt.Fprintf(&b, ", window %s", m.Window)
		}
		if m.Options != "" {
			fmt.Fprintf(&b, ", options %s", m.Options)
		}
		fmt.Fprintf(&b, "): %s", m.Query)
	}
	fmt.Fprintf(&b, "\n                 %s", g.Status)
	if g.Status != plan.GatePending {
		fmt.Fprintf(&b, " (onFail %s, maxInconclusive %d): %s", g.OnFail, g.MaxInconclusive, g.Message)
	}
	return b.String()
}
