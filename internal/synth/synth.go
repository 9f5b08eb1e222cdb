// Package synth builds large synthetic snapshots for benchmarks and
// scaling tests: a DaemonSet over many nodes, StatefulSets and Deployments,
// each mid-way through an image update.
package synth

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// Now is the snapshot time of every synthetic snapshot.
var Now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Snapshot returns about n pods: a DaemonSet on n/30 nodes (5,000 at 150k),
// StatefulSets of 500 pods and Deployments of 1,000 (smaller below 10k pods).
func Snapshot(n int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{}
	nodes := max(n/30, 3)
	zones := []string{"zone-a", "zone-b", "zone-c"}
	for i := 0; i < nodes; i++ {
		s.Nodes = append(s.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{corev1.LabelTopologyZone: zones[i%3]}},
		})
	}
	rest := n - nodes
	daemonSet(s, nodes)
	stsSize, deploySize := 500, 1000
	if n < 10000 {
		stsSize, deploySize = 50, 100
	}
	for i := 0; rest > 0; i++ {
		if i%3 == 0 {
			k := min(stsSize, rest)
			statefulSet(s, fmt.Sprintf("db-%03d", i), k, nodes)
			rest -= k
		} else {
			k := min(deploySize, rest)
			deployment(s, fmt.Sprintf("api-%03d", i), k, nodes)
			rest -= k
		}
	}
	s.Sort()
	return s
}

func template(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: image,
			Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
		}}},
	}
}

func revisionData(t corev1.PodTemplateSpec) runtime.RawExtension {
	b, _ := jsonMarshal(map[string]any{"spec": map[string]any{"template": t}})
	return runtime.RawExtension{Raw: b}
}

func pod(name, ns string, owner metav1.OwnerReference, labels map[string]string, node string, i int) *corev1.Pod {
	created := Now.Add(-time.Duration(48+i%7) * time.Hour)
	ready := Now.Add(-time.Duration(1+i%13) * time.Hour)
	status := corev1.ConditionTrue
	if i%97 == 0 {
		status = corev1.ConditionFalse
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(created), OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app:1.0"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(ready)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: int32(i % 2)}}},
	}
}

func ownerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &t}
}

func daemonSet(s *snapshot.Snapshot, nodes int) {
	old, cur := template("agent", "agent:1.0"), template("agent", "agent:1.1")
	mu := intstr.FromString("10%")
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds-agent"},
		Spec: appsv1.DaemonSetSpec{Template: cur, UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
			Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &mu}}},
	}
	s.DaemonSets = append(s.DaemonSets, ds)
	s.ControllerRevisions = append(s.ControllerRevisions, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-old", Namespace: "kube-system", Labels: map[string]string{"controller-revision-hash": "old"},
			OwnerReferences: []metav1.OwnerReference{ownerRef("DaemonSet", "agent", ds.UID)}},
		Revision: 1, Data: revisionData(old)})
	for i := 0; i < nodes; i++ {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("agent-%05d", i), "kube-system", ownerRef("DaemonSet", "agent", ds.UID),
			map[string]string{"app": "agent", "controller-revision-hash": "old"}, fmt.Sprintf("node-%05d", i), i))
	}
}

func statefulSet(s *snapshot.Snapshot, name string, n, nodes int) {
	old, cur := template(name, "db:1.0"), template(name, "db:1.1")
	replicas := int32(n)
	mu := intstr.FromString("20%")
	uid := types.UID("sts-" + name)
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "data", UID: uid},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Template: cur, PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: &mu}}},
	}
	s.StatefulSets = append(s.StatefulSets, set)
	rev := name + "-old"
	s.ControllerRevisions = append(s.ControllerRevisions, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: rev, Namespace: "data", OwnerReferences: []metav1.OwnerReference{ownerRef("StatefulSet", name, uid)}},
		Revision:   1, Data: revisionData(old)})
	for i := 0; i < n; i++ {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("%s-%d", name, i), "data", ownerRef("StatefulSet", name, uid),
			map[string]string{"app": name, "controller-revision-hash": rev}, fmt.Sprintf("node-%05d", (i*7)%nodes), i))
	}
}

func deployment(s *snapshot.Snapshot, name string, n, nodes int) {
	old, cur := template(name, "api:1.0"), template(name, "api:1.1")
	replicas := int32(n)
	uid := types.UID("deploy-" + name)
	s.Deployments = append(s.Deployments, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", UID: uid},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Template: cur},
	})
	rsName := name + "-old"
	rsUID := types.UID("rs-" + name)
	old.Labels = map[string]string{"app": name, "pod-template-hash": "old"}
	s.ReplicaSets = append(s.ReplicaSets, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: "web", UID: rsUID, OwnerReferences: []metav1.OwnerReference{ownerRef("Deployment", name, uid)},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: &replicas, Template: old},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: replicas},
	})
	for i := 0; i < n; i++ {
		s.Pods = append(s.Pods, pod(fmt.Sprintf("%s-old-%05d", name, i), "web", ownerRef("ReplicaSet", rsName, rsUID),
			old.Labels, fmt.Sprintf("node-%05d", (i*13)%nodes), i))
	}
}
