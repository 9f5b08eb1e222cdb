package facts

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Workload annotations (DESIGN.md).
const (
	AnnManaged = "rollplan.dev/managed"
	// AnnPaused ("true"): `rollplan pause` stopped the rollout after the
	// actions in flight; `rollplan resume` removes it.
	AnnPaused          = "rollplan.dev/paused"
	AnnPodUpdatePolicy = "rollplan.dev/pod-update-policy"
	AnnMaxUnavailable  = "rollplan.dev/max-unavailable"
	AnnPartition       = "rollplan.dev/partition"
	AnnPolicy          = "rollplan.dev/policy"
	// AnnRolloutState: the controller's record of a managed rollout (JSON;
	// see controller.State), written by server-side apply under its own
	// field manager.
	AnnRolloutState = "rollplan.dev/rollout-state"
	// AnnAnalysis: the executor's record of the analysis gate the rollout
	// waits at (JSON; see executor.AnalysisState), written by server-side
	// apply under its own field manager.
	AnnAnalysis         = "rollplan.dev/analysis"
	AnnProgressDeadline = "rollplan.dev/progress-deadline-seconds"
)

// Options steer Build.
type Options struct {
	Now time.Time
	// KubernetesVersion: the version planned for; zero means
	// kubeversion.Newest.
	KubernetesVersion kubeversion.Version
	// FeatureGates override the version's defaults, one by one.
	FeatureGates map[string]bool
}

// Build computes the facts of every workload in the snapshot, sorted by
// kind, namespace and name. Any workload whose facts cannot be built fails
// the whole call (the first in snapshot order, Deployments, DaemonSets, then
// StatefulSets): callers that can report a workload's error beside the
// others' plans use BuildEach.
func Build(s *snapshot.Snapshot, o Options) ([]*Rollout, error) {
	out, failed, err := build(s, o)
	if err != nil {
		return nil, err
	}
	if len(failed) > 0 {
		return nil, failed[0]
	}
	sortRollouts(out)
	return out, nil
}

// WorkloadError is the error of one workload whose facts cannot be built:
// an invalid annotation, strategy or ControllerRevision of its own. It
// belongs to that workload alone; the other workloads' facts do not depend
// on it (a PodDisruptionBudget counts another workload's pods from the
// snapshot, not from that workload's facts).
type WorkloadError struct {
	Kind, Namespace, Name string
	// Err names the object and the field; its message starts with the
	// workload ("DaemonSet default/agent: annotation ...").
	Err error
}

func (e *WorkloadError) Error() string { return e.Err.Error() }

func (e *WorkloadError) Unwrap() error { return e.Err }

// BuildEach is Build where one workload's error does not fail the others:
// it returns the facts of every workload that has them (sorted as Build
// sorts them) and the errors of the others (sorted the same way). The
// error is for what belongs to no single workload (the feature gates); it
// fails the whole call.
func BuildEach(s *snapshot.Snapshot, o Options) ([]*Rollout, []*WorkloadError, error) {
	out, failed, err := build(s, o)
	if err != nil {
		return nil, nil, err
	}
	sortRollouts(out)
	sort.SliceStable(failed, func(i, j int) bool {
		return workloadLess(failed[i].Kind, failed[i].Namespace, failed[i].Name, failed[j].Kind, failed[j].Namespace, failed[j].Name)
	})
	return out, failed, nil
}

// build computes the facts of every workload, in snapshot order, with the
// errors of the workloads that have none.
func build(s *snapshot.Snapshot, o Options) ([]*Rollout, []*WorkloadError, error) {
	b := &builder{snap: s, opts: o, now: o.Now, version: o.KubernetesVersion.Or(kubeversion.Newest)}
	var err error
	if b.gates, err = kubeversion.WithOverrides(b.version, o.FeatureGates); err != nil {
		return nil, nil, err
	}
	b.index()
	var out []*Rollout
	var failed []*WorkloadError
	add := func(kind string, meta *metav1.ObjectMeta, selector *metav1.LabelSelector, r *Rollout, err error) {
		if err != nil {
			failed = append(failed, workloadError(kind, meta, err))
			return
		}
		r.Warnings = append(r.Warnings, b.orphans(kind, meta, selector)...)
		out = append(out, r)
	}
	for _, d := range s.Deployments {
		r, err := b.deployment(d)
		add("Deployment", &d.ObjectMeta, d.Spec.Selector, r, err)
	}
	for _, ds := range s.DaemonSets {
		r, err := b.daemonSet(ds)
		add("DaemonSet", &ds.ObjectMeta, ds.Spec.Selector, r, err)
	}
	for _, set := range s.StatefulSets {
		r, err := b.statefulSet(set)
		add("StatefulSet", &set.ObjectMeta, set.Spec.Selector, r, err)
	}
	for _, r := range out {
		b.pdbs(r)
		setRevisions(r)
		b.nodeFacts(r)
	}
	return out, failed, nil
}

