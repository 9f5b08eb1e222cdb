// Package gate is rollplan's validating admission webhook: one budget for
// every actor. It answers admission.k8s.io/v1 AdmissionReviews from an
// informer cache, with the planner's facts and the same compiled policies:
//
//   - a pod DELETE, a pods/eviction CREATE, or a pod UPDATE that restarts
//     containers (an image change; a resize whose resizePolicy restarts the
//     container) is a disruption: it is admitted while every budget of the
//     pod's workload, resolved by the policy exactly as the planner
//     resolves it (PDBs included), keeps room (see fits). A pod that is
//     already unavailable may always go; pods without an owning workload,
//     or whose owner is gone or being deleted (the garbage collector's to
//     remove), are not the gate's business.
//   - a Deployment, StatefulSet or DaemonSet CREATE or UPDATE is denied by
//     the policy's deny rules; otherwise the response carries a warning
//     that summarises the plan the change produces.
//
// Admitted disruptions are reserved in a Store shared by every replica
// until the cache shows them, so two requests racing for the last unit of
// a budget are not both admitted.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Enforcement modes (Options.Enforcement, or per workload with the
// AnnEnforcement annotation).
const (
	Deny   = "deny"   // a request that breaks a budget or a guard rail is denied
	Warn   = "warn"   // it is admitted with a warning
	DryRun = "dryrun" // it is admitted; only the decision log and metrics tell
)

// AnnEnforcement on a workload overrides the gate's enforcement mode for
// it and its pods: deny, warn or dryrun.
const AnnEnforcement = "rollplan.dev/gate-enforcement"

// Cache is what the gate reads: capture's objects, and pods and
// ReplicaSets by name (capture.ListerSource over informers).
type Cache interface {
	capture.Source
	Pod(ns, name string) (*corev1.Pod, error)
	ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error)
}

// Options configure a Gate.
type Options struct {
	// Engine: the compiled policies; replace it with SetEngine.
	Engine engine.Engine
	Cache  Cache
	// Store keeps reservations; default a MemoryStore (one replica only).
	Store Store
	// Enforcement: Deny (default), Warn or DryRun.
	Enforcement string
	// PolicyEnforcement: the mode for the workloads whose
	// rollplan.dev/policy annotation names a policy, over Enforcement (a
	// workload's AnnEnforcement is over both).
	PolicyEnforcement map[string]string
	// Exempt namespaces are never gated: kube-system and the gate's own
	// are added to them.
	Exempt []string
	// Namespace is the gate's own.
	Namespace string
	// KubernetesVersion is the cluster's version (zero: the newest
	// rollplan knows); FeatureGates override its defaults.
	KubernetesVersion kubeversion.Version
	FeatureGates      map[string]bool
	// ReservationTTL: how long an admitted disruption is reserved at most
	// (it ends earlier once the cache shows it); default 30s.
	ReservationTTL time.Duration
	// PlanOptions: the duration estimates of the plan warnings.
	PlanOptions plan.Options
	Now         func() time.Time
	Log         *slog.Logger
	Metrics     *Metrics
}

// Gate answers admission requests.
type Gate struct {
	opts   Options
	engine atomic.Pointer[engine.Engine]
	exempt map[string]bool
	states *stateCache // nil: no caching (a Cache without informers)
}

// New returns a gate.
func New(o Options) (*Gate, error) {
	if o.Engine == nil || o.Cache == nil {
		return nil, errors.New("gate: an engine and a cache are required")
	}
	switch o.Enforcement {
	case "":
		o.Enforcement = Deny
	case Deny, Warn, DryRun:
	default:
		return nil, fmt.Errorf("gate: enforcement %q: want %s, %s or %s", o.Enforcement, Deny, Warn, DryRun)
	}
	for policy, m := range o.PolicyEnforcement {
		if m != Deny && m != Warn && m != DryRun {
			return nil, fmt.Errorf("gate: enforcement %q for policy %q: want %s, %s or %s", m, policy, Deny, Warn, DryRun)
		}
	}
	if o.Store == nil {
		o.Store = &MemoryStore{}
	}
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = 30 * time.Second
	}
	if o.PlanOptions == (plan.Options{}) {
		o.PlanOptions = plan.DefaultOptions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	g := &Gate{opts: o, exempt: map[string]bool{metav1.NamespaceSystem: true}}
	if o.Namespace != "" {
		g.exempt[o.Namespace] = true
	}
	for _, ns := range o.Exempt {
		g.exempt[ns] = true
	}
	g.SetEngine(o.Engine)
	var err error
	if g.states, err = newStateCache(o.Cache); err != nil {
		return nil, err
	}
	return g, nil
}

