package plan

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// controllerDecisions: a workload rollplan does not drive is rolled out by
// its own controller, which follows upstream's rules whatever a policy
// says: one not annotated rollplan.dev/managed; a managed StatefulSet or
// DaemonSet whose updateStrategy is not OnDelete (rollplan apply refuses
// it); a managed Deployment whose rollout falls back to the upstream rolling
// update (apply unpauses it and the Deployment controller rolls it). The
// plan shows what runs, so for such a workload the answers the controller
// makes for itself — which pods are in the rollout, Recreate, the order
// (StatefulSet: highest ordinal first; ReplicaSet: its deletion ranking),
// the pacing and the budgets it paces by — are upstream's, as model (the
// caller's Options.Upstream: the native engine) gives them for an
// unmanaged workload (the default strategy, which reproduces upstream). A
// policy's own budgets stay, advisory: the controller does not pace by
// them (rollplan gate, running with the policy, holds it to them). Halt and deny rules are the policy's. Each
// answer the policy changed is named in a warning, and per pod in
// det.Overrides.
func controllerDecisions(r *facts.Rollout, d *engine.Decisions, det *Detail, model engine.Engine) (*engine.Decisions, []string) {
	w := &r.Workload
	if drivenByRollplan(r, d) || (w.Managed && len(d.Halt) > 0) {
		return d, nil // rollplan apply follows the policy, or halts
	}
	if !w.Managed && d.Upstream&engine.ControllerPoints == engine.ControllerPoints {
		return d, nil // nothing to compare: every answer is upstream's already
	}
	cr := r
	if w.Managed {
		// The default strategy answers a managed workload as rollplan drives
		// it; the controller's answers are those of an unmanaged one.
		c := *r
		c.Workload.Managed = false
		cr = &c
	}
	if model == nil {
		return d, []string{fmt.Sprintf("not managed by rollplan, but the %s controller's own rollout could not be modelled (no model given: plan.Options.Upstream): the waves follow the policy, which the controller does not", w.Kind)}
	}
	up, err := model.Decide(context.Background(), cr)
	if err != nil {
		return d, []string{fmt.Sprintf("not managed by rollplan, but the %s controller's own rollout could not be modelled (%v): the waves follow the policy, which the controller does not", w.Kind, err)}
	}
	out := *d
	out.Pods = slices.Clone(d.Pods)
	var changed []string
	note := func(rule string) {
		if !slices.Contains(changed, rule) {
			changed = append(changed, rule)
		}
	}
	override := func(pod, why string) {
		if prev, ok := det.Overrides[pod]; ok {
			why = prev + "; " + why
		}
		det.Overrides[pod] = why
	}
	// A DaemonSet's controller has no order of its own among nodes (it
	// walks a map), so any order the policy gives is one it may take.
	controllerOrders := w.Kind != "DaemonSet"
	fallback := w.Managed && w.Kind == "Deployment"
	var pending []int
	for i, p := range r.Pods {
		if p.Updated {
			continue
		}
		pending = append(pending, i)
		pd, ud := &out.Pods[i], up.Pods[i]
		if pd.InScope != ud.InScope {
			pd.InScope, pd.HeldReason = ud.InScope, ud.HeldReason
			note("scope")
			override(p.Name, fmt.Sprintf("scope: the %s controller's (%s)", w.Kind, inOrHeld(ud)))
		}
		if pd.Action != ud.Action {
			pd.Action, pd.Reasons = ud.Action, ud.Reasons
			// A managed Deployment falls back precisely because some pod
			// cannot go in place: the plan's note says so already.
			if fallback {
				override(p.Name, fmt.Sprintf("eligibility: %s: the rollout falls back to the Deployment controller", ud.Action))
			} else {
				note("eligibility")
				override(p.Name, fmt.Sprintf("eligibility: %s, as the %s controller does", ud.Action, w.Kind))
			}
		}
	}
	// Equal keys (the default strategy's) need no sorting to compare.
	sameKeys := true
	for _, i := range pending {
		if compareKeys(d.Pods[i].Order, up.Pods[i].Order) != 0 {
			sameKeys = false
			break
		}
	}
	if controllerOrders && !sameKeys {
		policyOrder := ordered(r, d, pending)
		for _, i := range pending {
			out.Pods[i].Order = up.Pods[i].Order
		}
		if !slices.Equal(policyOrder, ordered(r, &out, pending)) {
			note("order")
			for _, i := range pending {
				override(r.Pods[i].Name, fmt.Sprintf("order: the %s controller's, not the policy's", w.Kind))
			}
		}
	}
	if out.Pacing != up.Pacing {
		out.Pacing = up.Pacing
		note("pacing")
	}
	// The controller paces by its own budgets; the policy's others become
	// advisory (PDBs already are, in the default strategy).
	budgets := slices.Clone(up.Budgets)
	var advisory []string
	for _, b := range d.Budgets {
		if slices.ContainsFunc(up.Budgets, func(u engine.Budget) bool { return reflect.DeepEqual(u, b) }) {
			continue
		}
		if !b.Advisory {
			b.Advisory = true
			advisory = append(advisory, fmt.Sprintf("%q", b.Name))
		}
		budgets = append(budgets, b)
	}
	dropped := 0
	for _, u := range up.Budgets {
		if !slices.ContainsFunc(d.Budgets, func(b engine.Budget) bool { return reflect.DeepEqual(u, b) }) {
			dropped++
		}
	}
	if len(advisory) > 0 || dropped > 0 {
		note("budgets")
	}
	out.Budgets = budgets
	if len(changed) == 0 {
		return d, nil
	}
	why := "not managed by rollplan"
	switch {
	case w.Managed && w.Kind == "Deployment":
		why = "managed, but the rollout falls back to the upstream rolling update (not every pod goes in place)"
	case w.Managed:
		why = fmt.Sprintf("managed, but updateStrategy %s: rollplan apply leaves it to its controller", w.Strategy.Type)
	}
	msg := fmt.Sprintf("%s: the %s controller rolls this workload out by its own %s, not the policy's, so the waves follow the controller", why, w.Kind, strings.Join(changed, ", "))
	if len(advisory) > 0 {
		msg += fmt.Sprintf("; the policy's budget(s) %s are advisory here (rollplan gate, if it runs with this policy, holds the controller to them)", strings.Join(advisory, ", "))
	}
	switch {
	case w.Managed && w.Kind == "Deployment":
		msg += ". To roll it out by the policy, every change must be able to go in place under pod update policy InPlaceIfPossible or InPlaceOnly"
	case w.Managed:
		msg += ". To roll it out by the policy, set updateStrategy.type OnDelete and use rollplan apply"
	default:
		how := ""
		if w.Kind != "Deployment" {
			how = " with updateStrategy OnDelete"
		}
		msg += fmt.Sprintf(". To roll it out by the policy, annotate it %s=\"true\"%s and use rollplan apply", facts.AnnManaged, how)
	}
	return &out, []string{msg}
}

// drivenByRollplan: rollplan apply drives the rollout, so the policy's
// answers are what runs: a managed StatefulSet or DaemonSet with
// updateStrategy OnDelete (apply refuses the others), or a managed
// Deployment whose pods all go in place by the policy's answers (otherwise
// it falls back to the Deployment controller).
func drivenByRollplan(r *facts.Rollout, d *engine.Decisions) bool {
	w := &r.Workload
	if !w.Managed {
		return false
	}
	switch w.Kind {
	case "Deployment":
		return inPlaceDeployment(r, d)
	case "StatefulSet", "DaemonSet":
		return w.Strategy.Type == "OnDelete"
	}
	return false
}

func inOrHeld(pd engine.PodDecision) string {
	if pd.InScope {
		return "in this rollout"
	}
	return "held: " + pd.HeldReason
}