// orphans warns about each pod of the workload's namespace that its
// spec.selector matches but that no controller owns (no ownerReference with
// controller: true): the facts take a workload's pods by owner, so such a
// pod is neither planned nor counted, in budgets or in the summary.
func (b *builder) orphans(kind string, meta *metav1.ObjectMeta, selector *metav1.LabelSelector) []string {
	if selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() {
		return nil // the API server refuses both; nothing a pod could match
	}
	var out []string
	for _, p := range b.unowned {
		if p.Namespace != meta.Namespace || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		out = append(out, fmt.Sprintf("pod %s/%s matches spec.selector of %s %s/%s but no controller owns it (no ownerReference with controller: true): it is neither planned nor counted", p.Namespace, p.Name, kind, meta.Namespace, meta.Name))
	}
	return out
}

// workloadError names the workload in front of err, unless err names it
// already (the workload checks do; a ControllerRevision's decoding names
// the revision only).
func workloadError(kind string, meta *metav1.ObjectMeta, err error) *WorkloadError {
	id := fmt.Sprintf("%s %s/%s", kind, meta.Namespace, meta.Name)
	if !strings.HasPrefix(err.Error(), id+":") {
		err = fmt.Errorf("%s: %w", id, err)
	}
	return &WorkloadError{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Err: err}
}

func sortRollouts(out []*Rollout) {
	sort.SliceStable(out, func(i, j int) bool {
		a, c := out[i].Workload, out[j].Workload
		return workloadLess(a.Kind, a.Namespace, a.Name, c.Kind, c.Namespace, c.Name)
	})
}

// workloadLess orders workloads by kind, namespace and name.
func workloadLess(k1, ns1, n1, k2, ns2, n2 string) bool {
	if k1 != k2 {
		return k1 < k2
	}
	if ns1 != ns2 {
		return ns1 < ns2
	}
	return n1 < n2
}

type builder struct {
	snap    *snapshot.Snapshot
	opts    Options
	now     time.Time
	version kubeversion.Version
	// gates: the version's feature gates with the overrides applied;
	// every rollout gets its own copy.
	gates map[string]bool
	// podsByOwner: controller owner UID (or "Kind/ns/name" when the UID is empty) → pods.
	podsByOwner map[string][]*corev1.Pod
	// unowned: the pods without a controller, by name (orphans).
	unowned []*corev1.Pod
	// nodes by name. The facts read a Node's labels, taints,
	// spec.unschedulable, AnnCordonedBy and its maintenance conditions
	// (Maintenance) only; the gate rebuilds its cached states on a change
	// of those (gate.nodeFactsChanged): keep both in step.
	nodes map[string]*corev1.Node
	// drainable: node → the pods a drain evicts (nodeFacts, built on first use).
	drainable map[string][]string
}

func (b *builder) index() {
	b.podsByOwner = map[string][]*corev1.Pod{}
	for _, p := range b.snap.Pods {
		ref := snapshot.ControllerOf(p)
		if ref == nil {
			b.unowned = append(b.unowned, p)
			continue
		}
		// Index by UID when the reference has one, and by name so that
		// snapshots without UIDs still resolve.
		if ref.UID != "" {
			b.podsByOwner["uid:"+string(ref.UID)] = append(b.podsByOwner["uid:"+string(ref.UID)], p)
		}
		k := ref.Kind + "/" + p.Namespace + "/" + ref.Name
		b.podsByOwner[k] = append(b.podsByOwner[k], p)
	}
	b.unowned = sortPods(b.unowned)
	b.nodes = map[string]*corev1.Node{}
	for _, n := range b.snap.Nodes {
		b.nodes[n.Name] = n
	}
}

