package executor

// Node preparation (the policy's node_preparation, DaemonSets only): the
// plan puts, in the wave of a daemon pod's InPlaceUpdate or Recreate, a
// CordonNode before it (and a DrainNode for "drain") and an UncordonNode
// after it. A step carries them out in that order:
//
//  1. CordonNode: the daemon pod's action must fit every budget now (the
//     pod counts as in flight from here on); then one merge patch of the
//     Node, spec.unschedulable=true and annotation rollplan.dev/cordoned-by
//     naming the DaemonSet, with the Node's resourceVersion as
//     precondition. A node cordoned already counts as prepared: by rollplan
//     for this DaemonSet (an earlier step), or by someone else (it is left
//     cordoned for good).
//  2. DrainNode: only on a node this step found cordoned; every pod bound
//     to it that facts.Drainable says a drain evicts is evicted (UID
//     precondition; a PodDisruptionBudget's refusal is "not now", see
//     pdbRefusal). The node is drained once no such pod is left,
//     terminating ones included. On v1.37+ a node rollplan cordoned
//     carries the conditions DrainInProgress and Drained meanwhile (see
//     setDrainConditions).
//  3. The pod's own action runs only once its node was found cordoned (and
//     drained) in this very step.
//  4. UncordonNode: only on a node annotated for this DaemonSet, once every
//     daemon pod on it runs the update revision and is available (pods held
//     out of the rollout aside): rollplan's drain conditions removed
//     first, then spec.unschedulable=false and the annotation removed,
//     with the resourceVersion as precondition.
//
// Nothing is remembered between steps: the state is the Node (its cordon
// and annotation) and its pods, read again from the API server before each
// action. A node rollplan cordoned whose pod is not updated yet is in
// flight: the planner puts that pod first, whatever the budget, and the
// step counts it (spent) from its CordonNode on, so a restarted apply
// finishes the node it prepared before it prepares another.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
)

// Event reasons of node preparation.
const (
	reasonNodeCordoned   = "NodeCordoned"
	reasonNodeDrain      = "NodeDrain"
	reasonNodeUncordoned = "NodeUncordoned"
)

// Keys of spent (see act) for the nodes this step found prepared: pod
// names contain neither ':' nor '/', so they never collide.
func cordonedKey(node string) string { return "cordoned:" + node }
func drainedKey(node string) string  { return "drained:" + node }

// ownCordonKey: this step cordoned the node for the DaemonSet (in a dry
// run too, where the node shows no annotation afterwards).
func ownCordonKey(node string) string { return "cordoned-by-rollplan:" + node }

// cordonedBy is the AnnCordonedBy value for the target.
func (e *Executor) cordonedBy() string { return e.opts.Namespace + "/" + e.opts.Name }

// nodeUnprepared says why a pod action must wait: the first wave prepares
// its node, and this step has not found the node cordoned (drained) yet.
func nodeUnprepared(wp plan.WorkloadPlan, a plan.Action, spent map[string]bool) string {
	if a.Node == "" || (a.Type != plan.ActionInPlace && a.Type != plan.ActionRecreate) || len(wp.Waves) == 0 {
		return ""
	}
	for _, x := range wp.Waves[0].Actions {
		if x.Node != a.Node {
			continue
		}
		switch {
		case x.Type == plan.ActionCordonNode && !spent[cordonedKey(a.Node)]:
			return fmt.Sprintf("node %s is not cordoned yet: pod %s waits", a.Node, a.Pod)
		case x.Type == plan.ActionDrainNode && !spent[drainedKey(a.Node)]:
			return fmt.Sprintf("node %s is not drained yet: pod %s waits", a.Node, a.Pod)
		}
	}
	return ""
}

