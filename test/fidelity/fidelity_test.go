package fidelity

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/kubelet"
)

// run is one control plane a scenario runs on: a Kubernetes version with
// its default feature gates, or with gates overriding them.
type run struct {
	// version: "v1.36"; empty: every version built.
	version string
	// gates override the version's defaults, on the control plane (the
	// apiserver and the controller-manager) and in the plan
	// (--feature-gates); nil: the defaults, and no gate flag anywhere.
	gates map[string]bool
}

// label names the control plane: the version, and the gates it overrides
// ("v1.36", "v1.36+MaxUnavailableStatefulSet=true"). Test names and the
// report start with it.
func (r run) label() string {
	if len(r.gates) == 0 {
		return r.version
	}
	return r.version + "+" + gateArgs(r.gates)
}

var (
	// everyVersion: each control plane built, at its default gates
	// (MaxUnavailableStatefulSet off on v1.36, on from v1.37).
	everyVersion = []run{{}}
	// kep961: also v1.36 with MaxUnavailableStatefulSet on, the KEP-961
	// maxUnavailable that v1.37 has by default, without v1.37's
	// two-phase Parallel deletion.
	kep961 = []run{{}, {version: "v1.36", gates: map[string]bool{kubeversion.MaxUnavailableStatefulSet: true}}}
	// recreateStrategy: StatefulSet updateStrategy.type Recreate, alpha in
	// v1.37; without the gate the apiserver refuses the type.
	recreateStrategy = []run{{version: "v1.37", gates: map[string]bool{kubeversion.StatefulSetRecreateStrategy: true}}}
)

// The workloads a scenario rolls, each named app, given the scenario's
// namespace and pod template.

func deployment(replicas int32, strategy appsv1.DeploymentStrategy, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		return testobj.Deployment(ns, "app").Template(t).Replicas(replicas).Strategy(strategy).MinReadySeconds(minReady).Obj()
	}
}

func daemonSet(surge, unavail string, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		return testobj.DaemonSet(ns, "app").Template(t).RollingUpdate(surge, unavail).MinReadySeconds(minReady).Obj()
	}
}

// statefulSetRecreate: updateStrategy.type Recreate (v1.37, gate
// StatefulSetRecreateStrategy).
func statefulSetRecreate(replicas int32, policy appsv1.PodManagementPolicyType) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		return testobj.StatefulSet(ns, "app").Template(t).Replicas(replicas).ServiceName("app").PodManagement(policy).Recreate().Obj()
	}
}

func statefulSet(replicas int32, policy appsv1.PodManagementPolicyType, partition int32, maxUnavail string, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		s := testobj.StatefulSet(ns, "app").Template(t).Replicas(replicas).ServiceName("app").PodManagement(policy).
			MinReadySeconds(minReady).Partition(partition)
		if maxUnavail != "" {
			s.MaxUnavailable(maxUnavail)
		}
		return s.Obj()
	}
}

// breakPods makes the named pods unready before the update.
func breakPods(names ...string) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		for _, n := range names {
			if err := e.k.Break(ctx, e.ns, n); err != nil {
				return err
			}
		}
		return nil
	}
}

// breakPodOn makes the DaemonSet's pod on node i unready.
func breakPodOn(i int) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		pods, err := e.c.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.nodeName(i)})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if err := e.k.Break(ctx, e.ns, p.Name); err != nil {
				return err
			}
		}
		return nil
	}
}

func taintNode(i int, effect corev1.TaintEffect) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		return e.k.SetNode(ctx, kubelet.Node{Name: e.nodeName(i), Labels: map[string]string{scenarioLabel: e.sc.name},
			Taints: []corev1.Taint{{Key: "fidelity/tainted", Value: "yes", Effect: effect}}})
	}
}

