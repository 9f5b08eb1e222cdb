// Package parity is a property-based harness for the planner: a seeded
// generator of valid snapshots, an invariant checker for plans, a shrinker
// that reduces a failing snapshot to a minimal reproduction, and (in the
// tests) a parity check that every policy engine yields the same plan.
package parity

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Now is the snapshot time of every generated case: every timestamp in a
// generated snapshot is at or before it.
var Now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// GateMaxUnavailableStatefulSet is the only feature gate the planner models.
const GateMaxUnavailableStatefulSet = "MaxUnavailableStatefulSet"

// Case is one generated input: the snapshot and the arguments a plan needs
// besides it (`rollplan plan -f snap.yaml --now … --feature-gates …`).
type Case struct {
	Snap *snapshot.Snapshot
	Now  time.Time
	// Version planned for (zero: the newest); Gates override its defaults.
	Version kubeversion.Version
	Gates   map[string]bool
}

// FactsOptions are the facts.Build options of the case.
func (c *Case) FactsOptions() facts.Options {
	return facts.Options{Now: c.Now, KubernetesVersion: c.Version, FeatureGates: c.Gates}
}

// Args are the `rollplan plan` flags that reproduce the case besides -f.
func (c *Case) Args() []string {
	args := []string{"--now", c.Now.UTC().Format(time.RFC3339), "--kubernetes-version", c.Version.Or(kubeversion.Newest).String()}
	if on, ok := c.Gates[GateMaxUnavailableStatefulSet]; ok {
		args = append(args, "--feature-gates", fmt.Sprintf("%s=%t", GateMaxUnavailableStatefulSet, on))
	}
	return args
}

// Clone deep-copies the case.
func (c *Case) Clone() *Case {
	g := map[string]bool{}
	for k, v := range c.Gates {
		g[k] = v
	}
	return &Case{Snap: CopySnapshot(c.Snap), Now: c.Now, Version: c.Version, Gates: g}
}

// Generate builds a random, valid case: 1–3 workloads (Deployments with
// RollingUpdate or Recreate, often mid-rollover over several ReplicaSets;
// StatefulSets with partitions, OrderedReady or Parallel, maxUnavailable
// int / percent / unset, OnDelete; DaemonSets with maxUnavailable or
// maxSurge as int or percent) of 0–40 pods in varied states, the rollplan
// annotations, template changes of every class, nodes in zones with the odd
// taint or label, PodDisruptionBudgets and the MaxUnavailableStatefulSet
// gate. facts.Build accepts every case: a rejection is a generator bug.
func Generate(r *rand.Rand) *Case {
	g := &gen{r: r, now: Now, names: map[string]bool{}, s: &snapshot.Snapshot{}}
	g.nodes()
	n := 1 + r.Intn(3)
	var apps []appRef
	for i := 0; i < n; i++ {
		ns := "default"
		if g.chance(0.2) {
			ns = "prod"
		}
		switch k := r.Intn(100); {
		case k < 40:
			apps = append(apps, g.deployment(ns, fmt.Sprintf("api%d", i)))
		case k < 75:
			apps = append(apps, g.statefulSet(ns, fmt.Sprintf("db%d", i)))
		default:
			apps = append(apps, g.daemonSet(ns, fmt.Sprintf("agent%d", i)))
		}
	}
	g.pdbs(apps)
	g.s.Sort()
	// Each supported version's controllers, the gate on or off.
	version := kubeversion.Supported[r.Intn(len(kubeversion.Supported))]
	return &Case{Snap: g.s, Now: g.now, Version: version, Gates: map[string]bool{GateMaxUnavailableStatefulSet: g.chance(0.5)}}
}

type appRef struct{ ns, app string }

type gen struct {
	r     *rand.Rand
	s     *snapshot.Snapshot
	now   time.Time
	names map[string]bool // namespace/pod names in use
	// node facts the generator needs to place daemon pods.
	nodeList []*corev1.Node
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

// ago is a time sec seconds before now.
func (g *gen) ago(sec int) metav1.Time {
	return metav1.NewTime(g.now.Add(-time.Duration(sec) * time.Second))
}

const alnum = "bcdfghjklmnpqrstvwxz2456789"

func (g *gen) suffix(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[g.r.Intn(len(alnum))]
	}
	return string(b)
}

func (g *gen) podName(ns, prefix string) string {
	for {
		name := prefix + "-" + g.suffix(5)
		if !g.names[ns+"/"+name] {
			g.names[ns+"/"+name] = true
			return name
		}
	}
}

