package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	rolloutv1 "github.com/rollplan/rollplan/api/v1alpha1"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
)

// RolloutName is the name of the Rollout of the workload KIND/NAME in its
// namespace: "statefulset-web", as the driver Lease is
// "rollplan-statefulset-web". A name too long for an object name keeps
// its start and ends in a hash of the whole.
func RolloutName(kind, name string) string {
	n := strings.ToLower(kind) + "-" + name
	if len(n) <= validation.DNS1123SubdomainMaxLength {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:validation.DNS1123SubdomainMaxLength-11] + "-" + hex.EncodeToString(sum[:])[:10]
}

// rolloutRetry: after the API server says it has no Rollout resource (the
// CRD is not installed: a controller run from a workstation), how long
// before trying again.
const rolloutRetry = time.Minute

// rolloutRecord is what this replica last wrote to a workload's Rollout.
type rolloutRecord struct {
	uid    types.UID // the workload's: a new workload of the same name gets its own
	status string    // the state it was written from (its encoding)
	conds  []metav1.Condition
	gen    int64 // the Rollout's metadata.generation
}

// recordRollout writes the Rollout of the workload from its state: the
// object the first time this replica meets the workload (owned by it, so
// it goes with it), then the status subresource whenever the state
// changes. Both by server-side apply under the rollout state's field
// manager. A missing CRD is logged once a minute and skipped: the
// annotation still carries the state.
func (c *Controller) recordRollout(ctx context.Context, k key, m metav1.Object, st live.RolloutState) error {
	if c.o.Dynamic == nil || c.o.DryRun {
		return nil
	}
	c.mu.Lock()
	rec, known := c.rollouts[k]
	skip := known && rec.uid == m.GetUID() && rec.status == st.Encode()
	missing := !c.noCRD.IsZero() && c.o.Now().Sub(c.noCRD) < rolloutRetry
	c.mu.Unlock()
	if skip || missing {
		return nil
	}
	res := c.o.Dynamic.Resource(rolloutv1.GroupVersionResource).Namespace(k.Namespace)
	name := RolloutName(k.Kind, k.Name)
	opts := metav1.ApplyOptions{FieldManager: live.RolloutStateFieldManager, Force: true}
	if !known || rec.uid != m.GetUID() {
		obj, err := toUnstructured(c.rolloutObject(k, m, name))
		if err != nil {
			return err
		}
		got, err := res.Apply(ctx, name, obj, opts)
		if err != nil {
			return c.rolloutError(k, err)
		}
		rec = rolloutRecord{uid: m.GetUID(), gen: got.GetGeneration()}
		if conds, found, _ := unstructured.NestedSlice(got.Object, "status", "conditions"); found {
			rec.conds = decodeConditions(conds)
		}
	}
	now := metav1.NewTime(c.o.Now())
	status := rolloutStatus(st, rec.gen)
	for _, cond := range rolloutConditions(st, rec.gen) {
		cond.LastTransitionTime = now
		meta.SetStatusCondition(&rec.conds, cond)
	}
	if st.Analysis == nil { // a revision without a gate: no verdict to show
		meta.RemoveStatusCondition(&rec.conds, rolloutv1.ConditionAnalysisPassed)
	}
	status.Conditions = rec.conds
	obj, err := toUnstructured(&rolloutv1.Rollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: rolloutv1.Group + "/" + rolloutv1.Version, Kind: rolloutv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Namespace},
		Status:     status,
	})
	if err != nil {
		return err
	}
	delete(obj.Object, "spec") // the status subresource takes status alone
	if _, err := res.ApplyStatus(ctx, name, obj, opts); err != nil {
		return c.rolloutError(k, err)
	}
	rec.status = st.Encode()
	c.mu.Lock()
	c.rollouts[k] = rec
	c.noCRD = time.Time{}
	c.mu.Unlock()
	return nil
}

