package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// prepEngine is the default strategy answering node_preparation prep.
type prepEngine struct {
	engine.Engine
	prep string
}

func (p prepEngine) Decide(ctx context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	d, err := p.Engine.Decide(ctx, r)
	if err == nil {
		d.NodePreparation = p.prep
	}
	return d, err
}

// dsCluster is a managed OnDelete DaemonSet "agent" on n nodes, each
// running one pod at revision "old" (image v1, Ready for an hour); the
// template now says v2 (a Recreate: the pod update policy is the default).
type dsCluster struct {
	ds    *appsv1.DaemonSet
	revs  []*appsv1.ControllerRevision
	nodes []*corev1.Node
	pods  []*corev1.Pod
}

var (
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

func dsTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func dsRevision(hash string, image string, n int64) *appsv1.ControllerRevision {
	t := dsTemplate(image)
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"$patch": "replace", "metadata": map[string]any{"labels": t.Labels}, "spec": t.Spec,
	}}})
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-" + hash, Labels: map[string]string{"app": "agent", appsv1.ControllerRevisionHashLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: n,
	}
}

// dsPod is the daemon pod on node at revision hash ("old": v1, "new": v2).
func dsPod(name, node, hash string, ready bool) *corev1.Pod {
	image, gen := "example.com/agent:v1", "1"
	if hash == "new" {
		image, gen = "example.com/agent:v2", "2"
	}
	return running(testobj.Pod(ns, name).Meta(podMeta(name)).
		Labels(map[string]string{"app": "agent", appsv1.ControllerRevisionHashLabelKey: hash, labelDSGeneration: gen}).Owner("DaemonSet", "agent", "ds-uid").
		Node(node).Image(image).Env("MODE", "a"), ready)
}

// otherPod is a pod of another workload (ownerKind; "" for a bare pod).
func otherPod(namespace, name, node, ownerKind string) *corev1.Pod {
	w := testobj.Pod(namespace, name).Meta(metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "3"}).
		Node(node).Containers(corev1.Container{Name: "main", Image: "example.com/other:1"})
	if ownerKind != "" {
		w.Owner(ownerKind, "owner", "owner-uid")
	}
	p := w.Obj()
	p.Status.Phase = corev1.PodRunning
	return p
}

func newDSCluster(n int, maxUnavailable string) *dsCluster {
	c := &dsCluster{
		ds: testobj.DaemonSet(ns, "agent").
			Meta(metav1.ObjectMeta{Namespace: ns, Name: "agent", UID: "ds-uid", Generation: 2,
				Annotations: map[string]string{facts.AnnManaged: "true", facts.AnnMaxUnavailable: maxUnavailable, annDSGeneration: "2"}}).
			Template(dsTemplate("example.com/agent:v2")).OnDelete().Obj(),
		revs: []*appsv1.ControllerRevision{dsRevision("old", "example.com/agent:v1", 1), dsRevision("new", "example.com/agent:v2", 2)},
	}
	c.ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(n), ObservedGeneration: 2}
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		c.nodes = append(c.nodes, testobj.Node(node).Meta(metav1.ObjectMeta{Name: node, ResourceVersion: "10"}).Obj())
		c.pods = append(c.pods, dsPod(fmt.Sprintf("agent-%d", i), node, "old", true))
	}
	return c
}

// cordon marks a node cordoned, by rollplan for by ("" for someone else).
func (c *dsCluster) cordon(i int, by string) {
	c.nodes[i].Spec.Unschedulable = true
	if by != "" {
		c.nodes[i].Annotations = map[string]string{facts.AnnCordonedBy: by}
	}
}

// nodeWrites records the node patches and evictions the executor sent.
type nodeWrites struct {
	patches   []string // node name, with " (dry run)"
	evictions []string // namespace/name, with " (dry run)"
	// status: patches of a node's status subresource, as "node-0
	// DrainInProgress=True Drained=False" (a condition set) or "node-0
	// -DrainInProgress" (one deleted), with " (dry run)".
	status []string
	// statusErr, when set, answers a status patch of the node instead.
	statusErr func(node string) error
	// seq: every node write in order, "status node-0" or "patch node-0".
	seq []string
}

// dsClient is a fake clientset holding the DaemonSet's cluster, and the
// API server's side of the executor's node patches and evictions, which
// the executors of newDSExec and newDSExecAt write through.
type dsClient struct {
	*fake.Clientset
	t         *testing.T
	w         *nodeWrites
	evict     func(name string) error
	patchNode func(name string) error
}

// client is a fake clientset holding the cluster. A node patch must carry
// the node's resourceVersion (else 409) and bumps it; an eviction must
// carry the pod's UID and removes the pod (unless evict refuses it). A dry
// run changes nothing.
func (c *dsCluster) client(t *testing.T, w *nodeWrites, evict func(name string) error, patchNode func(name string) error) *dsClient {
	objs := []runtime.Object{c.ds}
	for _, r := range c.revs {
		objs = append(objs, r)
	}
	for _, n := range c.nodes {
		objs = append(objs, n)
	}
	for _, p := range c.pods {
		objs = append(objs, p)
	}
	return &dsClient{Clientset: fake.NewClientset(objs...), t: t, w: w, evict: evict, patchNode: patchNode}
}

// install makes x write through the cluster's nodeWriter.
func (c *dsClient) install(x *Executor) {
	x.writer = nodeWriter{writer: x.writer, client: c}
}

// nodeWriter plays the API server for node patches and evictions, which
// the fake clientset would store without the checks (resourceVersion
// precondition, owned conditions) or not at all (evictions); other writes
// go to next unchanged.
type nodeWriter struct {
	writer
	client *dsClient
}

func (nw nodeWriter) dryRun() bool {
	cw, ok := sends(nw.writer)
	return ok && cw.dryRun
}

func (nw nodeWriter) patchNode(ctx context.Context, name string, pt types.PatchType, data []byte, sub ...string) (*corev1.Node, error) {
	if len(sub) > 0 && sub[0] == "status" {
		return nw.patchNodeStatus(name, pt, data)
	}
	cs, t, w, dry := nw.client, nw.client.t, nw.client.w, nw.dryRun()
	w.patches = append(w.patches, name+map[bool]string{true: " (dry run)"}[dry])
	w.seq = append(w.seq, "patch "+name)
	if pt != types.MergePatchType {
		t.Errorf("node %s: patch type %s, want a merge patch", name, pt)
	}
	if cs.patchNode != nil {
		if err := cs.patchNode(name); err != nil {
			return nil, err
		}
	}
	obj, err := cs.Tracker().Get(nodesGVR, "", name)
	if err != nil {
		return nil, err
	}
	node := obj.(*corev1.Node).DeepCopy()
	var body struct {
		Metadata struct {
			ResourceVersion string             `json:"resourceVersion"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Unschedulable *bool `json:"unschedulable"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, err
	}
	if body.Metadata.ResourceVersion != node.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, fmt.Errorf("resourceVersion %q, the node has %q", body.Metadata.ResourceVersion, node.ResourceVersion))
	}
	if dry {
		return node, nil
	}
	for k, v := range body.Metadata.Annotations {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		if v == nil {
			delete(node.Annotations, k)
		} else {
			node.Annotations[k] = *v
		}
	}
	if body.Spec.Unschedulable != nil {
		node.Spec.Unschedulable = *body.Spec.Unschedulable
	}
	var rv int
	fmt.Sscan(node.ResourceVersion, &rv)
	node.ResourceVersion = fmt.Sprint(rv + 1)
	return node, cs.Tracker().Update(nodesGVR, node, "")
}

