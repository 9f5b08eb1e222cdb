package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
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
	p := pod(name, image, "", ready)
	p.Labels = map[string]string{"app": "agent", appsv1.ControllerRevisionHashLabelKey: hash, labelDSGeneration: gen}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}
	p.Spec.NodeName = node
	return p
}

// otherPod is a pod of another workload (ownerKind; "" for a bare pod).
func otherPod(namespace, name, node, ownerKind string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "3"},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "example.com/other:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ownerKind != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: ownerKind, Name: "owner", UID: "owner-uid", Controller: ptr.To(true)}}
	}
	return p
}

func newDSCluster(n int, maxUnavailable string) *dsCluster {
	c := &dsCluster{
		ds: &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", UID: "ds-uid", Generation: 2,
				Annotations: map[string]string{facts.AnnManaged: "true", facts.AnnMaxUnavailable: maxUnavailable, annDSGeneration: "2"}},
			Spec: appsv1.DaemonSetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
				Template:       dsTemplate("example.com/agent:v2"),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(n), ObservedGeneration: 2},
		},
		revs: []*appsv1.ControllerRevision{dsRevision("old", "example.com/agent:v1", 1), dsRevision("new", "example.com/agent:v2", 2)},
	}
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		c.nodes = append(c.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: "10"}})
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
}

// client is a fake clientset holding the cluster. A node patch must carry
// the node's resourceVersion (else 409) and bumps it; an eviction must
// carry the pod's UID and removes the pod (unless evict refuses it). A dry
// run changes nothing.
func (c *dsCluster) client(t *testing.T, w *nodeWrites, evict func(name string) error, patchNode func(name string) error) *fake.Clientset {
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
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchActionImpl)
		dry := len(p.PatchOptions.DryRun) > 0
		w.patches = append(w.patches, p.Name+map[bool]string{true: " (dry run)"}[dry])
		if p.PatchType != types.MergePatchType {
			t.Errorf("node %s: patch type %s, want a merge patch", p.Name, p.PatchType)
		}
		if patchNode != nil {
			if err := patchNode(p.Name); err != nil {
				return true, nil, err
			}
		}
		obj, err := cs.Tracker().Get(nodesGVR, "", p.Name)
		if err != nil {
			return true, nil, err
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
		if err := json.Unmarshal(p.Patch, &body); err != nil {
			return true, nil, err
		}
		if body.Metadata.ResourceVersion != node.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, p.Name, fmt.Errorf("resourceVersion %q, the node has %q", body.Metadata.ResourceVersion, node.ResourceVersion))
		}
		if dry {
			return true, node, nil
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
		return true, node, cs.Tracker().Update(nodesGVR, node, "")
	})
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		name := ev.Namespace + "/" + ev.Name
		if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || ev.DeleteOptions.Preconditions.UID == nil || string(*ev.DeleteOptions.Preconditions.UID) != ev.Name+"-uid" {
			t.Errorf("eviction of %s without its UID as precondition", name)
		}
		dry := len(ev.DeleteOptions.DryRun) > 0
		w.evictions = append(w.evictions, name+map[bool]string{true: " (dry run)"}[dry])
		if evict != nil {
			if err := evict(name); err != nil {
				return true, nil, err
			}
		}
		if !dry {
			_ = cs.Tracker().Delete(podsGVR, ev.Namespace, ev.Name)
		}
		return true, nil, nil
	})
	return cs
}

func newDSExec(t *testing.T, cs *fake.Clientset, prep string, dryRun bool, log *bytes.Buffer) *Executor {
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
func nodeState(t *testing.T, cs *fake.Clientset, name string) string {
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
			wave(cordon, recreate), cordon, Skipped, "budget maxUnavailable would be 2/1 with pod agent-0: node node-0 is not cordoned now", OutcomeSkippedBudget},
		{"the node's pod was updated since the plan: no cordon", func(c *dsCluster) { c.pods[0] = dsPod("agent-0", "node-0", "new", true) },
			wave(cordon, recreate), cordon, Skipped, "updated since the plan was made", OutcomeConflict},
		{"someone else's cordon is never lifted", func(c *dsCluster) { c.cordon(0, "") },
			wave(uncordon), uncordon, Skipped, `not cordoned by rollplan for default/agent (annotation rollplan.dev/cordoned-by=""): left as it is`, OutcomeUnchanged},
		{"nor one rollplan made for another DaemonSet", func(c *dsCluster) { c.cordon(0, "default/other") },
			wave(uncordon), uncordon, Skipped, `(annotation rollplan.dev/cordoned-by="default/other"): left as it is`, OutcomeUnchanged},
		{"a pod held out of the rollout does not keep its node cordoned", func(c *dsCluster) { c.cordon(0, "default/agent") },
			plan.WorkloadPlan{Held: []plan.Held{{Pod: "agent-0", Reason: "frozen"}}, Waves: []plan.Wave{{Index: 1, Actions: []plan.Action{uncordon}}}}, uncordon, Done, "", OutcomeDone},
		{"an unheld pod at the old revision keeps it cordoned", func(c *dsCluster) { c.cordon(0, "default/agent") },
			wave(uncordon), uncordon, Skipped, "pod agent-0 does not run the update revision yet", OutcomeWaiting},
		{"a drain on a node this step did not cordon does nothing", nil,
			wave(cordon, plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}, recreate), plan.Action{Type: plan.ActionDrainNode, Node: "node-0"}, Skipped, "node node-0 is not cordoned yet: not drained", OutcomeWaiting},
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
			Target: Target{Namespace: ns, Kind: "DaemonSet", Name: "agent"},
			Engine: prepEngine{native.New(), engine.NodePrepDrain}, Now: func() time.Time { return now },
			Log: slog.New(slog.NewTextHandler(&log, nil)), Events: rec, Metrics: NewMetrics(reg),
		})
		if err != nil {
			t.Fatal(err)
		}
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
			x, restarted = newExec(), true
		case err != nil:
			t.Fatalf("step %d: %v\n%s", step, err, log.String())
		default:
			done = res.Done
		}
		cordoned := 0
		for i := range 4 {
			if strings.HasPrefix(nodeState(t, cs, fmt.Sprintf("node-%d", i)), "cordoned by") {
				cordoned++
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
		case strings.Contains(e, ReasonNodeCordoned):
			cordons++
		case strings.Contains(e, ReasonNodeUncordoned):
			uncordons++
		case strings.Contains(e, ReasonNodeDrain):
			drains++
		}
	}
	if cordons != 3 || uncordons != 3 || drains != 4 {
		t.Errorf("events: %d NodeCordoned, %d NodeUncordoned, %d NodeDrain; want 3, 3, 4", cordons, uncordons, drains)
	}
	if n := testutil.ToFloat64(x.Metrics().Actions.WithLabelValues("DaemonSet", plan.ActionUncordonNode, OutcomeDone)); n < 1 {
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
