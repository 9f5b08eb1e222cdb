// Package snapshot holds the Kubernetes objects a plan is computed from, as
// typed k8s.io/api objects, and loads them from files.
package snapshot

import (
	"bufio"
	"bytes"
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

// AnnKubernetesVersion, on a snapshot file's kind: List, records the
// version of the cluster rollplan snapshot read (discovery's gitVersion), so
// that the file plans as that cluster's controllers roll out.
const AnnKubernetesVersion = "rollplan.dev/kubernetes-version"

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
	// KubernetesVersion is the API server's version as rollplan snapshot
	// recorded it (AnnKubernetesVersion, e.g. "v1.37.2"); "" when no file
	// records one. Left out of the digest when empty.
	KubernetesVersion string `json:",omitempty"`
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

// Digest is the sha256 of the sorted snapshot's canonical JSON (the bytes
// of json.Marshal(s)): the same objects in any order or file layout give
// the same digest. The JSON is hashed an object at a time, never held
// whole: a 150,000-pod snapshot marshals to hundreds of megabytes.
func (s *Snapshot) Digest() (string, error) {
	s.Sort()
	h := sha256.New()
	d := digester{w: bufio.NewWriterSize(h, 64<<10)}
	d.enc = json.NewEncoder(stripNewlines{d.w})
	d.raw("{")
	list(&d, "Deployments", s.Deployments)
	list(&d, "ReplicaSets", s.ReplicaSets)
	list(&d, "StatefulSets", s.StatefulSets)
	list(&d, "DaemonSets", s.DaemonSets)
	list(&d, "ControllerRevisions", s.ControllerRevisions)
	list(&d, "Pods", s.Pods)
	list(&d, "Nodes", s.Nodes)
	list(&d, "PDBs", s.PDBs)
	if !s.CapturedAt.IsZero() { // json:",omitzero"
		d.field("CapturedAt")
		d.value(s.CapturedAt)
	}
	if s.KubernetesVersion != "" { // json:",omitempty"
		d.field("KubernetesVersion")
		d.value(s.KubernetesVersion)
	}
	d.raw("}")
	if d.err == nil {
		d.err = d.w.Flush()
	}
	if d.err != nil {
		return "", fmt.Errorf("digest snapshot: %w", d.err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// digester writes JSON as encoding/json would marshal the Snapshot struct,
// field by field and element by element; the first error sticks.
type digester struct {
	w *bufio.Writer
	// enc encodes each value in a buffer it reuses (json.Marshal returns
	// a new slice per object: 150 MB for 150,000 pods).
	enc    *json.Encoder
	fields int
	err    error
}

// stripNewlines drops the newline json.Encoder writes after each value:
// encoding/json escapes newlines inside strings and indents nothing, so the
// bytes left are json.Marshal's.
type stripNewlines struct{ w *bufio.Writer }

func (s stripNewlines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p)
		}
		if _, err := s.w.Write(p[:i]); err != nil {
			return 0, err
		}
		p = p[min(i+1, len(p)):]
	}
	return n, nil
}

func (d *digester) raw(s string) {
	if d.err == nil {
		_, d.err = d.w.WriteString(s)
	}
}

func (d *digester) field(name string) {
	if d.fields > 0 {
		d.raw(",")
	}
	d.fields++
	d.raw(`"` + name + `":`)
}

func (d *digester) value(v any) {
	if d.err != nil {
		return
	}
	d.err = d.enc.Encode(v)
}

// list writes one slice field: null when nil, as encoding/json does.
func list[T any](d *digester, name string, xs []T) {
	d.field(name)
	if xs == nil {
		d.raw("null")
		return
	}
	d.raw("[")
	for i, x := range xs {
		if i > 0 {
			d.raw(",")
		}
		d.value(x)
	}
	d.raw("]")
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
