package facts

import (
	"encoding/json"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Pods of a ReplicaSet carry the ReplicaSet's pod-template-hash for life (it
// is in the selector), so the pods of a Deployment updated in place by
// rollplan cannot say their revision with a label the way StatefulSet and
// DaemonSet pods do. Their own spec says it instead: a pod runs the update
// revision once it holds the target value of every change between its
// ReplicaSet's template and the Deployment's. Only the changed fields are
// compared, so what the API server fills in (defaults, LimitRange
// resources) never makes a pod look outdated.

// RunsChanges reports whether pod p already holds, for every change (a
// diff from its revision's template to `to`), the value `to` gives. A
// change of a class that cannot go in place is never held.
func RunsChanges(p *corev1.Pod, to *corev1.PodTemplateSpec, changes []Change) bool {
	for _, c := range changes {
		if !c.InPlace || !holds(p, to, c) {
			return false
		}
	}
	return true
}

func holds(p *corev1.Pod, to *corev1.PodTemplateSpec, c Change) bool {
	switch c.Class {
	case ClassLabels, ClassAnnotations:
		key := strings.TrimSuffix(c.Path[strings.Index(c.Path, "[")+1:], "]")
		have, want := p.Labels, to.Labels
		if c.Class == ClassAnnotations {
			have, want = p.Annotations, to.Annotations
		}
		hv, hok := have[key]
		wv, wok := want[key]
		return hok == wok && hv == wv
	case ClassImage, ClassInitImage, ClassResources:
		list, tlist := p.Spec.Containers, to.Spec.Containers
		if strings.HasPrefix(c.Path, "spec.initContainers[") {
			list, tlist = p.Spec.InitContainers, to.Spec.InitContainers
		}
		name := c.Path[strings.Index(c.Path, "[")+1 : strings.Index(c.Path, "]")]
		have, want := container(list, name), container(tlist, name)
		if have == nil || want == nil {
			return false
		}
		if c.Class != ClassResources {
			return have.Image == want.Image
		}
		for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if !sameQuantity(have.Resources.Requests, want.Resources.Requests, rn) || !sameQuantity(have.Resources.Limits, want.Resources.Limits, rn) {
				return false
			}
		}
		return true
	}
	return false
}

func container(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func sameQuantity(a, b corev1.ResourceList, rn corev1.ResourceName) bool {
	qa, oka := a[rn]
	qb, okb := b[rn]
	return oka == okb && (!oka || qa.Cmp(qb) == 0)
}

// imageDrift lists the container and init-container images in which pod p
// differs from template t, as the changes that bring p to t. Only images
// are compared: the API server and admission fill in the rest of a pod's
// spec (defaults, LimitRange resources), and images are what an in-place
// update changes.
func imageDrift(p *corev1.Pod, t *corev1.PodTemplateSpec) []Change {
	images := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Image: c.Image}
		}
		return out
	}
	from := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: images(p.Spec.Containers), InitContainers: images(p.Spec.InitContainers)}}
	to := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: images(t.Spec.Containers), InitContainers: images(t.Spec.InitContainers)}}
	return Diff(from, to)
}

// inPlaceRevision is the revision the executor's in-place record on p
// names ("" without one).
func inPlaceRevision(p *corev1.Pod) string {
	raw, ok := p.Annotations[annInPlaceUpdate]
	if !ok {
		return ""
	}
	var rec struct {
		Revision string `json:"revision"`
	}
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return ""
	}
	return rec.Revision
}

// annInPlaceUpdate is the executor's record on a pod it updated in place
// (live.AnnInPlaceUpdate); facts read the restart counts it kept.
const annInPlaceUpdate = "rollplan.dev/in-place-update"

// inPlaceRestarts reads the restart counts the pod's containers had when
// rollplan last updated it in place, and which containers the update
// restarted (their image changed); nil without such a record.
func inPlaceRestarts(p *corev1.Pod) (map[string]int32, map[string]bool) {
	raw, ok := p.Annotations[annInPlaceUpdate]
	if !ok {
		return nil, nil
	}
	var rec struct {
		ImageIDs      map[string]string `json:"imageIDs"`
		RestartCounts map[string]int32  `json:"restartCounts"`
	}
	if json.Unmarshal([]byte(raw), &rec) != nil || rec.RestartCounts == nil {
		return nil, nil
	}
	restarted := map[string]bool{}
	for name := range rec.ImageIDs {
		restarted[name] = true
	}
	return rec.RestartCounts, restarted
}

// RevisionTemplate is the pod template a StatefulSet's or DaemonSet's
// ControllerRevision records.
func RevisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	return revisionTemplate(cr)
}
