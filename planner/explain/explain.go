// Package explain says why the plan puts a pod where it does, and why a
// wave starts when it does: every decision behind it (the policy's answers,
// Go's overrides, the wave, the budgets, what it waited for), from a
// plan.Result. `rollplan explain` prints an Explanation as text (WriteText),
// JSON or YAML (planner/render's JSONValue, YAMLValue); the HTML plan shows
// the same text for a pod.
//
// An Explanation is data: its JSON field names are lowerCamel and stable,
// changed by adding, never by renaming (as the Plan's are).
package explain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
)

// Explanation is why the plan puts one pod where it does. Fields after
// State are set as far as the pod's story goes: a pod at the update
// revision stops at Updated, a held pod at Scope (unless Go overrode the
// policy), a pod in no wave at Wave.None.
type Explanation struct {
	// Pod and Namespace name the pod; Workload its workload.
	Pod       string   `json:"pod"`
	Namespace string   `json:"namespace"`
	Workload  Workload `json:"workload"`
	// Revision: the pod's; UpdateRevision: the workload's.
	Revision       string `json:"revision"`
	UpdateRevision string `json:"updateRevision"`
	State          State  `json:"state"`
	// Updated: the pod is at the update revision already; nothing to do,
	// and nothing below is set.
	Updated bool `json:"updated,omitempty"`
	// Changes: the template fields that differ between the pod and the
	// update revision, and whether a running pod can take each.
	Changes []Change `json:"changes,omitempty"`
	// Scope: in this rollout, or held (with the policy's reason).
	Scope *Scope `json:"scope,omitempty"`
	// Eligibility: the policy's answer, InPlace or Recreate, with why.
	Eligibility *Eligibility `json:"eligibility,omitempty"`
	// OrderKey: the policy's sort key; pods go in ascending key order.
	OrderKey []any `json:"orderKey,omitempty"`
	// Wave: where the plan puts the pod, or why nowhere.
	Wave *Wave `json:"wave,omitempty"`
	// Actions: the actions of the pod's wave that name it (or, for a
	// DaemonSet, prepare its node).
	Actions []Action `json:"actions,omitempty"`
	// Waited: why the pod is not in the wave before its own (the budget
	// that was full, or what else held it); only for a pod of wave 2 on.
	Waited *plan.Wait `json:"waited,omitempty"`
	// Budgets: the workload's budgets as the plan resolved them.
	Budgets []plan.Budget `json:"budgets,omitempty"`
	// Kubernetes: the version and feature gates that decided how a native
	// StatefulSet's controller rolls it, when they change anything.
	Kubernetes string `json:"kubernetes,omitempty"`
}

// Workload names a workload.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String prints the workload as KIND NAMESPACE/NAME.
func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}

// State is the pod as the snapshot shows it.
type State struct {
	Phase       string `json:"phase"`
	Ready       bool   `json:"ready"`
	Available   bool   `json:"available"`
	Terminating bool   `json:"terminating,omitempty"`
	Node        string `json:"node"`
	Zone        string `json:"zone"`
	Restarts    int    `json:"restarts"`
}

// Change is one template field the pod differs in.
type Change struct {
	Path  string `json:"path"`
	Class string `json:"class"`
	// InPlace: a running pod can take it; otherwise Detail says why not.
	InPlace bool   `json:"inPlace"`
	Detail  string `json:"detail,omitempty"`
}

// Scope is whether the pod is in this rollout.
type Scope struct {
	InRollout bool `json:"inRollout"`
	// HeldReason: the policy's reason for holding it.
	HeldReason string `json:"heldReason,omitempty"`
	// Override: why Go changed the policy's answers for this pod (its
	// controller rolls it otherwise; the API refuses an in-place change).
	Override string `json:"override,omitempty"`
}

// Eligibility is how the pod is updated.
type Eligibility struct {
	// Action: InPlace or Recreate, as the policy answered.
	Action  string   `json:"action"`
	Reasons []string `json:"reasons"`
	// OptIn: every change could go in place, but the workload does not
	// opt in: what to annotate.
	OptIn string `json:"optIn,omitempty"`
}

// Wave is where the plan puts the pod.
type Wave struct {
	// Index of the pod's wave, of Of; Start, as an offset from the
	// beginning of the rollout; Pacing, the workload's.
	Index  int    `json:"index,omitempty"`
	Of     int    `json:"of,omitempty"`
	Start  string `json:"start,omitempty"`
	Pacing string `json:"pacing,omitempty"`
	// Halted: the rollout is halted, with the halt reasons; no wave.
	Halted []string `json:"halted,omitempty"`
	// None: why the pod is in no wave (the plan's notes), when it is
	// neither halted nor in a wave.
	None string `json:"none,omitempty"`
}

// Action is one action of the pod's wave that names it.
type Action struct {
	// Description: the action's type, with a ReplicaSet's scale (from->to)
	// or the node it prepares.
	Description string   `json:"description"`
	Reasons     []string `json:"reasons"`
}

