package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Revision labels the owning controllers count.
const (
	labelRevisionHash = appsv1.ControllerRevisionHashLabelKey // controller-revision-hash
	labelDSGeneration = "pod-template-generation"
	annDSGeneration   = "deprecated.daemonset.template.generation"
)

func (e *Executor) outcome() string {
	if e.opts.DryRun {
		return Would
	}
	return Done
}

// act carries out one action of the first wave, if the live budgets allow
// it now. spent: pods this step disrupted already (a dry run changes
// nothing the next read would see, so they are counted here too).
// Every action is counted in the metrics; one carried out is recorded as
// an Event on the workload.
func (e *Executor) act(ctx context.Context, first *liveState, wp plan.WorkloadPlan, a plan.Action, spent map[string]bool) (r ActionResult, err error) {
	r = ActionResult{Type: a.Type, Pod: a.Pod, Reason: strings.Join(a.Reasons, "; ")}
	metric := outcomeConflict
	defer func() {
		if err != nil {
			metric = outcomeError
		}
		e.metrics.action(e.opts.Kind, a, metric)
	}()
	switch a.Type {
	case plan.ActionInPlace, plan.ActionRecreate, plan.ActionDelete:
	case plan.ActionCordonNode, plan.ActionDrainNode, plan.ActionUncordonNode:
		r, metric, err = e.nodeAction(ctx, wp, a, spent) // nodes.go
		return r, err
	default:
		return r, fmt.Errorf("%s: the plan asks for %s, which rollplan apply does not carry out yet", e.opts.Target, a.Type)
	}
	if a.Surge {
		return r, fmt.Errorf("%s: the plan asks for a surge replacement of %s, which rollplan apply does not carry out yet", e.opts.Target, a.Pod)
	}
	if why := nodeUnprepared(wp, a, spent); why != "" {
		metric = outcomeWaiting
		r.Outcome, r.Reason = Skipped, why
		return r, nil
	}
	// The live budget re-check: a fresh read from the API server before
	// every write.
	state, err := e.readFrom(ctx, e.checker)
	if err != nil {
		return r, err
	}
	pod := findPod(state, a.Pod)
	if pod == nil {
		r.Outcome, r.Reason = Skipped, "the pod is gone since the plan was made"
		return r, nil
	}
	fp := factPod(state.rollout, a.Pod)
	if fp != nil && fp.Updated && a.Type != plan.ActionDelete {
		r.Outcome, r.Reason = Skipped, "the pod runs the update revision already"
		return r, nil
	}
	extra := map[string]bool{a.Pod: true}
	for p := range spent {
		extra[p] = true
	}
	// Replacing a pod that is down costs no availability: an unavailable
	// old pod goes whatever the budget (the plan puts it first), so the
	// crash-looping pods of a broken revision never hold their own
	// rollback. It still counts against the budget for the others.
	down := fp != nil && !fp.Available && !fp.Terminating
	if why := overBudget(state.rollout, wp.Budgets, extra); why != "" && !down {
		metric = outcomeSkippedBudget
		r.Outcome, r.Reason = Skipped, why+" with this pod: not now"
		return r, nil
	}
	// The write itself is not cut short by a cancelled context (Ctrl-C
	// stops after the action in flight); it has its own deadline.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch a.Type {
	case plan.ActionInPlace:
		err = e.inPlace(wctx, state, pod)
	default:
		err = e.remove(wctx, pod)
	}
	pdb, isPDB := pdbRefusal(err, pod.Namespace)
	switch {
	case err == nil:
		spent[a.Pod] = true
		r.Outcome = e.outcome()
		metric = outcomeDone
		if e.opts.DryRun {
			metric = outcomeDryRun
		}
		e.actionEvent(state, pod, a)
	case isPDB:
		metric = outcomeSkippedPDB
		r.Outcome, r.Reason = Skipped, fmt.Sprintf("eviction refused for now by %s: %s; %s", pdb.by, pdb.cause, pdb.next)
	case apierrors.IsTooManyRequests(err):
		// A 429 without the cause of a PodDisruptionBudget: the rollplan
		// gate's "not now" for evictions, the API server's flow control,
		// or a server that names no cause.
		metric = outcomeSkippedPDB
		r.Outcome, r.Reason = Skipped, "eviction refused for now (a PodDisruptionBudget, the rollplan gate or the API server's flow control; 429): "+err.Error()
	case apierrors.IsForbidden(err) && live.GateDenied(err):
		// The admission gate counted a disruption this executor's read
		// did not see yet (another actor's): not now.
		metric = outcomeSkippedBudget
		r.Outcome, r.Reason = Skipped, "denied by the rollplan gate for now: "+err.Error()
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.Outcome, r.Reason = Skipped, "the pod changed since it was read: "+err.Error()
	default:
		return r, fmt.Errorf("%s %s: %w", a.Type, a.Pod, err)
	}
	return r, nil
}

