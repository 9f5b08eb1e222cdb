package executor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// The rollout's own plan (origin): status numbers a rollout's waves
// against the plan of the rollout as it stood before its first pod moved,
// not against the plan of what is left at each read. rollplan keeps no
// history, so that plan is planned again at every read from the live
// state rewound: every pod of the rollout back at the previous revision,
// Ready and available, none terminating, a pod on each slot (each
// StatefulSet replica, each node that should run the DaemonSet's pod).
// Its waves depend only on what a rollout does not change (the spec, the
// pods' slots and nodes, the change from the previous revision), so the
// total is the same at every read, for every reader, after a restart of
// the CLI too; and it is what `rollplan plan` and the gate's warning said
// when the template changed.
//
// Where the rollout stands is counted from the pods: started = the pods of
// the origin plan less the pods the current plan still has to update.
// Pods only ever leave the current plan (a pod updated, in flight or
// being replaced is not planned again), so started never decreases and
// the wave number never goes backwards; it is capped at the total.

// maxRewound bounds the replicas without a pod a rewind puts back: a
// rollout has at most its budget of pods being replaced at a time; more
// missing replicas (a scale-up, a StatefulSet being created) are not a
// rollout's motion, and the waves are then not numbered.
const maxRewound = 1024

// originPlan plans the rollout from its start (see above). Nil when the
// waves cannot be numbered: a Deployment its controller rolls (its waves
// scale ReplicaSets), no previous revision known (a new workload), too
// many replicas without a pod, or an origin plan with no pod to update.
func (e *Executor) originPlan(ctx context.Context, snap *snapshot.Snapshot, r *facts.Rollout, wp plan.WorkloadPlan, now time.Time) (*plan.WorkloadPlan, error) {
	if len(wp.Halted)+len(wp.Denied) > 0 || scalesReplicaSets(wp) {
		return nil, nil
	}
	rr, ok := rewind(snap, r, wp)
	if !ok {
		return nil, nil
	}
	res, err := plan.Build(ctx, []*facts.Rollout{rr}, e.opts.Engine, plan.Metadata{Now: now.UTC().Format(time.RFC3339)}, e.opts.PlanOptions)
	if err != nil {
		return nil, fmt.Errorf("%s: plan the rollout from its start (to number its waves): %w", e.opts.Target, err)
	}
	if len(res.Plan.Workloads) == 0 {
		return nil, nil
	}
	o := res.Plan.Workloads[0]
	if len(o.Halted)+len(o.Denied) > 0 || scalesReplicaSets(o) || updates(o.Waves) == 0 {
		return nil, nil
	}
	return &o, nil
}

func scalesReplicaSets(wp plan.WorkloadPlan) bool {
	for _, w := range wp.Waves {
		for _, a := range w.Actions {
			if a.Type == plan.ActionScaleRS {
				return true
			}
		}
	}
	return false
}

// updates counts the pods the waves update (in place or recreated): a
// Delete moves no pod to the update revision, a node action is no pod.
func updates(ws []plan.Wave) int {
	n := 0
	for _, w := range ws {
		n += waveUpdates(w)
	}
	return n
}

func waveUpdates(w plan.Wave) int {
	n := 0
	for _, a := range w.Actions {
		if a.Pod != "" && (a.Type == plan.ActionInPlace || a.Type == plan.ActionRecreate) {
			n++
		}
	}
	return n
}

// rewind is the rollout as it stood before its first pod moved (see
// above), from r, a read's facts, and wp, its plan (the pods it holds stay
// as they are). False when it cannot be told.
func rewind(snap *snapshot.Snapshot, r *facts.Rollout, wp plan.WorkloadPlan) (*facts.Rollout, bool) {
	w := r.Workload
	if w.Kind != "StatefulSet" && w.Kind != "DaemonSet" && w.Kind != "Deployment" {
		return nil, false
	}
	held := map[string]bool{}
	for _, h := range wp.Held {
		held[h.Pod] = true
	}
	prev, changes, ok := previousChanges(snap, r, held)
	if !ok {
		return nil, false
	}
	rr := *r
	rr.Pods = nil
	rr.Nodes = append([]facts.Node{}, r.Nodes...)
	old := func(p facts.Pod) facts.Pod {
		if held[p.Name] {
			return p
		}
		if p.Updated || p.Revision == w.UpdateRevision {
			p.Updated, p.Revision, p.Changes = false, prev, changes
		}
		p.Terminating, p.Terminal, p.Phase, p.Scheduled = false, false, string(corev1.PodRunning), true
		p.Ready, p.Available, p.UnavailableSeconds = true, true, 0
		p.ReadySeconds = max(p.ReadySeconds, int64(w.MinReadySeconds))
		p.Restarts, p.SidecarRestarts = 0, 0
		return p
	}
	switch w.Kind {
	case "StatefulSet":
		have := map[int]bool{}
		for _, p := range r.Pods {
			rr.Pods = append(rr.Pods, old(p))
			have[p.Index] = true
		}
		var missing []int
		for i := 0; i < w.Replicas && len(missing) <= maxRewound; i++ {
			if !have[i] {
				missing = append(missing, i)
			}
		}
		if len(missing) > maxRewound {
			return nil, false
		}
		for _, i := range missing {
			ord := i + w.OrdinalsStart
			rr.Pods = append(rr.Pods, old(facts.Pod{Name: fmt.Sprintf("%s-%d", w.Name, ord), Ordinal: ord, Index: i, Owner: w.Name,
				Revision: w.UpdateRevision, Labels: map[string]string{}, PDBs: []string{}, ReadySeconds: -1}))
		}
	case "DaemonSet":
		// One pod on each node that should run it: the node's oldest pod
		// (a replacement beside it, a pod not yet bound, are the
		// rollout's motion), or one put back.
		onNode := map[string]facts.Pod{}
		for _, p := range r.Pods {
			if p.Node == "" {
				continue
			}
			if q, ok := onNode[p.Node]; !ok || (q.Updated && !p.Updated) || (q.Terminating && !p.Terminating && q.Updated == p.Updated) {
				onNode[p.Node] = p
			}
		}
		for i := range rr.Nodes {
			n := &rr.Nodes[i]
			p, ok := onNode[n.Name]
			if !n.ShouldRun && !ok {
				continue
			}
			if !ok {
				p = facts.Pod{Name: fmt.Sprintf("%s-%s", w.Name, n.Name), Node: n.Name, Zone: n.Zone, Ordinal: -1, Index: -1, Owner: w.Name,
					Revision: w.UpdateRevision, Labels: map[string]string{}, PDBs: []string{}, ReadySeconds: -1}
			}
			rr.Pods = append(rr.Pods, old(p))
			n.Pods = 1
			if n.CordonedBy == w.Namespace+"/"+w.Name {
				n.Unschedulable, n.CordonedBy = false, ""
			}
		}
	case "Deployment":
		// Pods are replaced under new names: the active ones, then
		// terminating ones up to spec.replicas.
		for _, p := range r.Pods {
			if !p.Terminating && !p.Terminal {
				rr.Pods = append(rr.Pods, old(p))
			}
		}
		for _, p := range r.Pods {
			if (p.Terminating || p.Terminal) && len(rr.Pods) < w.Replicas {
				rr.Pods = append(rr.Pods, old(p))
			}
		}
	}
	for i := range rr.Pods {
		rr.Pods[i].Colocated = 0
	}
	setColocated(rr.Pods)
	return &rr, true
}

