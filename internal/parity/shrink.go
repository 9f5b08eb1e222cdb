package parity

import (
	"bytes"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// ShrinkLimit bounds the predicate evaluations of one Shrink.
var ShrinkLimit = 4000

// ShrinkSnapshot reduces a snapshot for which fails holds to a smaller one
// for which it still holds (see Shrink).
func ShrinkSnapshot(s *snapshot.Snapshot, fails func(*snapshot.Snapshot) bool) *snapshot.Snapshot {
	c := &Case{Snap: s, Now: Now, Gates: map[string]bool{}}
	return Shrink(c, func(c *Case) bool { return fails(c.Snap) }).Snap
}

// Shrink greedily reduces a failing case: it drops workloads, PDBs, nodes,
// ReplicaSets, ControllerRevisions and pods, lowers replica counts and
// partitions, simplifies values (annotations, strategies, pod states,
// taints, the feature gate), keeping each step for which fails still holds,
// until no step applies. fails must hold for c; c is not modified.
func Shrink(c *Case, fails func(*Case) bool) *Case {
	cur := c.Clone()
	evals := 0
	try := func(cand *Case) bool {
		if evals >= ShrinkLimit {
			return false
		}
		evals++
		cand.Snap.Sort()
		if fails(cand) {
			cur = cand
			return true
		}
		return false
	}
	for progress := true; progress && evals < ShrinkLimit; {
		progress = false
		for _, step := range shrinkSteps {
			// Each step proposes candidates from the current case; a
			// successful candidate becomes current and the step runs again.
			for again := true; again && evals < ShrinkLimit; {
				again = false
				for _, cand := range step(cur) {
					if try(cand) {
						again, progress = true, true
						break
					}
				}
			}
		}
	}
	return cur
}

type shrinkStep func(*Case) []*Case

var shrinkSteps = []shrinkStep{
	dropWorkloads, dropPDBs, dropReplicaSets, dropPodChunks, dropNodes, dropRevisions,
	lowerNumbers, simplifyWorkloads, simplifyPods, simplifyNodes, simplifyGates,
}

// edit returns a copy of c changed by f.
func edit(c *Case, f func(s *snapshot.Snapshot)) *Case {
	n := c.Clone()
	f(n.Snap)
	return n
}

func without[T any](xs []T, i int) []T {
	out := append([]T(nil), xs[:i]...)
	return append(out, xs[i+1:]...)
}

func controllerOf(o metav1.Object) (string, string) {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.Kind, ref.Name
	}
	return "", ""
}

// dropOwned removes the objects a workload owns (ReplicaSets and their pods,
// ControllerRevisions, pods).
func dropOwned(s *snapshot.Snapshot, kind, ns, name string) {
	rsNames := map[string]bool{}
	var rss []*appsv1.ReplicaSet
	for _, rs := range s.ReplicaSets {
		if k, n := controllerOf(rs); rs.Namespace == ns && k == kind && n == name {
			rsNames[rs.Name] = true
			continue
		}
		rss = append(rss, rs)
	}
	s.ReplicaSets = rss
	var crs []*appsv1.ControllerRevision
	for _, cr := range s.ControllerRevisions {
		if k, n := controllerOf(cr); cr.Namespace == ns && k == kind && n == name {
			continue
		}
		crs = append(crs, cr)
	}
	s.ControllerRevisions = crs
	var pods []*corev1.Pod
	for _, p := range s.Pods {
		k, n := controllerOf(p)
		if p.Namespace == ns && ((k == kind && n == name) || (k == "ReplicaSet" && rsNames[n])) {
			continue
		}
		pods = append(pods, p)
	}
	s.Pods = pods
}

func dropWorkloads(c *Case) []*Case {
	var out []*Case
	for i, d := range c.Snap.Deployments {
		out = append(out, edit(c, func(s *snapshot.Snapshot) {
			s.Deployments = without(s.Deployments, i)
			dropOwned(s, "Deployment", d.Namespace, d.Name)
		}))
	}
	for i, set := range c.Snap.StatefulSets {
		out = append(out, edit(c, func(s *snapshot.Snapshot) {
			s.StatefulSets = without(s.StatefulSets, i)
			dropOwned(s, "StatefulSet", set.Namespace, set.Name)
		}))
	}
	for i, ds := range c.Snap.DaemonSets {
		out = append(out, edit(c, func(s *snapshot.Snapshot) {
			s.DaemonSets = without(s.DaemonSets, i)
			dropOwned(s, "DaemonSet", ds.Namespace, ds.Name)
		}))
	}
	return out
}

func dropPDBs(c *Case) []*Case {
	var out []*Case
	for i := range c.Snap.PDBs {
		out = append(out, edit(c, func(s *snapshot.Snapshot) { s.PDBs = without(s.PDBs, i) }))
	}
	return out
}