// SetEngine swaps in newly compiled policies; requests in flight finish
// with the old ones.
func (g *Gate) SetEngine(e engine.Engine) { g.engine.Store(&e) }

func (g *Gate) eng() engine.Engine { return *g.engine.Load() }

// Decisions (the decision label of metrics and logs).
const (
	Allowed    = "allow"
	Denied     = "deny"
	WouldDeny  = "would-deny" // warn or dryrun enforcement admitted it
	Errored    = "error"      // admitted or denied by the failure policy
	denyPrefix = "rollplan gate: "
)

// verdict is a decision before enforcement.
type verdict struct {
	allow bool
	// what a refusal names ("eviction of pod ns/x"), when it is worded
	// "<what> denied: <reason>" (see text); "" when reason says it all.
	what     string
	reason   string   // why, for the log (and the message when denied)
	next     string   // what to do about a denial: in deny mode's message only
	warnings []string // for the user
	workload string   // "Kind namespace/name", when one was resolved
	mode     string   // enforcement for this workload
	failed   bool     // the decision could not be made
	dryRun   bool     // a dry run: nothing is reserved
}

// text words the verdict for the log and a denial.
func (v *verdict) text() string {
	if v.what == "" {
		return v.reason
	}
	return v.what + " denied: " + v.reason
}

// warnText words a denial that warn mode admitted: the request went
// through, so no retry advice.
func (v *verdict) warnText() string {
	if v.what == "" {
		return "would be denied in deny mode: " + v.reason
	}
	return v.what + " would be denied in deny mode: " + v.reason
}

// Review answers one admission request. It never returns nil.
func (g *Gate) Review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string, verdict) {
	v := g.decide(ctx, req)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, Warnings: v.warnings}
	decision := Allowed
	switch {
	case v.allow && v.failed:
		decision = Errored
	case v.allow:
	case v.mode == Warn:
		decision = WouldDeny
		resp.Warnings = append(resp.Warnings, denyPrefix+v.warnText())
	case v.mode == DryRun:
		decision = WouldDeny
	default:
		decision = Denied
		if v.failed {
			decision = Errored
		}
		resp.Allowed = false
		msg := v.text()
		if v.next != "" {
			msg += "; " + v.next
		}
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: denyPrefix + msg,
			// The cause tells the executor the gate refused, whatever the message says.
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: live.GateDenialCause, Message: v.text()}}}}
		if req.SubResource == "eviction" {
			// kubectl drain and the Eviction API clients retry a 429.
			resp.Result.Code, resp.Result.Reason = 429, metav1.StatusReasonTooManyRequests
		}
	}
	return resp, decision, v
}

func (g *Gate) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	dryRun := isDryRun(req)
	v := g.judge(ctx, req, dryRun)
	v.dryRun = dryRun
	return v
}

