package e2e

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/test/kubelet"
)

// cordonNodesPolicy is the example policy, as rollplan apply --policy takes
// it (the test runs in test/e2e).
const cordonNodesPolicy = "../../policies/examples/cordon-nodes"

// nodePrepEvent is one object as a watch delivered it. Pods and Nodes live
// in one etcd, so their resourceVersions order every change in one
// timeline.
type nodePrepEvent struct {
	rv      int64
	pod     *corev1.Pod
	node    *corev1.Node
	deleted bool
}

// nodePrepWatcher records every change of the test's pods and Nodes.
type nodePrepWatcher struct {
	mu     sync.Mutex
	events []nodePrepEvent
}

func (e *env) watchNodePrep() *nodePrepWatcher {
	w := &nodePrepWatcher{}
	add := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
			deleted = true
		}
		ev := nodePrepEvent{deleted: deleted}
		switch o := obj.(type) {
		case *corev1.Pod:
			ev.pod = o
			ev.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
		case *corev1.Node:
			ev.node = o
			ev.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
		default:
			return
		}
		w.mu.Lock()
		w.events = append(w.events, ev)
		w.mu.Unlock()
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { add(obj, false) },
		UpdateFunc: func(_, obj any) { add(obj, false) },
		DeleteFunc: func(obj any) { add(obj, true) },
	}
	pods := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.ns))
	nodes := informers.NewSharedInformerFactoryWithOptions(e.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = envLabel + "=" + e.ns }))
	_, _ = pods.Core().V1().Pods().Informer().AddEventHandler(handler)
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(handler)
	stop := make(chan struct{})
	pods.Start(stop)
	nodes.Start(stop)
	pods.WaitForCacheSync(stop)
	nodes.WaitForCacheSync(stop)
	e.t.Cleanup(func() { close(stop); pods.Shutdown(); nodes.Shutdown() })
	return w
}

// nodePrepReport is what the replay of the timeline found.
type nodePrepReport struct {
	violations []string
	// replaced: nodes whose old daemon pod went (first deletion mark);
	// cordoned: nodes rollplan cordoned at some point.
	replaced, cordoned map[string]bool
	// maxCordoned: the most nodes cordoned for the DaemonSet at once.
	maxCordoned int
}

// check replays the timeline in resourceVersion order: whenever an old
// daemon pod is marked for deletion, its node must be cordoned and hold no
// pod of the other workload (drained); whenever rollplan lifts its cordon,
// the node's daemon pod must run the new template and be Ready.
func (w *nodePrepWatcher) check(ds, by, other string) nodePrepReport {
	w.mu.Lock()
	evs := append([]nodePrepEvent(nil), w.events...)
	w.mu.Unlock()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].rv < evs[j].rv })
	rep := nodePrepReport{replaced: map[string]bool{}, cordoned: map[string]bool{}}
	nodes, pods := map[string]*corev1.Node{}, map[string]*corev1.Pod{}
	old := func(p *corev1.Pod) bool { return p.Spec.Containers[0].Env[0].Value == "a" }
	ready := func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	ours := func(n *corev1.Node) bool {
		return n != nil && n.Spec.Unschedulable && n.Annotations[facts.AnnCordonedBy] == by
	}
	for _, ev := range evs {
		if ev.node != nil {
			prev := nodes[ev.node.Name]
			nodes[ev.node.Name] = ev.node
			if ours(ev.node) {
				rep.cordoned[ev.node.Name] = true
			}
			if ours(prev) && !ev.node.Spec.Unschedulable {
				for _, p := range pods {
					if p.Labels["app"] == ds && p.Spec.NodeName == ev.node.Name && p.DeletionTimestamp == nil && (old(p) || !ready(p)) {
						rep.violations = append(rep.violations, fmt.Sprintf("rv %d: node %s uncordoned while its daemon pod %s is old=%v ready=%v", ev.rv, ev.node.Name, p.Name, old(p), ready(p)))
					}
				}
			}
			n := 0
			for _, x := range nodes {
				if ours(x) {
					n++
				}
			}
			rep.maxCordoned = max(rep.maxCordoned, n)
			continue
		}
		p := ev.pod
		key := p.Namespace + "/" + p.Name
		prev := pods[key]
		if ev.deleted {
			delete(pods, key)
		} else {
			pods[key] = p
		}
		marked := (p.DeletionTimestamp != nil || ev.deleted) && (prev == nil || prev.DeletionTimestamp == nil)
		if p.Labels["app"] != ds || !old(p) || !marked || prev == nil {
			continue
		}
		node := p.Spec.NodeName
		rep.replaced[node] = true
		if n := nodes[node]; n == nil || !n.Spec.Unschedulable {
			rep.violations = append(rep.violations, fmt.Sprintf("rv %d: daemon pod %s deleted while node %s is not cordoned", ev.rv, p.Name, node))
		}
		for _, q := range pods {
			if q.Labels["app"] == other && q.Spec.NodeName == node {
				rep.violations = append(rep.violations, fmt.Sprintf("rv %d: daemon pod %s deleted while node %s still holds %s (not drained)", ev.rv, p.Name, node, q.Name))
			}
		}
	}
	return rep
}

