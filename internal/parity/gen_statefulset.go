package parity

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (g *gen) statefulSet(ns, name string) appRef {
	n := g.replicas()
	uid := types.UID("uid-" + ns + "-sts-" + name)
	cur := g.baseTemplate(name)
	minReady := g.pickInt(0, 0, 0, 5, 30)
	set := &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, CreationTimestamp: g.ago(86400 * 10),
			Labels: map[string]string{"app": name}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:        ptr(int32(n)),
			Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:        cur.build(),
			ServiceName:     name,
			MinReadySeconds: int32(minReady),
		},
	}
	switch k := g.r.Intn(100); {
	case k < 45:
		set.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	case k < 60:
	default:
		set.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	}
	start := 0
	if g.chance(0.12) {
		start = 1 + g.r.Intn(3)
		set.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: int32(start)}
	}
	onDelete := false
	switch k := g.r.Intn(100); {
	case k < 25:
		set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	case k < 80:
		ru := &appsv1.RollingUpdateStatefulSetStrategy{}
		if g.chance(0.6) {
			ru.Partition = ptr(int32(g.r.Intn(n + 2)))
		}
		ru.MaxUnavailable = g.intOrPercent(0.4, []int{1, 2, 3, 4}, []string{"10%", "25%", "50%", "100%"})
		set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: ru}
	default:
		onDelete = true
		set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	set.Annotations = g.rollplanAnnotations("StatefulSet", n, onDelete)

	// Revisions: the update revision (usually recorded) and 1–2 older ones.
	type rev struct {
		name string
		t    corev1.PodTemplateSpec
	}
	updName := name + "-" + g.suffix(10)
	hasUpd := g.chance(0.85)
	var olds []rev
	for i := 0; i < 1+g.r.Intn(2); i++ {
		olds = append(olds, rev{name: name + "-" + g.suffix(10), t: g.mutate(cur, i+1).build()})
	}
	for i, o := range olds {
		g.s.ControllerRevisions = append(g.s.ControllerRevisions, g.controllerRevision(ns, o.name, "StatefulSet", name, uid, int64(i+1), o.t, nil))
	}
	if hasUpd {
		g.s.ControllerRevisions = append(g.s.ControllerRevisions, g.controllerRevision(ns, updName, "StatefulSet", name, uid, int64(len(olds)+1), set.Spec.Template, nil))
	}
	set.Status.CurrentRevision = olds[0].name
	if hasUpd {
		set.Status.UpdateRevision = updName
	}
	// Pods: highest ordinals updated first (a rollout under way), a few
	// gaps, the odd pod beyond replicas (condemned) or at an unknown revision.
	updatedFrom := n - g.r.Intn(n+1)
	if !hasUpd {
		updatedFrom = n
	}
	scatter := g.chance(0.1)
	sick := g.health()
	extra := 0
	if g.chance(0.05) {
		extra = 1
	}
	for idx := 0; idx < n+extra; idx++ {
		if g.chance(0.06) {
			continue // missing pod
		}
		ord := start + idx
		podName := fmt.Sprintf("%s-%d", name, ord)
		g.names[ns+"/"+podName] = true
		updated := idx >= updatedFrom
		if scatter && hasUpd {
			updated = g.chance(0.4)
		}
		r, t := updName, set.Spec.Template
		if !updated {
			o := olds[g.r.Intn(len(olds))]
			if len(olds) > 1 && g.chance(0.5) {
				o = olds[len(olds)-1]
			}
			r, t = o.name, o.t
			if g.chance(0.04) {
				r = name + "-" + g.suffix(10) // a revision the snapshot does not hold
			}
		}
		p := g.pod(ns, podName, t, ownerRef("StatefulSet", name, uid), podOpts{updated: updated, minReady: minReady, sick: sick})
		p.Labels["controller-revision-hash"] = r
		p.Labels["statefulset.kubernetes.io/pod-name"] = podName
		p.Labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ord)
		g.s.Pods = append(g.s.Pods, p)
	}
	g.s.StatefulSets = append(g.s.StatefulSets, set)
	return appRef{ns, name}
}
