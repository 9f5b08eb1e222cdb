package parity

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/facts"
)

func (g *gen) daemonSet(ns, name string) appRef {
	uid := types.UID("uid-" + ns + "-ds-" + name)
	cur := g.baseTemplate(name)
	cur.nodeSelector = g.chance(0.15)
	cur.tolerate = g.chance(0.3)
	minReady := g.pickInt(0, 0, 0, 5, 30)
	ds := &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, CreationTimestamp: g.ago(86400 * 10),
			Labels: map[string]string{"app": name}},
		Spec: appsv1.DaemonSetSpec{
			Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:        cur.build(),
			MinReadySeconds: int32(minReady),
		},
	}
	onDelete := false
	switch k := g.r.Intn(100); {
	case k < 15:
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}
	case k < 55:
		mu := g.intOrPercent(0.1, []int{1, 2, 3}, []string{"10%", "25%", "50%", "100%"})
		var ms *intstr.IntOrString
		if g.chance(0.3) {
			ms = ptr(intstr.FromInt32(0))
		}
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: mu, MaxSurge: ms}}
	case k < 85:
		mu := ptr(intstr.FromInt32(0))
		if g.chance(0.3) {
			mu = ptr(intstr.FromString("0%"))
		}
		ms := g.intOrPercent(0, []int{1, 2}, []string{"10%", "25%", "50%", "100%"})
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: mu, MaxSurge: ms}}
	default:
		onDelete = true
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	}
	ds.Annotations = g.rollplanAnnotations("DaemonSet", len(g.nodeList), onDelete)
	if onDelete {
		// A managed OnDelete DaemonSet takes maxUnavailable from the
		// annotation, where 0 is allowed (a stalled rollout).
		if _, ok := ds.Annotations[facts.AnnMaxUnavailable]; ok && g.chance(0.05) {
			ds.Annotations[facts.AnnMaxUnavailable] = "0"
		}
	}

	updHash := g.suffix(10)
	type rev struct {
		hash string
		t    corev1.PodTemplateSpec
	}
	var olds []rev
	for i := 0; i < 1+g.r.Intn(2); i++ {
		olds = append(olds, rev{hash: g.suffix(10), t: g.mutate(cur, i+1).build()})
	}
	for i, o := range olds {
		g.s.ControllerRevisions = append(g.s.ControllerRevisions, g.controllerRevision(ns, name+"-"+o.hash, "DaemonSet", name, uid, int64(i+1), o.t, map[string]string{"controller-revision-hash": o.hash}))
	}
	g.s.ControllerRevisions = append(g.s.ControllerRevisions, g.controllerRevision(ns, name+"-"+updHash, "DaemonSet", name, uid, int64(len(olds)+1), ds.Spec.Template, map[string]string{"controller-revision-hash": updHash}))

	share := g.r.Float64() // share of nodes already updated
	sick := g.health()
	for _, node := range g.nodeList {
		run := g.shouldRun(node, cur)
		count := 1
		switch k := g.r.Intn(100); {
		case !run && k < 70:
			count = 0
		case k < 8:
			count = 0
		case k < 13:
			count = 2
		}
		for j := 0; j < count; j++ {
			updated := g.r.Float64() < share
			h, t := updHash, ds.Spec.Template
			if !updated {
				o := olds[g.r.Intn(len(olds))]
				h, t = o.hash, o.t
				if g.chance(0.03) {
					h = g.suffix(10) // unknown revision
				}
			}
			p := g.pod(ns, g.podName(ns, name), t, ownerRef("DaemonSet", name, uid), podOpts{updated: updated, minReady: minReady, node: node.Name, daemon: true, sick: sick})
			p.Labels["controller-revision-hash"] = h
			g.s.Pods = append(g.s.Pods, p)
		}
	}
	g.s.DaemonSets = append(g.s.DaemonSets, ds)
	return appRef{ns, name}
}

// shouldRun approximates upstream NodeShouldRunDaemonPod for the taints and
// selectors the generator makes (only to decide where pods usually are).
func (g *gen) shouldRun(n *corev1.Node, t tmpl) bool {
	if t.nodeSelector && n.Labels["disk"] != "ssd" {
		return false
	}
	for _, taint := range n.Spec.Taints {
		switch taint.Key {
		case "dedicated":
			if !t.tolerate {
				return false
			}
		case "maintenance":
			return false
		}
	}
	return true
}