// refusal is a PodDisruptionBudget's refusal of an eviction: by whom
// ("PodDisruptionBudget ns/name", or "a PodDisruptionBudget in namespace
// ns" when the server names it only in the cause), why (the server's
// cause message, which names the budget) and what to do.
type refusal struct{ by, cause, next string }

// pdbRefusal recognises an eviction a PodDisruptionBudget refused:
//
//   - a status cause of type policyv1.DisruptionBudgetCause, which the
//     eviction REST attaches to every refusal of a PDB from v1.37
//     (kubernetes#138003: the 403s of a budget whose status is out of order
//     too) and to its 429s before. A 429 is "not now": the budget allows no
//     disruption until pods are healthy again. A 403 says the budget's
//     status is out of order (disruptionsAllowed negative, or too many
//     evictions its controller has not confirmed yet).
//   - on older servers, a 403 without a cause whose details name a
//     poddisruptionbudget of group policy (the same refusals).
//
// A 429 without the cause is left to the callers' older recognition (any
// 429 is "not now").
func pdbRefusal(err error, namespace string) (refusal, bool) {
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return refusal{}, false
	}
	s := st.Status()
	var cause, name string
	if d := s.Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				cause = c.Message
				break
			}
		}
		if d.Group == policyv1.GroupName && d.Kind == "poddisruptionbudget" {
			name = d.Name
		}
	}
	by := "a PodDisruptionBudget in namespace " + namespace
	if name != "" {
		by = "PodDisruptionBudget " + namespace + "/" + name
	}
	switch {
	case apierrors.IsTooManyRequests(err) && cause != "":
		return refusal{by: by, cause: cause,
			next: fmt.Sprintf("rollplan tries again once the budget allows a disruption, when the pods it selects are healthy again (kubectl get pdb -n %s)", namespace)}, true
	case apierrors.IsForbidden(err) && (cause != "" || name != ""):
		if cause == "" {
			cause = s.Message
		}
		what := "kubectl get pdb -n " + namespace + " -o yaml"
		if name != "" {
			what = "kubectl get pdb -n " + namespace + " " + name + " -o yaml"
		}
		return refusal{by: by, cause: cause,
			next: fmt.Sprintf("the budget's status is out of order: check that kube-controller-manager's disruption controller runs and updates it (%s: status.disruptionsAllowed, status.disruptedPods, the DisruptionAllowed condition); rollplan tries again", what)}, true
	}
	return refusal{}, false
}

func findPod(state *liveState, name string) *corev1.Pod {
	for _, p := range state.snap.Pods {
		if p.Name == name && p.Namespace == state.rollout.Workload.Namespace {
			return p
		}
	}
	return nil
}

func factPod(r *facts.Rollout, name string) *facts.Pod {
	for i := range r.Pods {
		if r.Pods[i].Name == name {
			return &r.Pods[i]
		}
	}
	return nil
}