// scenarios run on the control planes their runs name (nil: everyVersion).
var scenarios = []scenario{
	// Deployments: upstream's ReplicaSet scaling, step by step.
	{name: "deploy-rolling-10-25pct", nodes: 4, workload: deployment(10, testobj.RollingUpdate("25%", "25%"), 0)},
	{name: "deploy-rolling-4-int-1-1", nodes: 3, workload: deployment(4, testobj.RollingUpdate("1", "1"), 0)},
	{name: "deploy-rolling-5-surge0-unavail2", nodes: 3, workload: deployment(5, testobj.RollingUpdate("0", "2"), 0)},
	{name: "deploy-rolling-3-surge2-unavail0", nodes: 3, workload: deployment(3, testobj.RollingUpdate("2", "0"), 0)},
	{name: "deploy-rolling-7-surge30pct-unavail0pct", nodes: 3, workload: deployment(7, testobj.RollingUpdate("30%", "0%"), 0)},
	{name: "deploy-rolling-1-25pct", nodes: 2, workload: deployment(1, testobj.RollingUpdate("25%", "25%"), 0)},
	{name: "deploy-recreate-3", nodes: 3, workload: deployment(3, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, 0)},
	{name: "deploy-rollover-10", nodes: 4, workload: deployment(10, testobj.RollingUpdate("25%", "25%"), 0),
		hooks: map[int]func(context.Context, *env) error{2: func(ctx context.Context, e *env) error {
			return e.mutate(ctx, "Deployment", setImage(imageV3))
		}}},
	{name: "deploy-paused-4", nodes: 3, workload: deployment(4, testobj.RollingUpdate("1", "1"), 0),
		update: func(o any) { d := o.(*appsv1.Deployment); d.Spec.Paused = true; setImage(imageV2)(d) },
		hooks: map[int]func(context.Context, *env) error{1: func(ctx context.Context, e *env) error {
			return e.mutate(ctx, "Deployment", func(o any) { o.(*appsv1.Deployment).Spec.Paused = false })
		}}},
	{name: "deploy-min-ready-4", nodes: 3, minReady: 2, workload: deployment(4, testobj.RollingUpdate("1", "1"), 2)},

	// DaemonSets.
	{name: "ds-maxunavailable-1", nodes: 4, workload: daemonSet("0", "1", 0)},
	{name: "ds-maxunavailable-40pct", nodes: 5, workload: daemonSet("0", "40%", 0)},
	{name: "ds-maxsurge-1", nodes: 4, workload: daemonSet("1", "0", 0)},
	{name: "ds-maxsurge-50pct", nodes: 4, workload: daemonSet("50%", "0", 0)},
	{name: "ds-unready-old-pod", nodes: 5, workload: daemonSet("0", "2", 0), prepare: breakPodOn(3)},
	{name: "ds-tainted-node", nodes: 4, workload: daemonSet("0", "1", 0), prepare: taintNode(2, corev1.TaintEffectNoSchedule)},
	{name: "ds-min-ready", nodes: 3, minReady: 2, workload: daemonSet("0", "1", 2)},

	// StatefulSets without maxUnavailable: one pod at a time on v1.36; on
	// v1.37 KEP-961 with maxUnavailable defaulted to 1, unavailable pods
	// anywhere counted, and Parallel's two-phase deletion.
	{name: "sts-orderedready", nodes: 3, workload: statefulSet(4, appsv1.OrderedReadyPodManagement, 0, "", 0)},
	{name: "sts-partition-2", nodes: 3, workload: statefulSet(5, appsv1.OrderedReadyPodManagement, 2, "", 0)},
	{name: "sts-parallel", nodes: 3, workload: statefulSet(4, appsv1.ParallelPodManagement, 0, "", 0)},
	{name: "sts-unready", nodes: 3, workload: statefulSet(4, appsv1.OrderedReadyPodManagement, 0, "", 0), prepare: breakPods("app-1")},
	// maxUnavailable set, no gate: the v1.36 apiserver drops the field
	// (one pod at a time), v1.37 takes it; and v1.36 with the gate on.
	{name: "sts-orderedready-maxunavail2", runs: kep961, nodes: 3, workload: statefulSet(5, appsv1.OrderedReadyPodManagement, 0, "2", 0)},
	{name: "sts-parallel-maxunavail2", runs: kep961, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 0, "2", 0)},
	{name: "sts-parallel-maxunavail2-partition1", runs: kep961, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 1, "2", 0)},
	{name: "sts-orderedready-maxunavail50pct-partition2", runs: kep961, nodes: 3, workload: statefulSet(7, appsv1.OrderedReadyPodManagement, 2, "50%", 0)},
	{name: "sts-parallel-maxunavail40pct-unready", runs: kep961, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 0, "40%", 0), prepare: breakPods("app-0")},
	// Two old pods not Ready, budget 1: v1.37's phase 1 deletes both (more
	// than the budget), v1.36 with the gate returns early.
	{name: "sts-parallel-maxunavail1-unready2", runs: kep961, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 0, "1", 0), prepare: breakPods("app-1", "app-3")},
	{name: "sts-min-ready", runs: kep961, nodes: 3, minReady: 2, workload: statefulSet(3, appsv1.ParallelPodManagement, 0, "2", 2)},
	// updateStrategy Recreate (v1.37 alpha): every old pod deleted, then
	// the new ones made as podManagementPolicy says.
	{name: "sts-recreate-orderedready", runs: recreateStrategy, nodes: 3, workload: statefulSetRecreate(4, appsv1.OrderedReadyPodManagement)},
	{name: "sts-recreate-parallel", runs: recreateStrategy, nodes: 3, workload: statefulSetRecreate(4, appsv1.ParallelPodManagement)},
}