func dropReplicaSets(c *Case) []*Case {
	var out []*Case
	for i, rs := range c.Snap.ReplicaSets {
		out = append(out, edit(c, func(s *snapshot.Snapshot) {
			s.ReplicaSets = without(s.ReplicaSets, i)
			dropOwned(s, "ReplicaSet", rs.Namespace, rs.Name)
		}))
	}
	return out
}

func dropRevisions(c *Case) []*Case {
	var out []*Case
	for i := range c.Snap.ControllerRevisions {
		out = append(out, edit(c, func(s *snapshot.Snapshot) { s.ControllerRevisions = without(s.ControllerRevisions, i) }))
	}
	return out
}

func dropNodes(c *Case) []*Case {
	var out []*Case
	for i := range c.Snap.Nodes {
		out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Nodes = without(s.Nodes, i) }))
	}
	return out
}

// dropPodChunks removes pods in halves, quarters, … down to single pods.
func dropPodChunks(c *Case) []*Case {
	n := len(c.Snap.Pods)
	var out []*Case
	for size := n / 2; size >= 1; size /= 2 {
		for start := 0; start < n; start += size {
			lo, hi := start, min(n, start+size)
			out = append(out, edit(c, func(s *snapshot.Snapshot) {
				s.Pods = append(append([]*corev1.Pod(nil), s.Pods[:lo]...), s.Pods[hi:]...)
			}))
		}
	}
	return out
}

// lowered proposes smaller values for a replica count.
func lowered(v int32) []int32 {
	var out []int32
	for _, x := range []int32{0, 1, v / 2, v - 1} {
		if x >= 0 && x < v && (len(out) == 0 || out[len(out)-1] != x) {
			out = append(out, x)
		}
	}
	return out
}

func lowerNumbers(c *Case) []*Case {
	var out []*Case
	for i, d := range c.Snap.Deployments {
		for _, v := range lowered(deref(d.Spec.Replicas, 1)) {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Deployments[i].Spec.Replicas = ptr(v) }))
		}
	}
	for i, rs := range c.Snap.ReplicaSets {
		for _, v := range lowered(deref(rs.Spec.Replicas, 1)) {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.ReplicaSets[i].Spec.Replicas = ptr(v) }))
		}
	}
	for i, set := range c.Snap.StatefulSets {
		for _, v := range lowered(deref(set.Spec.Replicas, 1)) {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.Replicas = ptr(v) }))
		}
		if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			for _, v := range lowered(*ru.Partition) {
				out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.UpdateStrategy.RollingUpdate.Partition = ptr(v) }))
			}
		}
	}
	return out
}

func simplifyWorkloads(c *Case) []*Case {
	var out []*Case
	metaEdits := func(get func(s *snapshot.Snapshot) *metav1.ObjectMeta, m *metav1.ObjectMeta) {
		for k := range m.Annotations {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { delete(get(s).Annotations, k) }))
		}
		for k := range m.Labels {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { delete(get(s).Labels, k) }))
		}
	}
	for i, d := range c.Snap.Deployments {
		metaEdits(func(s *snapshot.Snapshot) *metav1.ObjectMeta { return &s.Deployments[i].ObjectMeta }, &d.ObjectMeta)
		if d.Spec.MinReadySeconds != 0 {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Deployments[i].Spec.MinReadySeconds = 0 }))
		}
		if d.Spec.Paused {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Deployments[i].Spec.Paused = false }))
		}
		if d.Spec.ProgressDeadlineSeconds != nil {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Deployments[i].Spec.ProgressDeadlineSeconds = nil }))
		}
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.Deployments[i].Spec.Strategy.RollingUpdate = nil }))
		}
	}
	for i, rs := range c.Snap.ReplicaSets {
		if rs.Spec.MinReadySeconds != 0 {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.ReplicaSets[i].Spec.MinReadySeconds = 0 }))
		}
	}
	for i, set := range c.Snap.StatefulSets {
		metaEdits(func(s *snapshot.Snapshot) *metav1.ObjectMeta { return &s.StatefulSets[i].ObjectMeta }, &set.ObjectMeta)
		if set.Spec.MinReadySeconds != 0 {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.MinReadySeconds = 0 }))
		}
		if set.Spec.PodManagementPolicy != "" {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.PodManagementPolicy = "" }))
		}
		if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			if ru.MaxUnavailable != nil {
				out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = nil }))
			}
			if ru.Partition != nil {
				out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.UpdateStrategy.RollingUpdate.Partition = nil }))
			}
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.UpdateStrategy.RollingUpdate = nil }))
		}
		if set.Spec.Ordinals != nil {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.StatefulSets[i].Spec.Ordinals = nil }))
		}
	}
	for i, ds := range c.Snap.DaemonSets {
		metaEdits(func(s *snapshot.Snapshot) *metav1.ObjectMeta { return &s.DaemonSets[i].ObjectMeta }, &ds.ObjectMeta)
		if ds.Spec.MinReadySeconds != 0 {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { s.DaemonSets[i].Spec.MinReadySeconds = 0 }))
		}
		if ds.Spec.Template.Spec.NodeSelector != nil || ds.Spec.Template.Spec.Tolerations != nil {
			// The template is part of the update revision: change it and
			// its revision together, or the pods would all look outdated.
			out = append(out, edit(c, func(s *snapshot.Snapshot) {
				t := &s.DaemonSets[i].Spec.Template.Spec
				t.NodeSelector, t.Tolerations = nil, nil
			}))
		}
	}
	return out
}