// patchNodeStatus is the status subresource of a node: the patch must be a
// strategic-merge patch of status.conditions only, of the types rollplan
// writes (its field manager: TestClientWriter); it is applied to the
// tracker (not in a dry run) and bumps the resourceVersion.
func (nw nodeWriter) patchNodeStatus(name string, pt types.PatchType, data []byte) (*corev1.Node, error) {
	cs, t, w, dry := nw.client, nw.client.t, nw.client.w, nw.dryRun()
	if pt != types.StrategicMergePatchType {
		t.Errorf("node %s status: patch type %s; want a strategic-merge patch", name, pt)
	}
	var body map[string]map[string][]map[string]any
	if err := json.Unmarshal(data, &body); err != nil || len(body) != 1 || len(body["status"]) != 1 || body["status"]["conditions"] == nil {
		t.Errorf("node %s status: patch %s, want status.conditions only (%v)", name, data, err)
	}
	what := name
	for _, c := range body["status"]["conditions"] {
		switch ty := fmt.Sprint(c["type"]); {
		case ty != string(corev1.NodeDrainInProgress) && ty != string(corev1.NodeDrained):
			t.Errorf("node %s status: patch of condition %s, which rollplan does not own", name, ty)
		case c["$patch"] == "delete":
			what += " -" + ty
		default:
			what += " " + ty + "=" + fmt.Sprint(c["status"])
		}
	}
	w.status = append(w.status, what+map[bool]string{true: " (dry run)"}[dry])
	w.seq = append(w.seq, "status "+name)
	if w.statusErr != nil {
		if err := w.statusErr(name); err != nil {
			return nil, err
		}
	}
	obj, err := cs.Tracker().Get(nodesGVR, "", name)
	if err != nil {
		return nil, err
	}
	node := obj.(*corev1.Node).DeepCopy()
	if dry {
		return node, nil
	}
	old, _ := json.Marshal(node)
	merged, err := strategicpatch.StrategicMergePatch(old, data, corev1.Node{})
	if err != nil {
		return nil, err
	}
	out := &corev1.Node{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	node.Status = out.Status
	var rv int
	fmt.Sscan(node.ResourceVersion, &rv)
	node.ResourceVersion = fmt.Sprint(rv + 1)
	return node, cs.Tracker().Update(nodesGVR, node, "")
}

func (nw nodeWriter) evictPod(ctx context.Context, pod *corev1.Pod) error {
	cs, t, w, dry := nw.client, nw.client.t, nw.client.w, nw.dryRun()
	name := pod.Namespace + "/" + pod.Name
	if pod.UID != types.UID(pod.Name+"-uid") {
		t.Errorf("eviction of %s without its UID as precondition", name)
	}
	w.evictions = append(w.evictions, name+map[bool]string{true: " (dry run)"}[dry])
	if cs.evict != nil {
		if err := cs.evict(name); err != nil {
			return err
		}
	}
	if !dry {
		_ = cs.Tracker().Delete(podsGVR, pod.Namespace, pod.Name)
	}
	return nil
}

func newDSExec(t *testing.T, cs *dsClient, prep string, dryRun bool, log *bytes.Buffer) *Executor {
	t.Helper()
	return testExec(t, cs, "DaemonSet", "agent", prepEngine{native.New(), prep}, dryRun, log)
}

// nodeOutcomes prints a step's actions as type:pod-or-node:outcome.
func nodeOutcomes(s *StepResult) []string {
	var out []string
	for _, a := range s.Actions {
		what := a.Pod
		if what == "" {
			what = a.Node
		}
		out = append(out, a.Type+":"+what+":"+a.Outcome)
	}
	return out
}

// nodeState is "schedulable", or "cordoned" with the AnnCordonedBy value.
func nodeState(t *testing.T, cs *dsClient, name string) string {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := "schedulable"
	if n.Spec.Unschedulable {
		s = "cordoned"
	}
	if by, ok := n.Annotations[facts.AnnCordonedBy]; ok {
		s += " by " + by
	}
	return s
}

func TestNodePreparationStep(t *testing.T) {
	tooMany := func(string) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	}
	gone := metav1.NewTime(now.Add(-time.Second))
	tests := []struct {
		name      string
		prep      string
		setup     func(c *dsCluster)
		dryRun    bool
		evict     func(string) error
		patchNode func(string) error
		want      []string          // type:pod-or-node:outcome
		nodes     map[string]string // node → nodeState after the step
		evicted   []string
		patched   []string
		reason    map[int]string // action index → a substring of its reason
	}{
		{
			name:    "cordon: the node is cordoned and annotated, then its pod is recreated; uncordon waits for the new pod",
			prep:    engine.NodePrepCordon,
			want:    []string{"CordonNode:node-0:done", "Recreate:agent-0:done", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "cordoned by default/agent", "node-1": "schedulable"},
			evicted: []string{"default/agent-0"}, patched: []string{"node-0"},
			reason: map[int]string{2: "no daemon pod runs on the node yet: node node-0 stays cordoned for now"},
		},
		{
			name: "cordon, in place: the pod is patched once its node is cordoned; uncordon waits until the new image runs",
			prep: engine.NodePrepCordon,
			setup: func(c *dsCluster) {
				c.ds.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceIfPossible"
			},
			want:    []string{"CordonNode:node-0:done", "InPlaceUpdate:agent-0:done", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "cordoned by default/agent", "node-1": "schedulable"},
			patched: []string{"node-0"},
			reason:  map[int]string{2: "pod agent-0 is not available yet (container app runs example.com/agent:v1, spec says example.com/agent:v2)"},
		},
		{
			name: "drain: only pods no DaemonSet owns, not mirror or finished, are evicted; the pod waits until they are gone",
			prep: engine.NodePrepDrain,
			setup: func(c *dsCluster) {
				mirror := otherPod("kube-system", "etcd-node-0", "node-0", "")
				mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
				done := otherPod("batch", "job-1", "node-0", "Job")
				done.Status.Phase = corev1.PodSucceeded
				c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet"), otherPod("kube-system", "proxy-0", "node-0", "DaemonSet"),
					mirror, done, otherPod("shop", "web-2", "node-1", "ReplicaSet"), otherPod("shop", "debug", "node-0", ""))
			},
			want:    []string{"CordonNode:node-0:done", "DrainNode:node-0:done", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "cordoned by default/agent", "node-1": "schedulable"},
			evicted: []string{"shop/debug", "shop/web-1"}, patched: []string{"node-0"},
			reason: map[int]string{1: "evicted shop/debug, shop/web-1 from node node-0; pod agent-0 waits until they are gone", 2: "node node-0 is not drained yet"},
		},
		{
			name: "drain: a PodDisruptionBudget refusing the eviction is not now; the node stays cordoned, the pod waits",
			prep: engine.NodePrepDrain,
			setup: func(c *dsCluster) {
				c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet"))
			},
			evict:   func(n string) error { return map[bool]error{true: tooMany(n)}[n == "shop/web-1"] },
			want:    []string{"CordonNode:node-0:done", "DrainNode:node-0:skipped", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "cordoned by default/agent"},
			evicted: []string{"shop/web-1"}, patched: []string{"node-0"},
			reason: map[int]string{1: "eviction refused for now"},
		},
		{
			name: "drain: a PodDisruptionBudget whose status is out of order (v1.37's 403 with its cause) is not now; the reason names it and what to do",
			prep: engine.NodePrepDrain,
			setup: func(c *dsCluster) {
				c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet"), otherPod("shop", "web-2", "node-0", "ReplicaSet"))
			},
			evict: func(n string) error {
				return pdbForbidden("web-pdb", "pdb disruptions allowed is negative",
					"The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative")
			},
			want:    []string{"CordonNode:node-0:done", "DrainNode:node-0:skipped", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "cordoned by default/agent"},
			evicted: []string{"shop/web-1", "shop/web-2"}, patched: []string{"node-0"},
			reason: map[int]string{1: "eviction refused for now (PodDisruptionBudget or the rollplan gate): " +
				"shop/web-1 (PodDisruptionBudget shop/web-pdb: The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative), " +
				"shop/web-2 (PodDisruptionBudget shop/web-pdb: The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative): " +
				"node node-0 is not drained; the budget's status is out of order: check that kube-controller-manager's disruption controller runs and updates it (kubectl get pdb -n shop web-pdb -o yaml"},
		},
		{
			name: "drain: a pod still terminating on the node keeps it undrained",
			prep: engine.NodePrepDrain,
			setup: func(c *dsCluster) {
				p := otherPod("shop", "web-1", "node-0", "ReplicaSet")
				p.DeletionTimestamp, p.Finalizers = &gone, []string{"example.com/hold"}
				c.pods = append(c.pods, p)
			},
			want:    []string{"CordonNode:node-0:done", "DrainNode:node-0:skipped", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			patched: []string{"node-0"},
			reason:  map[int]string{1: "waiting for shop/web-1 to terminate"},
		},
		{
			name: "a node rollplan cordoned earlier goes first (a restarted apply), without a write; no other node is prepared",
			prep: engine.NodePrepDrain,
			setup: func(c *dsCluster) {
				c.cordon(1, "default/agent")
			},
			want:    []string{"CordonNode:node-1:skipped", "DrainNode:node-1:skipped", "Recreate:agent-1:done", "UncordonNode:node-1:skipped"},
			nodes:   map[string]string{"node-0": "schedulable", "node-1": "cordoned by default/agent"},
			evicted: []string{"default/agent-1"},
			reason:  map[int]string{0: "nothing to write: node node-1 is cordoned for default/agent already", 1: "nothing to evict: node node-1 is drained"},
		},
		{
			name: "a node someone else cordoned counts as prepared, is not written, and stays cordoned",
			prep: engine.NodePrepCordon,
			setup: func(c *dsCluster) {
				c.cordon(0, "")
			},
			want:    []string{"CordonNode:node-0:skipped", "Recreate:agent-0:done"},
			nodes:   map[string]string{"node-0": "cordoned"},
			evicted: []string{"default/agent-0"},
			reason:  map[int]string{0: "cordoned already, not by rollplan for default/agent"},
		},
		{
			name: "a node left cordoned with its pod updated and available is uncordoned; the next node follows",
			prep: engine.NodePrepCordon,
			setup: func(c *dsCluster) {
				c.cordon(0, "default/agent")
				c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			},
			want:    []string{"UncordonNode:node-0:done", "CordonNode:node-1:done", "Recreate:agent-1:done", "UncordonNode:node-1:skipped"},
			nodes:   map[string]string{"node-0": "schedulable", "node-1": "cordoned by default/agent"},
			evicted: []string{"default/agent-1"}, patched: []string{"node-0", "node-1"},
		},
		{
			name: "the updated pod of a node left cordoned is not available yet: the node stays cordoned, and the next node waits for the budget",
			prep: engine.NodePrepCordon,
			setup: func(c *dsCluster) {
				c.cordon(0, "default/agent")
				c.pods[0] = dsPod("agent-0x", "node-0", "new", false)
				c.pods[0].CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
			},
			want:   []string{"UncordonNode:node-0:skipped", "CordonNode:node-1:skipped", "Recreate:agent-1:skipped", "UncordonNode:node-1:skipped"},
			nodes:  map[string]string{"node-0": "cordoned by default/agent", "node-1": "schedulable"},
			reason: map[int]string{0: "pod agent-0x is not available yet", 1: "budget maxUnavailable would be 2/1 with pod agent-1"},
		},
		{
			name:   "dry run: node writes and evictions carry dryRun=All, nothing changes, the step goes as far as it can",
			prep:   engine.NodePrepDrain,
			dryRun: true,
			setup: func(c *dsCluster) {
				c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet"))
			},
			want:    []string{"CordonNode:node-0:would", "DrainNode:node-0:would", "Recreate:agent-0:would", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "schedulable"},
			evicted: []string{"shop/web-1 (dry run)", "default/agent-0 (dry run)"}, patched: []string{"node-0 (dry run)"},
		},
		{
			name: "the node changed since it was read (409): not cordoned, its pod waits",
			prep: engine.NodePrepCordon,
			patchNode: func(n string) error {
				return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, n, fmt.Errorf("changed"))
			},
			want:    []string{"CordonNode:node-0:skipped", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			nodes:   map[string]string{"node-0": "schedulable"},
			patched: []string{"node-0"},
			reason:  map[int]string{1: "node node-0 is not cordoned yet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDSCluster(2, "1")
			if tt.setup != nil {
				tt.setup(c)
			}
			w := &nodeWrites{}
			cs := c.client(t, w, tt.evict, tt.patchNode)
			var log bytes.Buffer
			res, err := newDSExec(t, cs, tt.prep, tt.dryRun, &log).Step(context.Background())
			if err != nil {
				t.Fatalf("step: %v\n%s", err, log.String())
			}
			if got := nodeOutcomes(res); !slices.Equal(got, tt.want) {
				t.Errorf("actions %q, want %q\nlog:\n%s", got, tt.want, log.String())
			}
			for node, want := range tt.nodes {
				if got := nodeState(t, cs, node); got != want {
					t.Errorf("%s: %s, want %s", node, got, want)
				}
			}
			if !slices.Equal(w.evictions, tt.evicted) {
				t.Errorf("evicted %q, want %q", w.evictions, tt.evicted)
			}
			if !slices.Equal(w.patches, tt.patched) {
				t.Errorf("node patches %q, want %q", w.patches, tt.patched)
			}
			for i, want := range tt.reason {
				if i >= len(res.Actions) || !strings.Contains(res.Actions[i].Reason, want) {
					t.Errorf("action %d: reason lacks %q: %+v", i, want, res.Actions)
				}
			}
		})
	}
}