// inPlace patches a pod to the update revision: the images of the
// containers whose image changed, the template's labels and annotations,
// the revision label the owning controller counts (controller-revision-hash;
// for a DaemonSet also pod-template-generation) and the AnnInPlaceUpdate
// record, in one strategic-merge patch with the resourceVersion read as
// precondition. A cpu/memory change goes first, through the pods/resize
// subresource (resize), with the same precondition; the main patch then
// carries the resourceVersion the resize returned. Resizing first means a
// pod is never labelled with the update revision before its resources are
// asked for: if the main patch fails, the pod is still at the old revision
// and planned again (the resize, sent again, changes nothing). A change
// it cannot make in place is an error, before any write.
func (e *Executor) inPlace(ctx context.Context, state *liveState, pod *corev1.Pod) error {
	r := state.rollout
	fp := factPod(r, pod.Name)
	if fp != nil {
		for _, c := range fp.Changes {
			switch c.Class {
			case facts.ClassImage, facts.ClassInitImage, facts.ClassLabels, facts.ClassAnnotations:
			case facts.ClassResources:
				if !c.InPlace {
					return fmt.Errorf("in-place change %s cannot be resized in place: %s", c.Path, c.Detail)
				}
			default:
				return fmt.Errorf("in-place change %s (%s) is not carried out by rollplan apply yet (only images, cpu/memory, labels and annotations)", c.Path, c.Class)
			}
		}
	}
	tmpl, labels, err := e.updateTemplate(state)
	if err != nil {
		return err
	}
	rec := live.InPlaceRecord{Revision: r.Workload.UpdateRevision, At: state.now.UTC().Truncate(time.Second).Format(time.RFC3339), ImageIDs: map[string]string{}}
	imageIDs := map[string]string{}
	for _, cs := range pod.Status.ContainerStatuses {
		imageIDs[cs.Name] = cs.ImageID
		if rec.RestartCounts == nil {
			rec.RestartCounts = map[string]int32{}
		}
		rec.RestartCounts[cs.Name] = cs.RestartCount
	}
	containers := func(want, have []corev1.Container, record bool) []map[string]string {
		var out []map[string]string
		for _, w := range want {
			for _, h := range have {
				if h.Name == w.Name && h.Image != w.Image {
					out = append(out, map[string]string{"name": w.Name, "image": w.Image})
					if record {
						rec.ImageIDs[w.Name] = imageIDs[w.Name]
					}
				}
			}
		}
		return out
	}
	spec := map[string]any{}
	if cs := containers(tmpl.Spec.Containers, pod.Spec.Containers, true); len(cs) > 0 {
		spec["containers"] = cs
	}
	if cs := containers(tmpl.Spec.InitContainers, pod.Spec.InitContainers, false); len(cs) > 0 {
		spec["initContainers"] = cs
	}
	resize, restarts := resizeContainers(tmpl.Spec.Containers, pod.Spec.Containers)
	for _, c := range resize {
		rec.Resized = append(rec.Resized, c["name"].(string))
	}
	recJSON, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	annotations := map[string]any{}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[live.AnnInPlaceUpdate] = string(recJSON)
	allLabels := map[string]any{}
	for k, v := range tmpl.Labels {
		allLabels[k] = v
	}
	for k, v := range labels {
		allLabels[k] = v
	}
	if fp != nil {
		// A key the update template no longer has goes (null in a
		// strategic-merge patch deletes it).
		for _, c := range fp.Changes {
			key, ok := strings.CutPrefix(c.Path, "metadata.labels[")
			m, from := allLabels, tmpl.Labels
			if !ok {
				key, ok = strings.CutPrefix(c.Path, "metadata.annotations[")
				m, from = annotations, tmpl.Annotations
			}
			key = strings.TrimSuffix(key, "]")
			if _, kept := from[key]; ok && !kept {
				m[key] = nil
			}
		}
	}
	rv := pod.ResourceVersion
	if (len(spec) > 0 || restarts) && live.HasReadinessGate(pod) {
		// Out of the Services before the kubelet restarts a container.
		if rv, err = e.setGate(ctx, pod, corev1.ConditionFalse, "InPlaceUpdate",
			"in-place update to revision "+r.Workload.UpdateRevision, state.now); err != nil {
			return err
		}
		if rv, err = e.waitNotReady(ctx, pod, rv); err != nil {
			return err
		}
	}
	if len(resize) > 0 {
		if rv, err = e.resize(ctx, pod, rv, resize); err != nil {
			return err
		}
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": rv,
			"labels":          allLabels,
			"annotations":     annotations,
		},
	}
	if len(spec) > 0 {
		patch["spec"] = spec
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = e.writer.patchPod(ctx, pod, types.StrategicMergePatchType, data)
	return err
}