// podActionOn is the first wave's InPlaceUpdate or Recreate on the node.
func podActionOn(wp plan.WorkloadPlan, node string) *plan.Action {
	if len(wp.Waves) == 0 {
		return nil
	}
	for i, a := range wp.Waves[0].Actions {
		if a.Node == node && (a.Type == plan.ActionInPlace || a.Type == plan.ActionRecreate) {
			return &wp.Waves[0].Actions[i]
		}
	}
	return nil
}

func findNode(state *liveState, name string) *corev1.Node {
	for _, n := range state.snap.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// nodeAction carries out a CordonNode, DrainNode or UncordonNode of the
// first wave, against a fresh read. It returns the result and the outcome
// label of the metrics.
func (e *Executor) nodeAction(ctx context.Context, wp plan.WorkloadPlan, a plan.Action, spent map[string]bool) (ActionResult, string, error) {
	r := ActionResult{Type: a.Type, Node: a.Node, Reason: strings.Join(a.Reasons, "; ")}
	skip := func(metric, format string, args ...any) (ActionResult, string, error) {
		r.Outcome, r.Reason = Skipped, fmt.Sprintf(format, args...)
		return r, metric, nil
	}
	state, err := e.readFrom(ctx, e.checker)
	if err != nil {
		return r, outcomeError, err
	}
	node := findNode(state, a.Node)
	if node == nil {
		return skip(outcomeConflict, "node %s is gone since the plan was made", a.Node)
	}
	// Like every write, not cut short by a cancelled context.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch a.Type {
	case plan.ActionCordonNode:
		return e.cordon(wctx, state, wp, node, r, spent)
	case plan.ActionDrainNode:
		if !spent[cordonedKey(a.Node)] {
			return skip(outcomeWaiting, "node %s is not cordoned yet: not drained", a.Node)
		}
		return e.drain(wctx, state, wp, node, r, spent)
	}
	return e.uncordon(wctx, state, wp, node, r)
}

func (e *Executor) cordon(ctx context.Context, state *liveState, wp plan.WorkloadPlan, node *corev1.Node, r ActionResult, spent map[string]bool) (ActionResult, string, error) {
	by := e.cordonedBy()
	prepared := func() {
		spent[cordonedKey(node.Name)] = true
		if pa := podActionOn(wp, node.Name); pa != nil {
			spent[pa.Pod] = true // in flight from now on
		}
	}
	if node.Spec.Unschedulable && node.Annotations[facts.AnnCordonedBy] == by {
		// Its pod has been in flight since the cordon (an earlier step).
		prepared()
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("nothing to write: node %s is cordoned for %s already", node.Name, by)
		return r, outcomeUnchanged, nil
	}
	pa := podActionOn(wp, node.Name)
	if pa == nil {
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("the plan updates no pod on node %s in this wave", node.Name)
		return r, outcomeConflict, nil
	}
	if fp := factPod(state.rollout, pa.Pod); fp == nil || fp.Updated || fp.Terminating {
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("pod %s on node %s is gone, terminating or updated since the plan was made: node %s is not cordoned", pa.Pod, node.Name, node.Name)
		return r, outcomeConflict, nil
	}
	extra := map[string]bool{pa.Pod: true}
	for p := range spent {
		extra[p] = true
	}
	// A node cordoned for this DaemonSet is still in flight until it is
	// uncordoned, even once its new pod is available: its pod counts
	// against the budget until then, so that the nodes cordoned at once
	// never outnumber the budget (the uncordon, earlier in the wave,
	// goes first).
	for _, n := range state.snap.Nodes {
		if n.Name == node.Name || !n.Spec.Unschedulable || n.Annotations[facts.AnnCordonedBy] != by {
			continue
		}
		for i := range state.rollout.Pods {
			if p := &state.rollout.Pods[i]; p.Node == n.Name {
				extra[p.Name] = true
			}
		}
	}
	if why := overBudget(state.rollout, wp.Budgets, extra); why != "" {
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("%s with pod %s: node %s is not cordoned now", why, pa.Pod, node.Name)
		return r, outcomeSkippedBudget, nil
	}
	if node.Spec.Unschedulable {
		prepared()
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("nothing to write: node %s is cordoned already, not by rollplan for %s (annotation %s=%q): it counts as prepared and stays cordoned", node.Name, by, facts.AnnCordonedBy, node.Annotations[facts.AnnCordonedBy])
		return r, outcomeUnchanged, nil
	}
	err := e.patchNode(ctx, node, map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "annotations": map[string]any{facts.AnnCordonedBy: by}},
		"spec":     map[string]any{"unschedulable": true},
	})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("node %s changed since it was read: %v", node.Name, err)
		return r, outcomeConflict, nil
	case err != nil:
		return r, outcomeError, fmt.Errorf("%s: cordon node %s (spec.unschedulable, annotation %s): %w", e.opts.Target, node.Name, facts.AnnCordonedBy, err)
	}
	prepared()
	spent[ownCordonKey(node.Name)] = true
	r.Outcome = e.outcome()
	e.nodeEvent(state, node, reasonNodeCordoned, plan.ActionCordonNode,
		fmt.Sprintf("cordoned node %s before updating pod %s to revision %s", node.Name, pa.Pod, state.rollout.Workload.UpdateRevision))
	return r, e.doneMetric(), nil
}