// The Node actions on their own: the cordon checks the budget with the
// node's pod added; an uncordon never touches a node rollplan did not
// cordon for this DaemonSet.
func TestNodeActionGuards(t *testing.T) {
	budget := []plan.Budget{{Name: "maxUnavailable", Limit: 1, Type: "unavailable"}}
	wave := func(as ...plan.Action) plan.WorkloadPlan {
		return plan.WorkloadPlan{Budgets: budget, Waves: []plan.Wave{{Index: 1, Actions: as}}}
	}
	cordon := plan.Action{Type: plan.ActionCordonNode, Node: "node-0"}
	recreate := plan.Action{Type: plan.ActionRecreate, Pod: "agent-0", Node: "node-0"}
	uncordon := plan.Action{Type: plan.ActionUncordonNode, Node: "node-0"}
	for _, tc := range []struct {
		name          string
		setup         func(c *dsCluster)
		wp            plan.WorkloadPlan
		a             plan.Action
		outcome, want string
		metric        string
	}{
		{"another pod is unavailable: the budget has no room, no cordon", func(c *dsCluster) { c.pods[1] = dsPod("agent-1", "node-1", "old", false) },
			wave(cordon, recreate), cordon, Skipped, "budget maxUnavailable would be 2/1 with pod agent-0: node node-0 is not cordoned now", outcomeSkippedBudget},
		{"the node's pod was updated since the plan: no cordon", func(c *dsCluster) { c.pods[0] = dsPod("agent-0", "node-0", "new", true) },
			wave(cordon, recreate), cordon, Skipped, "updated since the plan was made", outcomeConflict},
		{"someone else's cordon is never lifted", func(c *dsCluster) { c.cordon(0, "") },
			wave(uncordon), uncordon, Skipped, `not cordoned by rollplan for default/agent (annotation rollplan.dev/cordoned-by=""): left as it is`, outcomeUnchanged},
		{"nor one rollplan made for another DaemonSet", func(c *dsCluster) { c.cordon(0, "default/other") },
			wave(uncordon), uncordon, Skipped, `(annotation rollplan.dev/cordoned-by="default/other"): left as it is`, outcomeUnchanged},
		{"a pod held out of the rollout does not keep its node cordoned", func(c *dsCluster) { c.cordon(0, "default/agent") },
			plan.WorkloadPlan{Held: []plan.Held{{Pod: "agent-0", Reason: "frozen"}}, Waves: []plan.Wave{{Index: 1, Actions: []plan.Action{uncordon}}}}, uncordon, Done, "", outcomeDone},
		{"an unheld pod at the old revision keeps it cordoned", func(c *dsCluster) { c.cordon(0, "default/agent") },
			wave(uncordon), uncordon, Skipped, "pod agent-0 does not run the update revision yet", outcomeWaiting},
		{"a drain on a node this step did not cordon does nothing", nil,
			wave(cordon, plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}, recreate), plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}, Skipped, "node node-0 is not cordoned yet: not drained", outcomeWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDSCluster(2, "1")
			if tc.setup != nil {
				tc.setup(c)
			}
			w := &nodeWrites{}
			cs := c.client(t, w, nil, nil)
			var log bytes.Buffer
			x := newDSExec(t, cs, engine.NodePrepCordon, false, &log)
			r, metric, err := x.nodeAction(context.Background(), tc.wp, tc.a, map[string]bool{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tc.outcome || !strings.Contains(r.Reason, tc.want) || metric != tc.metric {
				t.Errorf("got %s (%s) metric %s, want %s containing %q, metric %s", r.Outcome, r.Reason, metric, tc.outcome, tc.want, tc.metric)
			}
			if tc.outcome == Skipped && len(w.patches)+len(w.evictions) > 0 {
				t.Errorf("wrote %v %v", w.patches, w.evictions)
			}
		})
	}
}