// resizeContainers: for every container whose cpu or memory requests or
// limits differ between the template (want) and the pod (have), its
// pods/resize patch entry (name and the template's cpu/memory requests and
// limits); restarts: a resized resource's resizePolicy restarts the
// container.
func resizeContainers(want, have []corev1.Container) (out []map[string]any, restarts bool) {
	for _, w := range want {
		for _, h := range have {
			if h.Name != w.Name {
				continue
			}
			var changed []corev1.ResourceName
			for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if !live.SameQuantity(w.Resources.Requests, h.Resources.Requests, rn) || !live.SameQuantity(w.Resources.Limits, h.Resources.Limits, rn) {
					changed = append(changed, rn)
				}
			}
			if len(changed) == 0 {
				continue
			}
			res := map[string]any{}
			for key, list := range map[string]corev1.ResourceList{"requests": w.Resources.Requests, "limits": w.Resources.Limits} {
				m := map[string]string{}
				for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if q, ok := list[rn]; ok {
						m[string(rn)] = q.String()
					}
				}
				if len(m) > 0 {
					res[key] = m
				}
			}
			out = append(out, map[string]any{"name": w.Name, "resources": res})
			for _, p := range w.ResizePolicy {
				if p.RestartPolicy == corev1.RestartContainer && slices.Contains(changed, p.ResourceName) {
					restarts = true
				}
			}
		}
	}
	return out, restarts
}

// resize patches the containers' cpu/memory through the pods/resize
// subresource (InPlacePodVerticalScaling, GA in the Kubernetes 1.36 this targets), with
// resourceVersion rv as precondition, and returns the pod's new
// resourceVersion (rv itself in a dry run, which changes nothing).
func (e *Executor) resize(ctx context.Context, pod *corev1.Pod, rv string, containers []map[string]any) (string, error) {
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"spec":     map[string]any{"containers": containers},
	})
	if err != nil {
		return rv, err
	}
	got, err := e.writer.patchPod(ctx, pod, types.StrategicMergePatchType, data, "resize")
	if err != nil {
		return rv, fmt.Errorf("resize: %w", err)
	}
	if e.opts.DryRun || got == nil || got.ResourceVersion == "" {
		return rv, nil
	}
	return got.ResourceVersion, nil
}