// TestDaemonSetNodePreparation: a managed OnDelete DaemonSet on 4 nodes,
// labelled node-preparation=drain, under the example policy cordon-nodes,
// gets an env change (every pod recreated). A ReplicaSet of 3 pods runs
// beside it, and node 3 was cordoned by someone else beforehand. A dry
// run changes no node. Then the watcher's timeline shows every old daemon
// pod deleted only while its node was cordoned and held no ReplicaSet pod,
// no node rollplan cordoned uncordoned before its new daemon pod was
// Ready, and at most one node cordoned for the DaemonSet at a time (the
// budget is 1). At the end nodes 0-2 are uncordoned, with no annotation,
// and node 3 is still cordoned.
func TestDaemonSetNodePreparation(t *testing.T) {
	e := newEnv(t, 4)
	const name, other, nodes = "agent", "web", 4
	ds := daemonSet(e.ns, name, "example.com/agent:v1")
	ds.Labels = map[string]string{"node-preparation": "drain"}
	if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet(name, nodes, false)
	labels := map[string]string{"app": other}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: other},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}}}}}
	if _, err := e.client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAvailable("app="+other, 3)
	foreign := fmt.Sprintf("%s-node-3", e.ns)
	if _, err := e.client.CoreV1().Nodes().Patch(e.ctx, foreign, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w := e.watchNodePrep()
	e.kubelet.SetImage("example.com/agent:v2", kubelet.Behavior{StartDelay: 200 * time.Millisecond, ReadyDelay: 700 * time.Millisecond})
	e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Env[0].Value = "b"
		s.Containers[0].Image = "example.com/agent:v2"
	})
	by := e.ns + "/" + name
	nodeState := func() map[string]string {
		list, err := e.client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: envLabel + "=" + e.ns})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, n := range list.Items {
			out[strings.TrimPrefix(n.Name, e.ns+"-")] = fmt.Sprintf("unschedulable=%v annotation=%q", n.Spec.Unschedulable, n.Annotations[facts.AnnCordonedBy])
		}
		return out
	}
	before := nodeState()

	var dryLog bytes.Buffer
	dry, err := e.executorFor("DaemonSet", name, []string{cordonNodesPolicy}, &dryLog, true).Run(e.ctx, false)
	if err != nil || dry.Steps != 1 || dry.Actions["CordonNode"] != 1 {
		t.Fatalf("dry run: %v, %+v, want one step with 1 CordonNode\n%s", err, dry, dryLog.String())
	}
	if after := nodeState(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the dry run changed nodes: %v, was %v", after, before)
	}

	var log bytes.Buffer
	sum := run(t, e.executorFor("DaemonSet", name, []string{cordonNodesPolicy}, &log, false), e.ctx, &log)
	if sum.Actions["Recreate"] != nodes || sum.Actions["CordonNode"] != nodes-1 || sum.Actions["UncordonNode"] != nodes-1 || sum.Actions["DrainNode"] == 0 {
		t.Errorf("actions %v, want %d Recreate, %d CordonNode and UncordonNode (node 3 was cordoned already), some DrainNode", sum.Actions, nodes, nodes-1)
	}
	e.waitDaemonSet(name, nodes, true)
	e.waitAvailable("app="+other, 3)

	rep := w.check(name, by, other)
	for _, v := range rep.violations {
		t.Error(v)
	}
	if len(rep.replaced) != nodes || len(rep.cordoned) != nodes-1 {
		t.Errorf("the watcher saw %d daemon pods replaced and %d nodes cordoned by rollplan, want %d and %d: it did not observe the rollout", len(rep.replaced), len(rep.cordoned), nodes, nodes-1)
	}
	if rep.maxCordoned != 1 {
		t.Errorf("at most %d nodes cordoned for the DaemonSet at once, want 1 (the budget)", rep.maxCordoned)
	}
	want := map[string]string{}
	for i := range nodes {
		want[fmt.Sprintf("node-%d", i)] = `unschedulable=false annotation=""`
	}
	want["node-3"] = `unschedulable=true annotation=""`
	if got := nodeState(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("nodes at the end: %v, want %v", got, want)
	}
	for _, p := range e.pods("app=" + other) {
		if p.Spec.NodeName == foreign {
			t.Errorf("pod %s runs on %s, cordoned and drained", p.Name, foreign)
		}
	}
}