// A drain rollout converges step by step, with a DaemonSet controller that
// recreates each deleted daemon pod at the update revision and another
// workload's pods that go when evicted. apply is stopped once mid-way (the
// daemon pod's eviction fails after its node was cordoned and drained) and
// a new executor picks up that node first. At every moment at most one
// node is cordoned for the DaemonSet (the budget is 1); at the end every
// pod runs the update revision, every node rollplan cordoned is
// uncordoned, and the node someone else had cordoned stays cordoned.
func TestNodePreparationConverges(t *testing.T) {
	c := newDSCluster(4, "1")
	c.cordon(2, "")
	for i := range 4 {
		c.pods = append(c.pods, otherPod("shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("node-%d", i), "ReplicaSet"))
	}
	w := &nodeWrites{}
	failed := false
	cs := c.client(t, w, func(name string) error {
		if name == "default/agent-1" && !failed {
			failed = true
			return apierrors.NewInternalError(fmt.Errorf("apiserver went away"))
		}
		return nil
	}, nil)
	rec := events.NewFakeRecorder(100)
	var log bytes.Buffer
	newExec := func() *Executor {
		reg := prometheus.NewRegistry()
		x, err := New(cs, Options{
			Target: live.Target{Namespace: ns, Kind: "DaemonSet", Name: "agent"},
			Engine: prepEngine{native.New(), engine.NodePrepDrain}, Now: func() time.Time { return now },
			Log: slog.New(slog.NewTextHandler(&log, nil)), Events: rec, Metrics: NewMetrics(reg),
		})
		if err != nil {
			t.Fatal(err)
		}
		cs.install(x)
		return x
	}
	x := newExec()
	controller := func() {
		pods, _ := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=agent"})
		have := map[string]bool{}
		for _, p := range pods.Items {
			have[p.Spec.NodeName] = true
		}
		for i := range 4 {
			node := fmt.Sprintf("node-%d", i)
			if !have[node] {
				if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), dsPod(fmt.Sprintf("agent-%dx", i), node, "new", true), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	done, restarted := false, false
	for step := 0; step < 30 && !done; step++ {
		res, err := x.Step(context.Background())
		switch {
		case err != nil && !restarted && strings.Contains(err.Error(), "apiserver went away"):
			// apply dies here; the next one starts from the cluster alone.
			if got := nodeState(t, cs, "node-1"); got != "cordoned by default/agent" {
				t.Fatalf("node-1 %s when apply died, want cordoned for the DaemonSet", got)
			}
			if got, want := condState(t, cs, "node-1"), []string{"DrainInProgress=False/RollplanDrained", "Drained=True/RollplanDrained"}; !slices.Equal(got, want) {
				t.Fatalf("node-1 conditions %q when apply died, want %q", got, want)
			}
			x, restarted = newExec(), true
		case err != nil:
			t.Fatalf("step %d: %v\n%s", step, err, log.String())
		default:
			done = res.Done
		}
		cordoned := 0
		for i := range 4 {
			name := fmt.Sprintf("node-%d", i)
			ours := strings.HasPrefix(nodeState(t, cs, name), "cordoned by")
			if ours {
				cordoned++
			}
			// rollplan's drain conditions never outlive its cordon.
			if conds := condState(t, cs, name); len(conds) > 0 && !ours {
				t.Fatalf("step %d: %s is %s with conditions %q", step, name, nodeState(t, cs, name), conds)
			}
		}
		if cordoned > 1 {
			t.Fatalf("step %d: %d nodes cordoned for the DaemonSet at once, budget 1\n%s", step, cordoned, log.String())
		}
		controller()
	}
	if !done || !restarted {
		t.Fatalf("done %v, restarted %v\n%s", done, restarted, log.String())
	}
	for i, want := range []string{"schedulable", "schedulable", "cordoned", "schedulable"} {
		if got := nodeState(t, cs, fmt.Sprintf("node-%d", i)); got != want {
			t.Errorf("node-%d: %s, want %s", i, got, want)
		}
		if got := condState(t, cs, fmt.Sprintf("node-%d", i)); len(got) > 0 {
			t.Errorf("node-%d: conditions %q left", i, got)
		}
	}
	// Set while draining, cleared at the uncordon: the three nodes
	// rollplan cordoned, none on the one someone else did.
	var sets, clears int
	for _, s := range w.status {
		switch {
		case strings.HasPrefix(s, "node-2"):
			t.Errorf("status patch %q of the node someone else cordoned", s)
		case strings.Contains(s, " -"):
			clears++
		default:
			sets++
		}
	}
	if clears != 3 || sets < 3 {
		t.Errorf("status patches %q: %d removals, %d sets; want 3 and at least 3", w.status, clears, sets)
	}
	pods, _ := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Namespace == "shop" {
			t.Errorf("pod shop/%s was not drained", p.Name)
		}
		if p.Namespace == ns && p.Labels[appsv1.ControllerRevisionHashLabelKey] != "new" {
			t.Errorf("pod %s at revision %s", p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey])
		}
	}
	var cordons, uncordons, drains int
	for _, e := range drain(rec) {
		switch {
		case strings.Contains(e, reasonNodeCordoned):
			cordons++
		case strings.Contains(e, reasonNodeUncordoned):
			uncordons++
		case strings.Contains(e, reasonNodeDrain):
			drains++
		}
	}
	if cordons != 3 || uncordons != 3 || drains != 4 {
		t.Errorf("events: %d NodeCordoned, %d NodeUncordoned, %d NodeDrain; want 3, 3, 4", cordons, uncordons, drains)
	}
	if n := testutil.ToFloat64(x.Metrics().Actions.WithLabelValues("DaemonSet", plan.ActionUncordonNode, outcomeDone)); n < 1 {
		t.Errorf("no UncordonNode counted done by the last executor")
	}
}

// A DaemonSet deleted mid-rollout leaves the nodes rollplan cordoned for
// it: apply uncordons them (only them) and still fails with not found.
func TestReleaseCordonsOfDeletedDaemonSet(t *testing.T) {
	conflict := func(string) error {
		return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "node-0", fmt.Errorf("changed"))
	}
	tests := []struct {
		name      string
		cordons   map[int]string // node index → AnnCordonedBy ("" cordoned by someone else)
		dryRun    bool
		patchNode func(string) error
		wantErr   string
		exact     bool     // the error is wantErr, nothing added
		want      []string // state of node-0..2 afterwards
	}{
		{
			name:    "ours are uncordoned, the others left",
			cordons: map[int]string{0: ns + "/agent", 1: "", 2: ns + "/other"},
			wantErr: "daemonset \"agent\" not found in namespace \"default\"; uncordoned nodes node-0 that rollplan had cordoned for it",
			want:    []string{"schedulable", "cordoned", "cordoned by default/other"},
		},
		{
			name:    "dry run",
			cordons: map[int]string{0: ns + "/agent", 2: ns + "/agent"},
			dryRun:  true,
			wantErr: "would uncordon (dry run) nodes node-0, node-2 that rollplan had cordoned for it",
			want:    []string{"cordoned by default/agent", "schedulable", "cordoned by default/agent"},
		},
		{
			name:    "nothing cordoned: the not-found error alone",
			cordons: map[int]string{1: ""},
			wantErr: "daemonset \"agent\" not found in namespace \"default\"",
			exact:   true,
			want:    []string{"schedulable", "cordoned", "schedulable"},
		},
		{
			name:      "a node changed meanwhile",
			cordons:   map[int]string{0: ns + "/agent"},
			patchNode: conflict,
			wantErr:   "uncordoned nodes none that rollplan had cordoned for it; could not uncordon node-0",
			want:      []string{"cordoned by default/agent", "schedulable", "schedulable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDSCluster(3, "1")
			for i, by := range tt.cordons {
				c.cordon(i, by)
			}
			w := &nodeWrites{}
			cs := c.client(t, w, nil, tt.patchNode)
			if err := cs.AppsV1().DaemonSets(ns).Delete(context.Background(), "agent", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			_, err := newDSExec(t, cs, "cordon", tt.dryRun, &log).Step(context.Background())
			if err == nil || !errors.Is(err, capture.ErrNotFound) {
				t.Fatalf("Step error %v, want one wrapping capture.ErrNotFound", err)
			}
			if got := err.Error(); !strings.Contains(got, tt.wantErr) || (tt.exact && got != tt.wantErr) {
				t.Errorf("error %q, want %q (exact: %v)", got, tt.wantErr, tt.exact)
			}
			for i, want := range tt.want {
				if got := nodeState(t, cs, fmt.Sprintf("node-%d", i)); got != want {
					t.Errorf("node-%d: %s, want %s", i, got, want)
				}
			}
		})
	}
}

// Node conditions of others, on node-0 in the condition tests: the
// kubelet's Ready and an admin's MaintenancePlanned. rollplan never
// changes them.
var (
	kubeletReady = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.NewTime(now.Add(-time.Minute)), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	adminMaintenance = corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: "KernelUpgrade", Message: "reboot on Sunday",
		LastHeartbeatTime: metav1.NewTime(now.Add(-2 * time.Hour)), LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}
)

// cond is a condition as rollplan or someone else wrote it an hour ago.
func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: "earlier",
		LastHeartbeatTime: metav1.NewTime(now.Add(-time.Hour)), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
}