// replicas: 0–40, mostly small.
func (g *gen) replicas() int {
	switch k := g.r.Intn(100); {
	case k < 5:
		return 0
	case k < 50:
		return 1 + g.r.Intn(5)
	case k < 85:
		return 6 + g.r.Intn(10)
	default:
		return 16 + g.r.Intn(25)
	}
}

func ptr[T any](v T) *T { return &v }

func ownerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

// ---- nodes ----

func (g *gen) nodes() {
	n := 1 + g.r.Intn(6)
	zones := []string{"zone-a", "zone-b", "zone-c"}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("node-%d", i)
		labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
		if !g.chance(0.1) {
			labels[corev1.LabelTopologyZone] = zones[(i+g.r.Intn(2))%3]
		}
		if g.chance(0.5) {
			labels["disk"] = "ssd"
		}
		node := &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name), Labels: labels, CreationTimestamp: g.ago(86400 * 30)},
		}
		switch k := g.r.Intn(100); {
		case k < 8:
			node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		case k < 12:
			node.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
		case k < 14:
			node.Spec.Unschedulable = true
			node.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
		}
		g.s.Nodes = append(g.s.Nodes, node)
		g.nodeList = append(g.nodeList, node)
	}
}

func (g *gen) randomNode() string { return g.nodeList[g.r.Intn(len(g.nodeList))].Name }

// ---- templates ----

// tmpl describes a pod template; mutate derives an older revision from it
// with changes of chosen classes.
type tmpl struct {
	app        string
	image      string
	initImage  string // "" → no init container
	sidecar    bool   // the init container is a restartable sidecar
	env        string
	cpu        string
	noRes      bool
	guaranteed bool
	version    string
	note       string
	apparmor   string
	command    bool
	grace      int64
	// DaemonSet placement.
	nodeSelector bool
	tolerate     bool
}

func (g *gen) baseTemplate(app string) tmpl {
	t := tmpl{app: app, image: fmt.Sprintf("registry.example/%s:1.%d", app, 1+g.r.Intn(9)), env: "prod", cpu: g.pick("100m", "250m"), version: "v9", note: "n9", grace: 30}
	if g.chance(0.2) {
		t.initImage = "registry.example/init:2.0"
		t.sidecar = g.chance(0.3)
	}
	switch k := g.r.Intn(100); {
	case k < 15:
		t.guaranteed = true
	case k < 25:
		t.noRes = true
	}
	return t
}

// Change classes an older revision may differ by.
var changeClasses = []struct {
	name   string
	weight int
}{
	{"image", 35}, {"initImage", 8}, {"env", 14}, {"resources", 10}, {"qos", 5},
	{"labels", 10}, {"annotations", 8}, {"apparmor", 2}, {"command", 4}, {"other", 4},
}

func (g *gen) changeClass() string {
	total := 0
	for _, c := range changeClasses {
		total += c.weight
	}
	k := g.r.Intn(total)
	for _, c := range changeClasses {
		if k < c.weight {
			return c.name
		}
		k -= c.weight
	}
	return "image"
}

// mutate returns the template of an older revision (variant v) that differs
// from t by one to three change classes.
func (g *gen) mutate(t tmpl, v int) tmpl {
	o := t
	n := 1
	if g.chance(0.3) {
		n += 1 + g.r.Intn(2)
	}
	for i := 0; i < n; i++ {
		switch g.changeClass() {
		case "image":
			o.image = fmt.Sprintf("registry.example/%s:0.%d", t.app, v)
		case "initImage":
			if t.initImage != "" {
				o.initImage = fmt.Sprintf("registry.example/init:1.%d", v)
			} else {
				o.image = fmt.Sprintf("registry.example/%s:0.%d", t.app, v)
			}
		case "env":
			o.env = fmt.Sprintf("dev%d", v)
		case "resources":
			if t.noRes {
				o.image = fmt.Sprintf("registry.example/%s:0.%d", t.app, v)
			} else {
				o.cpu = fmt.Sprintf("%dm", 50+10*v)
			}
		case "qos":
			switch {
			case t.noRes:
				o.noRes = false
			case t.guaranteed:
				o.guaranteed = false
			default:
				o.noRes = true
			}
		case "labels":
			o.version = fmt.Sprintf("v%d", v)
		case "annotations":
			o.note = fmt.Sprintf("n%d", v)
		case "apparmor":
			o.apparmor = "runtime/default"
		case "command":
			o.command = true
		case "other":
			o.grace = 10 + int64(v)
		}
	}
	if o == t {
		o.image = fmt.Sprintf("registry.example/%s:0.%d", t.app, v)
	}
	return o
}

