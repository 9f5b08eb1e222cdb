package facts

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// AnnCordonedBy is the Node annotation rollplan apply writes, in the same
// patch as spec.unschedulable, when it cordons a node to prepare it for a
// DaemonSet's pod update: "<namespace>/<name>" of the DaemonSet. rollplan
// uncordons only the nodes that carry it for that DaemonSet, so a node
// someone else cordoned stays cordoned.
const AnnCordonedBy = "rollplan.dev/cordoned-by"

// Drainable reports whether a drain evicts the pod: bound, not owned by a
// DaemonSet (their controllers tolerate a cordon and would put them back),
// not a mirror pod (the kubelet owns it; the API cannot evict it), not
// terminating and not finished (it runs nothing any more).
func Drainable(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if ref := snapshot.ControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return true
}

// Maintenance reports whether the node has the condition
// MaintenancePlanned, and MaintenanceInProgress, with status True: what
// the facts' MaintenancePlanned and MaintenanceInProgress say. The gate
// compares it between a Node's updates (see builder.nodes).
func Maintenance(n *corev1.Node) (planned, inProgress bool) {
	for _, c := range n.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.NodeMaintenancePlanned:
			planned = true
		case corev1.NodeMaintenanceInProgress:
			inProgress = true
		}
	}
	return planned, inProgress
}

// nodeFacts adds to a DaemonSet's nodes what node preparation reads: the
// cordon, who cordoned it (AnnCordonedBy), and the pods of the snapshot a
// drain would evict; and whether the node is under maintenance.
func (b *builder) nodeFacts(r *Rollout) {
	if r.Workload.Kind != "DaemonSet" || len(r.Nodes) == 0 {
		return
	}
	if b.drainable == nil {
		b.drainable = map[string][]string{}
		for _, p := range b.snap.Pods {
			if Drainable(p) {
				b.drainable[p.Spec.NodeName] = append(b.drainable[p.Spec.NodeName], p.Namespace+"/"+p.Name)
			}
		}
		for _, names := range b.drainable {
			sort.Strings(names)
		}
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		n.DrainPods = []string{}
		if node := b.nodes[n.Name]; node != nil {
			n.Unschedulable = node.Spec.Unschedulable
			n.CordonedBy = node.Annotations[AnnCordonedBy]
			n.DrainPods = append(n.DrainPods, b.drainable[n.Name]...)
			n.MaintenancePlanned, n.MaintenanceInProgress = Maintenance(node)
		}
	}
}