// drain evicts the node's pods that a drain evicts; the node is drained
// once none is left, terminating ones included.
func (e *Executor) drain(ctx context.Context, state *liveState, wp plan.WorkloadPlan, node *corev1.Node, r ActionResult, spent map[string]bool) (ActionResult, string, error) {
	list, err := e.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()})
	if err != nil {
		return r, outcomeError, fmt.Errorf("%s: drain node %s: list its pods: %w", e.opts.Target, node.Name, err)
	}
	var evict []*corev1.Pod
	var going []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != node.Name {
			continue // a client that ignores the field selector
		}
		switch {
		case facts.Drainable(p):
			evict = append(evict, p)
		case p.DeletionTimestamp != nil && facts.Drainable(withoutDeletion(p)):
			going = append(going, p.Namespace+"/"+p.Name)
		}
	}
	sort.Slice(evict, func(i, j int) bool {
		return evict[i].Namespace+"/"+evict[i].Name < evict[j].Namespace+"/"+evict[j].Name
	})
	sort.Strings(going)
	var evicted, refused, nexts []string
	for _, p := range evict {
		err := e.evict(ctx, p)
		name := p.Namespace + "/" + p.Name
		pdb, isPDB := pdbRefusal(err, p.Namespace)
		switch {
		case err == nil:
			evicted = append(evicted, name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// gone or replaced since the list: not on the node any more.
		case isPDB:
			refused = append(refused, fmt.Sprintf("%s (%s: %s)", name, pdb.by, pdb.cause))
			if !slices.Contains(nexts, pdb.next) {
				nexts = append(nexts, pdb.next)
			}
		case apierrors.IsTooManyRequests(err) || (apierrors.IsForbidden(err) && live.GateDenied(err)):
			refused = append(refused, fmt.Sprintf("%s (%v)", name, err))
		default:
			return r, outcomeError, fmt.Errorf("%s: drain node %s: evict pod %s: %w", e.opts.Target, node.Name, name, err)
		}
	}
	pod := ""
	if pa := podActionOn(wp, node.Name); pa != nil {
		pod = pa.Pod
	}
	if len(evicted) > 0 {
		e.nodeEvent(state, node, reasonNodeDrain, plan.ActionDrainNode,
			fmt.Sprintf("evicted %d pod(s) from node %s to drain it before updating pod %s: %s", len(evicted), node.Name, pod, strings.Join(evicted, ", ")))
	}
	var metric string
	drained := false
	switch {
	case e.opts.DryRun && len(evicted) > 0 && len(refused) == 0 && len(going) == 0:
		// The server accepted every eviction and changed nothing: as far
		// as this step goes, the node is drained.
		drained = true
		r.Outcome, r.Reason = Would, fmt.Sprintf("would evict %d pod(s) from node %s: %s", len(evicted), node.Name, strings.Join(evicted, ", "))
		metric = outcomeDryRun
	case len(evicted) > 0:
		r.Outcome, r.Reason = e.outcome(), fmt.Sprintf("evicted %s from node %s; pod %s waits until they are gone", strings.Join(evicted, ", "), node.Name, pod)
		if len(refused) > 0 {
			r.Reason += "; eviction refused for now: " + strings.Join(refused, ", ")
		}
		metric = e.doneMetric()
	case len(refused) > 0:
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("eviction refused for now (PodDisruptionBudget or the rollplan gate): %s: node %s is not drained", strings.Join(refused, ", "), node.Name)
		metric = outcomeSkippedPDB
	case len(going) > 0:
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("waiting for %s to terminate: node %s is not drained yet", strings.Join(going, ", "), node.Name)
		metric = outcomeWaiting
	default:
		drained = true
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("nothing to evict: node %s is drained", node.Name)
		metric = outcomeUnchanged
	}
	if len(nexts) > 0 {
		r.Reason += "; " + strings.Join(nexts, "; ")
	}
	if drained {
		spent[drainedKey(node.Name)] = true
	}
	ours := node.Annotations[facts.AnnCordonedBy] == e.cordonedBy() || spent[ownCordonKey(node.Name)]
	if note := e.setDrainConditions(ctx, node, pod, ours, drained); note != "" {
		r.Reason += "; " + note
	}
	return r, metric, nil
}

