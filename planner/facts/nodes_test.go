package facts

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/snapshot"
)

func TestDrainable(t *testing.T) {
	owned := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "x", Controller: ptr.To(true)}}
	}
	gone := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"a ReplicaSet's pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("ReplicaSet")}, Spec: corev1.PodSpec{NodeName: "n"}}, true},
		{"a bare pod", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, true},
		{"a DaemonSet's pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("DaemonSet")}, Spec: corev1.PodSpec{NodeName: "n"}}, false},
		{"a mirror pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h"}}, Spec: corev1.PodSpec{NodeName: "n"}}, false},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &gone}, Spec: corev1.PodSpec{NodeName: "n"}}, false},
		{"finished", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"failed", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false},
		{"not bound", corev1.Pod{}, false},
	} {
		if got := Drainable(&tc.pod); got != tc.want {
			t.Errorf("%s: Drainable %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A DaemonSet's nodes carry their cordon, who cordoned them, and the
// snapshot's pods a drain would evict; other kinds have no nodes.
func TestNodeFacts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:2"}}}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent", UID: "ds"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	pod := func(ns, name, node string, owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node, Containers: tmpl.Spec.Containers}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: owner, Name: "x", Controller: ptr.To(true)}}
		}
		return p
	}
	snap := &snapshot.Snapshot{
		DaemonSets: []*appsv1.DaemonSet{ds},
		Nodes: []*corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "n2", Annotations: map[string]string{AnnCordonedBy: "default/agent"}}, Spec: corev1.NodeSpec{Unschedulable: true}},
		},
		Pods: []*corev1.Pod{
			pod("shop", "web-b", "n1", "ReplicaSet"),
			pod("batch", "debug", "n1", ""),
			pod("kube-system", "proxy", "n1", "DaemonSet"),
			pod("shop", "web-a", "n2", "ReplicaSet"),
		},
	}
	rs, err := Build(snap, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	nodes := rs[0].Nodes
	if len(nodes) != 2 {
		t.Fatalf("nodes %+v", nodes)
	}
	if n := nodes[0]; n.Unschedulable || n.CordonedBy != "" || !slices.Equal(n.DrainPods, []string{"batch/debug", "shop/web-b"}) {
		t.Errorf("n1: %+v, want schedulable, no annotation, drain [batch/debug shop/web-b]", n)
	}
	if n := nodes[1]; !n.Unschedulable || n.CordonedBy != "default/agent" || !slices.Equal(n.DrainPods, []string{"shop/web-a"}) {
		t.Errorf("n2: %+v, want cordoned by default/agent, drain [shop/web-a]", n)
	}
}

// A node reporting MaintenancePlanned or MaintenanceInProgress with status
// True shows it in a DaemonSet's facts; False, Unknown or another
// condition does not.
func TestNodeMaintenanceFacts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:2"}}}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent", UID: "ds"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	cond := func(ty corev1.NodeConditionType, st corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ty, Status: st, Reason: "Admin"}
	}
	ready := cond(corev1.NodeReady, corev1.ConditionTrue)
	cases := []struct {
		name                string
		conds               []corev1.NodeCondition
		planned, inProgress bool
	}{
		{"none", nil, false, false},
		{"ready only", []corev1.NodeCondition{ready}, false, false},
		{"planned", []corev1.NodeCondition{ready, cond(corev1.NodeMaintenancePlanned, corev1.ConditionTrue)}, true, false},
		{"in progress", []corev1.NodeCondition{cond(corev1.NodeMaintenanceInProgress, corev1.ConditionTrue), ready}, false, true},
		{"both", []corev1.NodeCondition{cond(corev1.NodeMaintenancePlanned, corev1.ConditionTrue), cond(corev1.NodeMaintenanceInProgress, corev1.ConditionTrue)}, true, true},
		{"reported False", []corev1.NodeCondition{cond(corev1.NodeMaintenancePlanned, corev1.ConditionFalse), cond(corev1.NodeMaintenanceInProgress, corev1.ConditionFalse)}, false, false},
		{"Unknown", []corev1.NodeCondition{cond(corev1.NodeMaintenanceInProgress, corev1.ConditionUnknown)}, false, false},
		{"a drain is not maintenance", []corev1.NodeCondition{cond(corev1.NodeDrainInProgress, corev1.ConditionTrue), cond(corev1.NodeDrained, corev1.ConditionTrue)}, false, false},
	}
	snap := &snapshot.Snapshot{DaemonSets: []*appsv1.DaemonSet{ds}}
	for i, c := range cases {
		snap.Nodes = append(snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}, Status: corev1.NodeStatus{Conditions: c.conds}})
	}
	rs, err := Build(snap, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Nodes) != len(cases) {
		t.Fatalf("rollouts %d, nodes %+v", len(rs), rs[0].Nodes)
	}
	for i, c := range cases {
		n := rs[0].Nodes[i]
		if n.Name != fmt.Sprintf("n%d", i) || n.MaintenancePlanned != c.planned || n.MaintenanceInProgress != c.inProgress {
			t.Errorf("%s: node %s maintenancePlanned %v, maintenanceInProgress %v; want %v, %v", c.name, n.Name, n.MaintenancePlanned, n.MaintenanceInProgress, c.planned, c.inProgress)
		}
	}
	// The facts document carries them under their schema names.
	raw, err := json.Marshal(rs[0].Nodes[4])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"maintenancePlanned":true,"maintenanceInProgress":true`) {
		t.Errorf("node facts JSON %s lacks maintenancePlanned and maintenanceInProgress", raw)
	}
}
