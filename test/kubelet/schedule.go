package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// SetNode adds or changes a node (taints, readiness, cordon) in the API.
func (k *Kubelet) SetNode(ctx context.Context, n Node) error {
	k.mu.Lock()
	k.nodes[n.Name] = n
	k.mu.Unlock()
	if err := k.applyNode(ctx, n); err != nil {
		return err
	}
	k.requeueAll()
	return nil
}

func (k *Kubelet) applyNode(ctx context.Context, n Node) error {
	lbls := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
	if n.Zone != "" {
		lbls[ZoneLabel] = n.Zone
	}
	for key, v := range n.Labels {
		lbls[key] = v
	}
	nodes := k.client.CoreV1().Nodes()
	cur, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: lbls},
			Spec:       corev1.NodeSpec{Taints: n.Taints, Unschedulable: n.Unschedulable},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("test kubelet: create node %s: %w", n.Name, err)
		}
	case err != nil:
		return fmt.Errorf("test kubelet: get node %s: %w", n.Name, err)
	}
	// Admission (TaintNodesByCondition) gives a new node the not-ready
	// taint, which the node lifecycle controller removes once the node is
	// Ready; that controller does not run here, so the kubelet sets the
	// node's taints itself.
	cur.Labels = lbls
	cur.Spec.Taints = n.Taints
	cur.Spec.Unschedulable = n.Unschedulable
	if cur, err = nodes.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("test kubelet: update node %s: %w", n.Name, err)
	}
	ready := corev1.ConditionTrue
	if n.NotReady {
		ready = corev1.ConditionFalse
	}
	now := metav1.Now()
	cur.Status = corev1.NodeStatus{
		Capacity:    nodeResources(),
		Allocatable: nodeResources(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, Reason: "TestKubelet",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}},
	}
	if _, err := nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("test kubelet: node %s status: %w", n.Name, err)
	}
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("500"),
	}
}

// schedule binds a pod to a node: the node its required node affinity names
// (DaemonSet pods), else the feasible node with the fewest pods.
func (k *Kubelet) schedule(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	k.mu.Lock()
	nodes := k.sortedNodes()
	k.mu.Unlock()
	// A node cordoned through the API (kubectl cordon, rollplan's node
	// preparation) takes no pod that does not tolerate it, as with the
	// scheduler.
	if live, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		cordoned := map[string]bool{}
		for _, n := range live.Items {
			cordoned[n.Name] = n.Spec.Unschedulable
		}
		for i := range nodes {
			nodes[i].Unschedulable = nodes[i].Unschedulable || cordoned[nodes[i].Name]
		}
	}
	count := map[string]int{}
	if all, err := k.pods.List(labels.Everything()); err == nil {
		for _, p := range all {
			if p.Spec.NodeName != "" {
				count[p.Spec.NodeName]++
			}
		}
	}
	var best string
	for _, n := range nodes {
		if !k.feasible(pod, n) {
			continue
		}
		if best == "" || count[n.Name] < count[best] {
			best = n.Name
		}
	}
	if best == "" {
		return 2 * time.Second, nil // unschedulable for now; look again
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: best},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, best, err)
	}
	return 0, nil
}

func (k *Kubelet) feasible(pod *corev1.Pod, n Node) bool {
	if n.NotReady || (n.Unschedulable && !tolerates(pod, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})) {
		return false
	}
	for _, t := range n.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(pod, t) {
			return false
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}}}
	if n.Zone != "" {
		node.Labels[ZoneLabel] = n.Zone
	}
	for key, v := range n.Labels {
		node.Labels[key] = v
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

func tolerates(pod *corev1.Pod, t corev1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}
