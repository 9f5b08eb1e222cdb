package gate

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// pod judges the pod requests that disrupt; a dry run reserves nothing.
func (g *Gate) pod(ctx context.Context, req *admissionv1.AdmissionRequest, dryRun bool) verdict {
	var pod *corev1.Pod
	var images map[string]string // an update's new images: when the cache shows them, it shows the update
	what := ""
	switch {
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		what = "deletion"
		if len(req.OldObject.Raw) > 0 {
			pod = &corev1.Pod{}
			if err := decode(req.OldObject.Raw, pod); err != nil {
				return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: oldObject: %v", req.Namespace, req.Name, err)}
			}
		}
	case req.Operation == admissionv1.Create && req.SubResource == "eviction":
		what = "eviction"
	case req.Operation == admissionv1.Update && (req.SubResource == "" || req.SubResource == "resize"):
		oldPod, newPod := &corev1.Pod{}, &corev1.Pod{}
		if err := decode(req.OldObject.Raw, oldPod); err != nil {
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: oldObject: %v", req.Namespace, req.Name, err)}
		}
		if err := decode(req.Object.Raw, newPod); err != nil {
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("pod %s/%s: object: %v", req.Namespace, req.Name, err)}
		}
		why := restarts(oldPod, newPod)
		if why == "" {
			return verdict{allow: true, reason: "the update restarts no container"}
		}
		what = "update (" + why + ")"
		pod, images = oldPod, containerImages(newPod)
	default:
		return verdict{allow: true, reason: "not a disruption"}
	}
	if pod == nil {
		var err error
		if pod, err = g.opts.Cache.Pod(req.Namespace, req.Name); err != nil {
			if apierrors.IsNotFound(err) {
				return verdict{allow: true, reason: "pod not in the cache (gone already, or too new to be a budget's)"}
			}
			return verdict{allow: true, failed: true, reason: fmt.Sprintf("read pod %s/%s from the cache: %v", req.Namespace, req.Name, err)}
		}
	}
	return g.disruption(ctx, pod, images, what, dryRun)
}

// restarts says why an update of a pod restarts a container: an image
// change, or a cpu/memory change under a RestartContainer resizePolicy.
func restarts(old, cur *corev1.Pod) string {
	prev := map[string]corev1.Container{}
	for _, c := range old.Spec.Containers {
		prev[c.Name] = c
	}
	var why []string
	for _, c := range cur.Spec.Containers {
		o, ok := prev[c.Name]
		if !ok {
			continue
		}
		if o.Image != c.Image {
			why = append(why, fmt.Sprintf("container %s image %s → %s", c.Name, o.Image, c.Image))
			continue
		}
		for _, rp := range c.ResizePolicy {
			if rp.RestartPolicy != corev1.RestartContainer {
				continue
			}
			if !o.Resources.Requests[rp.ResourceName].Equal(c.Resources.Requests[rp.ResourceName]) ||
				!o.Resources.Limits[rp.ResourceName].Equal(c.Resources.Limits[rp.ResourceName]) {
				why = append(why, fmt.Sprintf("container %s %s resized with resizePolicy RestartContainer", c.Name, rp.ResourceName))
			}
		}
	}
	return strings.Join(why, "; ")
}

// owner resolves the workload that controls a pod: its StatefulSet,
// DaemonSet, or the Deployment of its ReplicaSet (Kind "" for none).
// released, when not "", says why the pod is no budget's business any
// more: its owner, or the ReplicaSet between, is gone or being deleted
// (another object of the same name is not its owner). The garbage
// collector then deletes the pods, and must be let through: a foreground
// delete waits for every pod to go, and no replacement ever comes.
func (g *Gate) owner(ctx context.Context, pod *corev1.Pod) (ref capture.Ref, released string, err error) {
	c := snapshot.ControllerOf(pod)
	if c == nil {
		return capture.Ref{}, "", nil
	}
	ns := pod.Namespace
	switch c.Kind {
	case capture.StatefulSet:
		o, err := g.opts.Cache.StatefulSet(ctx, ns, c.Name)
		released, err = ownerLife(capture.StatefulSet, ns, c, o, err)
		return capture.Ref{Kind: c.Kind, Name: c.Name}, released, err
	case capture.DaemonSet:
		o, err := g.opts.Cache.DaemonSet(ctx, ns, c.Name)
		released, err = ownerLife(capture.DaemonSet, ns, c, o, err)
		return capture.Ref{Kind: c.Kind, Name: c.Name}, released, err
	case "ReplicaSet":
		rs, err := g.opts.Cache.ReplicaSet(ns, c.Name)
		if released, err := ownerLife("ReplicaSet", ns, c, rs, err); released != "" || err != nil {
			return capture.Ref{}, released, err
		}
		d := snapshot.ControllerOf(rs)
		if d == nil || d.Kind != capture.Deployment {
			return capture.Ref{}, "", nil
		}
		o, err := g.opts.Cache.Deployment(ctx, ns, d.Name)
		released, err = ownerLife(capture.Deployment, ns, d, o, err)
		return capture.Ref{Kind: capture.Deployment, Name: d.Name}, released, err
	}
	return capture.Ref{}, "", nil
}