func (g *Gate) judge(ctx context.Context, req *admissionv1.AdmissionRequest, dryRun bool) verdict {
	if g.exempt[req.Namespace] {
		return verdict{allow: true, reason: "namespace " + req.Namespace + " is exempt"}
	}
	switch {
	case req.Resource.Group == "" && req.Resource.Resource == "pods":
		return g.pod(ctx, req, dryRun)
	case req.Resource.Group == "apps" && req.SubResource == "" &&
		(req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		switch req.Resource.Resource {
		case "deployments", "statefulsets", "daemonsets":
			return g.workloadChange(ctx, req)
		}
	}
	return verdict{allow: true, reason: "not a request the gate judges"}
}

// pod judges the pod requests that disrupt; a dry run reserves nothing.
func (g *Gate) pod(ctx context.Context, req *admissionv1.AdmissionRequest, dryRun bool) verdict {
	var pod *corev1.Pod
	var images map[string]string // an update's new images: when the cache shows them, it shows the update
	what := ""
	switch {
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		what = "deletion"
		if len(req.OldObject.Raw) > 0 {
			pod = &corev1.Pod{}
			if err := decode(req.OldObject.Raw, pod); err != nil {
				return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: oldObject: %v", req.Namespace, req.Name, err)}
			}
		}
	case req.Operation == admissionv1.Create && req.SubResource == "eviction":
		what = "eviction"
	case req.Operation == admissionv1.Update && (req.SubResource == "" || req.SubResource == "resize"):
		oldPod, newPod := &corev1.Pod{}, &corev1.Pod{}
		if err := decode(req.OldObject.Raw, oldPod); err != nil {
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: oldObject: %v", req.Namespace, req.Name, err)}
		}
		if err := decode(req.Object.Raw, newPod); err != nil {
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: object: %v", req.Namespace, req.Name, err)}
		}
		why := restarts(oldPod, newPod)
		if why == "" {
			return verdict{allow: true, reason: "the update restarts no container"}
		}
		what = "update (" + why + ")"
		pod, images = oldPod, containerImages(newPod)
	default:
		return verdict{allow: true, reason: "not a disruption"}
	}
	if pod == nil {
		var err error
		if pod, err = g.opts.Cache.Pod(req.Namespace, req.Name); err != nil {
			if apierrors.IsNotFound(err) {
				return verdict{allow: true, reason: "pod not in the cache (gone already, or too new to be a budget's)"}
			}
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("read pod %s/%s from the cache: %v", req.Namespace, req.Name, err)}
		}
	}
	return g.disruption(ctx, pod, images, what, dryRun)
}

// isDryRun: the request changes nothing. An eviction says so in its
// Eviction's deleteOptions (policy/v1 or v1beta1: the same fields):
// kubectl drain --dry-run=server sets only those, the request's own
// dryRun stays false. An Eviction that cannot be read is judged as a
// real one.
func isDryRun(req *admissionv1.AdmissionRequest) bool {
	if req.DryRun != nil && *req.DryRun {
		return true
	}
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != "eviction" || req.Operation != admissionv1.Create {
		return false
	}
	var e policyv1.Eviction
	if decode(req.Object.Raw, &e) != nil || e.DeleteOptions == nil {
		return false
	}
	return slices.Contains(e.DeleteOptions.DryRun, metav1.DryRunAll)
}

// restarts says why an update of a pod restarts a container: an image
// change, or a cpu/memory change under a RestartContainer resizePolicy.
func restarts(old, cur *corev1.Pod) string {
	prev := map[string]corev1.Container{}
	for _, c := range old.Spec.Containers {
		prev[c.Name] = c
	}
	var why []string
	for _, c := range cur.Spec.Containers {
		o, ok := prev[c.Name]
		if !ok {
			continue
		}
		if o.Image != c.Image {
			why = append(why, fmt.Sprintf("container %s image %s → %s", c.Name, o.Image, c.Image))
			continue
		}
		for _, rp := range c.ResizePolicy {
			if rp.RestartPolicy != corev1.RestartContainer {
				continue
			}
			if !o.Resources.Requests[rp.ResourceName].Equal(c.Resources.Requests[rp.ResourceName]) ||
				!o.Resources.Limits[rp.ResourceName].Equal(c.Resources.Limits[rp.ResourceName]) {
				why = append(why, fmt.Sprintf("container %s %s resized with resizePolicy RestartContainer", c.Name, rp.ResourceName))
			}
		}
	}
	return strings.Join(why, "; ")
}