// withoutDeletion is the pod as if it were not terminating (Drainable
// judges the rest).
func withoutDeletion(p *corev1.Pod) *corev1.Pod {
	cp := *p
	cp.DeletionTimestamp = nil
	return &cp
}

// uncordon uncordons a node rollplan cordoned for this DaemonSet once
// every daemon pod on it runs the update revision and is available.
func (e *Executor) uncordon(ctx context.Context, state *liveState, wp plan.WorkloadPlan, node *corev1.Node, r ActionResult) (ActionResult, string, error) {
	by := e.cordonedBy()
	if got := node.Annotations[facts.AnnCordonedBy]; got != by {
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("nothing to write: node %s was not cordoned by rollplan for %s (annotation %s=%q): left as it is", node.Name, by, facts.AnnCordonedBy, got)
		return r, outcomeUnchanged, nil
	}
	if why := e.notReadyToUncordon(state, wp, node.Name); why != "" {
		r.Outcome, r.Reason = Skipped, why+": node "+node.Name+" stays cordoned for now"
		return r, outcomeWaiting, nil
	}
	// The drain conditions go first, while the annotation still says the
	// node is rollplan's: a crash after this write leaves the node to the
	// next UncordonNode, which finds them gone.
	node, note, err := e.clearDrainConditions(ctx, node)
	if err == nil {
		err = e.uncordonNode(ctx, node)
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("node %s changed since it was read: %v", node.Name, err)
		return r, outcomeConflict, nil
	case err != nil:
		return r, outcomeError, fmt.Errorf("%s: uncordon node %s (node conditions %s and %s, spec.unschedulable, annotation %s): %w", e.opts.Target, node.Name, corev1.NodeDrainInProgress, corev1.NodeDrained, facts.AnnCordonedBy, err)
	}
	r.Outcome = e.outcome()
	if note != "" {
		r.Reason = joinNotes(r.Reason, note)
	}
	e.nodeEvent(state, node, reasonNodeUncordoned, plan.ActionUncordonNode,
		fmt.Sprintf("uncordoned node %s: its daemon pod runs revision %s and is available", node.Name, state.rollout.Workload.UpdateRevision))
	return r, e.doneMetric(), nil
}

