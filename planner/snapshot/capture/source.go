package capture

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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
	objects   informers.SharedInformerFactory
	nodes     informers.SharedInformerFactory
	informers []cache.SharedIndexInformer
}

var _ Source = (*ListerSource)(nil)

// NewListerSource registers the informers a capture reads on the factories
// (they may be the same factory).
func NewListerSource(objects, nodes informers.SharedInformerFactory) *ListerSource {
	apps := objects.Apps().V1()
	l := &ListerSource{objects: objects, nodes: nodes, informers: []cache.SharedIndexInformer{
		apps.Deployments().Informer(),
		apps.StatefulSets().Informer(),
		apps.DaemonSets().Informer(),
		apps.ReplicaSets().Informer(),
		apps.ControllerRevisions().Informer(),
		objects.Core().V1().Pods().Informer(),
		objects.Policy().V1().PodDisruptionBudgets().Informer(),
	}}
	if nodes != nil {
		l.informers = append(l.informers, nodes.Core().V1().Nodes().Informer())
	}
	return l
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
	return l.objects.Apps().V1().Deployments().Lister().Deployments(ns).Get(name)
}

func (l *ListerSource) StatefulSet(_ context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	return l.objects.Apps().V1().StatefulSets().Lister().StatefulSets(ns).Get(name)
}

func (l *ListerSource) DaemonSet(_ context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	return l.objects.Apps().V1().DaemonSets().Lister().DaemonSets(ns).Get(name)
}

func (l *ListerSource) Deployments(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.Deployment, error) {
	return l.objects.Apps().V1().Deployments().Lister().Deployments(ns).List(everything(sel))
}

func (l *ListerSource) StatefulSets(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.StatefulSet, error) {
	return l.objects.Apps().V1().StatefulSets().Lister().StatefulSets(ns).List(everything(sel))
}

func (l *ListerSource) DaemonSets(_ context.Context, ns string, sel labels.Selector) ([]*appsv1.DaemonSet, error) {
	return l.objects.Apps().V1().DaemonSets().Lister().DaemonSets(ns).List(everything(sel))
}

func (l *ListerSource) ReplicaSets(_ context.Context, ns string) ([]*appsv1.ReplicaSet, error) {
	return l.objects.Apps().V1().ReplicaSets().Lister().ReplicaSets(ns).List(labels.Everything())
}

func (l *ListerSource) ControllerRevisions(_ context.Context, ns string) ([]*appsv1.ControllerRevision, error) {
	return l.objects.Apps().V1().ControllerRevisions().Lister().ControllerRevisions(ns).List(labels.Everything())
}

func (l *ListerSource) Pods(_ context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	return l.objects.Core().V1().Pods().Lister().Pods(ns).List(everything(sel))
}

func (l *ListerSource) PodDisruptionBudgets(_ context.Context, ns string) ([]*policyv1.PodDisruptionBudget, error) {
	return l.objects.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(ns).List(labels.Everything())
}

func (l *ListerSource) Nodes(context.Context) ([]*corev1.Node, error) {
	if l.nodes == nil {
		return nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", fmt.Errorf("the credentials may not list nodes"))
	}
	return l.nodes.Core().V1().Nodes().Lister().List(labels.Everything())
}

// Pod is one pod from the cache.
func (l *ListerSource) Pod(ns, name string) (*corev1.Pod, error) {
	return l.objects.Core().V1().Pods().Lister().Pods(ns).Get(name)
}

// ReplicaSet is one ReplicaSet from the cache.
func (l *ListerSource) ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error) {
	return l.objects.Apps().V1().ReplicaSets().Lister().ReplicaSets(ns).Get(name)
}