// ownerLife says whether obj, read from the cache for the owner reference
// c, is gone or being deleted ("" while it lives).
func ownerLife[T metav1.Object](kind, ns string, c *metav1.OwnerReference, obj T, err error) (string, error) {
	name := fmt.Sprintf("owner %s %s/%s", kind, ns, c.Name)
	switch {
	case apierrors.IsNotFound(err):
		return name + " is gone: the garbage collector deletes its pods", nil
	case err != nil:
		return "", fmt.Errorf("read %s %s/%s from the cache: %w", strings.ToLower(kind), ns, c.Name, err)
	case c.UID != "" && obj.GetUID() != "" && obj.GetUID() != c.UID:
		return fmt.Sprintf("%s is gone (the %s of that name now has uid %s, not %s): the garbage collector deletes its pods", name, kind, obj.GetUID(), c.UID), nil
	case obj.GetDeletionTimestamp() != nil:
		return name + " is being deleted: the garbage collector deletes its pods", nil
	}
	return "", nil
}

// disruption judges a disruption of pod against its workload's budgets.
func (g *Gate) disruption(ctx context.Context, pod *corev1.Pod, images map[string]string, what string, dryRun bool) verdict {
	ref, released, err := g.owner(ctx, pod)
	switch {
	case err != nil:
		return verdict{allow: true, failed: true, reason: err.Error()}
	case ref.Kind == "" && released == "":
		return verdict{allow: true, reason: "pod has no owning Deployment, StatefulSet or DaemonSet"}
	}
	t := live.Target{Namespace: pod.Namespace, Kind: ref.Kind, Name: ref.Name}
	v := verdict{mode: g.opts.Enforcement}
	if ref.Kind != "" {
		v.workload = t.String()
	}
	if released != "" {
		v.allow, v.reason = true, fmt.Sprintf("%s of pod %s admitted: %s", what, pod.Name, released)
		return v
	}
	// Whole seconds: the facts' clock, and the state cache's key.
	now := g.opts.Now().Truncate(time.Second)
	st := g.state(ctx, t, now)
	switch {
	case st.captureErr != nil:
		// The workload is unreadable (or went between owner and state).
		v.allow, v.failed, v.reason = true, true, fmt.Sprintf("%s: %v", t, st.captureErr)
		return v
	case st.factsErr != nil:
		v.allow, v.failed, v.reason = !st.managed, true, fmt.Sprintf("%s: facts: %v", t, st.factsErr)
		return v
	}
	r := st.rollout
	v.mode = g.mode(r)
	fp := factPod(r, pod.Name)
	switch {
	case fp == nil:
		v.allow, v.reason = true, fmt.Sprintf("pod is not one of %s's", t)
		return v
	case fp.Terminating || fp.Terminal || !fp.Available:
		v.allow, v.reason = true, "pod is unavailable already"
		return v
	case st.policyErr != nil:
		// Policy errors deny disruptions: a budget we cannot compute is not room.
		v.failed, v.reason = true, fmt.Sprintf("%s of pod %s: the policy for %s failed, so its budgets are unknown: %v; fix the policy (rollplan plan shows the same error)", what, pod.Name, t, st.policyErr)
		return v
	}
	if what == "eviction" {
		// The Eviction API calls webhooks before its own PDB check: an
		// eviction admitted here that the PDB then refuses (429) would hold
		// a reservation for nothing until it lapses, denying evictions the
		// PDB allows by then. Refuse what the PDB's status refuses now.
		if name, ok := g.pdbRefuses(ctx, pod); ok {
			v.what = fmt.Sprintf("eviction of pod %s/%s", pod.Namespace, pod.Name)
			v.reason = fmt.Sprintf("%s: PodDisruptionBudget %s/%s allows no disruption now (status.disruptionsAllowed 0), so the Eviction API refuses it", t, pod.Namespace, name)
			v.next = "retry once pods are available again"
			return v
		}
	}
	budgets, cached := st.budgets, st.pods
	var short *shortfall
	key := workloadKey(t.Namespace, t.Kind, t.Name)
	if shared := sharedPDB(r); shared != "" {
		// Every workload under a PDB that spans workloads reserves in one
		// place, so that two of them cannot both spend its last unit.
		key = workloadKey(t.Namespace, "PodDisruptionBudget", shared)
	}
	err = g.opts.Store.Reserve(ctx, key, func(cur []Reservation) ([]Reservation, bool, error) {
		live := pending(cur, r, cached, pod.Name, now)
		extra := map[string]bool{}
		for _, res := range live {
			extra[res.Pod] = true
		}
		elsewhere := g.pendingElsewhere(cur, r, pod.Name, now)
		if short = fits(r, budgets, pod.Name, extra, elsewhere); short != nil || dryRun {
			return nil, false, nil
		}
		// What this replica's cache shows no longer counts here, but stays
		// stored until it lapses: another replica's cache may lag behind
		// this one's and still need it.
		keep := []Reservation{}
		for _, res := range cur {
			if res.Pod != pod.Name && res.Until.After(now) {
				keep = append(keep, res)
			}
		}
		return append(keep, Reservation{Pod: pod.Name, UID: string(pod.UID), Images: images, PDBs: fp.PDBs,
			Until: now.Add(g.opts.ReservationTTL).UTC().Truncate(time.Second)}), true, nil
	})
	if err != nil {
		// Fail closed for managed workloads, open elsewhere.
		v.allow, v.failed = !r.Workload.Managed, true
		v.reason = fmt.Sprintf("%s of pod %s (%s): reservations unavailable: %v", what, pod.Name, t, err)
		return v
	}
	if short != nil {
		short.Elsewhere = st.elsewhere[short.Budget.PDB]
		v.what = fmt.Sprintf("%s of pod %s/%s", what, pod.Namespace, pod.Name)
		v.reason = fmt.Sprintf("%s %s", t, short)
		v.next = short.advice(t)
		return v
	}
	v.allow = true
	if why := surplus(r)(fp); why != "" {
		v.reason = fmt.Sprintf("%s of pod %s costs %s no budget: %s", what, pod.Name, t, why)
	} else {
		v.reason = fmt.Sprintf("%s of pod %s fits every budget of %s", what, pod.Name, t)
	}
	return v
}