// updateTemplate is the workload's pod template (the update revision is
// the current spec) and the revision labels a pod at the update revision
// carries: for a StatefulSet controller-revision-hash is the revision's
// name, for a DaemonSet its hash label, with pod-template-generation.
func (e *Executor) updateTemplate(state *liveState) (*corev1.PodTemplateSpec, map[string]string, error) {
	w := state.rollout.Workload
	switch w.Kind {
	case capture.StatefulSet:
		for _, s := range state.snap.StatefulSets {
			if s.Name == w.Name && s.Namespace == w.Namespace {
				return &s.Spec.Template, map[string]string{labelRevisionHash: w.UpdateRevision}, nil
			}
		}
	case capture.Deployment:
		// The pod keeps its pod-template-hash: it stays in its ReplicaSet,
		// which takes the template once every pod runs it
		// (completeDeployment).
		if d := state.deployment(e.opts.Target); d != nil {
			return &d.Spec.Template, map[string]string{}, nil
		}
	case capture.DaemonSet:
		for _, ds := range state.snap.DaemonSets {
			if ds.Name != w.Name || ds.Namespace != w.Namespace {
				continue
			}
			hash := strings.TrimPrefix(w.UpdateRevision, ds.Name+"-")
			for _, cr := range state.snap.ControllerRevisions {
				if cr.Name == w.UpdateRevision && cr.Namespace == ds.Namespace && cr.Labels[labelRevisionHash] != "" {
					hash = cr.Labels[labelRevisionHash]
				}
			}
			gen := ds.Annotations[annDSGeneration]
			if gen == "" {
				gen = strconv.FormatInt(ds.Generation, 10)
			}
			return &ds.Spec.Template, map[string]string{labelRevisionHash: hash, labelDSGeneration: gen}, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: no pod template to update in place from", e.opts.Target)
}

// remove removes a pod the way Options.DeleteMethod says: evict, or a
// plain delete with the pod's UID as precondition (the disruption
// controller is not asked: no PodDisruptionBudget is enforced).
func (e *Executor) remove(ctx context.Context, pod *corev1.Pod) error {
	if e.opts.DeleteMethod != DeletePlain {
		return e.evict(ctx, pod)
	}
	return e.writer.deletePod(ctx, pod)
}

// evict asks the Eviction API to remove the pod: the disruption controller
// refuses (429) what would break a PodDisruptionBudget, and the UID
// precondition keeps a pod recreated under the same name safe.
func (e *Executor) evict(ctx context.Context, pod *corev1.Pod) error {
	return e.writer.evictPod(ctx, pod)
}

// completeStatefulSet: before v1.37, with updateStrategy OnDelete the
// StatefulSet controller never moves status.currentRevision to the update
// revision (completeRollingUpdate only does for RollingUpdate). Once the
// controller itself reports every replica updated and ready, the executor
// records the completed rollout by writing status.currentRevision =
// updateRevision (the controller keeps it: it reads the current revision
// from the status). From v1.37 the controller completes every strategy's
// revision itself (completeUpdate, reference §8): the executor waits for
// it and never writes the status, so the two never fight over it. Until
// then the rollout is not done.
func (e *Executor) completeStatefulSet(ctx context.Context, state *liveState) (bool, error) {
	var set *appsv1.StatefulSet
	for _, s := range state.snap.StatefulSets {
		if s.Name == e.opts.Name && s.Namespace == e.opts.Namespace {
			set = s
		}
	}
	if set == nil {
		return false, fmt.Errorf("%s not found", e.opts.Target)
	}
	st := set.Status
	replicas := int32(1)
	if set.Spec.Replicas != nil {
		replicas = *set.Spec.Replicas
	}
	if st.ObservedGeneration < set.Generation || st.UpdatedReplicas != replicas || st.ReadyReplicas != replicas || st.Replicas != replicas {
		return false, nil // the controller has not counted the pods yet
	}
	if st.CurrentRevision == st.UpdateRevision {
		return true, nil
	}
	if e.opts.KubernetesVersion.Or(kubeversion.Newest).AtLeast(kubeversion.V1_37) {
		return false, nil // the controller's next status write completes it
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": set.ResourceVersion},
		"status": map[string]any{"currentRevision": st.UpdateRevision, "currentReplicas": st.UpdatedReplicas}})
	if err != nil {
		return false, err
	}
	// Like any write, not cut short by a cancelled context.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = e.writer.patchWorkload(wctx, live.Target{Namespace: set.Namespace, Kind: capture.StatefulSet, Name: set.Name}, patch, "status")
	switch {
	case apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: record the completed rollout in status.currentRevision: %w", e.opts.Target, err)
	}
	e.opts.Log.Info("complete", "workload", e.opts.Target.String(), "currentRevision", st.UpdateRevision, "dryRun", e.opts.DryRun)
	return !e.opts.DryRun, nil
}
