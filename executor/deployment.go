package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// How rollplan drives a managed Deployment (docs/deployment-in-place.md):
//
//   - spec.paused is rollplan's hold on the Deployment controller. While it
//     is set the controller creates no ReplicaSet and scales nothing beyond
//     keeping the one active ReplicaSet at spec.replicas; a template change
//     waits for rollplan.
//   - In place: the pods of the active ReplicaSet are patched wave by wave
//     (as StatefulSet pods are) while the ReplicaSet keeps its old
//     template; a pod runs the update revision once its spec holds every
//     change (facts.RunsChanges). When every pod does and is available,
//     one write gives the ReplicaSet the Deployment's template (its
//     pod-template-hash label kept), the next revision number and the old
//     template in AnnRevisionHistory; the controller then finds it as the
//     new ReplicaSet (FindNewReplicaSet ignores pod-template-hash) and
//     counts every pod updated. No ReplicaSet is created, no pod deleted.
//   - Fallback: a change the plan cannot make in place (and the policy does
//     not halt on) is handed to the controller: rollplan unpauses the
//     Deployment, the controller rolls it exactly as the plan's
//     ScaleReplicaSet waves show, and rollplan pauses it again once the
//     controller reports the rollout complete.
//
// Every decision is made from what the cluster holds (spec.paused, the
// ReplicaSets' templates and annotations, the pods' specs), so a killed
// executor started again carries on where the cluster is.

func (state *liveState) deployment(t live.Target) *appsv1.Deployment {
	for _, d := range state.snap.Deployments {
		if d.Name == t.Name && d.Namespace == t.Namespace {
			return d
		}
	}
	return nil
}

// replicaSets owned by the Deployment, oldest first.
func (state *liveState) replicaSets(d *appsv1.Deployment) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range state.snap.ReplicaSets {
		if rs.Namespace != d.Namespace {
			continue
		}
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// deploymentComplete: the controller has seen the current spec and reports
// every replica updated and available, and none else (kubectl rollout
// status's rule).
func deploymentComplete(d *appsv1.Deployment) bool {
	st, want := d.Status, replicas(d.Spec.Replicas)
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
}

// stepDeployment is the part of a step that is a Deployment's own: the
// hold (spec.paused), the fallback to the controller and the completion.
// handled: the step is over (no pod action of the plan is to be carried
// out by the caller).
func (e *Executor) stepDeployment(ctx context.Context, state *liveState, wp plan.WorkloadPlan, out *StepResult, paused bool) (handled bool, err error) {
	d := state.deployment(e.opts.Target)
	if d == nil {
		return true, fmt.Errorf("%s not found", e.opts.Target)
	}
	fallback := len(wp.Waves) > 0 && wp.Waves[0].Actions[0].Type == plan.ActionScaleRS
	switch {
	case !d.Spec.Paused && paused:
		// rollplan pause during a fallback: stop the controller too.
		return true, e.setPaused(ctx, d, true, "rollplan pause: hold the Deployment controller's rolling update")
	case !d.Spec.Paused:
		// The controller rolls (a fallback, or a Deployment that was never
		// held): wait for it, then hold the Deployment again.
		if !deploymentComplete(d) {
			out.Note = "the Deployment controller rolls it (spec.paused is false); rollplan pauses it again once it is complete"
			return true, nil
		}
		// Rolled out: by the controller after a fallback, or never held
		// (the first apply of a newly managed Deployment). Nothing is left
		// to roll, but the hold is what makes the next template change wait
		// for apply, so it is set now, and the log says so. No Note: Run
		// logs it after this step, and "the controller rolls it" after
		// "spec.paused=true" told two stories.
		if err := e.setPaused(ctx, d, true, "rolled out and not held: hold it so that the next template change waits for rollplan apply"); err != nil {
			return true, err
		}
		out.Done = !e.opts.DryRun
		return true, nil
	case paused:
		return true, nil
	case fallback:
		out.Note = "some pods cannot be updated in place: the Deployment controller rolls it"
		return true, e.setPaused(ctx, d, false, "some pods cannot be updated in place: hand the rollout to the Deployment controller (upstream rolling update)")
	}
	return false, nil
}

// setPaused writes spec.paused with the Deployment's resourceVersion as
// precondition (a conflict: the next step reads again).
func (e *Executor) setPaused(ctx context.Context, d *appsv1.Deployment, paused bool, why string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": d.ResourceVersion}, "spec": map[string]any{"paused": paused}})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = e.writer.patchWorkload(wctx, live.Target{Namespace: d.Namespace, Kind: capture.Deployment, Name: d.Name}, patch)
	switch {
	case apierrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("%s: set spec.paused=%t: %w", e.opts.Target, paused, err)
	}
	msg := "hold" // the Deployment controller waits for rollplan
	if !paused {
		msg = "release" // the Deployment controller rolls
	}
	e.opts.Log.Info(msg, "workload", e.opts.Target.String(), "spec.paused", paused, "reason", why, "dryRun", e.opts.DryRun)
	e.event(nil, nil, corev1.EventTypeNormal, reasonHold, "Hold", fmt.Sprintf("spec.paused=%t: %s", paused, why))
	return nil
}

// completeDeployment: every pod runs the update revision and is
// available. It gives the active ReplicaSet the Deployment's template (one
// write: template, next revision, the replaced template in
// AnnRevisionHistory), deletes any other ReplicaSet with that template (a
// 0-replica leftover the controller would otherwise take as the new one),
// and is done once the controller reports the rollout complete.
func (e *Executor) completeDeployment(ctx context.Context, state *liveState) (bool, error) {
	d := state.deployment(e.opts.Target)
	if d == nil {
		return false, fmt.Errorf("%s not found", e.opts.Target)
	}
	rss := state.replicaSets(d)
	var active []*appsv1.ReplicaSet
	for _, rs := range rss {
		if replicas(rs.Spec.Replicas) > 0 || rs.Status.Replicas > 0 {
			active = append(active, rs)
		}
	}
	if len(active) != 1 {
		return false, nil // the controller is still scaling
	}
	cur := active[0]
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if !live.SameTemplate(&cur.Spec.Template, &d.Spec.Template) {
		return false, e.adopt(wctx, d, cur, rss, state.now)
	}
	for _, rs := range rss {
		if rs == cur || !live.SameTemplate(&rs.Spec.Template, &d.Spec.Template) || replicas(rs.Spec.Replicas) > 0 || rs.Status.Replicas > 0 {
			continue
		}
		err := e.writer.deleteReplicaSet(wctx, rs)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("%s: delete ReplicaSet %s, which has the template %s now runs: %w", e.opts.Target, rs.Name, cur.Name, err)
		}
		e.opts.Log.Info("delete-replicaset", "workload", e.opts.Target.String(), "replicaSet", rs.Name, "reason", "same template as "+cur.Name, "dryRun", e.opts.DryRun)
		return false, nil
	}
	return deploymentComplete(d), nil
}

