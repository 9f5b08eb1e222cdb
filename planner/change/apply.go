package change

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// What a proposed object does to the snapshot.
const (
	// Replaced: the workload is in the snapshot and its spec changes.
	Replaced = "replaced"
	// Unchanged: the proposed spec is the one the snapshot holds.
	Unchanged = "unchanged"
	// New: the workload is not in the snapshot: applying the change
	// creates it, and nothing rolls.
	New = "new"
)

// Outcome is what one proposed object did.
type Outcome struct {
	Object *Object
	Status string
	// TemplateChanged: the pod template differs (a rollout follows);
	// else only other spec fields (replicas, strategy) or nothing.
	TemplateChanged bool
	// From and To: the pod template before and after (Replaced only).
	From, To *corev1.PodTemplateSpec
	// Redacted: the snapshot's env values are redacted (rollplan
	// snapshot), so the proposed ones were too: the plan compares like
	// with like, but its toRevision is not the name the controller gives.
	Redacted bool
}

// Note is the outcome in words, for stderr and the plan's notes.
func (o Outcome) Note() string {
	switch o.Status {
	case New:
		return fmt.Sprintf("%s (%s) is not in the snapshot: the change creates it, and nothing rolls out", o.Object.ID(), o.Object.Where)
	case Unchanged:
		return fmt.Sprintf("%s (%s) proposes the spec the workload already has: nothing changes", o.Object.ID(), o.Object.Where)
	case Replaced:
		if !o.TemplateChanged {
			return fmt.Sprintf("previewed from the change in %s: the spec changes but not the pod template, so no pod is replaced", o.Object.Where)
		}
		if o.Redacted {
			return fmt.Sprintf("previewed from the change in %s; the snapshot's env values are redacted, so the proposed ones are too: the waves are right, but the new revision's name is not the one the controller will give (preview against the cluster for it)", o.Object.Where)
		}
		return fmt.Sprintf("previewed from the change in %s", o.Object.Where)
	}
	return ""
}

// Mode says where the proposed objects come from.
type Mode int

const (
	// FromFiles: manifests given the API server's defaults locally
	// (Default). Apply merges them into the snapshot's objects as an
	// update would: the spec replaced, labels and annotations set over
	// the object's own, metadata.generation advanced when the spec
	// changes, status kept.
	FromFiles Mode = iota
	// FromServer: the objects a server-side dry-run apply returned. They
	// are what the update would store (generation, metadata and status
	// included) and replace the snapshot's objects whole.
	FromServer
)

// Apply puts the proposed objects in the snapshot in place of the
// workloads of the same kind, namespace and name, and says what each did.
// gates are the cluster's feature gates (Kubernetes names).
func Apply(s *snapshot.Snapshot, objs []*Object, mode Mode, gates map[string]bool) []Outcome {
	out := make([]Outcome, 0, len(objs))
	for _, o := range objs {
		oc := Outcome{Object: o, Status: New}
		switch p := o.Obj.(type) {
		case *appsv1.Deployment:
			if i := find(s.Deployments, o); i >= 0 {
				cur := s.Deployments[i]
				if mode == FromFiles {
					oc.Redacted = redactLike(&cur.Spec.Template, &p.Spec.Template)
				}
				oc.Status, oc.TemplateChanged = compare(&cur.Spec, &p.Spec, &cur.Spec.Template, &p.Spec.Template)
				oc.From, oc.To = &cur.Spec.Template, &p.Spec.Template
				if mode == FromFiles {
					next := cur.DeepCopy()
					next.Spec = p.Spec
					update(&next.ObjectMeta, &p.ObjectMeta, oc.Status == Replaced)
					p = next
				}
				s.Deployments[i] = p
			}
		case *appsv1.StatefulSet:
			if i := find(s.StatefulSets, o); i >= 0 {
				cur := s.StatefulSets[i]
				if mode == FromFiles {
					dropDisabled(p, cur, gates)
					oc.Redacted = redactLike(&cur.Spec.Template, &p.Spec.Template)
				}
				oc.Status, oc.TemplateChanged = compare(&cur.Spec, &p.Spec, &cur.Spec.Template, &p.Spec.Template)
				oc.From, oc.To = &cur.Spec.Template, &p.Spec.Template
				if mode == FromFiles {
					next := cur.DeepCopy()
					next.Spec = p.Spec
					update(&next.ObjectMeta, &p.ObjectMeta, oc.Status == Replaced)
					p = next
				}
				s.StatefulSets[i] = p
			}
		case *appsv1.DaemonSet:
			if i := find(s.DaemonSets, o); i >= 0 {
				cur := s.DaemonSets[i]
				if mode == FromFiles {
					oc.Redacted = redactLike(&cur.Spec.Template, &p.Spec.Template)
				}
				oc.Status, oc.TemplateChanged = compare(&cur.Spec, &p.Spec, &cur.Spec.Template, &p.Spec.Template)
				oc.From, oc.To = &cur.Spec.Template, &p.Spec.Template
				if mode == FromFiles {
					next := cur.DeepCopy()
					next.Spec = p.Spec
					update(&next.ObjectMeta, &p.ObjectMeta, oc.Status == Replaced)
					if oc.TemplateChanged {
						templateGeneration(next)
					}
					p = next
				}
				s.DaemonSets[i] = p
			}
		}
		out = append(out, oc)
	}
	s.Sort()
	return out
}