func (t tmpl) build() corev1.PodTemplateSpec {
	labels := map[string]string{"app": t.app, "tier": "backend", "version": t.version}
	ann := map[string]string{"example.com/note": t.note}
	if t.apparmor != "" {
		ann["container.apparmor.security.beta.kubernetes.io/app"] = t.apparmor
	}
	c := corev1.Container{
		Name: "app", Image: t.image,
		Env:                      []corev1.EnvVar{{Name: "MODE", Value: t.env}},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
	if t.command {
		c.Command = []string{"/app", "--serve"}
	}
	if !t.noRes {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(t.cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}
		if t.guaranteed {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(t.cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}
		}
	}
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 "default-scheduler",
		TerminationGracePeriodSeconds: ptr(t.grace),
	}
	if t.initImage != "" {
		ic := corev1.Container{Name: "init", Image: t.initImage, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}
		if t.sidecar {
			ic.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		}
		spec.InitContainers = []corev1.Container{ic}
	}
	if t.nodeSelector {
		spec.NodeSelector = map[string]string{"disk": "ssd"}
	}
	if t.tolerate {
		spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann}, Spec: spec}
}

func withLabel(t corev1.PodTemplateSpec, k, v string) corev1.PodTemplateSpec {
	c := *t.DeepCopy()
	c.Labels[k] = v
	return c
}

func revisionData(t corev1.PodTemplateSpec) runtime.RawExtension {
	tm, _ := json.Marshal(t)
	var m map[string]any
	_ = json.Unmarshal(tm, &m)
	m["$patch"] = "replace"
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
	return runtime.RawExtension{Raw: b}
}

// ---- pods ----

// podOpts are the knobs of one pod's state.
type podOpts struct {
	updated  bool // at the update revision: mostly healthy, so halts stay rare
	minReady int
	node     string  // "" → pick one (or leave unscheduled)
	daemon   bool    // DaemonSet pods are always bound to their node
	sick     float64 // chance that the pod is unhealthy (pending, not Ready, terminal…)
}

// health: the share of unhealthy pods of one workload: most workloads are
// healthy, some degraded, a few in a bad way (budgets spent, stalls).
func (g *gen) health() float64 {
	switch k := g.r.Intn(100); {
	case k < 55:
		return 0.03
	case k < 85:
		return 0.15
	default:
		return 0.45
	}
}

// pod builds a pod from a template with a random but consistent state.
func (g *gen) pod(ns, name string, t corev1.PodTemplateSpec, owner metav1.OwnerReference, o podOpts) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name),
			Labels: map[string]string{}, Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		p.Labels[k] = v
	}
	for k, v := range t.Annotations {
		p.Annotations[k] = v
	}
	node := o.node
	if node == "" {
		node = g.randomNode()
	}
	// Age of the pod and of its Ready transition.
	age := g.ageSeconds(o)
	created := g.ago(age)
	if g.chance(0.01) {
		created = metav1.Time{}
	}
	p.CreationTimestamp = created
	phase := corev1.PodRunning
	ready := true
	if g.chance(o.sick) {
		switch k := g.r.Intn(100); {
		case k < 20 && !o.daemon:
			phase, ready, node = corev1.PodPending, false, "" // unscheduled
		case k < 35:
			phase, ready = corev1.PodPending, false
		case k < 42:
			phase, ready = corev1.PodUnknown, false
		case k < 47:
			phase, ready = corev1.PodFailed, false
		case k < 50:
			phase, ready = corev1.PodSucceeded, false
		default:
			ready = false // Running, not Ready
		}
	}
	if o.updated && !ready && g.chance(0.5) {
		phase, ready = corev1.PodRunning, true
	}
	p.Spec.NodeName = node
	p.Status.Phase = phase
	// Ready transition: around minReadySeconds often, so availability varies.
	readyAgo := g.readyAgo(age, o.minReady)
	var conds []corev1.PodCondition
	switch {
	case ready:
		ltt := g.ago(readyAgo)
		if g.chance(0.02) {
			ltt = metav1.Time{}
		}
		conds = append(conds, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ltt})
	case g.chance(0.85):
		conds = append(conds, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: g.ago(readyAgo)})
	}
	if node != "" {
		conds = append(conds, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created})
	}
	p.Status.Conditions = conds
	restarts := 0
	switch k := g.r.Intn(100); {
	case k < 20:
		restarts = 1 + g.r.Intn(2)
	case k < 30 && (!o.updated || g.chance(0.3)):
		restarts = 3 + g.r.Intn(8)
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: t.Spec.Containers[0].Image, RestartCount: int32(restarts), Ready: ready}}
	if len(t.Spec.InitContainers) > 0 {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", Image: t.Spec.InitContainers[0].Image, RestartCount: int32(g.r.Intn(3))}}
	}
	if g.chance(0.05) {
		p.DeletionTimestamp = ptr(g.ago(g.r.Intn(90)))
		p.DeletionGracePeriodSeconds = ptr(int64(30))
	}
	if g.chance(0.06) {
		p.Annotations["controller.kubernetes.io/pod-deletion-cost"] = g.pick("-5", "0", "10", "100", "007", "+3", "abc")
	}
	return p
}

