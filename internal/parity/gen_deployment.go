package parity

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func (g *gen) deployment(ns, name string) appRef {
	d := g.replicas()
	uid := types.UID("uid-" + ns + "-deploy-" + name)
	cur := g.baseTemplate(name)
	minReady := g.pickInt(0, 0, 0, 5, 30, 120)
	dep := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, CreationTimestamp: g.ago(86400 * 10),
			Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas:        ptr(int32(d)),
			Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:        cur.build(),
			MinReadySeconds: int32(minReady),
			Paused:          g.chance(0.03),
		},
	}
	if g.chance(0.8) {
		dep.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
		if g.chance(0.85) {
			ru := &appsv1.RollingUpdateDeployment{
				MaxSurge:       g.intOrPercent(0.15, []int{0, 1, 2, 3}, []string{"0%", "10%", "25%", "30%", "50%", "100%", "150%"}),
				MaxUnavailable: g.intOrPercent(0.15, []int{0, 1, 2, 3}, []string{"0%", "10%", "25%", "30%", "50%", "100%"}),
			}
			if ru.MaxSurge != nil && ru.MaxUnavailable != nil && isZero(ru.MaxSurge) && isZero(ru.MaxUnavailable) {
				ru.MaxUnavailable = ptr(intstr.FromInt32(1)) // the API refuses 0/0
			}
			dep.Spec.Strategy.RollingUpdate = ru
		}
	} else {
		dep.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	}
	dep.Annotations = g.rollplanAnnotations("Deployment", d, false)
	if g.chance(0.05) {
		dep.Spec.ProgressDeadlineSeconds = ptr(int32(g.pickInt(120, 1200)))
	}
	g.s.Deployments = append(g.s.Deployments, dep)

	// ReplicaSets: 0–3 old ones, oldest first, and usually the new one.
	nOld := g.pickInt(0, 1, 1, 1, 2, 2, 3)
	hasNew := nOld == 0 || g.chance(0.7)
	type rsPlan struct {
		t    tmpl
		spec int
		new  bool
	}
	var plans []rsPlan
	for i := 0; i < nOld; i++ {
		plans = append(plans, rsPlan{t: g.mutate(cur, i+1)})
	}
	// Split the replicas: new gets a share, the old ones the rest (plus a
	// little surge now and then).
	newSpec := 0
	if hasNew {
		switch k := g.r.Intn(100); {
		case k < 25 || nOld == 0:
			newSpec = d
		default:
			newSpec = g.r.Intn(d + 1)
		}
	}
	rest := d - newSpec
	if rest > 0 && g.chance(0.3) {
		rest += g.r.Intn(3)
	}
	for i := range plans {
		if i == len(plans)-1 {
			plans[i].spec = rest
		} else {
			k := g.r.Intn(rest + 1)
			plans[i].spec, rest = k, rest-k
		}
	}
	if hasNew {
		plans = append(plans, rsPlan{t: cur, spec: newSpec, new: true})
	}
	sick := g.health()
	for i, pl := range plans {
		hash := g.suffix(9 + g.r.Intn(2))
		rsName := name + "-" + hash
		rsUID := types.UID("uid-" + ns + "-rs-" + rsName)
		t := withLabel(pl.t.build(), "pod-template-hash", hash)
		rsMinReady := minReady
		if !pl.new && g.chance(0.3) {
			rsMinReady = g.pickInt(0, 10)
		}
		rs := &appsv1.ReplicaSet{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
			ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: ns, UID: rsUID,
				CreationTimestamp: g.ago(86400*9 - 3600*i),
				Labels:            map[string]string{"app": name, "pod-template-hash": hash},
				Annotations:       map[string]string{"deployment.kubernetes.io/revision": strconv.Itoa(i + 1)},
				OwnerReferences:   []metav1.OwnerReference{ownerRef("Deployment", name, uid)}},
			Spec: appsv1.ReplicaSetSpec{
				Replicas:        ptr(int32(pl.spec)),
				MinReadySeconds: int32(rsMinReady),
				Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": name, "pod-template-hash": hash}},
				Template:        t,
			},
		}
		// Pods: usually as many as spec, sometimes one more or one less, the
		// odd terminating one; now and then none at all (status only).
		nPods := pl.spec
		switch k := g.r.Intn(100); {
		case k < 8 && nPods > 0:
			nPods--
		case k < 14:
			nPods++
		case k < 17 && !pl.new:
			nPods = 0
		}
		avail := 0
		for j := 0; j < nPods; j++ {
			p := g.pod(ns, g.podName(ns, rsName), t, ownerRef("ReplicaSet", rsName, rsUID), podOpts{updated: pl.new, minReady: rsMinReady, sick: sick})
			if g.available(p, rsMinReady) {
				avail++
			}
			g.s.Pods = append(g.s.Pods, p)
		}
		if nPods == 0 && pl.spec > 0 {
			avail = g.r.Intn(pl.spec + 1)
		}
		rs.Status = appsv1.ReplicaSetStatus{Replicas: int32(nPods), AvailableReplicas: int32(avail), ReadyReplicas: int32(avail)}
		g.s.ReplicaSets = append(g.s.ReplicaSets, rs)
	}
	return appRef{ns, name}
}