// condState lists the node's conditions as Type=Status/Reason, in order.
func condState(t *testing.T, cs *dsClient, name string) []string {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range n.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(out) // a merge by type keeps no order that matters
	return out
}

// checkOthers fails unless the kubelet's and the admin's conditions on the
// node are exactly as they were.
func checkOthers(t *testing.T, cs *dsClient, name string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []corev1.NodeCondition{kubeletReady, adminMaintenance} {
		got := nodeCondition(n, want.Type)
		if got == nil || !got.LastHeartbeatTime.Equal(&want.LastHeartbeatTime) || !got.LastTransitionTime.Equal(&want.LastTransitionTime) ||
			got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
			t.Errorf("node %s: condition %s is %+v, want it untouched: %+v", name, want.Type, got, want)
		}
	}
}

func newDSExecAt(t *testing.T, cs *dsClient, prep string, v kubeversion.Version, dryRun bool, log *bytes.Buffer) *Executor {
	t.Helper()
	x, err := New(cs, Options{
		Target: live.Target{Namespace: ns, Kind: "DaemonSet", Name: "agent"}, Engine: prepEngine{native.New(), prep},
		KubernetesVersion: v, DryRun: dryRun, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(log, nil)), Poll: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs.install(x)
	return x
}

// The drain conditions through whole steps: set on the node rollplan
// cordoned while it drains, Drained once no pod a drain evicts is left,
// removed before the cordon is lifted; none before v1.37 nor on a node
// someone else cordoned; the kubelet's and the admin's conditions are left
// as they are, and so is a drain condition someone else wrote.
func TestNodeDrainConditions(t *testing.T) {
	draining := []string{"Ready=True/KubeletReady", "MaintenancePlanned=True/KernelUpgrade", "DrainInProgress=True/RollplanDraining", "Drained=False/RollplanDraining"}
	drained := []string{"Ready=True/KubeletReady", "MaintenancePlanned=True/KernelUpgrade", "DrainInProgress=False/RollplanDrained", "Drained=True/RollplanDrained"}
	untouched := []string{"Ready=True/KubeletReady", "MaintenancePlanned=True/KernelUpgrade"}
	webOnNode0 := func(c *dsCluster) { c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet")) }
	tests := []struct {
		name    string
		version kubeversion.Version
		dryRun  bool
		setup   func(c *dsCluster)
		want    []string // type:pod-or-node:outcome
		status  []string // status patches
		seq     []string // node writes in order (when set)
		conds   []string // node-0's conditions afterwards
		reason  map[int]string
	}{
		{
			name:   "v1.37: the node rollplan cordons and drains gets DrainInProgress=True, Drained=False",
			setup:  webOnNode0,
			want:   []string{"CordonNode:node-0:done", "DrainNode:node-0:done", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			status: []string{"node-0 DrainInProgress=True Drained=False"},
			seq:    []string{"patch node-0", "status node-0"},
			conds:  draining,
		},
		{
			name:    "zero version means the newest: the same",
			version: kubeversion.Version{},
			setup:   webOnNode0,
			status:  []string{"node-0 DrainInProgress=True Drained=False"},
			conds:   draining,
		},
		{
			name:    "v1.36: no condition at all",
			version: kubeversion.V1_36,
			setup:   webOnNode0,
			want:    []string{"CordonNode:node-0:done", "DrainNode:node-0:done", "Recreate:agent-0:skipped", "UncordonNode:node-0:skipped"},
			conds:   untouched,
		},
		{
			name:    "v1.35: none either",
			version: kubeversion.V1_35,
			setup:   webOnNode0,
			conds:   untouched,
		},
		{
			name: "drained: nothing left to evict, DrainInProgress=False and Drained=True before the pod's own action",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.nodes[0].Status.Conditions = append(c.nodes[0].Status.Conditions,
					cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, condReasonDraining), cond(corev1.NodeDrained, corev1.ConditionFalse, condReasonDraining))
			},
			want:   []string{"CordonNode:node-0:skipped", "DrainNode:node-0:skipped", "Recreate:agent-0:done", "UncordonNode:node-0:skipped"},
			status: []string{"node-0 DrainInProgress=False Drained=True"},
			conds:  drained,
		},
		{
			name: "a restarted apply (a crash before the conditions were written) sets the ones it finds missing",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
			},
			status: []string{"node-0 DrainInProgress=False Drained=True"},
			conds:  drained,
		},
		{
			name: "a node someone else cordoned is drained without conditions",
			setup: func(c *dsCluster) {
				c.cordon(0, "")
				webOnNode0(c)
			},
			want:  []string{"CordonNode:node-0:skipped", "DrainNode:node-0:done", "Recreate:agent-0:skipped"},
			conds: untouched,
		},
		{
			name: "a DrainInProgress someone else wrote is left alone, and the reason says so",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.nodes[0].Status.Conditions = append(c.nodes[0].Status.Conditions, cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, "AdminDrain"))
			},
			status: []string{"node-0 Drained=True"},
			conds:  []string{"Ready=True/KubeletReady", "MaintenancePlanned=True/KernelUpgrade", "DrainInProgress=True/AdminDrain", "Drained=True/RollplanDrained"},
			reason: map[int]string{1: `node conditions DrainInProgress=True (reason "AdminDrain") are someone else's: left as they are`},
		},
		{
			name: "uncordon: rollplan's conditions go first, then the cordon; the others stay",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.nodes[0].Status.Conditions = append(c.nodes[0].Status.Conditions,
					cond(corev1.NodeDrainInProgress, corev1.ConditionFalse, condReasonDrained), cond(corev1.NodeDrained, corev1.ConditionTrue, condReasonDrained))
				c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			},
			want:   []string{"UncordonNode:node-0:done", "CordonNode:node-1:done", "DrainNode:node-1:skipped", "Recreate:agent-1:done", "UncordonNode:node-1:skipped"},
			status: []string{"node-0 -DrainInProgress -Drained", "node-1 DrainInProgress=False Drained=True"},
			seq:    []string{"status node-0", "patch node-0", "patch node-1", "status node-1"},
			conds:  untouched,
		},
		{
			name:    "uncordon removes rollplan's conditions whatever the version",
			version: kubeversion.V1_36,
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.nodes[0].Status.Conditions = append(c.nodes[0].Status.Conditions, cond(corev1.NodeDrained, corev1.ConditionTrue, condReasonDrained))
				c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			},
			status: []string{"node-0 -Drained"},
			conds:  untouched,
		},
		{
			name: "uncordon after a crash between the conditions' removal and the uncordon: nothing left to remove, uncordoned",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			},
			want:   []string{"UncordonNode:node-0:done", "CordonNode:node-1:done", "DrainNode:node-1:skipped", "Recreate:agent-1:done", "UncordonNode:node-1:skipped"},
			status: []string{"node-1 DrainInProgress=False Drained=True"},
			seq:    []string{"patch node-0", "patch node-1", "status node-1"},
			conds:  untouched,
		},
		{
			name: "uncordon leaves a drain condition someone else wrote",
			setup: func(c *dsCluster) {
				c.cordon(0, ns+"/agent")
				c.nodes[0].Status.Conditions = append(c.nodes[0].Status.Conditions, cond(corev1.NodeDrained, corev1.ConditionTrue, "AdminDrain"))
				c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			},
			status: []string{"node-1 DrainInProgress=False Drained=True"},
			conds:  []string{"Ready=True/KubeletReady", "MaintenancePlanned=True/KernelUpgrade", "Drained=True/AdminDrain"},
		},
		{
			name:   "dry run: the conditions are sent with dryRun=All and nothing changes",
			dryRun: true,
			setup:  webOnNode0,
			want:   []string{"CordonNode:node-0:would", "DrainNode:node-0:would", "Recreate:agent-0:would", "UncordonNode:node-0:skipped"},
			status: []string{"node-0 DrainInProgress=False Drained=True (dry run)"},
			conds:  untouched,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDSCluster(2, "1")
			c.nodes[0].Status.Conditions = []corev1.NodeCondition{kubeletReady, adminMaintenance}
			if tt.setup != nil {
				tt.setup(c)
			}
			v := tt.version
			if strings.HasPrefix(tt.name, "v1.37") {
				v = kubeversion.V1_37
			}
			w := &nodeWrites{}
			cs := c.client(t, w, nil, nil)
			var log bytes.Buffer
			res, err := newDSExecAt(t, cs, engine.NodePrepDrain, v, tt.dryRun, &log).Step(context.Background())
			if err != nil {
				t.Fatalf("step: %v\n%s", err, log.String())
			}
			if got := nodeOutcomes(res); tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("actions %q, want %q\nlog:\n%s", got, tt.want, log.String())
			}
			if !slices.Equal(w.status, tt.status) {
				t.Errorf("status patches %q, want %q", w.status, tt.status)
			}
			if tt.seq != nil && !slices.Equal(w.seq, tt.seq) {
				t.Errorf("node writes in order %q, want %q", w.seq, tt.seq)
			}
			if got, want := condState(t, cs, "node-0"), slices.Sorted(slices.Values(tt.conds)); !slices.Equal(got, want) {
				t.Errorf("node-0 conditions %q, want %q", got, want)
			}
			checkOthers(t, cs, "node-0")
			for i, want := range tt.reason {
				if i >= len(res.Actions) || !strings.Contains(res.Actions[i].Reason, want) {
					t.Errorf("action %d: reason lacks %q: %+v", i, want, res.Actions)
				}
			}
		})
	}
}