// notReadyToUncordon says why the node must stay cordoned: a daemon pod on
// it (not held out of the rollout) is not at the update revision or not
// available, or the node should run one and has none yet.
func (e *Executor) notReadyToUncordon(state *liveState, wp plan.WorkloadPlan, name string) string {
	held := map[string]bool{}
	for _, h := range wp.Held {
		held[h.Pod] = true
	}
	r := state.rollout
	n := 0
	for _, p := range r.Pods {
		if p.Node != name || p.Terminating || p.Terminal {
			continue
		}
		n++
		switch {
		case !p.Updated && held[p.Name]:
		case !p.Updated:
			return fmt.Sprintf("pod %s does not run the update revision yet", p.Name)
		case !p.Available:
			why := state.inFlight[p.Name]
			if why == "" {
				why = "not Ready for minReadySeconds"
			}
			return fmt.Sprintf("pod %s is not available yet (%s)", p.Name, why)
		}
	}
	if n == 0 {
		for _, fn := range r.Nodes {
			if fn.Name == name && fn.ShouldRun {
				return "no daemon pod runs on the node yet"
			}
		}
	}
	return ""
}

// uncordonNode lifts rollplan's cordon: spec.unschedulable false and the
// AnnCordonedBy annotation removed, in one patch. The drain conditions
// must be gone first (clearDrainConditions).
func (e *Executor) uncordonNode(ctx context.Context, node *corev1.Node) error {
	return e.patchNode(ctx, node, map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "annotations": map[string]any{facts.AnnCordonedBy: nil}},
		"spec":     map[string]any{"unschedulable": false},
	})
}

// patchNode sends a JSON merge patch of the node (its resourceVersion in
// the patch is the precondition).
func (e *Executor) patchNode(ctx context.Context, node *corev1.Node, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = e.writer.patchNode(ctx, node.Name, types.MergePatchType, data)
	return err
}

func (e *Executor) doneMetric() string {
	if e.opts.DryRun {
		return outcomeDryRun
	}
	return outcomeDone
}

// nodeEvent records an Event on the workload with the node as related
// object (a dry run logs it instead, as event does).
func (e *Executor) nodeEvent(state *liveState, node *corev1.Node, reason, action, note string) {
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	if e.opts.DryRun || e.opts.Events == nil {
		e.opts.Log.Debug("event", "workload", e.opts.Target.String(), "type", corev1.EventTypeNormal, "reason", reason, "note", note, "dryRun", e.opts.DryRun)
		return
	}
	e.opts.Events.Eventf(e.workloadObject(state), node, corev1.EventTypeNormal, reason, action, "%s", note)
}

