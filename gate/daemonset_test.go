package gate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
)

// daemonSet is a managed OnDelete DaemonSet "agent" (max-unavailable 1) on
// n nodes whose template moved from v1 to v2: every pod, Ready for an
// hour, still runs v1. Nodes listed in cordonedBy are cordoned, with the
// rollplan.dev/cordoned-by annotation when the value is not "".
func daemonSet(n int, cordonedBy map[int]string) []runtime.Object {
	template := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "agent-uid", Controller: ptr.To(true)}}
	ds := testobj.DaemonSet(ns, "agent").
		Meta(metav1.ObjectMeta{Namespace: ns, Name: "agent", UID: "agent-uid", Generation: 2,
			Annotations: map[string]string{facts.AnnManaged: "true", facts.AnnMaxUnavailable: "1"}}).
		Template(template("example.com/agent:v2")).OnDelete().Obj()
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(n), ObservedGeneration: 2}
	objs := []runtime.Object{ds}
	for i, image := range []string{"example.com/agent:v1", "example.com/agent:v2"} {
		t := template(image)
		raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"$patch": "replace", "metadata": t.ObjectMeta, "spec": t.Spec}}})
		hash := []string{"old", "new"}[i]
		objs = append(objs, &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-" + hash, OwnerReferences: owner,
				Labels: map[string]string{"app": "agent", appsv1.ControllerRevisionHashLabelKey: hash}},
			Data: runtime.RawExtension{Raw: raw}, Revision: int64(i + 1)})
	}
	started := metav1.NewTime(now.Add(-time.Hour))
	for i := range n {
		node := testobj.Node(fmt.Sprintf("node-%d", i)).Meta(metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), ResourceVersion: "5"}).Ready().Obj()
		if by, ok := cordonedBy[i]; ok {
			node.Spec.Unschedulable = true
			if by != "" {
				node.Annotations = map[string]string{facts.AnnCordonedBy: by}
			}
		}
		name := fmt.Sprintf("agent-%d", i)
		p := testobj.Pod(ns, name).
			Meta(metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "10", CreationTimestamp: started}).
			Labels(map[string]string{"app": "agent", appsv1.ControllerRevisionHashLabelKey: "old", "pod-template-generation": "1"}).Owner("DaemonSet", "agent", "agent-uid").
			Node(node.Name).Image("example.com/agent:v1").Obj()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "example.com/agent:v1", ImageID: "id-v1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
		objs = append(objs, node, p)
	}
	return objs
}

// A node rollplan apply cordoned for the DaemonSet holds a pod whose update
// is under way: the gate counts it against the budget, as apply does, so
// another daemon pod's eviction waits while apply's own delete of that pod
// goes through. A cordon by someone else, or for another DaemonSet, is no
// update of this one.
func TestPreparingDaemonPodsCountAgainstTheBudget(t *testing.T) {
	deleteReq := func(f *fixture, name string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{UID: types.UID("del-" + name), Namespace: ns, Name: name, Resource: podResource(),
			Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: f.podJSON(name, nil)}}
	}
	for _, tc := range []struct {
		name     string
		cordoned map[int]string
		evict    bool // want the eviction of agent-1 admitted
	}{
		{"node cordoned by rollplan for the DaemonSet", map[int]string{0: ns + "/agent"}, false},
		{"node cordoned by someone else", map[int]string{0: ""}, true},
		{"node cordoned by rollplan for another DaemonSet", map[int]string{0: ns + "/other"}, true},
		{"no cordon", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{}, daemonSet(3, tc.cordoned)...)
			resp, _ := f.review(evict("agent-1", true))
			if resp.Allowed != tc.evict {
				t.Fatalf("eviction of agent-1: allowed %v, want %v (%v)", resp.Allowed, tc.evict, resp.Result)
			}
			if !tc.evict {
				msg := resp.Result.Message
				for _, want := range []string{"DaemonSet shop/agent", "budget maxUnavailable allows 1", "agent-0 (being updated: node node-0 cordoned by rollplan for it)"} {
					if !strings.Contains(msg, want) {
						t.Errorf("denial %q does not say %q", msg, want)
					}
				}
			}
			// apply's own restart of the pod on the node it cordoned fits.
			if resp, _ := f.review(deleteReq(f, "agent-0")); !resp.Allowed {
				t.Errorf("delete of agent-0 denied: %v", resp.Result)
			}
		})
	}
}

func TestNodeFactsChanged(t *testing.T) {
	base := testobj.Node("n").Meta(metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{corev1.LabelTopologyZone: "a"},
		Annotations: map[string]string{"other": "x"}}).Ready().Obj()
	for _, tc := range []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{"status heartbeat", func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now)
		}, false},
		{"another annotation", func(n *corev1.Node) { n.Annotations["other"] = "y" }, false},
		{"zone label", func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "b" }, true},
		{"new label", func(n *corev1.Node) { n.Labels["pool"] = "gpu" }, true},
		{"cordon", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, true},
		{"rollplan's cordon annotation", func(n *corev1.Node) { n.Annotations[facts.AnnCordonedBy] = "shop/agent" }, true},
		{"maintenance planned", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue})
		}, true},
		{"maintenance in progress", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMaintenanceInProgress, Status: corev1.ConditionTrue})
		}, true},
		{"maintenance reported False", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionFalse})
		}, false},
		{"rollplan's drain conditions (the facts do not read them)", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeDrainInProgress, Status: corev1.ConditionTrue},
				corev1.NodeCondition{Type: corev1.NodeDrained, Status: corev1.ConditionFalse})
		}, false},
	} {
		cur := base.DeepCopy()
		tc.change(cur)
		if got := nodeFactsChanged(base, cur); got != tc.want {
			t.Errorf("%s: nodeFactsChanged = %v, want %v", tc.name, got, tc.want)
		}
		// The way back is a change too.
		if got := nodeFactsChanged(cur, base); got != tc.want {
			t.Errorf("%s, undone: nodeFactsChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Maintenance that ends (True → False), and its heartbeat.
	under := base.DeepCopy()
	under.Status.Conditions = append(under.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMaintenanceInProgress, Status: corev1.ConditionTrue})
	beat := under.DeepCopy()
	beat.Status.Conditions[1].LastHeartbeatTime = metav1.NewTime(now)
	ended := under.DeepCopy()
	ended.Status.Conditions[1].Status = corev1.ConditionFalse
	if nodeFactsChanged(under, beat) || !nodeFactsChanged(under, ended) {
		t.Errorf("maintenance heartbeat changed: %v (want false); maintenance ended changed: %v (want true)", nodeFactsChanged(under, beat), nodeFactsChanged(under, ended))
	}
}

// A Node's status updates leave the cached states alone; a change the
// facts read invalidates them.
func TestNodeStatusKeepsStates(t *testing.T) {
	f := newFixture(t, Options{}, daemonSet(2, nil)...)
	gens := f.gate.states.gens
	for last := uint64(1 << 63); last != gens.nodes.Load(); {
		last = gens.nodes.Load()
		time.Sleep(100 * time.Millisecond)
	}
	g0 := gens.nodes.Load()
	ctx := t.Context()
	n, err := f.client.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now)
	if n, err = f.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{corev1.LabelTopologyZone: "b"}
	if _, err := f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One handler gets a Node's events in order: once the label change
	// shows, the status update was seen before it.
	for deadline := time.Now().Add(5 * time.Second); gens.nodes.Load() == g0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the label change never reached the state cache")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if g := gens.nodes.Load(); g != g0+1 {
		t.Errorf("node generation moved by %d for a status update and a label change, want 1 (the label change)", g-g0)
	}
}