// A condition written keeps its lastTransitionTime while its status holds
// and gets the step's time when it changes; a node already as rollplan
// wants it gets no write.
func TestDrainConditionsIdempotent(t *testing.T) {
	c := newDSCluster(2, "1")
	c.cordon(0, ns+"/agent")
	// An earlier apply's DrainInProgress=True, with another message.
	c.nodes[0].Status.Conditions = []corev1.NodeCondition{cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, condReasonDraining)}
	c.pods = append(c.pods, otherPod("shop", "web-1", "node-0", "ReplicaSet"))
	w := &nodeWrites{}
	refuse := func(string) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	}
	cs := c.client(t, w, refuse, nil)
	var log bytes.Buffer
	x := newDSExecAt(t, cs, engine.NodePrepDrain, kubeversion.V1_37, false, &log)
	wave := plan.WorkloadPlan{Waves: []plan.Wave{{Index: 1, Actions: []plan.Action{
		{Type: plan.ActionCordonNode, Node: "node-0"}, {Type: plan.ActionDrainNode, Node: "node-0"}, {Type: plan.ActionRecreate, Pod: "agent-0", Node: "node-0"}}}}}
	drain := plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}
	spent := map[string]bool{cordonedKey("node-0"): true}
	for i := range 3 {
		if _, _, err := x.nodeAction(context.Background(), wave, drain, spent); err != nil {
			t.Fatal(err)
		}
		if want := []string{"node-0 DrainInProgress=True Drained=False"}; !slices.Equal(w.status, want) {
			t.Fatalf("after drain %d: status patches %q, want %q (one write)", i+1, w.status, want)
		}
	}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "node-0", metav1.GetOptions{})
	if got := nodeCondition(n, corev1.NodeDrainInProgress); !got.LastTransitionTime.Time.Equal(now.Add(-time.Hour)) || !got.LastHeartbeatTime.Time.Equal(now) || got.Message == "earlier" {
		t.Errorf("DrainInProgress %+v, want its new message, heartbeat %v and its transition kept (%v)", got, now, now.Add(-time.Hour))
	}
	if got := nodeCondition(n, corev1.NodeDrained).LastTransitionTime; !got.Time.Equal(now) {
		t.Errorf("Drained lastTransitionTime %v, want %v", got, now)
	}
	// The PDB lets web-1 go; an hour later the node is drained: only
	// then do the conditions change, with the new time.
	later := now.Add(time.Hour)
	x.opts.Now = func() time.Time { return later }
	_ = cs.Tracker().Delete(podsGVR, "shop", "web-1")
	if _, _, err := x.nodeAction(context.Background(), wave, drain, spent); err != nil {
		t.Fatal(err)
	}
	n, _ = cs.CoreV1().Nodes().Get(context.Background(), "node-0", metav1.GetOptions{})
	for _, ty := range drainConditionTypes {
		if got := nodeCondition(n, ty).LastTransitionTime; !got.Time.Equal(later) {
			t.Errorf("%s lastTransitionTime %v, want %v", ty, got, later)
		}
	}
	if len(w.status) != 2 || !spent[drainedKey("node-0")] {
		t.Errorf("status patches %q, drained %v; want a second write and the node drained", w.status, spent[drainedKey("node-0")])
	}
}

