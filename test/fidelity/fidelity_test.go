package fidelity

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/test/kubelet"
)

var (
	gateOff = map[string]bool{"MaxUnavailableStatefulSet": false}
	gateOn  = map[string]bool{"MaxUnavailableStatefulSet": true}
)

func ios(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }

func deployment(replicas int32, strategy appsv1.DeploymentStrategy, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: t.Labels},
				Template: t, Strategy: strategy, MinReadySeconds: minReady,
			},
		}
	}
}

func rolling(surge, unavail string) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios(surge), MaxUnavailable: ios(unavail)}}
}

func daemonSet(surge, unavail string, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: t.Labels}, Template: t, MinReadySeconds: minReady,
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: ios(surge), MaxUnavailable: ios(unavail)}},
			},
		}
	}
}

func statefulSet(replicas int32, policy appsv1.PodManagementPolicyType, partition int32, maxUnavail string, minReady int32) func(string, corev1.PodTemplateSpec) any {
	return func(ns string, t corev1.PodTemplateSpec) any {
		ru := &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition)}
		if maxUnavail != "" {
			ru.MaxUnavailable = ios(maxUnavail)
		}
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: t.Labels},
				Template: t, ServiceName: "app", PodManagementPolicy: policy, MinReadySeconds: minReady,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: ru},
			},
		}
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

var scenarios = []scenario{
	// Deployments: upstream's ReplicaSet scaling, step by step.
	{name: "deploy-rolling-10-25pct", gates: gateOff, nodes: 4, workload: deployment(10, rolling("25%", "25%"), 0)},
	{name: "deploy-rolling-4-int-1-1", gates: gateOff, nodes: 3, workload: deployment(4, rolling("1", "1"), 0)},
	{name: "deploy-rolling-5-surge0-unavail2", gates: gateOff, nodes: 3, workload: deployment(5, rolling("0", "2"), 0)},
	{name: "deploy-rolling-3-surge2-unavail0", gates: gateOff, nodes: 3, workload: deployment(3, rolling("2", "0"), 0)},
	{name: "deploy-rolling-7-surge30pct-unavail0pct", gates: gateOff, nodes: 3, workload: deployment(7, rolling("30%", "0%"), 0)},
	{name: "deploy-rolling-1-25pct", gates: gateOff, nodes: 2, workload: deployment(1, rolling("25%", "25%"), 0)},
	{name: "deploy-recreate-3", gates: gateOff, nodes: 3, workload: deployment(3, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, 0)},
	{name: "deploy-rollover-10", gates: gateOff, nodes: 4, workload: deployment(10, rolling("25%", "25%"), 0),
		hooks: map[int]func(context.Context, *env) error{2: func(ctx context.Context, e *env) error {
			return e.mutate(ctx, "Deployment", setImage(imageV3))
		}}},
	{name: "deploy-paused-4", gates: gateOff, nodes: 3, workload: deployment(4, rolling("1", "1"), 0),
		update: func(o any) { d := o.(*appsv1.Deployment); d.Spec.Paused = true; setImage(imageV2)(d) },
		hooks: map[int]func(context.Context, *env) error{1: func(ctx context.Context, e *env) error {
			return e.mutate(ctx, "Deployment", func(o any) { o.(*appsv1.Deployment).Spec.Paused = false })
		}}},
	{name: "deploy-min-ready-4", gates: gateOff, nodes: 3, minReady: 2, workload: deployment(4, rolling("1", "1"), 2)},

	// DaemonSets.
	{name: "ds-maxunavailable-1", gates: gateOff, nodes: 4, workload: daemonSet("0", "1", 0)},
	{name: "ds-maxunavailable-40pct", gates: gateOff, nodes: 5, workload: daemonSet("0", "40%", 0)},
	{name: "ds-maxsurge-1", gates: gateOff, nodes: 4, workload: daemonSet("1", "0", 0)},
	{name: "ds-maxsurge-50pct", gates: gateOff, nodes: 4, workload: daemonSet("50%", "0", 0)},
	{name: "ds-unready-old-pod", gates: gateOff, nodes: 5, workload: daemonSet("0", "2", 0), prepare: breakPodOn(3)},
	{name: "ds-tainted-node", gates: gateOff, nodes: 4, workload: daemonSet("0", "1", 0), prepare: taintNode(2, corev1.TaintEffectNoSchedule)},
	{name: "ds-min-ready", gates: gateOff, nodes: 3, minReady: 2, workload: daemonSet("0", "1", 2)},

	// StatefulSets, MaxUnavailableStatefulSet off: one pod at a time.
	{name: "sts-orderedready-gate-off", gates: gateOff, nodes: 3, workload: statefulSet(4, appsv1.OrderedReadyPodManagement, 0, "", 0)},
	{name: "sts-partition-2-gate-off", gates: gateOff, nodes: 3, workload: statefulSet(5, appsv1.OrderedReadyPodManagement, 2, "", 0)},
	{name: "sts-parallel-gate-off", gates: gateOff, nodes: 3, workload: statefulSet(4, appsv1.ParallelPodManagement, 0, "", 0)},
	{name: "sts-unready-gate-off", gates: gateOff, nodes: 3, workload: statefulSet(4, appsv1.OrderedReadyPodManagement, 0, "", 0), prepare: breakPods("app-1")},
	// Gate on: KEP-961 maxUnavailable.
	{name: "sts-orderedready-maxunavail2-gate-on", gates: gateOn, nodes: 3, workload: statefulSet(5, appsv1.OrderedReadyPodManagement, 0, "2", 0)},
	{name: "sts-parallel-maxunavail2-partition1-gate-on", gates: gateOn, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 1, "2", 0)},
	{name: "sts-parallel-maxunavail40pct-unready-gate-on", gates: gateOn, nodes: 3, workload: statefulSet(5, appsv1.ParallelPodManagement, 0, "40%", 0), prepare: breakPods("app-0")},
	{name: "sts-min-ready-gate-on", gates: gateOn, nodes: 3, minReady: 2, workload: statefulSet(3, appsv1.ParallelPodManagement, 0, "2", 2)},
}

func TestFidelity(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc) })
	}
}
