package executor

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// writer is every write the executor makes to the cluster (as upstream's
// StatefulPodControl is the StatefulSet controller's): the executor decides,
// the writer only sends. Each method sends one request; preconditions
// travel in the patch (metadata.resourceVersion) or as the method says, and
// an error is the API server's, unwrapped, so callers tell conflicts and
// refusals apart. Events go through Options.Events, reads through the
// readers and the client.
type writer interface {
	// patchPod patches a pod, or its subresource ("status", "resize")
	// when one is given, and returns the pod the server answered.
	patchPod(ctx context.Context, pod *corev1.Pod, pt types.PatchType, data []byte, subresource ...string) (*corev1.Pod, error)
	// deletePod deletes the pod, with its UID as precondition.
	deletePod(ctx context.Context, pod *corev1.Pod) error
	// evictPod asks the Eviction API to remove the pod, with its UID as
	// precondition.
	evictPod(ctx context.Context, pod *corev1.Pod) error
	// patchNode patches a node, or its subresource ("status") when given.
	patchNode(ctx context.Context, name string, pt types.PatchType, data []byte, subresource ...string) (*corev1.Node, error)
	// patchWorkload sends a JSON merge patch to the workload t names, or to
	// its subresource ("status") when given.
	patchWorkload(ctx context.Context, t live.Target, data []byte, subresource ...string) error
	// updateReplicaSet writes the ReplicaSet (its resourceVersion is the
	// precondition).
	updateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error
	// deleteReplicaSet deletes the ReplicaSet, with its UID and
	// resourceVersion as preconditions.
	deleteReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error
}

// clientWriter is the writer through client-go. It sets the field manager
// and, in a dry run, dryRun=All on every request, so nothing else does.
type clientWriter struct {
	client kubernetes.Interface
	dryRun bool
}

// fieldManager is the manager managedFields name for what rollplan wrote.
const fieldManager = "rollplan"

func (w clientWriter) dryRunAll() []string {
	if w.dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

func (w clientWriter) patchOptions() metav1.PatchOptions {
	return metav1.PatchOptions{DryRun: w.dryRunAll(), FieldManager: fieldManager}
}

func (w clientWriter) patchPod(ctx context.Context, pod *corev1.Pod, pt types.PatchType, data []byte, subresource ...string) (*corev1.Pod, error) {
	return w.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, pt, data, w.patchOptions(), subresource...)
}

func (w clientWriter) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	return w.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
		DryRun:        w.dryRunAll(),
	})
}

func (w clientWriter) evictPod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid},
			DryRun:        w.dryRunAll(),
		},
	}
	return w.client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
}

func (w clientWriter) patchNode(ctx context.Context, name string, pt types.PatchType, data []byte, subresource ...string) (*corev1.Node, error) {
	return w.client.CoreV1().Nodes().Patch(ctx, name, pt, data, w.patchOptions(), subresource...)
}

func (w clientWriter) patchWorkload(ctx context.Context, t live.Target, data []byte, subresource ...string) error {
	var err error
	switch t.Kind {
	case capture.Deployment:
		_, err = w.client.AppsV1().Deployments(t.Namespace).Patch(ctx, t.Name, types.MergePatchType, data, w.patchOptions(), subresource...)
	case capture.StatefulSet:
		_, err = w.client.AppsV1().StatefulSets(t.Namespace).Patch(ctx, t.Name, types.MergePatchType, data, w.patchOptions(), subresource...)
	case capture.DaemonSet:
		_, err = w.client.AppsV1().DaemonSets(t.Namespace).Patch(ctx, t.Name, types.MergePatchType, data, w.patchOptions(), subresource...)
	default:
		return fmt.Errorf("%s: want a Deployment, StatefulSet or DaemonSet", t)
	}
	return err
}

func (w clientWriter) updateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	_, err := w.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{DryRun: w.dryRunAll(), FieldManager: fieldManager})
	return err
}

func (w clientWriter) deleteReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	uid, rv := rs.UID, rs.ResourceVersion
	return w.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, DryRun: w.dryRunAll()})
}