// A failed condition write: while draining it is noted and the drain goes
// on; at the uncordon a refusal (403, no permission on nodes/status)
// lets the uncordon go on with a note, any other failure keeps the node
// cordoned (an error, like a failed uncordon).
func TestDrainConditionWriteFails(t *testing.T) {
	denied := func(n string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/status"}, n, errors.New("no RBAC"))
	}
	broken := func(string) error { return apierrors.NewInternalError(errors.New("etcd went away")) }
	uncordon := plan.Action{Type: plan.ActionUncordonNode, Node: "node-0"}
	drain := plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}
	for _, tc := range []struct {
		name      string
		a         plan.Action
		statusErr func(string) error
		outcome   string
		reason    string
		err       string
		node      string // nodeState afterwards
	}{
		{"drain: refused, noted", drain, denied, Skipped, `node conditions DrainInProgress=False, Drained=True not written (the drain goes on; the next step tries again)`, "", "cordoned by default/agent"},
		{"drain: failed, noted", drain, broken, Skipped, "etcd went away", "", "cordoned by default/agent"},
		{"uncordon: refused, uncordoned with a note", uncordon, denied, Done, "node conditions DrainInProgress, Drained left on the node: removing them was refused", "", "schedulable"},
		{"uncordon: failed, stays cordoned", uncordon, broken, "", "", "uncordon node node-0 (node conditions DrainInProgress and Drained", "cordoned by default/agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDSCluster(2, "1")
			c.cordon(0, ns+"/agent")
			c.nodes[0].Status.Conditions = []corev1.NodeCondition{
				cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, condReasonDraining), cond(corev1.NodeDrained, corev1.ConditionFalse, condReasonDraining)}
			c.pods[0] = dsPod("agent-0x", "node-0", "new", true)
			w := &nodeWrites{statusErr: tc.statusErr}
			cs := c.client(t, w, nil, nil)
			var log bytes.Buffer
			x := newDSExecAt(t, cs, engine.NodePrepDrain, kubeversion.V1_37, false, &log)
			wp := plan.WorkloadPlan{Waves: []plan.Wave{{Index: 1, Actions: []plan.Action{tc.a}}}}
			r, _, err := x.nodeAction(context.Background(), wp, tc.a, map[string]bool{cordonedKey("node-0"): true})
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one containing %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case r.Outcome != tc.outcome || !strings.Contains(r.Reason, tc.reason):
				t.Errorf("got %s (%s), want %s containing %q", r.Outcome, r.Reason, tc.outcome, tc.reason)
			}
			if len(w.status) != 1 {
				t.Errorf("status patches %q, want one attempt", w.status)
			}
			if got := nodeState(t, cs, "node-0"); got != tc.node {
				t.Errorf("node-0 %s, want %s", got, tc.node)
			}
		})
	}
}