// adopt gives ReplicaSet cur the Deployment's template in one write with
// cur's resourceVersion as precondition.
func (e *Executor) adopt(ctx context.Context, d *appsv1.Deployment, cur *appsv1.ReplicaSet, rss []*appsv1.ReplicaSet, now time.Time) error {
	hist, err := live.RevisionHistory(cur)
	if err != nil {
		return err
	}
	next := int64(0)
	for _, rs := range rss {
		next = max(next, live.Revision(rs))
		h, _ := live.RevisionHistory(rs)
		for _, r := range h {
			next = max(next, r.Revision)
		}
	}
	next++
	// The new template becomes the current revision: an older record of
	// the same template goes, as upstream moves a rolled-back ReplicaSet to
	// the new revision number.
	kept := hist[:0]
	for _, r := range hist {
		if !live.SameTemplate(&r.Template, &d.Spec.Template) {
			kept = append(kept, r)
		}
	}
	kept = append(kept, live.RevisionRecord{Revision: live.Revision(cur), ChangeCause: cur.Annotations[live.AnnChangeCause],
		Replaced: now.UTC().Truncate(time.Second).Format(time.RFC3339), Template: *live.StripHash(&cur.Spec.Template)})
	limit := 10
	if d.Spec.RevisionHistoryLimit != nil {
		limit = int(*d.Spec.RevisionHistoryLimit)
	}
	if len(kept) > limit {
		kept = kept[len(kept)-limit:]
	}
	rs := cur.DeepCopy()
	rs.Spec.Template = *d.Spec.Template.DeepCopy()
	if rs.Spec.Template.Labels == nil {
		rs.Spec.Template.Labels = map[string]string{}
	}
	rs.Spec.Template.Labels[live.LabelPodHash] = cur.Labels[live.LabelPodHash]
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[live.AnnRevision] = strconv.FormatInt(next, 10)
	if len(kept) == 0 {
		delete(rs.Annotations, live.AnnRevisionHistory)
	} else {
		raw, err := json.Marshal(kept)
		if err != nil {
			return err
		}
		rs.Annotations[live.AnnRevisionHistory] = string(raw)
	}
	if cause, ok := d.Annotations[live.AnnChangeCause]; ok {
		rs.Annotations[live.AnnChangeCause] = cause
	} else {
		delete(rs.Annotations, live.AnnChangeCause)
	}
	err = e.writer.updateReplicaSet(ctx, rs)
	switch {
	case apierrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("%s: give ReplicaSet %s the Deployment's template: %w", e.opts.Target, cur.Name, err)
	}
	e.opts.Log.Info("adopt", "workload", e.opts.Target.String(), "replicaSet", cur.Name, "revision", next, "dryRun", e.opts.DryRun)
	e.event(nil, nil, corev1.EventTypeNormal, reasonInPlaceRevision, "Adopt",
		fmt.Sprintf("every pod of ReplicaSet %s was updated in place: it now holds the Deployment's template as revision %d (revision %d's template kept in %s)", cur.Name, next, live.Revision(cur), live.AnnRevisionHistory))
	return nil
}

// refuseDeployment is the refusal, if any, for a Deployment.
func refuseDeployment(t live.Target, w *facts.Workload) error {
	if !w.Managed {
		// As docs/rollouts.md "Deployments in place" says it: annotating is all; apply
		// sets spec.paused itself (a user's spec.paused would only stop the
		// controller).
		return &RefusedError{t, fmt.Sprintf("not managed by rollplan: the Deployment controller rolls it (`rollplan plan` previews it); to let rollplan apply update it in place, run `kubectl annotate %s %s=true %s=InPlaceIfPossible`, then apply again: it holds the Deployment with spec.paused itself",
			targetRef(t), facts.AnnManaged, facts.AnnPodUpdatePolicy)}
	}
	return nil
}