// rolloutError: a missing resource is the CRD not installed (logged, not
// an error of the step); anything else fails the step, to be retried.
func (c *Controller) rolloutError(k key, err error) error {
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		first := c.noCRD.IsZero()
		c.noCRD = c.o.Now()
		c.mu.Unlock()
		if first {
			c.o.Log.Warn("no Rollout resource in the cluster: rollout state goes to the workload's annotation only; install the CRD (rollplan manifests)",
				"workload", k.String(), "resource", rolloutv1.GroupVersionResource.String(), "error", err)
		}
		return nil
	}
	return fmt.Errorf("%s: record the Rollout %s: %w", k, RolloutName(k.Kind, k.Name), err)
}

// rolloutObject is the Rollout's object part: the workload it is for,
// which owns it.
func (c *Controller) rolloutObject(k key, m metav1.Object, name string) *rolloutv1.Rollout {
	return &rolloutv1.Rollout{
		TypeMeta: metav1.TypeMeta{APIVersion: rolloutv1.Group + "/" + rolloutv1.Version, Kind: rolloutv1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: k.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "rollplan"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: string(k.Kind), Name: k.Name, UID: m.GetUID(),
			}},
		},
		Spec: rolloutv1.RolloutSpec{WorkloadRef: rolloutv1.WorkloadRef{APIVersion: "apps/v1", Kind: string(k.Kind), Name: k.Name}},
	}
}

// rolloutStatus is the Rollout's status for a state, conditions aside.
func rolloutStatus(st live.RolloutState, gen int64) rolloutv1.RolloutStatus {
	var a *rolloutv1.RolloutAnalysis
	if st.Analysis != nil {
		a = &rolloutv1.RolloutAnalysis{Wave: int32(st.Analysis.Wave), Attempt: int32(st.Analysis.Attempt),
			State: st.Analysis.State, Verdict: st.Analysis.Verdict, Message: st.Analysis.Message}
	}
	return rolloutv1.RolloutStatus{Analysis: a,
		ObservedGeneration: gen, WorkloadGeneration: st.Generation,
		Phase: st.Phase, Revision: st.Revision, Wave: int32(st.Wave), Waves: int32(st.Waves),
		Replicas: int32(st.Desired), UpdatedReplicas: int32(st.Updated), AvailableReplicas: int32(st.Available), InFlightReplicas: int32(st.InFlight),
		Driver: st.Driver, Policy: st.Policy, PlanDigest: st.PlanDigest, Message: st.Message, Reasons: st.Reasons,
	}
}

