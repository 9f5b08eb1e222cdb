package facts

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/rollplan/rollplan/internal/plural"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// ---- Deployment ----

func (b *builder) deployment(d *appsv1.Deployment) (*Rollout, error) {
	id := fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name)
	r, err := b.base("Deployment", &d.ObjectMeta, &d.Spec.Template)
	if err != nil {
		return nil, err
	}
	w := &r.Workload
	w.Replicas = 1
	if d.Spec.Replicas != nil {
		w.Replicas = int(*d.Spec.Replicas)
	}
	if w.Replicas < 0 {
		return nil, fmt.Errorf("%s: spec.replicas %d must be greater than or equal to 0", id, w.Replicas)
	}
	w.MinReadySeconds = int(d.Spec.MinReadySeconds)
	w.Paused = d.Spec.Paused
	if d.Spec.ProgressDeadlineSeconds != nil {
		w.ProgressDeadlineSeconds = int(*d.Spec.ProgressDeadlineSeconds)
	}
	st := &w.Strategy
	st.Type = string(d.Spec.Strategy.Type)
	if st.Type == "" {
		st.Type = string(appsv1.RollingUpdateDeploymentStrategyType)
	}
	switch st.Type {
	case string(appsv1.RollingUpdateDeploymentStrategyType):
		def := intstr.FromString("25%")
		surge, unavail := &def, &def
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			surge, unavail = ru.MaxSurge, ru.MaxUnavailable
			if surge == nil {
				surge = &def
			}
			if unavail == nil {
				unavail = &def
			}
		}
		if st.MaxSurge, err = IntOrPercent(surge, id+": spec.strategy.rollingUpdate.maxSurge", false); err != nil {
			return nil, err
		}
		if st.MaxUnavailable, err = IntOrPercent(unavail, id+": spec.strategy.rollingUpdate.maxUnavailable", true); err != nil {
			return nil, err
		}
		st.MaxSurgeSource, st.MaxUnavailableSource = "spec.strategy.rollingUpdate.maxSurge", "spec.strategy.rollingUpdate.maxUnavailable"
	case string(appsv1.RecreateDeploymentStrategyType):
	default:
		return nil, fmt.Errorf("%s: spec.strategy.type %q: want RollingUpdate or Recreate", id, st.Type)
	}

	// ReplicaSets owned by the Deployment, oldest first (ReplicaSetsByCreationTimestamp).
	var rss []*appsv1.ReplicaSet
	for _, rs := range b.snap.ReplicaSets {
		if rs.Namespace == d.Namespace && ownedBy(rs, "Deployment", d.Name, d.UID) {
			rss = append(rss, rs)
		}
	}
	sort.SliceStable(rss, func(i, j int) bool {
		a, c := rss[i], rss[j]
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		return a.Name < c.Name
	})
	var newRS *appsv1.ReplicaSet
	want := stripRevisionLabels(&d.Spec.Template)
	for _, rs := range rss {
		if equality.Semantic.DeepEqual(stripRevisionLabels(&rs.Spec.Template), want) {
			newRS = rs
			break
		}
	}
	if newRS != nil {
		w.UpdateRevision = newRS.Name
	} else {
		// The name the controller will give the new ReplicaSet. A
		// ReplicaSet of that name with another template (one rollplan
		// updated in place keeps its name) is a hash collision: upstream
		// bumps status.collisionCount and hashes again.
		taken := map[string]bool{}
		for _, rs := range rss {
			taken[rs.Name] = true
		}
		var collisions int32
		if d.Status.CollisionCount != nil {
			collisions = *d.Status.CollisionCount
		}
		for {
			count := &collisions
			if d.Status.CollisionCount == nil && collisions == 0 {
				count = nil
			}
			hash := ComputeHash(&d.Spec.Template, count, b.version)
			name := d.Name
			if max := 253 - 1 - len(hash); len(name) > max {
				name = name[:max]
			}
			w.UpdateRevision = name + "-" + hash
			if !taken[w.UpdateRevision] || collisions > 1000 {
				break
			}
			collisions++
		}
	}
	w.CurrentRevision = w.UpdateRevision
	bestRev := -1
	templates := map[string]*corev1.PodTemplateSpec{}
	minReady := map[string]int32{}
	for _, rs := range rss {
		templates[rs.Name] = &rs.Spec.Template
		minReady[rs.Name] = rs.Spec.MinReadySeconds
		rev, _ := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
		spec := int32(1)
		if rs.Spec.Replicas != nil {
			spec = *rs.Spec.Replicas
		}
		isNew := rs == newRS
		if !isNew && spec > 0 && rev > bestRev {
			bestRev, w.CurrentRevision = rev, rs.Name
		}
		f := ReplicaSet{
			Name: rs.Name, Hash: rs.Labels["pod-template-hash"], Revision: rev, Replicas: int(spec),
			AvailableReplicas: int(rs.Status.AvailableReplicas), MinReadySeconds: int(rs.Spec.MinReadySeconds),
			New: isNew, Created: rs.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"),
		}
		for _, p := range b.ownedPods("ReplicaSet", rs.Namespace, rs.Name, rs.UID) {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				f.Pods++
			}
		}
		r.ReplicaSets = append(r.ReplicaSets, f)
	}
	// rollplan updates a managed Deployment's pods in place within their
	// ReplicaSet (docs/deployment-in-place.md): such a pod runs the update
	// revision once its spec holds every change (RunsChanges).
	inPlace := w.Managed && w.PodUpdatePolicy != "Recreate"
	owned := make([][]*corev1.Pod, len(rss))
	n := 0
	for i, rs := range rss {
		owned[i] = sortPods(b.ownedPods("ReplicaSet", rs.Namespace, rs.Name, rs.UID))
		n += len(owned[i])
	}
	r.Pods = make([]Pod, 0, n)
	for i, rs := range rss {
		updated := rs.Name == w.UpdateRevision
		var changes []Change // one diff per ReplicaSet, shared by its pods
		if !updated {
			changes = Diff(templates[rs.Name], &d.Spec.Template)
		}
		for _, p := range owned[i] {
			pc := podCtx{minReady: minReady[rs.Name], revision: rs.Name, updated: updated, owner: rs.Name, changes: changes}
			if inPlace && !updated && len(changes) > 0 && RunsChanges(p, &d.Spec.Template, changes) {
				pc.revision, pc.updated, pc.changes = w.UpdateRevision, true, nil
			}
			// A pod of the update revision's ReplicaSet that runs other
			// images than its template was updated in place to a revision
			// since rolled back (undo of a broken image): it is not at
			// the update revision until it runs the template's images.
			if inPlace && updated {
				if drift := imageDrift(p, templates[rs.Name]); len(drift) > 0 {
					pc.updated, pc.changes = false, drift
					if rev := inPlaceRevision(p); rev != "" && rev != w.UpdateRevision {
						pc.revision = rev
					}
				}
			}
			r.Pods = append(r.Pods, b.pod(p, pc))
		}
	}
	sort.Slice(r.Pods, func(i, j int) bool { return r.Pods[i].Name < r.Pods[j].Name })
	if err := uniquePods(id, r.Pods); err != nil {
		return nil, err
	}
	setColocated(r.Pods)
	if len(rss) == 0 && d.Status.Replicas > 0 {
		r.Warnings = append(r.Warnings, incomplete(id, "ReplicaSets", d.Status.Replicas, "status.replicas", "kubectl get rs"))
	} else {
		r.Warnings = appendIfNoPods(r.Warnings, id, len(r.Pods), d.Status.Replicas, "status.replicas")
	}
	return r, nil
}