// ownedPods returns the pods whose controller is the object: by UID when
// both sides have one, else by kind and name.
func (b *builder) ownedPods(kind, ns, name string, uid types.UID) []*corev1.Pod {
	if uid != "" {
		if ps, ok := b.podsByOwner["uid:"+string(uid)]; ok {
			return ps
		}
	}
	var out []*corev1.Pod
	for _, p := range b.podsByOwner[kind+"/"+ns+"/"+name] {
		if ref := snapshot.ControllerOf(p); ref != nil && (ref.UID == "" || uid == "" || ref.UID == uid) {
			out = append(out, p)
		}
	}
	return out
}

func ownedBy(obj metav1.Object, kind, name string, uid types.UID) bool {
	ref := snapshot.ControllerOf(obj)
	if ref == nil || ref.Kind != kind || ref.Name != name {
		return false
	}
	return ref.UID == "" || uid == "" || ref.UID == uid
}

func (b *builder) base(kind string, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) (*Rollout, error) {
	id := fmt.Sprintf("%s %s/%s", kind, meta.Namespace, meta.Name)
	if len(template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: spec.template.spec.containers is empty: a workload needs a pod template with at least one container", id)
	}
	r := &Rollout{
		SchemaVersion:     SchemaVersion,
		Now:               b.now.UTC().Format(time.RFC3339),
		KubernetesVersion: b.version.String(),
		FeatureGates:      maps.Clone(b.gates),
		Workload: Workload{
			Kind: kind, Namespace: meta.Namespace, Name: meta.Name, UID: string(meta.UID),
			Labels: nonNil(meta.Labels), Annotations: nonNil(meta.Annotations),
			PodUpdatePolicy:         "Recreate",
			ProgressDeadlineSeconds: 600,
		},
		Pods: []Pod{}, ReplicaSets: []ReplicaSet{}, Nodes: []Node{}, PDBs: []PDB{}, Warnings: []string{},
		Analysis: Analysis{Pods: []string{}, Measurements: []MeasurementResults{}},
	}
	w := &r.Workload
	ann := meta.Annotations
	if v, ok := ann[AnnManaged]; ok {
		switch v {
		case "true":
			w.Managed = true
		case "false":
		default:
			return nil, fmt.Errorf("%s: annotation %s=%q: want \"true\" or \"false\"", id, AnnManaged, v)
		}
	}
	if v, ok := ann[AnnPaused]; ok && v != "true" && v != "false" {
		return nil, fmt.Errorf("%s: annotation %s=%q: want \"true\" or \"false\" (rollplan pause and rollplan resume set it)", id, AnnPaused, v)
	}
	if v, ok := ann[AnnPodUpdatePolicy]; ok {
		switch v {
		case "Recreate", "InPlaceIfPossible", "InPlaceOnly":
			w.PodUpdatePolicy = v
		default:
			return nil, fmt.Errorf("%s: annotation %s=%q: want Recreate, InPlaceIfPossible or InPlaceOnly", id, AnnPodUpdatePolicy, v)
		}
	}
	w.Policy = ann[AnnPolicy]
	if v, ok := ann[AnnProgressDeadline]; ok && kind != "Deployment" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: annotation %s=%q: want a positive number of seconds", id, AnnProgressDeadline, v)
		}
		w.ProgressDeadlineSeconds = n
	}
	return r, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// DefaultSuffix ends a strategy value's source that names a field or an
// annotation left unset, whose value is then the default: policies word it
// "<name> unset: default N" (the budget's source).
const DefaultSuffix = " (default)"

// annotationMaxUnavailable applies rollplan.dev/max-unavailable where the
// native strategy has no field, and reports a differing annotation where it has.
func annotationMaxUnavailable(r *Rollout, id string, native any, nativeField string, hasField bool, max100 bool) error {
	s := &r.Workload.Strategy
	v, ok := r.Workload.Annotations[AnnMaxUnavailable]
	if hasField {
		s.MaxUnavailable, s.MaxUnavailableSource = native, nativeField
		if ok && fmt.Sprint(native) != v {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: annotation %s=%q ignored: %s=%v wins", id, AnnMaxUnavailable, v, nativeField, native))
		}
		return nil
	}
	if !ok {
		s.MaxUnavailable, s.MaxUnavailableSource = 1, "annotation "+AnnMaxUnavailable+DefaultSuffix
		return nil
	}
	parsed, err := ParseIntOrPercentString(v, fmt.Sprintf("%s: annotation %s", id, AnnMaxUnavailable), max100)
	if err != nil {
		return err
	}
	s.MaxUnavailable, s.MaxUnavailableSource = parsed, "annotation "+AnnMaxUnavailable
	return nil
}