// releaseCordons uncordons the nodes rollplan cordoned for a DaemonSet that
// no longer exists (deleted mid-rollout, before their pods were updated):
// nothing else would, and they would stay out of scheduling. gone is the
// not-found error; it is returned with what was done, so apply still
// exits with it.
func (e *Executor) releaseCordons(ctx context.Context, gone error) error {
	by := e.cordonedBy()
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("%w (nodes rollplan cordoned for it, annotation %s=%s, were not looked for: list nodes: %v)", gone, facts.AnnCordonedBy, by, err)
	}
	var released, failed []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Annotations[facts.AnnCordonedBy] != by {
			continue
		}
		cleared, _, err := e.clearDrainConditions(ctx, n)
		if err == nil {
			err = e.uncordonNode(ctx, cleared)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", n.Name, err))
			continue
		}
		released = append(released, n.Name)
		e.opts.Log.Info(plan.ActionUncordonNode, "workload", e.opts.Target.String(), "node", n.Name, "outcome", e.doneMetric(), "reason", "the DaemonSet no longer exists")
	}
	verb := "uncordoned"
	if e.opts.DryRun {
		verb = "would uncordon (dry run)"
	}
	switch {
	case len(failed) > 0:
		return fmt.Errorf("%w; %s nodes %s that rollplan had cordoned for it; could not uncordon %s: run rollplan apply again, or kubectl uncordon them and remove their annotation %s",
			gone, verb, orNone(released), strings.Join(failed, ", "), facts.AnnCordonedBy)
	case len(released) > 0:
		return fmt.Errorf("%w; %s nodes %s that rollplan had cordoned for it", gone, verb, strings.Join(released, ", "))
	}
	return gone
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Node conditions (Kubernetes v1.37 node lifecycle vocabulary,
// corev1.NodeDrainInProgress and corev1.NodeDrained, which "the admin is
// responsible for setting and clearing"): on a cluster at v1.37 or newer,
// a DrainNode on a node rollplan cordoned for this DaemonSet (annotation
// AnnCordonedBy) sets, in the Node's status subresource,
//
//	draining: DrainInProgress=True, Drained=False  (reason RollplanDraining)
//	drained:  DrainInProgress=False, Drained=True  (reason RollplanDrained)
//
// and an UncordonNode removes both before it lifts the cordon, so a crash
// in between leaves the node cordoned and annotated, and the next apply's
// UncordonNode finds nothing left to remove and uncordons. Each write is a
// strategic-merge patch of status.conditions keyed by type: it touches
// rollplan's two types only, never the kubelet's (Ready, pressure) nor any
// other. A condition of those types whose reason is not rollplan's belongs
// to someone else (an admin, another drain tool) and is left alone. Like
// the rest, nothing is remembered: each DrainNode writes the conditions
// the node lacks, so a restarted apply converges. The conditions are a
// report: a failure to write them is noted in the action's reason and
// logged, never a reason to stop the drain; a failure to remove them,
// other than a refusal (403, the permission nodes/status patch missing),
// keeps the node cordoned until the next step removes them.

// Reasons of the node conditions rollplan writes; a condition with
// another reason is not rollplan's.
const (
	condReasonDraining = "RollplanDraining"
	condReasonDrained  = "RollplanDrained"
)

// drainConditionTypes are the node condition types rollplan writes.
var drainConditionTypes = []corev1.NodeConditionType{corev1.NodeDrainInProgress, corev1.NodeDrained}

// writesNodeConditions: the cluster has the node drain conditions (v1.37+).
func (e *Executor) writesNodeConditions() bool {
	return e.opts.KubernetesVersion.Or(kubeversion.Newest).AtLeast(kubeversion.V1_37)
}

func nodeCondition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// ownCondition: a condition rollplan wrote (by its reason).
func ownCondition(c *corev1.NodeCondition) bool {
	return c != nil && (c.Reason == condReasonDraining || c.Reason == condReasonDrained)
}

// drainConditions are the conditions rollplan wants on a node it cordoned
// for the DaemonSet, while it drains it (drained false) or once drained.
func (e *Executor) drainConditions(node, pod string, drained bool) []corev1.NodeCondition {
	by := e.cordonedBy()
	if !drained {
		return []corev1.NodeCondition{
			{Type: corev1.NodeDrainInProgress, Status: corev1.ConditionTrue, Reason: condReasonDraining,
				Message: fmt.Sprintf("rollplan is draining node %s for DaemonSet %s before it updates pod %s", node, by, pod)},
			{Type: corev1.NodeDrained, Status: corev1.ConditionFalse, Reason: condReasonDraining,
				Message: fmt.Sprintf("rollplan has not drained node %s yet: pods it evicts are still on the node", node)},
		}
	}
	return []corev1.NodeCondition{
		{Type: corev1.NodeDrainInProgress, Status: corev1.ConditionFalse, Reason: condReasonDrained,
			Message: fmt.Sprintf("rollplan drained node %s for DaemonSet %s", node, by)},
		{Type: corev1.NodeDrained, Status: corev1.ConditionTrue, Reason: condReasonDrained,
			Message: fmt.Sprintf("no pod a drain evicts is left on node %s: rollplan drained it for DaemonSet %s; it stays cordoned until pod %s is updated and available", node, by, pod)},
	}
}

// setDrainConditions writes the drain conditions the node lacks (see
// above): only on a v1.37+ cluster, only on a node rollplan cordoned for
// this DaemonSet (ours: its annotation says so, or this step cordoned it).
// It returns a note for the action's reason ("" when all is well or
// nothing was to be done).
func (e *Executor) setDrainConditions(ctx context.Context, node *corev1.Node, pod string, ours, drained bool) string {
	if !e.writesNodeConditions() || !ours {
		return ""
	}
	now := metav1.NewTime(e.now().UTC().Truncate(time.Second))
	var write []corev1.NodeCondition
	var others []string
	for _, want := range e.drainConditions(node.Name, pod, drained) {
		have := nodeCondition(node, want.Type)
		switch {
		case have != nil && !ownCondition(have):
			others = append(others, fmt.Sprintf("%s=%s (reason %q)", have.Type, have.Status, have.Reason))
			continue
		case have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message:
			continue
		}
		want.LastHeartbeatTime, want.LastTransitionTime = now, now
		if have != nil && have.Status == want.Status && !have.LastTransitionTime.IsZero() {
			want.LastTransitionTime = have.LastTransitionTime
		}
		write = append(write, want)
	}
	note := ""
	if len(others) > 0 {
		note = fmt.Sprintf("node conditions %s are someone else's: left as they are", strings.Join(others, ", "))
	}
	if len(write) == 0 {
		return note
	}
	if _, err := e.patchNodeConditions(ctx, node.Name, write, nil); err != nil {
		e.opts.Log.Warn("node conditions not written", "workload", e.opts.Target.String(), "node", node.Name, "error", err)
		return joinNotes(note, fmt.Sprintf("node conditions %s not written (the drain goes on; the next step tries again): %v", conditionList(write), err))
	}
	return note
}

// clearDrainConditions removes the drain conditions rollplan wrote on the
// node, whatever the cluster's version (there are none to remove before
// v1.37). It returns the node as the write left it (its resourceVersion
// is the precondition of the uncordon that follows) and a note for the
// action's reason; an error when they are still there and the node must
// stay cordoned for now.
func (e *Executor) clearDrainConditions(ctx context.Context, node *corev1.Node) (*corev1.Node, string, error) {
	var remove []corev1.NodeConditionType
	for _, t := range drainConditionTypes {
		if ownCondition(nodeCondition(node, t)) {
			remove = append(remove, t)
		}
	}
	if len(remove) == 0 {
		return node, "", nil
	}
	got, err := e.patchNodeConditions(ctx, node.Name, nil, remove)
	switch {
	case apierrors.IsForbidden(err):
		e.opts.Log.Warn("node conditions not removed", "workload", e.opts.Target.String(), "node", node.Name, "error", err)
		return node, fmt.Sprintf("node conditions %s left on the node: removing them was refused (%v); grant patch on nodes/status, or remove them by hand", typeList(remove), err), nil
	case err != nil:
		return node, "", err
	case e.opts.DryRun || got == nil:
		// A dry run changed nothing: the node's resourceVersion holds.
		return node, "", nil
	}
	return got, "", nil
}

// patchNodeConditions sends a strategic-merge patch of the Node's status
// subresource: the conditions in set (merged by type) and those of the
// types in remove deleted; no other condition is touched.
func (e *Executor) patchNodeConditions(ctx context.Context, name string, set []corev1.NodeCondition, remove []corev1.NodeConditionType) (*corev1.Node, error) {
	conds := []any{}
	for _, c := range set {
		conds = append(conds, c)
	}
	for _, t := range remove {
		conds = append(conds, map[string]any{"type": t, "$patch": "delete"})
	}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return nil, err
	}
	return e.writer.patchNode(ctx, name, types.StrategicMergePatchType, data, "status")
}

func conditionList(cs []corev1.NodeCondition) string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(out, ", ")
}

func typeList(ts []corev1.NodeConditionType) string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t))
	}
	return strings.Join(out, ", ")
}

func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}