// TestDaemonSetDeletedMidRollout: the DaemonSet is deleted while apply
// holds a node cordoned for it (the updated pod never becomes Ready). The
// running apply finds it gone, uncordons that node, and fails saying so.
func TestDaemonSetDeletedMidRollout(t *testing.T) {
	e := newEnv(t, 3)
	const name, nodes = "agent", 3
	if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, daemonSet(e.ns, name, "example.com/agent:v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet(name, nodes, false)
	e.kubelet.SetImage("example.com/agent:v2", kubelet.Behavior{StartDelay: 100 * time.Millisecond, NeverReady: true})
	e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) {
		s.Containers[0].Env[0].Value = "b" // not in place: the pod is recreated on a cordoned node
		s.Containers[0].Image = "example.com/agent:v2"
	})
	var log bytes.Buffer
	x := e.executorFor("DaemonSet", name, []string{cordonNodesPolicy}, &log, false)
	done := make(chan error, 1)
	go func() {
		_, err := x.Run(e.ctx, false)
		done <- err
	}()
	by := e.ns + "/" + name
	cordoned := func() []string {
		list, err := e.client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: envLabel + "=" + e.ns})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range list.Items {
			if n.Spec.Unschedulable || n.Annotations[facts.AnnCordonedBy] != "" {
				out = append(out, fmt.Sprintf("%s unschedulable=%v by=%q", n.Name, n.Spec.Unschedulable, n.Annotations[facts.AnnCordonedBy]))
			}
		}
		return out
	}
	var held []string
	for deadline := time.Now().Add(time.Minute); len(held) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no node cordoned for %s within a minute\n%s", by, log.String())
		}
		held = cordoned()
	}
	if len(held) != 1 || !strings.Contains(held[0], "unschedulable=true by=\""+by+"\"") {
		t.Fatalf("cordoned nodes %q, want one cordoned by rollplan for %s", held, by)
	}
	node := strings.Fields(held[0])[0]
	if err := e.client.AppsV1().DaemonSets(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "uncordoned nodes "+node+" that rollplan had cordoned for it") {
			t.Fatalf("apply ended with %v, want not found and node %s uncordoned\n%s", err, node, log.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("apply still running a minute after the DaemonSet was deleted\n%s", log.String())
	}
	if left := cordoned(); len(left) != 0 {
		t.Errorf("nodes still cordoned or annotated: %q", left)
	}
}