// setColocated counts the active pods on each pod's node (facts.Pod.Colocated).
func setColocated(pods []facts.Pod) {
	per := map[string]int{}
	for _, p := range pods {
		if p.Node != "" {
			per[p.Node]++
		}
	}
	for i := range pods {
		if pods[i].Node != "" {
			pods[i].Colocated = per[pods[i].Node]
		}
	}
}

// previousName is the revision the rollout rolls from.
func previousName(r *facts.Rollout) string {
	if r.Workload.CurrentRevision != r.Workload.UpdateRevision {
		return r.Workload.CurrentRevision
	}
	return ""
}

// previousChanges names the revision the rollout rolls from and what it
// changes in a pod of it: the facts' changes of that revision, else of a
// pod not yet updated, else (every pod updated) the diff of the workload's
// previous ControllerRevision with its template. False when none is known.
func previousChanges(snap *snapshot.Snapshot, r *facts.Rollout, held map[string]bool) (string, []facts.Change, bool) {
	w := r.Workload
	prev := previousName(r)
	if prev != "" {
		for _, rv := range r.Revisions {
			if rv.Name == prev {
				return prev, rv.Changes, true
			}
		}
	}
	for _, p := range r.Pods {
		if !p.Updated && !held[p.Name] && !p.Terminating && !p.Terminal && (prev == "" || p.Revision == prev) {
			return p.Revision, p.Changes, true
		}
	}
	if w.Kind == "Deployment" {
		// Updated in place, its pods' ReplicaSet keeps the template it
		// rolls from until the rollout completes.
		for _, d := range snap.Deployments {
			if d.Namespace != w.Namespace || d.Name != w.Name || prev == "" {
				continue
			}
			for _, rs := range snap.ReplicaSets {
				if rs.Namespace == w.Namespace && rs.Name == prev {
					if c := facts.Diff(live.StripHash(&rs.Spec.Template), live.StripHash(&d.Spec.Template)); len(c) > 0 {
						return prev, c, true
					}
				}
			}
		}
		return "", nil, false
	}
	var tmpl *corev1.PodTemplateSpec
	switch w.Kind {
	case "StatefulSet":
		for _, s := range snap.StatefulSets {
			if s.Namespace == w.Namespace && s.Name == w.Name {
				tmpl = &s.Spec.Template
			}
		}
	case "DaemonSet":
		for _, d := range snap.DaemonSets {
			if d.Namespace == w.Namespace && d.Name == w.Name {
				tmpl = &d.Spec.Template
			}
		}
	}
	if tmpl == nil {
		return "", nil, false
	}
	// The revision it rolls from, else the newest before the update one.
	var from *corev1.PodTemplateSpec
	var best int64 = -1
	name := ""
	for _, cr := range snap.ControllerRevisions {
		if cr.Namespace != w.Namespace || cr.Name == w.UpdateRevision {
			continue
		}
		owned := false
		for _, o := range cr.OwnerReferences {
			owned = owned || (o.Controller != nil && *o.Controller && o.Kind == w.Kind && o.Name == w.Name && string(o.UID) == w.UID)
		}
		if !owned || (prev != "" && cr.Name != prev) || cr.Revision <= best {
			continue
		}
		t, err := facts.RevisionTemplate(cr)
		if err != nil {
			continue // an unreadable revision: not the one to number against
		}
		from, best, name = t, cr.Revision, cr.Name
	}
	if from == nil {
		return "", nil, false
	}
	return name, facts.Diff(from, tmpl), true
}
