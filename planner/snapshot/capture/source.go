package capture

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
)

// Source is where a capture reads its objects: the API server (APISource)
// or an informer cache (ListerSource). The objects it returns are shared
// and read-only. ns "" lists every namespace. A Get of an absent object
// returns an error apierrors.IsNotFound recognises.
type Source interface {
	Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error)
	StatefulSet(ctx context.Context, ns, name string) (*appsv1.StatefulSet, error)
	DaemonSet(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error)
	Deployments(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.Deployment, error)
	StatefulSets(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.StatefulSet, error)
	DaemonSets(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.DaemonSet, error)
	ReplicaSets(ctx context.Context, ns string) ([]*appsv1.ReplicaSet, error)
	ControllerRevisions(ctx context.Context, ns string) ([]*appsv1.ControllerRevision, error)
	Pods(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error)
	PodDisruptionBudgets(ctx context.Context, ns string) ([]*policyv1.PodDisruptionBudget, error)
	Nodes(ctx context.Context) ([]*corev1.Node, error)
}

// APISource reads from the API server: every call is a fresh (paged) list
// or get, which is what a check right before a write needs.
type APISource struct{ Client kubernetes.Interface }

var _ Source = APISource{}

func (a APISource) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return a.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a APISource) StatefulSet(ctx context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	return a.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a APISource) DaemonSet(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	return a.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func selOpts(sel labels.Selector) metav1.ListOptions {
	if sel == nil || sel.Empty() {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{LabelSelector: sel.String()}
}

func (a APISource) Deployments(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.Deployment, error) {
	return listAll(ctx, "deployments "+where(ns), a.Client.AppsV1().Deployments(ns).List, selOpts(sel),
		func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })
}

func (a APISource) StatefulSets(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.StatefulSet, error) {
	return listAll(ctx, "statefulsets "+where(ns), a.Client.AppsV1().StatefulSets(ns).List, selOpts(sel),
		func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items })
}

func (a APISource) DaemonSets(ctx context.Context, ns string, sel labels.Selector) ([]*appsv1.DaemonSet, error) {
	return listAll(ctx, "daemonsets "+where(ns), a.Client.AppsV1().DaemonSets(ns).List, selOpts(sel),
		func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items })
}

func (a APISource) ReplicaSets(ctx context.Context, ns string) ([]*appsv1.ReplicaSet, error) {
	return listAll(ctx, "replicasets "+where(ns), a.Client.AppsV1().ReplicaSets(ns).List, metav1.ListOptions{},
		func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items })
}

func (a APISource) ControllerRevisions(ctx context.Context, ns string) ([]*appsv1.ControllerRevision, error) {
	return listAll(ctx, "controllerrevisions "+where(ns), a.Client.AppsV1().ControllerRevisions(ns).List, metav1.ListOptions{},
		func(l *appsv1.ControllerRevisionList) []appsv1.ControllerRevision { return l.Items })
}

func (a APISource) Pods(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	what := "pods " + where(ns)
	if sel != nil && !sel.Empty() {
		what += fmt.Sprintf(" with selector %q", sel.String())
	}
	return listAll(ctx, what, a.Client.CoreV1().Pods(ns).List, selOpts(sel),
		func(l *corev1.PodList) []corev1.Pod { return l.Items })
}

func (a APISource) PodDisruptionBudgets(ctx context.Context, ns string) ([]*policyv1.PodDisruptionBudget, error) {
	return listAll(ctx, "poddisruptionbudgets "+where(ns), a.Client.PolicyV1().PodDisruptionBudgets(ns).List, metav1.ListOptions{},
		func(l *policyv1.PodDisruptionBudgetList) []policyv1.PodDisruptionBudget { return l.Items })
}

func (a APISource) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	return listAll(ctx, "nodes", a.Client.CoreV1().Nodes().List, metav1.ListOptions{},
		func(l *corev1.NodeList) []corev1.Node { return l.Items })
}