// owner resolves the workload that controls a pod: its StatefulSet,
// DaemonSet, or the Deployment of its ReplicaSet (Kind "" for none).
// released, when not "", says why the pod is no budget's business any
// more: its owner, or the ReplicaSet between, is gone or being deleted
// (another object of the same name is not its owner). The garbage
// collector then deletes the pods, and must be let through: a foreground
// delete waits for every pod to go, and no replacement ever comes.
func (g *Gate) owner(ctx context.Context, pod *corev1.Pod) (ref capture.Ref, released string, err error) {
	c := snapshot.ControllerOf(pod)
	if c == nil {
		return capture.Ref{}, "", nil
	}
	ns := pod.Namespace
	switch c.Kind {
	case capture.StatefulSet:
		o, err := g.opts.Cache.StatefulSet(ctx, ns, c.Name)
		released, err = ownerLife(capture.StatefulSet, ns, c, o, err)
		return capture.Ref{Kind: c.Kind, Name: c.Name}, released, err
	case capture.DaemonSet:
		o, err := g.opts.Cache.DaemonSet(ctx, ns, c.Name)
		released, err = ownerLife(capture.DaemonSet, ns, c, o, err)
		return capture.Ref{Kind: c.Kind, Name: c.Name}, released, err
	case "ReplicaSet":
		rs, err := g.opts.Cache.ReplicaSet(ns, c.Name)
		if released, err := ownerLife("ReplicaSet", ns, c, rs, err); released != "" || err != nil {
			return capture.Ref{}, released, err
		}
		d := snapshot.ControllerOf(rs)
		if d == nil || d.Kind != capture.Deployment {
			return capture.Ref{}, "", nil
		}
		o, err := g.opts.Cache.Deployment(ctx, ns, d.Name)
		released, err = ownerLife(capture.Deployment, ns, d, o, err)
		return capture.Ref{Kind: capture.Deployment, Name: d.Name}, released, err
	}
	return capture.Ref{}, "", nil
}

// ownerLife says whether obj, read from the cache for the owner reference
// c, is gone or being deleted ("" while it lives).
func ownerLife[T metav1.Object](kind, ns string, c *metav1.OwnerReference, obj T, err error) (string, error) {
	name := fmt.Sprintf("owner %s %s/%s", kind, ns, c.Name)
	switch {
	case apierrors.IsNotFound(err):
		return name + " is gone: the garbage collector deletes its pods", nil
	case err != nil:
		return "", fmt.Errorf("read %s %s/%s from the cache: %w", strings.ToLower(kind), ns, c.Name, err)
	case c.UID != "" && obj.GetUID() != "" && obj.GetUID() != c.UID:
		return fmt.Sprintf("%s is gone (the %s of that name now has uid %s, not %s): the garbage collector deletes its pods", name, kind, obj.GetUID(), c.UID), nil
	case obj.GetDeletionTimestamp() != nil:
		return name + " is being deleted: the garbage collector deletes its pods", nil
	}
	return "", nil
}