// sharedPDB: the first (by name) PDB selecting pods of r that also selects
// pods of other workloads, whose reservations r must see; "" for none. A
// chain (PDB a over workloads 1 and 2, b over 2 and 3) is joined only
// through its first PDB.
func sharedPDB(r *facts.Rollout) string {
	for _, p := range r.PDBs { // sorted by name
		if p.ExpectedPods > r.Workload.Replicas {
			return p.Name
		}
	}
	return ""
}

// pendingElsewhere counts, per PDB, the reservations in cur of other
// workloads' pods that the facts do not count yet: the pod is still the one
// reserved and Ready (admitted, not seen), terminating (the facts leave
// terminating pods of other workloads out), or gone and not back. Once the
// cache shows it unavailable, or replaced, the facts count it, if at all.
func (g *Gate) pendingElsewhere(cur []Reservation, r *facts.Rollout, pod string, now time.Time) map[string]int {
	var out map[string]int
	for _, res := range cur {
		if res.Pod == pod || len(res.PDBs) == 0 || !res.Until.After(now) || factPod(r, res.Pod) != nil {
			continue
		}
		c, err := g.opts.Cache.Pod(r.Workload.Namespace, res.Pod)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			continue // unknown: the facts' count stands
		case err == nil && string(c.UID) != res.UID:
			continue // replaced: its replacement counts if unavailable
		case err == nil && c.DeletionTimestamp == nil && !podReady(c):
			continue // unavailable: the facts count it
		}
		if out == nil {
			out = map[string]int{}
		}
		for _, name := range res.PDBs {
			out[name]++
		}
	}
	return out
}

// pdbRefuses names a PodDisruptionBudget selecting pod whose status, up to
// date with its spec, allows no disruption: the Eviction API refuses the
// eviction whatever the gate says.
func (g *Gate) pdbRefuses(ctx context.Context, pod *corev1.Pod) (string, bool) {
	pdbs, err := g.opts.Cache.PodDisruptionBudgets(ctx, pod.Namespace)
	if err != nil {
		return "", false // the gate's own count still applies
	}
	for _, pdb := range pdbs {
		if pdb.Spec.Selector == nil || pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		return pdb.Name, true
	}
	return "", false
}

// pending are the reservations this replica still counts: not this pod's,
// not lapsed, and for disruptions its cache does not show yet. A cache
// shows a deletion or eviction once the pod is gone, replaced (another
// UID), terminating or unavailable, and an update once the pod's spec has
// the new images (the pod then counts as in flight until the update
// completes). A later resourceVersion alone shows nothing: the pod may
// have changed for another reason, the disruption still to come.
func pending(cur []Reservation, r *facts.Rollout, cached map[string]*corev1.Pod, pod string, now time.Time) []Reservation {
	var out []Reservation
	for _, res := range cur {
		if res.Pod == pod || !res.Until.After(now) {
			continue
		}
		p, c := factPod(r, res.Pod), cached[res.Pod]
		if p == nil || c == nil || string(c.UID) != res.UID || p.Terminating || p.Terminal || !p.Available {
			continue // the cache shows it: it counts as a pod now, if at all
		}
		if len(res.Images) > 0 && maps.Equal(containerImages(c), res.Images) {
			continue // the update is in the cache
		}
		out = append(out, res)
	}
	return out
}

// containerImages: container name → image.
func containerImages(p *corev1.Pod) map[string]string {
	out := make(map[string]string, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out[c.Name] = c.Image
	}
	return out
}

func factPod(r *facts.Rollout, name string) *facts.Pod {
	for i := range r.Pods {
		if r.Pods[i].Name == name {
			return &r.Pods[i]
		}
	}
	return nil
}