// plane is one control plane and the scenarios that run on it.
type plane struct {
	run
	scenarios []scenario
}

// planes expands the scenarios' runs over the versions built: every
// version's default control plane first, then those with gates, oldest
// version first.
func planes(versions []string, scs []scenario) []plane {
	byLabel := map[string]*plane{}
	var order []string
	add := func(r run, sc scenario) {
		p, ok := byLabel[r.label()]
		if !ok {
			p = &plane{run: r}
			byLabel[r.label()] = p
			order = append(order, r.label())
		}
		p.scenarios = append(p.scenarios, sc)
	}
	for _, v := range versions {
		for _, withGates := range []bool{false, true} {
			for _, sc := range scs {
				runs := sc.runs
				if runs == nil {
					runs = everyVersion
				}
				for _, r := range runs {
					if (r.version == "" || r.version == v) && (len(r.gates) > 0) == withGates {
						add(run{version: v, gates: r.gates}, sc)
					}
				}
			}
		}
	}
	out := make([]plane, len(order))
	for i, l := range order {
		out[i] = *byLabel[l]
	}
	return out
}

func TestFidelity(t *testing.T) {
	versions, err := controlplane.Versions()
	if err != nil {
		t.Skip(err)
	}
	// The control planes run side by side (as many as -test.parallel,
	// GOMAXPROCS by default): each has its own controllers, which its
	// scenarios pause and resume, so the scenarios of one plane run one
	// after another. Most of a scenario is waiting for controllers.
	for _, p := range planes(versions, scenarios) {
		t.Run(p.label(), func(t *testing.T) {
			t.Parallel()
			// The default control planes stay for TestRevisionNames; one
			// with gates has done its work.
			if len(p.gates) > 0 {
				defer stopCluster(p.run)
			}
			start := time.Now()
			defer func() { report.addWall(p.version, time.Since(start)) }()
			for _, sc := range p.scenarios {
				t.Run(sc.name, func(t *testing.T) { runScenario(t, p.run, sc) })
			}
		})
	}
}

func TestPlanesExpandRuns(t *testing.T) {
	scs := []scenario{
		{name: "deploy"},
		{name: "kep961", runs: kep961},
		{name: "recreate", runs: recreateStrategy},
	}
	var got []string
	for _, p := range planes([]string{"v1.36", "v1.37"}, scs) {
		for _, sc := range p.scenarios {
			got = append(got, p.label()+"/"+sc.name)
		}
	}
	want := []string{
		"v1.36/deploy", "v1.36/kep961",
		"v1.36+MaxUnavailableStatefulSet=true/kep961",
		"v1.37/deploy", "v1.37/kep961",
		"v1.37+StatefulSetRecreateStrategy=true/recreate",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("runs\n got %v\nwant %v", got, want)
	}
	if got := planes([]string{"v1.37"}, scs); len(got) != 2 {
		t.Fatalf("with v1.37 only: %d control planes, want v1.37 and v1.37 with Recreate", len(got))
	}
	if args := strings.Join(planArgs(run{version: "v1.37"}), " "); args != "--kubernetes-version v1.37" {
		t.Fatalf("plan args at the defaults: %s", args)
	}
	if args := strings.Join(planArgs(kep961[1]), " "); args != "--kubernetes-version v1.36 --feature-gates MaxUnavailableStatefulSet=true" {
		t.Fatalf("plan args with a gate: %s", args)
	}
}