// ageSeconds: how long ago a pod was created.
func (g *gen) ageSeconds(o podOpts) int {
	if o.updated {
		// Updated pods are recent (the rollout is under way); rarely past
		// the progress deadline.
		if g.chance(0.05) {
			return 700 + g.r.Intn(3000)
		}
		return 5 + g.r.Intn(500)
	}
	return g.pickInt(30, 300, 3600, 86400, 86400*20) + g.r.Intn(600)
}

func (g *gen) pickInt(xs ...int) int { return xs[g.r.Intn(len(xs))] }

// readyAgo: seconds since the Ready transition, around minReadySeconds.
func (g *gen) readyAgo(age, minReady int) int {
	var s int
	switch k := g.r.Intn(100); {
	case k < 20 && minReady > 0:
		s = max(0, minReady-1+g.r.Intn(3)) // at the boundary
	case k < 35:
		s = g.r.Intn(60)
	default:
		s = g.r.Intn(max(1, age))
	}
	return min(s, age)
}

// available mirrors upstream IsPodAvailable for the generated status (used
// only to fill ReplicaSet status; the facts compute their own).
func (g *gen) available(p *corev1.Pod, minReady int) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			if minReady == 0 {
				return true
			}
			return !c.LastTransitionTime.IsZero() && !c.LastTransitionTime.Add(time.Duration(minReady)*time.Second).After(g.now)
		}
	}
	return false
}

// ---- annotations ----

func (g *gen) rollplanAnnotations(kind string, replicas int, onDelete bool) map[string]string {
	ann := map[string]string{}
	managed := g.chance(0.35)
	if onDelete && g.chance(0.5) {
		managed = true
	}
	if managed {
		ann[facts.AnnManaged] = "true"
	} else if g.chance(0.1) {
		ann[facts.AnnManaged] = "false"
	}
	if managed || g.chance(0.1) {
		switch k := g.r.Intn(100); {
		case k < 50:
			ann[facts.AnnPodUpdatePolicy] = "InPlaceIfPossible"
		case k < 65:
			ann[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
		case k < 75:
			ann[facts.AnnPodUpdatePolicy] = "Recreate"
		}
	}
	if kind != "Deployment" && (onDelete && g.chance(0.7) || g.chance(0.1)) {
		ann[facts.AnnMaxUnavailable] = g.pick("1", "2", "3", "25%", "50%", "100%")
	}
	if kind == "StatefulSet" && (onDelete && g.chance(0.5) || g.chance(0.1)) {
		ann[facts.AnnPartition] = strconv.Itoa(g.r.Intn(replicas + 2))
	}
	if g.chance(0.03) {
		ann[facts.AnnProgressDeadline] = g.pick("60", "1200")
	}
	return ann
}

// intOrPercent returns nil, an int or a percent.
func (g *gen) intOrPercent(nilP float64, ints []int, percents []string) *intstr.IntOrString {
	if g.chance(nilP) {
		return nil
	}
	if g.chance(0.5) {
		v := intstr.FromInt32(int32(ints[g.r.Intn(len(ints))]))
		return &v
	}
	v := intstr.FromString(percents[g.r.Intn(len(percents))])
	return &v
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	return facts.Scale(must(facts.IntOrPercent(v, "", false)), 100, true) == 0
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}

func (g *gen) controllerRevision(ns, name, kind, owner string, ownerUID types.UID, revision int64, t corev1.PodTemplateSpec, labels map[string]string) *appsv1.ControllerRevision {
	if labels == nil {
		labels = map[string]string{}
	}
	labels["app"] = owner
	return &appsv1.ControllerRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-cr-" + name),
			CreationTimestamp: g.ago(86400*9 - 3600*int(revision)), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(kind, owner, ownerUID)}},
		Revision: revision,
		Data:     revisionData(t),
	}
}