// rolloutConditions are Ready, Reconciling and Stalled for a state, in
// the form kstatus reads (sigs.k8s.io/cli-utils/pkg/kstatus/status):
// Reconciling True is InProgress, Stalled True (Reconciling False) is
// Failed, neither is Current. So a rollout in progress, paused or driven
// by a person is InProgress; halted, stalled, or not drivable as it is
// (a policy the controller does not have, a strategy it does not drive) is
// Failed; rolled out is Current, and only then is Ready True.
func rolloutConditions(st live.RolloutState, gen int64) []metav1.Condition {
	reconciling := metav1.Condition{Type: rolloutv1.ConditionReconciling, Status: metav1.ConditionFalse}
	stalled := metav1.Condition{Type: rolloutv1.ConditionStalled, Status: metav1.ConditionFalse}
	ready := metav1.Condition{Type: rolloutv1.ConditionReady, Status: metav1.ConditionFalse}
	msg := st.Summary()
	switch {
	case st.Phase == live.RolloutComplete:
		ready.Status = metav1.ConditionTrue
		ready.Reason, reconciling.Reason, stalled.Reason = "RolledOut", "RolledOut", "RolledOut"
	case st.Phase == live.RolloutHalted:
		stalled.Status = metav1.ConditionTrue
		stalled.Reason, reconciling.Reason, ready.Reason = "Halted", "Halted", "Halted"
		msg = st.Message
	case st.Phase == live.RolloutInProgress && st.Stalled:
		stalled.Status = metav1.ConditionTrue
		stalled.Reason, reconciling.Reason, ready.Reason = "BudgetUsedUp", "Stalled", "Stalled"
		msg = st.Message
	case st.Phase == live.RolloutInProgress:
		reconciling.Status = metav1.ConditionTrue
		reconciling.Reason = "Starting"
		if st.Wave > 0 {
			reconciling.Reason = fmt.Sprintf("Wave%dOf%d", st.Wave, st.Waves)
		}
		stalled.Reason, ready.Reason = "Progressing", "RollingOut"
	case st.Phase == live.RolloutPaused:
		reconciling.Status = metav1.ConditionTrue
		reconciling.Reason, stalled.Reason, ready.Reason = "Paused", "Paused", "Paused"
	case st.NotDriven:
		stalled.Status = metav1.ConditionTrue
		stalled.Reason, reconciling.Reason, ready.Reason = "NotDriven", "NotDriven", "NotDriven"
		msg = st.Message
	case st.Driver != "":
		reconciling.Status = metav1.ConditionTrue
		reconciling.Reason, stalled.Reason, ready.Reason = "DrivenElsewhere", "DrivenElsewhere", "DrivenElsewhere"
	default: // waiting for a policy the controller does not have
		stalled.Status = metav1.ConditionTrue
		stalled.Reason, reconciling.Reason, ready.Reason = "PolicyUnknown", "PolicyUnknown", "PolicyUnknown"
		msg = st.Message
	}
	conds := []metav1.Condition{ready, reconciling, stalled}
	for i := range conds {
		conds[i].Message, conds[i].ObservedGeneration = msg, gen
	}
	if a := st.Analysis; a != nil {
		conds = append(conds, analysisCondition(*a, gen))
	}
	return conds
}

// analysisCondition is AnalysisPassed for the gate's state: True once it
// passed or was promoted, False when it failed, was inconclusive or rolled
// back, Unknown while the wave is updated, soaks or is measured. Argo CD and Flux read
// the rollout's health from Ready, Reconciling and Stalled; this one says
// why, for kubectl wait --for=condition=AnalysisPassed and alerts.
func analysisCondition(a live.RolloutAnalysis, gen int64) metav1.Condition {
	c := metav1.Condition{Type: rolloutv1.ConditionAnalysisPassed, Status: metav1.ConditionUnknown, Reason: a.State, Message: a.Message, ObservedGeneration: gen}
	switch a.State {
	case plan.AnalysisPassed, plan.AnalysisPromoted:
		c.Status = metav1.ConditionTrue
	case plan.AnalysisFailed, plan.AnalysisInconclusive, plan.AnalysisHalted, plan.AnalysisAborted, plan.AnalysisRolledBack:
		c.Status = metav1.ConditionFalse
	}
	if c.Message == "" {
		c.Message = fmt.Sprintf("wave %d: %s", a.Wave, a.State)
	}
	return c
}

// planDigest is the sha256 of a workload's plan as JSON.
func planDigest(p plan.WorkloadPlan) string {
	b, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("rollout object: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// decodeConditions reads the conditions of an object read back.
func decodeConditions(raw []any) []metav1.Condition {
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// forgetRollout deletes the Rollout this replica wrote for a workload that
// is no longer managed (m non-nil) and forgets it; a deleted workload's
// Rollout is the garbage collector's (m nil).
func (c *Controller) forgetRollout(ctx context.Context, k key, m metav1.Object) error {
	c.mu.Lock()
	_, known := c.rollouts[k]
	delete(c.rollouts, k)
	c.mu.Unlock()
	if !known || m == nil || c.o.Dynamic == nil || c.o.DryRun {
		return nil
	}
	err := c.o.Dynamic.Resource(rolloutv1.GroupVersionResource).Namespace(k.Namespace).Delete(ctx, RolloutName(k.Kind, k.Name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: delete the Rollout %s of a workload no longer managed: %w", k, RolloutName(k.Kind, k.Name), err)
	}
	return nil
}