// A DaemonSet deleted mid-drain: its nodes lose rollplan's drain
// conditions before their cordon; someone else's conditions stay.
func TestReleaseCordonsClearsConditions(t *testing.T) {
	c := newDSCluster(2, "1")
	c.cordon(0, ns+"/agent")
	c.nodes[0].Status.Conditions = []corev1.NodeCondition{kubeletReady, adminMaintenance,
		cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, condReasonDraining), cond(corev1.NodeDrained, corev1.ConditionFalse, condReasonDraining)}
	w := &nodeWrites{}
	cs := c.client(t, w, nil, nil)
	if err := cs.AppsV1().DaemonSets(ns).Delete(context.Background(), "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := newDSExec(t, cs, "drain", false, &log).Step(context.Background()); !errors.Is(err, capture.ErrNotFound) || !strings.Contains(err.Error(), "uncordoned nodes node-0") {
		t.Fatalf("Step error %v, want not found and node-0 uncordoned", err)
	}
	if want := []string{"status node-0", "patch node-0"}; !slices.Equal(w.seq, want) {
		t.Errorf("node writes %q, want %q", w.seq, want)
	}
	if got, want := condState(t, cs, "node-0"), []string{"MaintenancePlanned=True/KernelUpgrade", "Ready=True/KubeletReady"}; !slices.Equal(got, want) {
		t.Errorf("node-0 conditions %q, want %q", got, want)
	}
	checkOthers(t, cs, "node-0")
	if got := nodeState(t, cs, "node-0"); got != "schedulable" {
		t.Errorf("node-0 %s, want schedulable", got)
	}
}

// maintenancePolicy is the example of docs/policy-contract.md: a Rego
// policy that holds the daemon pods of a node under maintenance (facts
// nodes[].maintenancePlanned, .maintenanceInProgress), the default
// strategy otherwise.
const maintenancePolicy = `package rollplan.strategy

import data.rollplan.defaults

under_maintenance := {n.name | some n in input.nodes; n.maintenanceInProgress}

scope(pod) := {"in": false, "reason": sprintf("node %s is under maintenance", [pod.node])} if {
	pod.node in under_maintenance
} else := defaults.scope(pod)
`

// A policy can hold the pods of a node under maintenance: the live Node's
// MaintenanceInProgress condition reaches the facts, the plan holds the
// node's daemon pod, and apply neither cordons that node nor touches its
// pod; a node only planned for maintenance is not held by this policy.
func TestPolicyHoldsPodsUnderMaintenance(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "maintenance.rego"), []byte(maintenancePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := rego.Load(context.Background(), []string{dir}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := newDSCluster(3, "3")
	c.nodes[1].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMaintenanceInProgress, Status: corev1.ConditionTrue, Reason: "KernelUpgrade"}}
	c.nodes[2].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: "KernelUpgrade"}}
	w := &nodeWrites{}
	cs := c.client(t, w, nil, nil)
	var log bytes.Buffer
	res, err := testExec(t, cs, "DaemonSet", "agent", prepEngine{eng, engine.NodePrepCordon}, false, &log).Step(context.Background())
	if err != nil {
		t.Fatalf("step: %v\n%s", err, log.String())
	}
	if want := []plan.Held{{Pod: "agent-1", Reason: "node node-1 is under maintenance"}}; !slices.EqualFunc(res.Plan.Held, want, func(a, b plan.Held) bool { return a.Pod == b.Pod && a.Reason == b.Reason }) {
		t.Errorf("held %+v, want %+v", res.Plan.Held, want)
	}
	for _, a := range res.Actions {
		if a.Pod == "agent-1" || a.Node == "node-1" {
			t.Errorf("action %+v on the node under maintenance", a)
		}
	}
	if !slices.Equal(w.evictions, []string{"default/agent-0", "default/agent-2"}) || nodeState(t, cs, "node-1") != "schedulable" {
		t.Errorf("evicted %q, node-1 %s; want agent-0 and agent-2, node-1 untouched", w.evictions, nodeState(t, cs, "node-1"))
	}
}
