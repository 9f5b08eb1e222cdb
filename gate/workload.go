package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// replaceWorkload: a capture of the workload from the cache with obj in
// place of the cached object; for a workload the cache does not hold (a
// CREATE), obj alone, with the Nodes.
func (g *Gate) replaceWorkload(ctx context.Context, kind string, obj metav1.Object) (*snapshot.Snapshot, error) {
	ns, name := obj.GetNamespace(), obj.GetName()
	var err error
	switch kind {
	case capture.Deployment:
		_, err = g.opts.Cache.Deployment(ctx, ns, name)
	case capture.StatefulSet:
		_, err = g.opts.Cache.StatefulSet(ctx, ns, name)
	default:
		_, err = g.opts.Cache.DaemonSet(ctx, ns, name)
	}
	snap := &snapshot.Snapshot{}
	switch {
	case err == nil:
		if snap, _, err = capture.CaptureFrom(ctx, g.opts.Cache, capture.Options{Namespace: ns, Workloads: []capture.Ref{{Kind: kind, Name: name}}, Now: g.opts.Now}); err != nil {
			return nil, err
		}
	case apierrors.IsNotFound(err):
		if kind == capture.DaemonSet {
			nodes, err := g.opts.Cache.Nodes(ctx)
			if err == nil {
				snap.Nodes = nodes
			}
		}
	default:
		return nil, fmt.Errorf("read %s %s/%s from the cache: %w", strings.ToLower(kind), ns, name, err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		snap.Deployments = []*appsv1.Deployment{o}
	case *appsv1.StatefulSet:
		snap.StatefulSets = []*appsv1.StatefulSet{o}
	case *appsv1.DaemonSet:
		snap.DaemonSets = []*appsv1.DaemonSet{o}
	}
	snap.CapturedAt = g.opts.Now().UTC().Truncate(time.Second)
	return snap, nil
}

// workloadChange judges a workload CREATE or UPDATE: the policy's deny
// rules, and a warning with the plan the change produces.
func (g *Gate) workloadChange(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	t := live.Target{Namespace: req.Namespace, Name: req.Name}
	if req.Operation == admissionv1.Update && onlyRolloutState(req) {
		// The controller recording a rollout's state (a halt included)
		// must never be refused by the guard rails of the very spec it
		// reports on.
		return verdict{workload: live.Target{Namespace: req.Namespace, Kind: req.Kind.Kind, Name: req.Name}.String(), mode: g.opts.Enforcement, allow: true, reason: "only the rollout state annotation changed"}
	}
	snap, err := g.snapshotWith(ctx, req, &t)
	v := verdict{workload: t.String(), mode: g.opts.Enforcement, allow: true}
	if err != nil {
		v.failed, v.reason = true, err.Error()
		return v
	}
	now := g.opts.Now()
	r, _, err := live.Observe(snap, t, now, g.cluster())
	if err != nil {
		v.failed, v.reason = true, fmt.Sprintf("%s: facts: %v", t, err)
		return v
	}
	v.mode = g.mode(r)
	d, err := g.eng().Decide(ctx, r)
	if err != nil {
		// Guard rails are advisory when the policy fails (the webhook fails open for workloads).
		v.failed, v.reason = true, fmt.Sprintf("%s: policy error: %v", t, err)
		v.warnings = append(v.warnings, denyPrefix+"policy error, guard rails not checked: "+err.Error())
		return v
	}
	wp, _ := plan.Workload(r, d, g.opts.PlanOptions)
	if len(wp.Denied) > 0 {
		v.allow = false
		v.reason = fmt.Sprintf("%s %s denied by policy: %s", strings.ToLower(string(req.Operation)), t, strings.Join(wp.Denied, "; "))
		return v
	}
	v.reason = "no guard rail applies"
	// Why each pod is updated (its first reason), for a Deployment's
	// ReplicaSet scale-downs, whose own reasons are about the scaling.
	why := make(map[string]string, len(r.Pods))
	for i := range r.Pods {
		if i < len(d.Pods) && len(d.Pods[i].Reasons) > 0 {
			why[r.Pods[i].Name] = d.Pods[i].Reasons[0]
		}
	}
	if s := summarise(wp, why); s != "" {
		v.warnings = append(v.warnings, planPrefix+s)
		v.reason = s
	}
	return v
}

// snapshotWith is the cache's view of the workload with the request's
// object in place of the stored one.
func (g *Gate) snapshotWith(ctx context.Context, req *admissionv1.AdmissionRequest, t *live.Target) (*snapshot.Snapshot, error) {
	var kind string
	var obj metav1.Object
	switch req.Resource.Resource {
	case "deployments":
		kind, obj = capture.Deployment, &appsv1.Deployment{}
	case "statefulsets":
		kind, obj = capture.StatefulSet, &appsv1.StatefulSet{}
	default:
		kind, obj = capture.DaemonSet, &appsv1.DaemonSet{}
	}
	t.Kind = kind
	if err := decode(req.Object.Raw, obj); err != nil {
		return nil, fmt.Errorf("%s %s/%s: object: %w", strings.ToLower(kind), req.Namespace, req.Name, err)
	}
	obj.SetNamespace(req.Namespace)
	if obj.GetName() == "" {
		obj.SetName(req.Name)
	}
	if obj.GetName() == "" {
		obj.SetName(obj.GetGenerateName() + "new")
	}
	t.Name = obj.GetName()
	return g.replaceWorkload(ctx, kind, obj)
}

// summarise words a plan for a warning: "will update 30 pods in 8 waves:
// 25 in place, 5 recreated (spec.containers[app].env changed)", or, when
// no wave is planned, why: "3 pods to update, nothing planned: NOTE".
// podWhy: why each pod is updated, for the pods a Deployment's ReplicaSet
// scale-downs remove (those actions' reasons are about the scaling).
func summarise(wp plan.WorkloadPlan, podWhy map[string]string) string {
	s := wp.Summary
	if len(wp.Halted) > 0 {
		return fmt.Sprintf("the rollout will halt: %s", strings.Join(wp.Halted, "; "))
	}
	if s.ToUpdate == 0 {
		return ""
	}
	if len(wp.Waves) == 0 {
		// Pods to update but no wave: say why nothing is planned (the
		// plan's first note), not "in 0 waves".
		if len(wp.Notes) == 0 {
			return ""
		}
		return fmt.Sprintf("%d %s to update, nothing planned: %s", s.ToUpdate, plural.Noun(s.ToUpdate, "pod", "pods"), wp.Notes[0])
	}
	var why []string
	add := func(reason string) {
		if reason != "" && !slices.Contains(why, reason) {
			why = append(why, reason)
		}
	}
	for _, w := range wp.Waves {
		for _, a := range w.Actions {
			switch {
			case a.Type == plan.ActionRecreate && len(a.Reasons) > 0:
				add(a.Reasons[0])
			case a.Type == plan.ActionScaleRS:
				for _, p := range a.Pods {
					add(podWhy[p])
				}
			}
		}
	}
	parts := []string{}
	if s.InPlace > 0 {
		parts = append(parts, fmt.Sprintf("%d in place", s.InPlace))
	}
	if s.Recreate > 0 {
		r := fmt.Sprintf("%d recreated", s.Recreate)
		if len(why) > 0 {
			if len(why) > 2 {
				why = append(why[:2], "…")
			}
			r += " (" + strings.Join(why, "; ") + ")"
		}
		parts = append(parts, r)
	}
	// The parts add up to the pods to update, as the plan's summary does.
	if s.Deleted > 0 {
		parts = append(parts, fmt.Sprintf("%d deleted", s.Deleted))
	}
	if s.Terminating > 0 {
		parts = append(parts, fmt.Sprintf("%d terminating", s.Terminating))
	}
	if s.Blocked > 0 {
		b := fmt.Sprintf("%d blocked", s.Blocked)
		if len(wp.Blocked) > 0 {
			b += " (" + wp.Blocked[0].Reason + ")"
		}
		parts = append(parts, b)
	}
	out := fmt.Sprintf("will update %d %s in %d %s", s.ToUpdate, plural.Noun(s.ToUpdate, "pod", "pods"), s.Waves, plural.Noun(s.Waves, "wave", "waves"))
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}

// onlyRolloutState: an update that changes nothing of the workload but
// the annotation facts.AnnRolloutState (and the metadata the API server
// keeps: resourceVersion, managedFields, generation; and status).
func onlyRolloutState(req *admissionv1.AdmissionRequest) bool {
	var obj, old map[string]any
	if json.Unmarshal(req.Object.Raw, &obj) != nil || json.Unmarshal(req.OldObject.Raw, &old) != nil || obj == nil || old == nil {
		return false
	}
	strip := func(o map[string]any) {
		delete(o, "status")
		m, _ := o["metadata"].(map[string]any)
		if m == nil {
			return
		}
		for _, f := range []string{"resourceVersion", "managedFields", "generation"} {
			delete(m, f)
		}
		if a, _ := m["annotations"].(map[string]any); a != nil {
			delete(a, facts.AnnRolloutState)
			if len(a) == 0 {
				delete(m, "annotations")
			}
		}
	}
	strip(obj)
	strip(old)
	return reflect.DeepEqual(obj, old)
}