// incomplete: a workload whose status counts pods the snapshot does not
// hold was captured in part (one kind left out of `kubectl get`, or a
// filter); the plan is made from what the snapshot holds and says so.
func incomplete(id, what string, count int32, field, capture string) string {
	return fmt.Sprintf("%s: the snapshot holds none of its %s, yet its %s is %d: the plan treats them as absent; capture them too (rollplan snapshot, or %s -o yaml)", id, what, field, count, capture)
}

func appendIfNoPods(warnings []string, id string, pods int, count int32, field string) []string {
	if pods > 0 || count <= 0 {
		return warnings
	}
	return append(warnings, incomplete(id, "pods", count, field, "kubectl get pods"))
}

func uniquePods(id string, pods []Pod) error {
	for i := 1; i < len(pods); i++ {
		if pods[i].Name == pods[i-1].Name {
			return fmt.Errorf("%s: two pods are named %s", id, pods[i].Name)
		}
	}
	return nil
}

// ---- StatefulSet ----

func (b *builder) statefulSet(set *appsv1.StatefulSet) (*Rollout, error) {
	id := fmt.Sprintf("StatefulSet %s/%s", set.Namespace, set.Name)
	r, err := b.base("StatefulSet", &set.ObjectMeta, &set.Spec.Template)
	if err != nil {
		return nil, err
	}
	w := &r.Workload
	w.Replicas = 1
	if set.Spec.Replicas != nil {
		w.Replicas = int(*set.Spec.Replicas)
	}
	if w.Replicas < 0 {
		return nil, fmt.Errorf("%s: spec.replicas %d must be greater than or equal to 0", id, w.Replicas)
	}
	w.MinReadySeconds = int(set.Spec.MinReadySeconds)
	w.PodManagementPolicy = string(set.Spec.PodManagementPolicy)
	if w.PodManagementPolicy == "" {
		w.PodManagementPolicy = string(appsv1.OrderedReadyPodManagement)
	}
	if set.Spec.Ordinals != nil {
		w.OrdinalsStart = int(set.Spec.Ordinals.Start)
	}
	st := &w.Strategy
	st.Type = string(set.Spec.UpdateStrategy.Type)
	if st.Type == "" {
		st.Type = string(appsv1.RollingUpdateStatefulSetStrategyType)
	}
	ru := set.Spec.UpdateStrategy.RollingUpdate
	switch st.Type {
	case string(appsv1.RollingUpdateStatefulSetStrategyType):
		st.RollingUpdateSet = ru != nil
		st.PartitionSource = "default 0"
		if ru != nil && ru.Partition != nil {
			if *ru.Partition < 0 {
				return nil, fmt.Errorf("%s: spec.updateStrategy.rollingUpdate.partition %d must be greater than or equal to 0", id, *ru.Partition)
			}
			st.Partition, st.PartitionSource = int(*ru.Partition), "spec.updateStrategy.rollingUpdate.partition"
		}
		var mu any
		if ru != nil && ru.MaxUnavailable != nil {
			if mu, err = IntOrPercent(ru.MaxUnavailable, id+": spec.updateStrategy.rollingUpdate.maxUnavailable", true); err != nil {
				return nil, err
			}
			if Scale(mu, 100, true) == 0 {
				return nil, fmt.Errorf("%s: spec.updateStrategy.rollingUpdate.maxUnavailable %v: must be at least 1 (with 0 no pod could ever update; the API server rejects it)", id, mu)
			}
			st.MaxUnavailable, st.MaxUnavailableSource = mu, "spec.updateStrategy.rollingUpdate.maxUnavailable"
		} else {
			// Unset: nil, which the policies take as 1 and word so.
			st.MaxUnavailableSource = "spec.updateStrategy.rollingUpdate.maxUnavailable"
		}
		if _, ok := w.Annotations[AnnMaxUnavailable]; ok && mu != nil {
			_ = annotationMaxUnavailable(r, id, mu, st.MaxUnavailableSource, true, true)
		}
		if v, ok := w.Annotations[AnnPartition]; ok && v != strconv.Itoa(st.Partition) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: annotation %s=%q ignored: %s=%d wins", id, AnnPartition, v, st.PartitionSource, st.Partition))
		}
	case string(appsv1.OnDeleteStatefulSetStrategyType):
		if ru != nil {
			return nil, fmt.Errorf("%s: spec.updateStrategy.rollingUpdate may only be set when spec.updateStrategy.type is RollingUpdate", id)
		}
		if w.Managed {
			if err := annotationMaxUnavailable(r, id, nil, "", false, true); err != nil {
				return nil, err
			}
			if Scale(st.MaxUnavailable, 100, true) == 0 {
				return nil, fmt.Errorf("%s: annotation %s=%v: must be at least 1 (with 0 no pod could ever update)", id, AnnMaxUnavailable, st.MaxUnavailable)
			}
			st.PartitionSource = "default 0 (annotation " + AnnPartition + " not set)"
			if v, ok := w.Annotations[AnnPartition]; ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("%s: annotation %s=%q: want a whole number greater than or equal to 0", id, AnnPartition, v)
				}
				st.Partition, st.PartitionSource = n, "annotation "+AnnPartition
			}
		}
	case string(appsv1.RecreateStatefulSetStrategyType):
		// v1.37's alpha strategy (gate StatefulSetRecreateStrategy): the
		// plan says whether this version's controller takes it.
		if ru != nil {
			return nil, fmt.Errorf("%s: spec.updateStrategy.rollingUpdate may only be set when spec.updateStrategy.type is RollingUpdate", id)
		}
		if w.Managed {
			return nil, fmt.Errorf("%s: spec.updateStrategy.type Recreate on a managed StatefulSet: rollplan drives managed StatefulSets through OnDelete; set updateStrategy.type OnDelete, or remove annotation %s", id, AnnManaged)
		}
	default:
		return nil, fmt.Errorf("%s: spec.updateStrategy.type %q: want RollingUpdate, OnDelete or Recreate (v1.37)", id, st.Type)
	}

	revs, err := b.revisions("StatefulSet", &set.ObjectMeta)
	if err != nil {
		return nil, err
	}
	if m := matchingRevision(revs, &set.Spec.Template); m != nil {
		w.UpdateRevision = m.name
	} else if w.UpdateRevision, err = statefulSetRevisionName(set); err != nil {
		return nil, fmt.Errorf("%s: compute the update revision: %w", id, err)
	}
	w.CurrentRevision = set.Status.CurrentRevision
	if w.CurrentRevision == "" {
		w.CurrentRevision = w.UpdateRevision
	}
	byName := map[string]*corev1.PodTemplateSpec{}
	for _, rv := range revs {
		byName[rv.name] = rv.template
	}
	diffs := map[string][]Change{} // one diff per revision, shared by its pods
	pods := sortPods(b.ownedPods("StatefulSet", set.Namespace, set.Name, set.UID))
	r.Pods = make([]Pod, 0, len(pods))
	for _, p := range pods {
		rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
		updated := rev == w.UpdateRevision
		var changes []Change
		if !updated {
			if from := byName[rev]; from != nil {
				if _, ok := diffs[rev]; !ok {
					diffs[rev] = Diff(from, &set.Spec.Template)
				}
				changes = diffs[rev]
			} else {
				changes = changesFor(r, p, nil, &set.Spec.Template, rev)
			}
		}
		r.Pods = append(r.Pods, b.pod(p, podCtx{minReady: set.Spec.MinReadySeconds, requireRun: true, revision: rev, updated: updated, owner: set.Name, changes: changes, sts: true, ordinalStart: w.OrdinalsStart}))
	}
	setColocated(r.Pods)
	r.Warnings = appendIfNoPods(r.Warnings, id, len(r.Pods), set.Status.Replicas, "status.replicas")
	return r, nil
}