// ---- PDBs ----

func (g *gen) pdbs(apps []appRef) {
	n := 0
	switch k := g.r.Intn(100); {
	case k < 35:
		n = 1
	case k < 45:
		n = 2
	}
	for i := 0; i < n; i++ {
		a := apps[g.r.Intn(len(apps))]
		sel := map[string]string{"app": a.app}
		if g.chance(0.2) {
			sel = map[string]string{"tier": "backend"}
		}
		pdb := &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pdb%d", a.app, i), Namespace: a.ns, UID: types.UID(fmt.Sprintf("uid-%s-pdb-%s-%d", a.ns, a.app, i))},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
		}
		v := g.intOrPercent(0, []int{0, 1, 2, 3}, []string{"0%", "25%", "50%", "80%", "100%"})
		if g.chance(0.5) {
			pdb.Spec.MaxUnavailable = v
		} else {
			pdb.Spec.MinAvailable = v
		}
		g.s.PDBs = append(g.s.PDBs, pdb)
		// Pods of no workload that the PDB also selects (some unavailable).
		if g.chance(0.3) {
			for j := 0; j < 1+g.r.Intn(2); j++ {
				name := g.podName(a.ns, a.app+"-bare")
				p := &corev1.Pod{
					TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.ns, UID: types.UID("uid-" + a.ns + "-" + name),
						Labels: map[string]string{"app": a.app, "tier": "backend"}, CreationTimestamp: g.ago(3600)},
					Spec: corev1.PodSpec{NodeName: g.randomNode(), Containers: []corev1.Container{{Name: "app", Image: "registry.example/bare:1"}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
						Type: corev1.PodReady, Status: corev1.ConditionStatus(g.pick("True", "False")), LastTransitionTime: g.ago(600)}}},
				}
				g.s.Pods = append(g.s.Pods, p)
			}
		}
	}
}

// CopySnapshot deep-copies every object of a snapshot.
func CopySnapshot(s *snapshot.Snapshot) *snapshot.Snapshot {
	out := &snapshot.Snapshot{}
	for _, o := range s.Deployments {
		out.Deployments = append(out.Deployments, o.DeepCopy())
	}
	for _, o := range s.ReplicaSets {
		out.ReplicaSets = append(out.ReplicaSets, o.DeepCopy())
	}
	for _, o := range s.StatefulSets {
		out.StatefulSets = append(out.StatefulSets, o.DeepCopy())
	}
	for _, o := range s.DaemonSets {
		out.DaemonSets = append(out.DaemonSets, o.DeepCopy())
	}
	for _, o := range s.ControllerRevisions {
		out.ControllerRevisions = append(out.ControllerRevisions, o.DeepCopy())
	}
	for _, o := range s.Pods {
		out.Pods = append(out.Pods, o.DeepCopy())
	}
	for _, o := range s.Nodes {
		out.Nodes = append(out.Nodes, o.DeepCopy())
	}
	for _, o := range s.PDBs {
		out.PDBs = append(out.PDBs, o.DeepCopy())
	}
	return out
}

// Describe summarises a case in one line (kinds, sizes, gate) for logs.
func (c *Case) Describe() string {
	var parts []string
	for _, d := range c.Snap.Deployments {
		parts = append(parts, fmt.Sprintf("Deployment %s/%s (%d)", d.Namespace, d.Name, deref(d.Spec.Replicas, 1)))
	}
	for _, s := range c.Snap.StatefulSets {
		parts = append(parts, fmt.Sprintf("StatefulSet %s/%s (%d)", s.Namespace, s.Name, deref(s.Spec.Replicas, 1)))
	}
	for _, d := range c.Snap.DaemonSets {
		parts = append(parts, fmt.Sprintf("DaemonSet %s/%s", d.Namespace, d.Name))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%v, %d pods, %d nodes, %d PDBs, gates %v", parts, len(c.Snap.Pods), len(c.Snap.Nodes), len(c.Snap.PDBs), c.Gates)
}

func deref(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}