// ---- pods ----

type podCtx struct {
	minReady     int32
	requireRun   bool // StatefulSet availability also needs phase Running
	revision     string
	updated      bool
	owner        string
	changes      []Change
	ordinalStart int
	sts          bool
}

func (b *builder) pod(p *corev1.Pod, c podCtx) Pod {
	f := Pod{
		Name: p.Name, UID: string(p.UID), Revision: c.revision, Updated: c.updated,
		Ordinal: -1, Index: -1, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
		Scheduled: p.Spec.NodeName != "", Owner: c.owner, Labels: nonNil(p.Labels),
		Terminating: p.DeletionTimestamp != nil, ReadySeconds: -1,
		Changes: c.changes, PDBs: []string{},
	}
	if f.Changes == nil {
		f.Changes = []Change{}
	}
	f.Terminal = p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if c.sts {
		if i := strings.LastIndex(p.Name, "-"); i >= 0 {
			if n, err := strconv.Atoi(p.Name[i+1:]); err == nil && n >= 0 {
				f.Ordinal, f.Index = n, n-c.ordinalStart
			}
		}
	}
	if n := b.nodes[p.Spec.NodeName]; n != nil {
		f.Zone = n.Labels[corev1.LabelTopologyZone]
	}
	var readyLTT time.Time
	var readyCond *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			readyCond = &p.Status.Conditions[i]
		}
	}
	if readyCond != nil && readyCond.Status == corev1.ConditionTrue {
		f.Ready = true
		readyLTT = readyCond.LastTransitionTime.Time
		if !readyLTT.IsZero() {
			f.ReadySeconds = int64(b.now.Sub(readyLTT) / time.Second)
		}
	}
	f.Available = f.Ready && (c.minReady == 0 || (!readyLTT.IsZero() && !readyLTT.Add(time.Duration(c.minReady)*time.Second).After(b.now)))
	if c.requireRun && p.Status.Phase != corev1.PodRunning {
		f.Available = false
	}
	if f.Terminating {
		f.Available = false
	}
	if !f.Available {
		since := p.CreationTimestamp.Time
		if readyCond != nil && readyCond.LastTransitionTime.After(since) {
			since = readyCond.LastTransitionTime.Time
		}
		if !since.IsZero() && b.now.After(since) {
			f.UnavailableSeconds = int64(b.now.Sub(since) / time.Second)
		}
	}
	base, restarted := inPlaceRestarts(p)
	for _, cs := range p.Status.ContainerStatuses {
		n := int(cs.RestartCount)
		if b, ok := base[cs.Name]; ok {
			// Restarts since rollplan's last in-place update, not counting
			// the one the update itself causes.
			n -= int(b)
			if restarted[cs.Name] {
				n--
			}
			n = max(n, 0)
		}
		f.Restarts = max(f.Restarts, n)
	}
	sidecars := map[string]bool{}
	for _, ic := range p.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[ic.Name] = true
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if sidecars[cs.Name] {
			f.SidecarRestarts = max(f.SidecarRestarts, int(cs.RestartCount))
		}
	}
	f.DeletionCost = deletionCost(p.Annotations["controller.kubernetes.io/pod-deletion-cost"])
	f.ReadyBucket = logBucket(readyLTT, b.now)
	f.CreatedBucket = logBucket(p.CreationTimestamp.Time, b.now)
	return f
}

// deletionCost parses the pod-deletion-cost annotation as upstream does:
// "0", or an optional "-" then a non-zero digit; int32; anything else 0.
func deletionCost(s string) int {
	if s == "" {
		return 0
	}
	t := strings.TrimPrefix(s, "-")
	if s != "0" && (t == "" || t[0] < '1' || t[0] > '9') {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0
	}
	return int(n)
}