func simplifyPods(c *Case) []*Case {
	type podEdit struct {
		applies func(p *corev1.Pod) bool
		apply   func(p *corev1.Pod)
	}
	edits := []podEdit{
		{func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }, func(p *corev1.Pod) {
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = nil, nil
		}},
		{func(p *corev1.Pod) bool { return p.Annotations["controller.kubernetes.io/pod-deletion-cost"] != "" }, func(p *corev1.Pod) {
			delete(p.Annotations, "controller.kubernetes.io/pod-deletion-cost")
		}},
		{func(p *corev1.Pod) bool {
			for _, s := range p.Status.ContainerStatuses {
				if s.RestartCount != 0 {
					return true
				}
			}
			return len(p.Status.InitContainerStatuses) > 0
		}, func(p *corev1.Pod) {
			for i := range p.Status.ContainerStatuses {
				p.Status.ContainerStatuses[i].RestartCount = 0
			}
			p.Status.InitContainerStatuses = nil
		}},
		{func(p *corev1.Pod) bool { return len(p.Status.Conditions) > 1 }, func(p *corev1.Pod) {
			var keep []corev1.PodCondition
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					keep = append(keep, c)
				}
			}
			p.Status.Conditions = keep
		}},
		{func(p *corev1.Pod) bool { return len(p.Status.ContainerStatuses) > 0 }, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = nil
		}},
	}
	var out []*Case
	for _, e := range edits {
		var idx []int
		for i, p := range c.Snap.Pods {
			if e.applies(p) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		// All at once first, then pod by pod.
		out = append(out, edit(c, func(s *snapshot.Snapshot) {
			for _, i := range idx {
				e.apply(s.Pods[i])
			}
		}))
		if len(idx) > 1 {
			for _, i := range idx {
				out = append(out, edit(c, func(s *snapshot.Snapshot) { e.apply(s.Pods[i]) }))
			}
		}
	}
	return out
}

func simplifyNodes(c *Case) []*Case {
	var out []*Case
	for i, n := range c.Snap.Nodes {
		if len(n.Spec.Taints) > 0 || n.Spec.Unschedulable {
			out = append(out, edit(c, func(s *snapshot.Snapshot) {
				s.Nodes[i].Spec.Taints, s.Nodes[i].Spec.Unschedulable = nil, false
			}))
		}
		for k := range n.Labels {
			out = append(out, edit(c, func(s *snapshot.Snapshot) { delete(s.Nodes[i].Labels, k) }))
		}
	}
	return out
}

func simplifyGates(c *Case) []*Case {
	if !c.Gates[GateMaxUnavailableStatefulSet] {
		return nil
	}
	n := c.Clone()
	n.Gates[GateMaxUnavailableStatefulSet] = false
	return []*Case{n}
}

// ---- YAML ----

// RenderYAML writes the snapshot as multi-document YAML, the format
// `rollplan plan -f` reads.
func RenderYAML(s *snapshot.Snapshot) ([]byte, error) {
	var objs []any
	for _, o := range s.Nodes {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		objs = append(objs, o)
	}
	for _, o := range s.Deployments {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		objs = append(objs, o)
	}
	for _, o := range s.ReplicaSets {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}
		objs = append(objs, o)
	}
	for _, o := range s.StatefulSets {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
		objs = append(objs, o)
	}
	for _, o := range s.DaemonSets {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
		objs = append(objs, o)
	}
	for _, o := range s.ControllerRevisions {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"}
		objs = append(objs, o)
	}
	for _, o := range s.Pods {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		objs = append(objs, o)
	}
	for _, o := range s.PDBs {
		o = o.DeepCopy()
		o.TypeMeta = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
		objs = append(objs, o)
	}
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", o, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// Repro renders a case as a file `rollplan plan -f` reads, headed by the
// command that plans it.
func Repro(c *Case) (string, error) {
	y, err := RenderYAML(c.Snap)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("# rollplan plan -f repro.yaml %s\n%s", strings.Join(c.Args(), " "), y), nil
}

// DecodeYAML reads a rendered snapshot back (what `rollplan plan -f` does).
func DecodeYAML(data []byte) (*snapshot.Snapshot, error) {
	s, _, err := snapshot.Decode("repro.yaml", data)
	return s, err
}