// find is the index of the object o replaces, -1 when there is none.
func find[T metav1.Object](list []T, o *Object) int {
	for i, x := range list {
		if x.GetNamespace() == o.Namespace && x.GetName() == o.Name {
			return i
		}
	}
	return -1
}

func compare(cur, next, curTemplate, nextTemplate any) (string, bool) {
	if equality.Semantic.DeepEqual(cur, next) {
		return Unchanged, false
	}
	return Replaced, !equality.Semantic.DeepEqual(curTemplate, nextTemplate)
}

// update merges the proposed metadata into the object's, as an apply of
// the manifest would: labels and annotations it names are set, the
// others kept; metadata.generation advances when the spec changes (the
// registries' PrepareForUpdate), so that status.observedGeneration falls
// behind as it does while the controller has not seen the update.
func update(meta, proposed *metav1.ObjectMeta, specChanged bool) {
	for k, v := range proposed.Labels {
		if meta.Labels == nil {
			meta.Labels = map[string]string{}
		}
		meta.Labels[k] = v
	}
	for k, v := range proposed.Annotations {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		meta.Annotations[k] = v
	}
	if specChanged {
		meta.Generation++
	}
}

// annTemplateGeneration is the apps/v1 form of the DaemonSet's
// spec.templateGeneration (pkg/apis/apps/v1 conversion).
const annTemplateGeneration = "deprecated.daemonset.template.generation"

// templateGeneration advances a DaemonSet's template generation, as
// pkg/registry/apps/daemonset/strategy.go PrepareForUpdate does when the
// template changes.
func templateGeneration(ds *appsv1.DaemonSet) {
	v, ok := ds.Annotations[annTemplateGeneration]
	if !ok {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return
	}
	ds.Annotations[annTemplateGeneration] = strconv.FormatInt(n+1, 10)
}

// dropDisabled is pkg/registry/apps/statefulset/strategy.go
// dropStatefulSetDisabledFields: with MaxUnavailableStatefulSet off, the
// API server drops rollingUpdate.maxUnavailable unless the stored object
// already uses it.
func dropDisabled(p, cur *appsv1.StatefulSet, gates map[string]bool) {
	if gates[kubeversion.MaxUnavailableStatefulSet] {
		return
	}
	inUse := cur.Spec.UpdateStrategy.RollingUpdate != nil && cur.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil
	if ru := p.Spec.UpdateStrategy.RollingUpdate; ru != nil && !inUse {
		ru.MaxUnavailable = nil
	}
}

// Merge adds the objects of src that dst does not hold yet (by kind,
// namespace and name: captures of two namespaces share their Nodes).
func Merge(dst, src *snapshot.Snapshot) {
	dst.Deployments = merge(dst.Deployments, src.Deployments)
	dst.ReplicaSets = merge(dst.ReplicaSets, src.ReplicaSets)
	dst.StatefulSets = merge(dst.StatefulSets, src.StatefulSets)
	dst.DaemonSets = merge(dst.DaemonSets, src.DaemonSets)
	dst.ControllerRevisions = merge(dst.ControllerRevisions, src.ControllerRevisions)
	dst.Pods = merge(dst.Pods, src.Pods)
	dst.Nodes = merge(dst.Nodes, src.Nodes)
	dst.PDBs = merge(dst.PDBs, src.PDBs)
	if src.CapturedAt.After(dst.CapturedAt) {
		dst.CapturedAt = src.CapturedAt
	}
	if dst.KubernetesVersion == "" {
		dst.KubernetesVersion = src.KubernetesVersion
	}
	dst.Sort()
}

func merge[T metav1.Object](dst, src []T) []T {
	have := map[string]bool{}
	for _, x := range dst {
		have[x.GetNamespace()+"/"+x.GetName()] = true
	}
	for _, x := range src {
		if k := x.GetNamespace() + "/" + x.GetName(); !have[k] {
			have[k] = true
			dst = append(dst, x)
		}
	}
	return dst
}

// redactLike redacts the env values of the proposed template as rollplan
// snapshot redacted the stored one's (capture.Redact), when it did: a
// value against its own hash would read as a change. It reports whether
// it redacted.
func redactLike(stored, proposed *corev1.PodTemplateSpec) bool {
	if !redacted(&stored.Spec) {
		return false
	}
	each(&proposed.Spec, func(e *corev1.EnvVar) {
		if !strings.HasPrefix(e.Value, capture.RedactedPrefix) {
			e.Value = capture.Redact(e.Value)
		}
	})
	return true
}

func redacted(s *corev1.PodSpec) bool {
	found := false
	each(s, func(e *corev1.EnvVar) { found = found || strings.HasPrefix(e.Value, capture.RedactedPrefix) })
	return found
}

// each calls fn with every env var of the pod spec's containers.
func each(s *corev1.PodSpec, fn func(*corev1.EnvVar)) {
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			for j := range cs[i].Env {
				fn(&cs[i].Env[j])
			}
		}
	}
	for i := range s.EphemeralContainers {
		for j := range s.EphemeralContainers[i].Env {
			fn(&s.EphemeralContainers[i].Env[j])
		}
	}
}
