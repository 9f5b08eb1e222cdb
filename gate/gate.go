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
	"slices"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
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
	// PlanOptions: the duration estimates of the plan warnings and the upstream
	// model (default: the native engine).
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
	if o.PlanOptions.Upstream == nil {
		// Workloads rollplan does not drive are planned as their controller rolls them.
		o.PlanOptions.Upstream = engines.Upstream()
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
	planPrefix = "rollplan: "
)

// WarningPrefixes start every warning the gate returns (the plan a
// workload change causes, a would-be denial): the API server hands them to
// the client that wrote, which says they are the gate's.
var WarningPrefixes = []string{denyPrefix, planPrefix}

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

// cluster is what the facts need to know of the cluster: its version and
// gates.
func (g *Gate) cluster() facts.Options {
	return facts.Options{KubernetesVersion: g.opts.KubernetesVersion, FeatureGates: g.opts.FeatureGates}
}