// disruption judges a disruption of pod against its workload's budgets.
func (g *Gate) disruption(ctx context.Context, pod *corev1.Pod, images map[string]string, what string, dryRun bool) verdict {
	ref, released, err := g.owner(ctx, pod)
	switch {
	case err != nil:
		return verdict{allow: true, failed: true, reason: err.Error()}
	case ref.Kind == "" && released == "":
		return verdict{allow: true, reason: "pod has no owning Deployment, StatefulSet or DaemonSet"}
	}
	t := live.Target{Namespace: pod.Namespace, Kind: ref.Kind, Name: ref.Name}
	v := verdict{mode: g.opts.Enforcement}
	if ref.Kind != "" {
		v.workload = t.String()
	}
	if released != "" {
		v.allow, v.reason = true, fmt.Sprintf("%s of pod %s admitted: %s", what, pod.Name, released)
		return v
	}
	// Whole seconds: the facts' clock, and the state cache's key.
	now := g.opts.Now().Truncate(time.Second)
	st := g.state(ctx, t, now)
	switch {
	case st.captureErr != nil:
		// The workload is unreadable (or went between owner and state).
		v.allow, v.failed, v.reason = true, true, fmt.Sprintf("%s: %v", t, st.captureErr)
		return v
	case st.factsErr != nil:
		v.allow, v.failed, v.reason = !st.managed, true, fmt.Sprintf("%s: facts: %v", t, st.factsErr)
		return v
	}
	r := st.rollout
	v.mode = g.mode(r)
	fp := factPod(r, pod.Name)
	switch {
	case fp == nil:
		v.allow, v.reason = true, fmt.Sprintf("pod is not one of %s's", t)
		return v
	case fp.Terminating || fp.Terminal || !fp.Available:
		v.allow, v.reason = true, "pod is unavailable already"
		return v
	case st.policyErr != nil:
		// Policy errors deny disruptions: a budget we cannot compute is not room.
		v.failed, v.reason = true, fmt.Sprintf("%s of pod %s: the policy for %s failed, so its budgets are unknown: %v; fix the policy (rollplan plan shows the same error)", what, pod.Name, t, st.policyErr)
		return v
	}
	if what == "eviction" {
		// The Eviction API calls webhooks before its own PDB check: an
		// eviction admitted here that the PDB then refuses (429) would hold
		// a reservation for nothing until it lapses, denying evictions the
		// PDB allows by then. Refuse what the PDB's status refuses now.
		if name, ok := g.pdbRefuses(ctx, pod); ok {
			v.what = fmt.Sprintf("eviction of pod %s/%s", pod.Namespace, pod.Name)
			v.reason = fmt.Sprintf("%s: PodDisruptionBudget %s/%s allows no disruption now (status.disruptionsAllowed 0), so the Eviction API refuses it", t, pod.Namespace, name)
			v.next = "retry once pods are available again"
			return v
		}
	}
	budgets, cached := st.budgets, st.pods
	var short *shortfall
	key := workloadKey(t.Namespace, t.Kind, t.Name)
	if shared := sharedPDB(r); shared != "" {
		// Every workload under a PDB that spans workloads reserves in one
		// place, so that two of them cannot both spend its last unit.
		key = workloadKey(t.Namespace, "PodDisruptionBudget", shared)
	}
	err = g.opts.Store.Reserve(ctx, key, func(cur []Reservation) ([]Reservation, bool, error) {
		live := pending(cur, r, cached, pod.Name, now)
		extra := map[string]bool{}
		for _, res := range live {
			extra[res.Pod] = true
		}
		elsewhere := g.pendingElsewhere(cur, r, pod.Name, now)
		if short = fits(r, budgets, pod.Name, extra, elsewhere); short != nil || dryRun {
			return nil, false, nil
		}
		// What this replica's cache shows no longer counts here, but stays
		// stored until it lapses: another replica's cache may lag behind
		// this one's and still need it.
		keep := []Reservation{}
		for _, res := range cur {
			if res.Pod != pod.Name && res.Until.After(now) {
				keep = append(keep, res)
			}
		}
		return append(keep, Reservation{Pod: pod.Name, UID: string(pod.UID), Images: images, PDBs: fp.PDBs,
			Until: now.Add(g.opts.ReservationTTL).UTC().Truncate(time.Second)}), true, nil
	})
	if err != nil {
		// Fail closed for managed workloads, open elsewhere.
		v.allow, v.failed = !r.Workload.Managed, true
		v.reason = fmt.Sprintf("%s of pod %s (%s): reservations unavailable: %v", what, pod.Name, t, err)
		return v
	}
	if short != nil {
		short.Elsewhere = st.elsewhere[short.Budget.PDB]
		v.what = fmt.Sprintf("%s of pod %s/%s", what, pod.Namespace, pod.Name)
		v.reason = fmt.Sprintf("%s %s", t, short)
		v.next = short.advice(t)
		return v
	}
	v.allow = true
	if why := surplus(r)(fp); why != "" {
		v.reason = fmt.Sprintf("%s of pod %s costs %s no budget: %s", what, pod.Name, t, why)
	} else {
		v.reason = fmt.Sprintf("%s of pod %s fits every budget of %s", what, pod.Name, t)
	}
	return v
}

// sharedPDB: the first (by name) PDB selecting pods of r that also selects
// pods of other workloads, whose reservations r must see; "" for none. A
// chain (PDB a over workloads 1 and 2, b over 2 and 3) is joined only
// through its first PDB.
func sharedPDB(r *facts.Rollout) string {
	for _, p := range r.PDBs { // sorted by name
		if p.ExpectedPods > r.Workload.Replicas {
			return p.Name
		}
	}
	return ""
}

// pendingElsewhere counts, per PDB, the reservations in cur of other
// workloads' pods that the facts do not count yet: the pod is still the one
// reserved and Ready (admitted, not seen), terminating (the facts leave
// terminating pods of other workloads out), or gone and not back. Once the
// cache shows it unavailable, or replaced, the facts count it, if at all.
func (g *Gate) pendingElsewhere(cur []Reservation, r *facts.Rollout, pod string, now time.Time) map[string]int {
	var out map[string]int
	for _, res := range cur {
		if res.Pod == pod || len(res.PDBs) == 0 || !res.Until.After(now) || factPod(r, res.Pod) != nil {
			continue
		}
		c, err := g.opts.Cache.Pod(r.Workload.Namespace, res.Pod)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			continue // unknown: the facts' count stands
		case err == nil && string(c.UID) != res.UID:
			continue // replaced: its replacement counts if unavailable
		case err == nil && c.DeletionTimestamp == nil && !podReady(c):
			continue // unavailable: the facts count it
		}
		if out == nil {
			out = map[string]int{}
		}
		for _, name := range res.PDBs {
			out[name]++
		}
	}
	return out
}

