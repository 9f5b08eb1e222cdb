// Package capture reads the rollout-relevant objects of a live cluster into a
// snapshot (Capture), and writes a snapshot as the file rollplan plan -f
// reads (Marshal): one sorted kind: List, with metadata noise stripped and
// env values redacted, fit to commit as a test fixture.
//
// What a capture holds, for every selected Deployment, StatefulSet and
// DaemonSet: the ReplicaSets and ControllerRevisions it controls, its pods
// (those it or its ReplicaSets control, and orphans its selector matches),
// the PodDisruptionBudgets of its namespace that select those pods together
// with every other pod they select (the disruption controller counts them),
// and the Nodes the captured pods run on; with a DaemonSet, every Node, as
// they decide where its pods should run. Secrets and ConfigMaps are never
// read.
package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// Workload kinds a Ref names.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
)

// Ref names one workload: Kind is Deployment, StatefulSet or DaemonSet.
type Ref struct {
	Kind, Name string
}

func (r Ref) String() string { return strings.ToLower(r.Kind) + "/" + r.Name }

// ParseRef reads KIND/NAME as kubectl does: deployment/web, deploy/web,
// deployments.apps/web, sts/db, ds/agent (kinds are case-insensitive).
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Ref{}, fmt.Errorf("%q: want KIND/NAME, e.g. deployment/web, sts/db or ds/agent", s)
	}
	k := strings.TrimSuffix(strings.ToLower(kind), ".apps")
	switch k {
	case "deployment", "deployments", "deploy":
		return Ref{Deployment, name}, nil
	case "statefulset", "statefulsets", "sts":
		return Ref{StatefulSet, name}, nil
	case "daemonset", "daemonsets", "ds":
		return Ref{DaemonSet, name}, nil
	}
	return Ref{}, fmt.Errorf("%q: kind %q is not a workload rollplan plans: want deployment (deploy), statefulset (sts) or daemonset (ds)", s, kind)
}

// Options select what to capture.
type Options struct {
	// Namespace holds the workloads; ignored with AllNamespaces.
	Namespace     string
	AllNamespaces bool
	// Selector is a label selector (kubectl -l syntax) on the workloads;
	// only without Workloads.
	Selector string
	// Workloads, when given, are the only workloads captured, all in
	// Namespace; otherwise every workload in scope is.
	Workloads []Ref
	// Now is the clock of the capture time; default time.Now.
	Now func() time.Time
}

// Validate reports options that contradict each other.
func (o *Options) Validate() error {
	if len(o.Workloads) > 0 && o.AllNamespaces {
		return fmt.Errorf("a named workload is read from one namespace: drop --all-namespaces and pass -n NAMESPACE")
	}
	if len(o.Workloads) > 0 && o.Selector != "" {
		return fmt.Errorf("--selector picks workloads by label: it cannot be combined with KIND/NAME arguments")
	}
	if !o.AllNamespaces && o.Namespace == "" {
		return fmt.Errorf("no namespace: pass -n NAMESPACE or --all-namespaces")
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return fmt.Errorf("--selector %q: %w", o.Selector, err)
	}
	return nil
}

// Capture reads the workloads the options select and everything their
// rollouts depend on. The snapshot is sorted and its CapturedAt set: the
// clock once every object is read, never earlier than a time the objects
// record (the API server's clock may run ahead of ours). It returns
// warnings for what it could not read but can do without (Nodes the
// credentials may not list).
func Capture(ctx context.Context, client kubernetes.Interface, o Options) (*snapshot.Snapshot, []string, error) {
	return CaptureFrom(ctx, APISource{Client: client}, o)
}