// ListerSource reads from the caches of informer factories: objects for
// the namespaced kinds (one namespace or all) and nodes for the Nodes; a
// nil nodes factory stands for credentials that may not list Nodes (its
// Nodes call answers Forbidden, which a capture turns into a warning).
// Creating it registers the informers it reads; start the factories and
// wait for their caches to sync before the first capture.
type ListerSource struct {
	informers []cache.SharedIndexInformer
	// The listers, looked up once (a factory lookup takes its lock).
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
	replicaSets  appslisters.ReplicaSetLister
	revisions    appslisters.ControllerRevisionLister
	podLister    corelisters.PodLister
	budgets      policylisters.PodDisruptionBudgetLister
	nodeLister   corelisters.NodeLister // nil without a nodes factory
	// pods is the pod informer's store; labelIndex says it indexes the
	// pods by label (podLabelIndex), so a selector's pods are found
	// without a scan of their namespace.
	pods       cache.Indexer
	labelIndex bool
}

var _ Source = (*ListerSource)(nil)

// StripManagedFields is an informer transform (informers.WithTransform)
// that drops metadata.managedFields from every cached object: they are most
// of a pod's bytes in a real cluster and nothing a capture reads. The
// executor and the gate cache with it.
func StripManagedFields(obj any) (any, error) {
	if m, err := apimeta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// NewListerSource registers the informers a capture reads on the factories
// (they may be the same factory).
func NewListerSource(objects, nodes informers.SharedInformerFactory) *ListerSource {
	apps := objects.Apps().V1()
	pods := objects.Core().V1().Pods().Informer()
	l := &ListerSource{informers: []cache.SharedIndexInformer{
		apps.Deployments().Informer(),
		apps.StatefulSets().Informer(),
		apps.DaemonSets().Informer(),
		apps.ReplicaSets().Informer(),
		apps.ControllerRevisions().Informer(),
		pods,
		objects.Policy().V1().PodDisruptionBudgets().Informer(),
	},
		deployments: apps.Deployments().Lister(), statefulSets: apps.StatefulSets().Lister(), daemonSets: apps.DaemonSets().Lister(),
		replicaSets: apps.ReplicaSets().Lister(), revisions: apps.ControllerRevisions().Lister(),
		podLister: objects.Core().V1().Pods().Lister(), budgets: objects.Policy().V1().PodDisruptionBudgets().Lister(),
	}
	// An informer started already indexes the objects it holds; one that
	// has stopped takes no index: Pods then scans.
	_, l.labelIndex = pods.GetIndexer().GetIndexers()[podLabelIndex]
	if !l.labelIndex {
		l.labelIndex = pods.AddIndexers(cache.Indexers{podLabelIndex: podLabels}) == nil
	}
	l.pods = pods.GetIndexer()
	if nodes != nil {
		l.informers = append(l.informers, nodes.Core().V1().Nodes().Informer())
		l.nodeLister = nodes.Core().V1().Nodes().Lister()
	}
	return l
}

// HasSynced reports whether every informer the source reads has synced.
func (l *ListerSource) HasSynced() bool {
	for _, i := range l.informers {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until every informer the source reads has synced
// (start the factories first), or ctx ends.
func (l *ListerSource) WaitForSync(ctx context.Context) error {
	synced := make([]cache.InformerSynced, len(l.informers))
	for i, inf := range l.informers {
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Informers are the informers the source reads, for event handlers and
// cache-sync checks.
func (l *ListerSource) Informers() []cache.SharedIndexInformer { return l.informers }

func everything(sel labels.Selector) labels.Selector {
	if sel == nil {
		return labels.Everything()
	}
	return sel
}

func (l *ListerSource) Deployment(_ context.Context, ns, name string) (*appsv1.Deployment, error) {
	return l.deployments.Deployments(ns).Get(name)
}

func (l *ListerSource) StatefulSet(_ context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	return l.statefulSets.StatefulSets(ns).Get(name)
}

func (l *ListerSource) DaemonSet(_ context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	return l.daemonSets.DaemonSets(ns).Get(name)
}

func (l *ListerSource) Deployments(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.Deployment, error) {
	return l.deployments.Deployments(ns).List(everything(sel))
}

func (l *ListerSource) StatefulSets(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.StatefulSet, error) {
	return l.statefulSets.StatefulSets(ns).List(everything(sel))
}

func (l *ListerSource) DaemonSets(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.DaemonSet, error) {
	return l.daemonSets.DaemonSets(ns).List(everything(sel))
}

func (l *ListerSource) ReplicaSets(_ context.Context, ns string) ([]*appsv1.ReplicaSet, error) {
	return l.replicaSets.ReplicaSets(ns).List(labels.Everything())
}

func (l *ListerSource) ControllerRevisions(_ context.Context, ns string) ([]*appsv1.ControllerRevision, error) {
	return l.revisions.ControllerRevisions(ns).List(labels.Everything())
}

func (l *ListerSource) Pods(_ context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	if cand, ok := l.podCandidates(ns, sel); ok {
		out := make([]*corev1.Pod, 0, len(cand))
		for _, o := range cand {
			if p, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
		// In the order a snapshot sorts them (one namespace: by name), so
		// its sort has little left to do.
		slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	}
	return l.podLister.Pods(ns).List(everything(sel))
}

// podLabelIndex indexes pods by namespace and label: "ns/key=value" for
// each label (a namespace holds no "/", a label key no "=") but those of
// unindexed.
const podLabelIndex = "rollplan.dev/pod-labels"

// unindexed are labels with a value of their own on every pod: indexing
// them would cost an index entry per pod, and workload selectors do not
// use them (a selector on them is answered by another of its
// requirements, or by a scan).
var unindexed = map[string]bool{
	appsv1.StatefulSetPodNameLabel: true, // statefulset.kubernetes.io/pod-name
	appsv1.PodIndexLabel:           true, // apps.kubernetes.io/pod-index
}

func podLabels(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		if !unindexed[k] {
			keys = append(keys, labelKey(p.Namespace, k, v))
		}
	}
	return keys, nil
}

func labelKey(ns, key, value string) string { return ns + "/" + key + "=" + value }

// podCandidates are the pods of namespace ns that carry one of the values
// of the selector's narrowest equality (=, ==, in) requirement on an
// indexed label: a superset of the pods sel selects. ok is false when
// there is no such requirement or no label index; Pods then scans the
// namespace.
func (l *ListerSource) podCandidates(ns string, sel labels.Selector) ([]any, bool) {
	if !l.labelIndex || ns == metav1.NamespaceAll || sel == nil {
		return nil, false
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, false
	}
	var best []any
	found := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		if unindexed[r.Key()] {
			continue
		}
		var cand []any
		for v := range r.Values() { // one label has one value: no pod twice
			objs, err := l.pods.ByIndex(podLabelIndex, labelKey(ns, r.Key(), v))
			if err != nil {
				return nil, false
			}
			cand = append(cand, objs...)
		}
		if !found || len(cand) < len(best) {
			best, found = cand, true
		}
		if len(best) == 0 {
			break
		}
	}
	return best, found
}

func (l *ListerSource) PodDisruptionBudgets(_ context.Context, ns string) ([]*policyv1.PodDisruptionBudget, error) {
	return l.budgets.PodDisruptionBudgets(ns).List(labels.Everything())
}

func (l *ListerSource) Nodes(context.Context) ([]*corev1.Node, error) {
	if l.nodeLister == nil {
		return nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", fmt.Errorf("the credentials may not list nodes"))
	}
	return l.nodeLister.List(labels.Everything())
}

// Pod is one pod from the cache.
func (l *ListerSource) Pod(ns, name string) (*corev1.Pod, error) {
	return l.podLister.Pods(ns).Get(name)
}

// ReplicaSet is one ReplicaSet from the cache.
func (l *ListerSource) ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error) {
	return l.replicaSets.ReplicaSets(ns).Get(name)
}