// pdbRefuses names a PodDisruptionBudget selecting pod whose status, up to
// date with its spec, allows no disruption: the Eviction API refuses the
// eviction whatever the gate says.
func (g *Gate) pdbRefuses(ctx context.Context, pod *corev1.Pod) (string, bool) {
	pdbs, err := g.opts.Cache.PodDisruptionBudgets(ctx, pod.Namespace)
	if err != nil {
		return "", false // the gate's own count still applies
	}
	for _, pdb := range pdbs {
		if pdb.Spec.Selector == nil || pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		return pdb.Name, true
	}
	return "", false
}

// pending are the reservations this replica still counts: not this pod's,
// not lapsed, and for disruptions its cache does not show yet. A cache
// shows a deletion or eviction once the pod is gone, replaced (another
// UID), terminating or unavailable, and an update once the pod's spec has
// the new images (the pod then counts as in flight until the update
// completes). A later resourceVersion alone shows nothing: the pod may
// have changed for another reason, the disruption still to come.
func pending(cur []Reservation, r *facts.Rollout, cached map[string]*corev1.Pod, pod string, now time.Time) []Reservation {
	var out []Reservation
	for _, res := range cur {
		if res.Pod == pod || !res.Until.After(now) {
			continue
		}
		p, c := factPod(r, res.Pod), cached[res.Pod]
		if p == nil || c == nil || string(c.UID) != res.UID || p.Terminating || p.Terminal || !p.Available {
			continue // the cache shows it: it counts as a pod now, if at all
		}
		if len(res.Images) > 0 && maps.Equal(containerImages(c), res.Images) {
			continue // the update is in the cache
		}
		out = append(out, res)
	}
	return out
}

// containerImages: container name → image.
func containerImages(p *corev1.Pod) map[string]string {
	out := make(map[string]string, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out[c.Name] = c.Image
	}
	return out
}

func factPod(r *facts.Rollout, name string) *facts.Pod {
	for i := range r.Pods {
		if r.Pods[i].Name == name {
			return &r.Pods[i]
		}
	}
	return nil
}

// mode: the workload's AnnEnforcement, else its policy's, else the gate's.
func (g *Gate) mode(r *facts.Rollout) string {
	switch m := r.Workload.Annotations[AnnEnforcement]; m {
	case Deny, Warn, DryRun:
		return m
	}
	if m, ok := g.opts.PolicyEnforcement[r.Workload.Policy]; ok && r.Workload.Policy != "" {
		return m
	}
	return g.opts.Enforcement
}

// isManaged: the workload carries rollplan.dev/managed="true" (read from
// the object when its facts could not be built).
func isManaged(snap *snapshot.Snapshot, t live.Target) bool {
	var m metav1.Object
	switch t.Kind {
	case capture.Deployment:
		for _, o := range snap.Deployments {
			if o.Name == t.Name {
				m = o
			}
		}
	case capture.StatefulSet:
		for _, o := range snap.StatefulSets {
			if o.Name == t.Name {
				m = o
			}
		}
	case capture.DaemonSet:
		for _, o := range snap.DaemonSets {
			if o.Name == t.Name {
				m = o
			}
		}
	}
	return m != nil && m.GetAnnotations()[facts.AnnManaged] == "true"
}

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
		v.warnings = append(v.warnings, "rollplan: "+s)
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
		return fmt.Sprintf("%d %s to update, nothing planned: %s", s.ToUpdate, plural(s.ToUpdate, "pod", "pods"), wp.Notes[0])
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
	out := fmt.Sprintf("will update %d %s in %d %s", s.ToUpdate, plural(s.ToUpdate, "pod", "pods"), s.Waves, plural(s.Waves, "wave", "waves"))
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}

// cluster is what the facts need to know of the cluster: its version and
// gates.
func (g *Gate) cluster() facts.Options {
	return facts.Options{KubernetesVersion: g.opts.KubernetesVersion, FeatureGates: g.opts.FeatureGates}
}