// CaptureFrom is Capture reading from src: the API server or an informer
// cache. The snapshot shares src's objects: treat them as read-only.
func CaptureFrom(ctx context.Context, src Source, o Options) (*snapshot.Snapshot, []string, error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	c := &capturer{src: src, opts: o, scope: o.Namespace, snap: &snapshot.Snapshot{}, pods: map[string]*corev1.Pod{}, nodeNames: map[string]bool{}}
	if o.AllNamespaces {
		c.scope = metav1.NamespaceAll
	}
	// Without named workloads most pods in scope belong to a captured
	// workload: one list beats a list per workload.
	c.bulk = len(o.Workloads) == 0
	if err := c.workloads(ctx); err != nil {
		return nil, nil, err
	}
	for _, d := range c.snap.Deployments {
		if err := c.deployment(ctx, d); err != nil {
			return nil, nil, err
		}
	}
	for _, s := range c.snap.StatefulSets {
		if err := c.statefulSet(ctx, s); err != nil {
			return nil, nil, err
		}
	}
	for _, ds := range c.snap.DaemonSets {
		if err := c.daemonSet(ctx, ds); err != nil {
			return nil, nil, err
		}
	}
	if err := c.pdbs(ctx); err != nil {
		return nil, nil, err
	}
	if err := c.nodes(ctx); err != nil {
		return nil, nil, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	at := now().UTC().Truncate(time.Second)
	if latest := c.snap.Latest(); latest.After(at) {
		at = latest.UTC()
	}
	c.snap.CapturedAt = at
	c.snap.Sort()
	return c.snap, c.warnings, nil
}

type capturer struct {
	src   Source
	opts  Options
	scope string // namespace of the lists; "" is every namespace
	bulk  bool   // list the pods of the scope once, not per selector
	snap  *snapshot.Snapshot

	replicaSets lazy[appsv1.ReplicaSet]
	revisions   lazy[appsv1.ControllerRevision]
	budgets     lazy[policyv1.PodDisruptionBudget]
	allPods     lazy[corev1.Pod]

	pods         map[string]*corev1.Pod // captured, by namespace/name
	workloadPods []*corev1.Pod          // captured as some workload's pods
	nodeNames    map[string]bool
	allNodes     bool
	warnings     []string
}

func where(ns string) string {
	if ns == metav1.NamespaceAll {
		return "in any namespace"
	}
	return fmt.Sprintf("in namespace %q", ns)
}

func (c *capturer) workloads(ctx context.Context) error {
	ns := c.opts.Namespace
	if len(c.opts.Workloads) > 0 {
		seen := map[Ref]bool{}
		for _, ref := range c.opts.Workloads {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			var err error
			switch ref.Kind {
			case Deployment:
				var o *appsv1.Deployment
				if o, err = c.src.Deployment(ctx, ns, ref.Name); err == nil {
					c.snap.Deployments = append(c.snap.Deployments, o)
				}
			case StatefulSet:
				var o *appsv1.StatefulSet
				if o, err = c.src.StatefulSet(ctx, ns, ref.Name); err == nil {
					c.snap.StatefulSets = append(c.snap.StatefulSets, o)
				}
			case DaemonSet:
				var o *appsv1.DaemonSet
				if o, err = c.src.DaemonSet(ctx, ns, ref.Name); err == nil {
					c.snap.DaemonSets = append(c.snap.DaemonSets, o)
				}
			default:
				return fmt.Errorf("%s: kind must be %s, %s or %s", ref, Deployment, StatefulSet, DaemonSet)
			}
			if apierrors.IsNotFound(err) {
				return NotFoundError(ref.Kind, ref.Name, ns)
			}
			if err != nil {
				return fmt.Errorf("get %s %q %s: %w", strings.ToLower(ref.Kind), ref.Name, where(ns), err)
			}
		}
		return nil
	}
	sel, err := labels.Parse(c.opts.Selector)
	if err != nil {
		return fmt.Errorf("--selector %q: %w", c.opts.Selector, err)
	}
	if c.snap.Deployments, err = c.src.Deployments(ctx, c.scope, sel); err != nil {
		return err
	}
	if c.snap.StatefulSets, err = c.src.StatefulSets(ctx, c.scope, sel); err != nil {
		return err
	}
	if c.snap.DaemonSets, err = c.src.DaemonSets(ctx, c.scope, sel); err != nil {
		return err
	}
	if len(c.snap.Deployments)+len(c.snap.StatefulSets)+len(c.snap.DaemonSets) == 0 {
		msg := "no Deployment, StatefulSet or DaemonSet found " + where(c.scope)
		if c.opts.Selector != "" {
			msg += fmt.Sprintf(" matching selector %q", c.opts.Selector)
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// selector is the workload's spec.selector as a labels.Selector.
func selector(kind string, meta *metav1.ObjectMeta, sel *metav1.LabelSelector) (labels.Selector, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("%s %q in namespace %q: spec.selector: %w", strings.ToLower(kind), meta.Name, meta.Namespace, err)
	}
	return s, nil
}

func (c *capturer) deployment(ctx context.Context, d *appsv1.Deployment) error {
	sel, err := selector(Deployment, &d.ObjectMeta, d.Spec.Selector)
	if err != nil {
		return err
	}
	all, err := c.replicaSets.get(func() ([]*appsv1.ReplicaSet, error) {
		return c.src.ReplicaSets(ctx, c.scope)
	})
	if err != nil {
		return err
	}
	var owners []owner
	for _, rs := range all {
		if rs.Namespace == d.Namespace && controlledBy(rs, Deployment, d.Name, d.UID) {
			c.snap.ReplicaSets = append(c.snap.ReplicaSets, rs)
			owners = append(owners, owner{"ReplicaSet", rs.Name, rs.UID})
		}
	}
	return c.workloadPodsOf(ctx, d.Namespace, sel, owners)
}

func (c *capturer) statefulSet(ctx context.Context, s *appsv1.StatefulSet) error {
	sel, err := selector(StatefulSet, &s.ObjectMeta, s.Spec.Selector)
	if err != nil {
		return err
	}
	if err := c.revisionsOf(ctx, StatefulSet, &s.ObjectMeta); err != nil {
		return err
	}
	return c.workloadPodsOf(ctx, s.Namespace, sel, []owner{{StatefulSet, s.Name, s.UID}})
}

func (c *capturer) daemonSet(ctx context.Context, ds *appsv1.DaemonSet) error {
	sel, err := selector(DaemonSet, &ds.ObjectMeta, ds.Spec.Selector)
	if err != nil {
		return err
	}
	if err := c.revisionsOf(ctx, DaemonSet, &ds.ObjectMeta); err != nil {
		return err
	}
	c.allNodes = true
	return c.workloadPodsOf(ctx, ds.Namespace, sel, []owner{{DaemonSet, ds.Name, ds.UID}})
}

func (c *capturer) revisionsOf(ctx context.Context, kind string, meta *metav1.ObjectMeta) error {
	all, err := c.revisions.get(func() ([]*appsv1.ControllerRevision, error) {
		return c.src.ControllerRevisions(ctx, c.scope)
	})
	if err != nil {
		return err
	}
	for _, cr := range all {
		if cr.Namespace == meta.Namespace && controlledBy(cr, kind, meta.Name, meta.UID) {
			c.snap.ControllerRevisions = append(c.snap.ControllerRevisions, cr)
		}
	}
	return nil
}

// owner is a controller of pods.
type owner struct {
	kind, name string
	uid        types.UID
}

// workloadPodsOf captures the pods the owners control, and the orphans the
// selector matches (the controller would adopt them).
func (c *capturer) workloadPodsOf(ctx context.Context, ns string, sel labels.Selector, owners []owner) error {
	pods, err := c.podsMatching(ctx, ns, sel)
	if err != nil {
		return err
	}
	for _, p := range pods {
		ref := snapshot.ControllerOf(p)
		mine := ref == nil && sel.Matches(labels.Set(p.Labels)) && !sel.Empty()
		for _, o := range owners {
			mine = mine || controlledBy(p, o.kind, o.name, o.uid)
		}
		if mine && c.addPod(p) {
			c.workloadPods = append(c.workloadPods, p)
		}
	}
	return nil
}

// podsMatching returns the candidate pods of a selector in a namespace: in
// bulk mode every pod of the namespace (the workload's own pods are found
// by owner), else the pods the API server selects.
func (c *capturer) podsMatching(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	if !c.bulk {
		return c.src.Pods(ctx, ns, sel)
	}
	all, err := c.allPods.get(func() ([]*corev1.Pod, error) {
		return c.src.Pods(ctx, c.scope, nil)
	})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range all {
		if p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *capturer) addPod(p *corev1.Pod) bool {
	k := p.Namespace + "/" + p.Name
	if _, dup := c.pods[k]; dup {
		return false
	}
	c.pods[k] = p
	c.snap.Pods = append(c.snap.Pods, p)
	if p.Spec.NodeName != "" {
		c.nodeNames[p.Spec.NodeName] = true
	}
	return true
}

// pdbs captures the PodDisruptionBudgets that select a workload pod, and
// every other pod they select: the planner counts those as expected pods
// of the budget.
func (c *capturer) pdbs(ctx context.Context) error {
	if len(c.workloadPods) == 0 {
		return nil
	}
	all, err := c.budgets.get(func() ([]*policyv1.PodDisruptionBudget, error) {
		return c.src.PodDisruptionBudgets(ctx, c.scope)
	})
	if err != nil {
		return err
	}
	for _, pdb := range all {
		if pdb.Spec.Selector == nil {
			continue // selects nothing (policy/v1)
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue // the planner ignores it too, with a warning
		}
		selects := false
		for _, p := range c.workloadPods {
			if p.Namespace == pdb.Namespace && sel.Matches(labels.Set(p.Labels)) {
				selects = true
				break
			}
		}
		if !selects {
			continue
		}
		c.snap.PDBs = append(c.snap.PDBs, pdb)
		pods, err := c.podsMatching(ctx, pdb.Namespace, sel)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				c.addPod(p)
			}
		}
	}
	return nil
}

// nodes captures the Nodes the captured pods run on, or every Node when a
// DaemonSet is captured. Credentials that may not list Nodes (namespaced
// roles) give a warning: the planner does without them, less precisely.
func (c *capturer) nodes(ctx context.Context) error {
	if !c.allNodes && len(c.nodeNames) == 0 {
		return nil
	}
	all, err := c.src.Nodes(ctx)
	if apierrors.IsForbidden(err) {
		c.warnings = append(c.warnings, fmt.Sprintf("nodes not captured (%v): plan then counts DaemonSet nodes from the DaemonSet status and knows no pod zones", err))
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range all {
		if c.allNodes || c.nodeNames[n.Name] {
			c.snap.Nodes = append(c.snap.Nodes, n)
		}
	}
	return nil
}

// controlledBy is the planner's ownership test: the controller reference
// names the object, by UID when both sides have one.
func controlledBy(obj metav1.Object, kind, name string, uid types.UID) bool {
	ref := snapshot.ControllerOf(obj)
	if ref == nil || ref.Kind != kind || ref.Name != name {
		return false
	}
	return ref.UID == "" || uid == "" || ref.UID == uid
}

// lazy is a list read at most once.
type lazy[T any] struct {
	items []*T
	done  bool
}

func (l *lazy[T]) get(load func() ([]*T, error)) ([]*T, error) {
	if l.done {
		return l.items, nil
	}
	items, err := load()
	if err != nil {
		return nil, err
	}
	l.items, l.done = items, true
	return items, nil
}

// pageSize is the number of objects per list request, as kubectl reads.
const pageSize = 500

// ErrNotFound is wrapped by the error for a named workload that does not
// exist, so that callers can tell it from a failed read.
var ErrNotFound = errors.New("not found")

// NotFoundError is the error for the named workload (kind Deployment,
// StatefulSet or DaemonSet) that does not exist in namespace ns, worded
// as every command words it: `statefulset "web" not found in namespace
// "prod"`. It wraps ErrNotFound.
func NotFoundError(kind, name, ns string) error {
	return fmt.Errorf("%s %q %w %s", strings.ToLower(kind), name, ErrNotFound, where(ns))
}

// WorkloadNotFound is err, a read or write of the named workload, as
// NotFoundError when the API server answered that the workload does not
// exist; other errors are returned as they are.
func WorkloadNotFound(kind, name, ns string, err error) error {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return err
	}
	if d := status.Status().Details; d != nil && d.Name != "" && d.Name != name {
		return err // another object's
	}
	return NotFoundError(kind, name, ns)
}

// listAll reads every page of a list.
func listAll[L interface{ GetContinue() string }, T any](ctx context.Context, what string, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions, items func(L) []T) ([]*T, error) {
	opts.Limit = pageSize
	var out []*T
	for {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		page := items(l)
		for i := range page {
			out = append(out, &page[i])
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}