// logBucket is upstream's LogarithmicScaleDown bucket of now − t.
func logBucket(t, now time.Time) int {
	if t.IsZero() || now.IsZero() {
		return -2
	}
	d := now.Sub(t)
	if d <= 0 {
		return -1
	}
	return int(math.Log2(float64(d)))
}

func setColocated(pods []Pod) {
	count := map[string]int{}
	for _, p := range pods {
		if !p.Terminating && !p.Terminal {
			count[p.Node]++
		}
	}
	for i := range pods {
		pods[i].Colocated = count[pods[i].Node]
		if pods[i].Colocated == 0 {
			pods[i].Colocated = 1
		}
	}
}

func sortPods(ps []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ---- revisions shared by StatefulSet and DaemonSet ----

type revision struct {
	cr       *appsv1.ControllerRevision
	name     string
	template *corev1.PodTemplateSpec
}

func (b *builder) revisions(kind string, meta *metav1.ObjectMeta) ([]revision, error) {
	var out []revision
	for _, cr := range b.snap.ControllerRevisions {
		if cr.Namespace != meta.Namespace || !ownedBy(cr, kind, meta.Name, meta.UID) {
			continue
		}
		t, err := revisionTemplate(cr)
		if err != nil {
			return nil, err
		}
		out = append(out, revision{cr: cr, name: cr.Name, template: t})
	}
	// history.SortControllerRevisions: revision, creation time, name.
	sort.SliceStable(out, func(i, j int) bool {
		a, c := out[i].cr, out[j].cr
		if a.Revision != c.Revision {
			return a.Revision < c.Revision
		}
		if !a.CreationTimestamp.Equal(&c.CreationTimestamp) {
			return a.CreationTimestamp.Before(&c.CreationTimestamp)
		}
		return a.Name < c.Name
	})
	return out, nil
}

// matchingRevision returns the newest revision whose template equals the
// workload's (semantic equality: the revision bytes of a hand-written
// snapshot need not be byte-identical to what the controller would write).
func matchingRevision(revs []revision, t *corev1.PodTemplateSpec) *revision {
	for i := len(revs) - 1; i >= 0; i-- {
		if equality.Semantic.DeepEqual(stripRevisionLabels(revs[i].template), stripRevisionLabels(t)) {
			return &revs[i]
		}
	}
	return nil
}

func stripRevisionLabels(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := t.DeepCopy()
	for k := range revisionLabels {
		delete(c.Labels, k)
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}

// changesFor diffs a pod's revision template against the update template;
// when the revision is not in the snapshot it compares the pod spec itself.
func changesFor(r *Rollout, p *corev1.Pod, from *corev1.PodTemplateSpec, to *corev1.PodTemplateSpec, rev string) []Change {
	if from != nil {
		return Diff(from, to)
	}
	r.Warnings = append(r.Warnings, fmt.Sprintf("pod %s: revision %q is not in the snapshot; changes are taken from the pod's own spec", p.Name, rev))
	// Only compare the containers: the API server fills in the rest of a pod's spec.
	podTmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: p.Spec.Containers, InitContainers: p.Spec.InitContainers}}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: to.Spec.Containers, InitContainers: to.Spec.InitContainers}}
	out := Diff(podTmpl, tmpl)
	if len(out) == 0 {
		out = []Change{{Path: "metadata.labels[controller-revision-hash]", Class: ClassOther, Detail: "revision " + rev + " is unknown: its template is not in the snapshot"}}
	}
	return out
}

// setRevisions lists the revisions whose pods share one changes list.
func setRevisions(r *Rollout) {
	r.Revisions = []Revision{}
	shared := map[string]bool{}
	first := map[string]*Pod{}
	var names []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Updated || p.Revision == "" {
			continue
		}
		f, ok := first[p.Revision]
		if !ok {
			first[p.Revision], shared[p.Revision] = p, true
			names = append(names, p.Revision)
			continue
		}
		if len(f.Changes) != len(p.Changes) || (len(p.Changes) > 0 && &f.Changes[0] != &p.Changes[0]) {
			shared[p.Revision] = false
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if shared[n] {
			r.Revisions = append(r.Revisions, Revision{Name: n, Changes: first[n].Changes})
		}
	}
}