// Pod explains pod podIndex (in res.Details[workloadIndex].Facts.Pods) of
// workload workloadIndex (in res.Plan.Workloads and res.Details, which
// line up). Both indexes must be in range.
func Pod(res *plan.Result, workloadIndex, podIndex int) Explanation {
	det := res.Details[workloadIndex]
	wp := &res.Plan.Workloads[workloadIndex]
	r := det.Facts
	p := &r.Pods[podIndex]
	e := Explanation{
		Pod: p.Name, Namespace: r.Workload.Namespace,
		Workload: Workload{Kind: r.Workload.Kind, Namespace: r.Workload.Namespace, Name: r.Workload.Name},
		Revision: p.Revision, UpdateRevision: r.Workload.UpdateRevision,
		State: State{Phase: p.Phase, Ready: p.Ready, Available: p.Available, Terminating: p.Terminating, Node: p.Node, Zone: p.Zone, Restarts: p.Restarts},
	}
	if p.Updated {
		e.Updated = true
		return e
	}
	canInPlace := len(p.Changes) > 0
	for _, c := range p.Changes {
		ch := Change{Path: c.Path, Class: c.Class, InPlace: c.InPlace}
		if !c.InPlace {
			ch.Detail = c.Detail
			canInPlace = false
		}
		e.Changes = append(e.Changes, ch)
	}
	pd := det.Decisions.Pods[podIndex]
	override, overridden := det.Overrides[p.Name]
	e.Scope = &Scope{InRollout: pd.InScope, HeldReason: pd.HeldReason, Override: override}
	if pd.InScope {
		e.Scope.HeldReason = ""
	}
	if !pd.InScope && !overridden {
		return e
	}
	e.Eligibility = &Eligibility{Action: pd.Action, Reasons: pd.Reasons}
	if w := r.Workload; canInPlace && pd.Action == engine.Recreate && (!w.Managed || w.PodUpdatePolicy == "" || w.PodUpdatePolicy == "Recreate") {
		how := fmt.Sprintf("%s=\"true\" and %s=InPlaceIfPossible", facts.AnnManaged, facts.AnnPodUpdatePolicy)
		if w.Managed {
			how = facts.AnnPodUpdatePolicy + "=InPlaceIfPossible"
		}
		e.Eligibility.OptIn = fmt.Sprintf("every change could go in place, but %s %s does not opt in: annotate it %s", w.Kind, w.Name, how)
	}
	e.OrderKey = pd.Order
	if e.OrderKey == nil {
		e.OrderKey = []any{}
	}
	if len(wp.Halted) > 0 && det.Wave[p.Name] == 0 {
		// A halt rule plans no wave; an analysis halt keeps the waves
		// before it.
		e.Wave = &Wave{Halted: wp.Halted}
		return e
	}
	wave := det.Wave[p.Name]
	if wave == 0 {
		e.Wave = &Wave{None: strings.Join(append(slices.Clone(wp.Notes), "the plan holds no action for this pod"), "; ")}
		return e
	}
	w := wp.Waves[wave-1]
	e.Wave = &Wave{Index: wave, Of: len(wp.Waves), Start: w.Start, Pacing: wp.Pacing}
	for _, a := range w.Actions {
		// A node action of the pod's node prepares it (DaemonSet).
		prepares := a.Pod == "" && a.Node != "" && a.Node == p.Node && wp.Kind == "DaemonSet"
		if a.Pod == p.Name || slices.Contains(a.Pods, p.Name) || prepares {
			desc := a.Type
			if a.ReplicaSet != "" {
				desc = fmt.Sprintf("%s %s %d->%d", a.Type, a.ReplicaSet, *a.From, *a.To)
			}
			if prepares {
				desc += " " + a.Node
			}
			e.Actions = append(e.Actions, Action{Description: desc, Reasons: a.Reasons})
		}
	}
	e.Waited = det.Waited[p.Name]
	e.Budgets = wp.Budgets
	e.Kubernetes = VersionDecided(r)
	return e
}

// VersionDecided names the Kubernetes version and the feature gates that
// decided how a native StatefulSet's controller rolls it, or "" where the
// version changes nothing (reference §8).
func VersionDecided(r *facts.Rollout) string {
	w := r.Workload
	if w.Kind != "StatefulSet" || w.Managed {
		return ""
	}
	v, err := kubeversion.ParseAny(r.KubernetesVersion)
	if err != nil {
		return ""
	}
	gate := func(name string) string {
		on := r.FeatureGates[name]
		how := "--feature-gates"
		if def, ok := kubeversion.Gates(v)[name]; ok && def == on {
			how = "the " + v.String() + " default"
		}
		return fmt.Sprintf("%s=%t (%s)", name, on, how)
	}
	switch w.Strategy.Type {
	case "Recreate":
		return fmt.Sprintf("planned for %s; %s decides whether the controller takes updateStrategy Recreate", v, gate(kubeversion.StatefulSetRecreateStrategy))
	case "RollingUpdate":
		on := r.FeatureGates[kubeversion.MaxUnavailableStatefulSet]
		switch {
		case !on:
			return fmt.Sprintf("planned for %s; %s: the controller replaces one pod at a time and ignores maxUnavailable", v, gate(kubeversion.MaxUnavailableStatefulSet))
		case w.PodManagementPolicy == "Parallel" && v.AtLeast(kubeversion.V1_37):
			return fmt.Sprintf("planned for %s; %s: maxUnavailable pods at once, and unavailable old pods first whatever the budget (two-phase Parallel update)", v, gate(kubeversion.MaxUnavailableStatefulSet))
		default:
			return fmt.Sprintf("planned for %s; %s: maxUnavailable pods at once (KEP-961)", v, gate(kubeversion.MaxUnavailableStatefulSet))
		}
	}
	return ""
}

// WaitText says in a sentence why a pod waited for a later wave: "wave 1
// was full: maxUnavailable 2/2: ...", with the pod it went after when the
// budget kept that one out first.
func WaitText(w *plan.Wait) string {
	s := fmt.Sprintf("kept out of wave %d: %s", w.Wave, w.Reason)
	if w.Budget != "" {
		s = fmt.Sprintf("wave %d was full: %s", w.Wave, w.Reason)
	}
	if w.Behind != "" {
		s += fmt.Sprintf("; this pod comes after %s in policy order", w.Behind)
	}
	return s
}