// ---- DaemonSet ----

func (b *builder) daemonSet(ds *appsv1.DaemonSet) (*Rollout, error) {
	id := fmt.Sprintf("DaemonSet %s/%s", ds.Namespace, ds.Name)
	r, err := b.base("DaemonSet", &ds.ObjectMeta, &ds.Spec.Template)
	if err != nil {
		return nil, err
	}
	w := &r.Workload
	w.MinReadySeconds = int(ds.Spec.MinReadySeconds)
	st := &w.Strategy
	st.Type = string(ds.Spec.UpdateStrategy.Type)
	if st.Type == "" {
		st.Type = string(appsv1.RollingUpdateDaemonSetStrategyType)
	}
	switch st.Type {
	case string(appsv1.RollingUpdateDaemonSetStrategyType):
		one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
		mu, ms := &one, &zero
		if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			if ru.MaxUnavailable != nil {
				mu = ru.MaxUnavailable
			}
			if ru.MaxSurge != nil {
				ms = ru.MaxSurge
			}
		}
		muv, err := IntOrPercent(mu, id+": spec.updateStrategy.rollingUpdate.maxUnavailable", true)
		if err != nil {
			return nil, err
		}
		if st.MaxSurge, err = IntOrPercent(ms, id+": spec.updateStrategy.rollingUpdate.maxSurge", true); err != nil {
			return nil, err
		}
		st.MaxSurgeSource = "spec.updateStrategy.rollingUpdate.maxSurge"
		if err := annotationMaxUnavailable(r, id, muv, "spec.updateStrategy.rollingUpdate.maxUnavailable", true, true); err != nil {
			return nil, err
		}
		if Scale(muv, 100, true) != 0 && Scale(st.MaxSurge, 100, true) != 0 {
			return nil, fmt.Errorf("%s: spec.updateStrategy.rollingUpdate.maxSurge %v may not be set when maxUnavailable (%v) is non-zero", id, st.MaxSurge, muv)
		}
	case string(appsv1.OnDeleteDaemonSetStrategyType):
		if w.Managed {
			if err := annotationMaxUnavailable(r, id, nil, "", false, true); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("%s: spec.updateStrategy.type %q: want RollingUpdate or OnDelete", id, st.Type)
	}

	revs, err := b.revisions("DaemonSet", &ds.ObjectMeta)
	if err != nil {
		return nil, err
	}
	hashOf := func(rv *revision) string {
		if h := rv.cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
			return h
		}
		return rv.name // legacy revisions: the name is the hash (§3.9)
	}
	var updateHash string
	if m := matchingRevision(revs, &ds.Spec.Template); m != nil {
		updateHash, w.UpdateRevision = hashOf(m), m.name
	} else {
		// The revision the controller will create. One of that name with
		// another template is a hash collision: upstream snapshot() bumps
		// status.collisionCount (nil counts as 0) and hashes again, so
		// pods of the colliding revision are not taken as updated.
		taken := map[string]bool{}
		for _, rv := range revs {
			taken[rv.name] = true
		}
		count := ds.Status.CollisionCount
		for {
			updateHash = ComputeHash(&ds.Spec.Template, count, b.version)
			w.UpdateRevision = ds.Name + "-" + updateHash
			if !taken[w.UpdateRevision] || (count != nil && *count > 1000) {
				break
			}
			next := int32(1)
			if count != nil {
				next = *count + 1
			}
			count = &next
		}
	}
	byHash := map[string]*revision{}
	for i := range revs {
		byHash[hashOf(&revs[i])] = &revs[i]
	}
	generation := ds.Annotations["deprecated.daemonset.template.generation"]

	pods := sortPods(b.ownedPods("DaemonSet", ds.Namespace, ds.Name, ds.UID))
	r.Pods = make([]Pod, 0, len(pods))
	currentBest := int64(-1)
	diffs := map[string][]Change{} // one diff per revision, shared by its pods
	for _, p := range pods {
		h := p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		updated := h == updateHash || (generation != "" && p.Labels["pod-template-generation"] == generation)
		rev := h
		var changes []Change
		if rv := byHash[h]; rv != nil {
			rev = rv.name
			if !updated && rv.cr.Revision > currentBest {
				currentBest, w.CurrentRevision = rv.cr.Revision, rv.name
			}
		}
		switch rv := byHash[h]; {
		case updated:
			rev = w.UpdateRevision
		case rv != nil:
			if _, ok := diffs[rev]; !ok {
				diffs[rev] = Diff(rv.template, &ds.Spec.Template)
			}
			changes = diffs[rev]
		default:
			changes = changesFor(r, p, nil, &ds.Spec.Template, rev)
		}
		r.Pods = append(r.Pods, b.pod(p, podCtx{minReady: ds.Spec.MinReadySeconds, revision: rev, updated: updated, owner: ds.Name, changes: changes}))
	}
	if w.CurrentRevision == "" {
		w.CurrentRevision = w.UpdateRevision
	}
	setColocated(r.Pods)
	r.Warnings = appendIfNoPods(r.Warnings, id, len(r.Pods), ds.Status.CurrentNumberScheduled+ds.Status.NumberMisscheduled, "status.currentNumberScheduled + numberMisscheduled")

	// Nodes (§3.3): which should run a daemon pod.
	perNode := map[string]int{}
	for _, p := range r.Pods {
		if !p.Terminating && p.Node != "" {
			perNode[p.Node]++
		}
	}
	if len(b.snap.Nodes) == 0 {
		w.Replicas = int(ds.Status.DesiredNumberScheduled)
		if w.Replicas == 0 {
			w.Replicas = len(perNode)
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: the snapshot has no Node objects: %s assumed from the DaemonSet status and its pods", id, plural.Count(w.Replicas, "node", "nodes")))
		return r, nil
	}
	for _, n := range b.snap.Nodes {
		run, cont := shouldRunDaemonPod(n, ds)
		if run {
			w.Replicas++
		}
		r.Nodes = append(r.Nodes, Node{Name: n.Name, Zone: n.Labels[corev1.LabelTopologyZone], ShouldRun: run, ShouldContinueRunning: cont, Pods: perNode[n.Name]})
	}
	return r, nil
}

// Tolerations the DaemonSet controller adds to every daemon pod (§3.3).
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// shouldRunDaemonPod is upstream NodeShouldRunDaemonPod: (shouldRun, shouldContinueRunning).
func shouldRunDaemonPod(node *corev1.Node, ds *appsv1.DaemonSet) (bool, bool) {
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	pod.Spec.NodeName = node.Name
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false, false
	}
	tolerations := append(append([]corev1.Toleration{}, spec.Tolerations...), daemonTolerations(spec.HostNetwork)...)
	logger := klog.Background()
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, false)
	if !untolerated {
		return true, true
	}
	_, untoleratedNoExecute := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return false, !untoleratedNoExecute
}

// PhaseOrdinal is upstream's podPhaseToOrdinal, the second key of the
// ReplicaSet deletion ranking (reference §2.10): Pending 0 < Unknown 1 <
// Running 2, any other phase 0. The default strategy's order key and the
// simulator's ranking both use it.
func PhaseOrdinal(phase string) int {
	switch phase {
	case "Unknown":
		return 1
	case "Running":
		return 2
	}
	return 0
}
