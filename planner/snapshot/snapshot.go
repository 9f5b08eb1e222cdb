// Package snapshot holds the Kubernetes objects a plan is computed from, as
// typed k8s.io/api objects, and loads them from files.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnCapturedAt, on a snapshot file's kind: List (metadata.annotations),
// records when rollplan snapshot read the objects from the cluster (RFC 3339).
// It is part of the snapshot time (Latest): a pod that turned Ready a minute
// before the capture has been Ready for a minute, not for zero seconds.
// Files without it keep the time of their newest object.
const AnnCapturedAt = "rollplan.dev/captured-at"

// Snapshot is a set of objects read at one moment.
type Snapshot struct {
	Deployments         []*appsv1.Deployment
	ReplicaSets         []*appsv1.ReplicaSet
	StatefulSets        []*appsv1.StatefulSet
	DaemonSets          []*appsv1.DaemonSet
	ControllerRevisions []*appsv1.ControllerRevision
	Pods                []*corev1.Pod
	Nodes               []*corev1.Node
	PDBs                []*policyv1.PodDisruptionBudget
	// CapturedAt is when the objects were read from a cluster (the latest
	// AnnCapturedAt of the files); zero when no file records it. Left out
	// of the digest when zero, so files without it keep their digest.
	CapturedAt time.Time `json:",omitzero"`
}

// Sort orders every list by namespace and name so that everything computed
// from the snapshot is independent of input order.
func (s *Snapshot) Sort() {
	sortByKey(s.Deployments, func(o *appsv1.Deployment) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.ReplicaSets, func(o *appsv1.ReplicaSet) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.StatefulSets, func(o *appsv1.StatefulSet) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.DaemonSets, func(o *appsv1.DaemonSet) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.ControllerRevisions, func(o *appsv1.ControllerRevision) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.Pods, func(o *corev1.Pod) string { return o.Namespace + "/" + o.Name })
	sortByKey(s.Nodes, func(o *corev1.Node) string { return o.Name })
	sortByKey(s.PDBs, func(o *policyv1.PodDisruptionBudget) string { return o.Namespace + "/" + o.Name })
}

func sortByKey[T any](xs []T, key func(T) string) {
	sort.SliceStable(xs, func(i, j int) bool { return key(xs[i]) < key(xs[j]) })
}

// Digest is the sha256 of the sorted snapshot's canonical JSON: the same
// objects in any order or file layout give the same digest.
func (s *Snapshot) Digest() (string, error) {
	s.Sort()
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("digest snapshot: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Latest returns the most recent time recorded in the snapshot: the capture
// time (AnnCapturedAt) and the objects' creation, deletion and condition
// transition times. It is the snapshot time when --now is not given:
// deterministic, never the wall clock.
func (s *Snapshot) Latest() time.Time {
	t := s.CapturedAt
	see := func(x time.Time) {
		if x.After(t) {
			t = x
		}
	}
	for _, p := range s.Pods {
		see(p.CreationTimestamp.Time)
		if p.DeletionTimestamp != nil {
			see(p.DeletionTimestamp.Time)
		}
		for _, c := range p.Status.Conditions {
			see(c.LastTransitionTime.Time)
		}
	}
	for _, o := range s.ReplicaSets {
		see(o.CreationTimestamp.Time)
	}
	for _, o := range s.ControllerRevisions {
		see(o.CreationTimestamp.Time)
	}
	for _, o := range s.Deployments {
		see(o.CreationTimestamp.Time)
		for _, c := range o.Status.Conditions {
			see(c.LastUpdateTime.Time)
		}
	}
	for _, o := range s.StatefulSets {
		see(o.CreationTimestamp.Time)
	}
	for _, o := range s.DaemonSets {
		see(o.CreationTimestamp.Time)
	}
	return t
}

// ControllerOf returns the object's controller reference, as
// metav1.GetControllerOf does, but points into the object instead of
// returning a copy: it runs for every pod of every capture and plan. The
// caller must not modify the reference.
func ControllerOf(obj metav1.Object) *metav1.OwnerReference {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if c := refs[i].Controller; c != nil && *c {
			return &refs[i]
		}
	}
	return nil
}
