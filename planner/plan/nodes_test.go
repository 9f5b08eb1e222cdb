package plan_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// daemonSet is a managed OnDelete DaemonSet "agent" on n nodes, each
// running one available pod at the old revision, max-unavailable 1.
func daemonSet(n int) *facts.Rollout {
	r := &facts.Rollout{
		Workload: facts.Workload{Kind: "DaemonSet", Namespace: "default", Name: "agent", Replicas: n, Managed: true,
			PodUpdatePolicy: "Recreate", CurrentRevision: "agent-old", UpdateRevision: "agent-new",
			Strategy: facts.Strategy{Type: "OnDelete", MaxUnavailable: 1, MaxUnavailableSource: "annotation rollplan.dev/max-unavailable=1"}},
		FeatureGates: map[string]bool{},
	}
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		r.Nodes = append(r.Nodes, facts.Node{Name: node, ShouldRun: true, ShouldContinueRunning: true, Pods: 1, DrainPods: []string{}})
		r.Pods = append(r.Pods, facts.Pod{Name: fmt.Sprintf("agent-%d", i), Node: node, Revision: "agent-old", Owner: "agent",
			Scheduled: true, Ready: true, Available: true, ReadySeconds: 3600, Ordinal: -1, Index: -1, Phase: "Running",
			Labels: map[string]string{}, PDBs: []string{},
			Changes: []facts.Change{{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}}})
	}
	return r
}

func planWith(t *testing.T, r *facts.Rollout, prep string) plan.WorkloadPlan {
	t.Helper()
	d, err := native.New().Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	d.NodePreparation = prep
	wp, _ := plan.Workload(r, d, upstreamOptions)
	return wp
}

// steps prints each wave as "type:node-or-pod" items.
func steps(wp plan.WorkloadPlan) []string {
	var out []string
	for _, w := range wp.Waves {
		var as []string
		for _, a := range w.Actions {
			what := a.Pod
			if what == "" {
				what = a.Node
			}
			if len(a.Pods) > 0 {
				what += "[" + strings.Join(a.Pods, ",") + "]"
			}
			as = append(as, a.Type+":"+what)
		}
		out = append(out, strings.Join(as, " "))
	}
	return out
}

func TestNodePreparation(t *testing.T) {
	tests := []struct {
		name  string
		prep  string
		nodes int // default 2
		setup func(r *facts.Rollout)
		want  []string // per wave
		warn  string
		// reason: a substring of the first reason of the action of
		// type:node-or-pod.
		reason map[string]string
	}{
		{
			name: "none: the plan is the plain one",
			prep: engine.NodePrepNone,
			want: []string{"Recreate:agent-0", "Recreate:agent-1"},
		},
		{
			name: "cordon: cordon before each pod, uncordon after it, in its wave",
			prep: engine.NodePrepCordon,
			want: []string{
				"CordonNode:node-0 Recreate:agent-0 UncordonNode:node-0",
				"CordonNode:node-1 Recreate:agent-1 UncordonNode:node-1",
			},
			reason: map[string]string{
				"CordonNode:node-0":   `policy node_preparation "cordon": cordon node node-0 before pod agent-0 is updated: spec.unschedulable=true and annotation rollplan.dev/cordoned-by=default/agent`,
				"UncordonNode:node-0": "once its daemon pod runs the update revision and is available",
			},
		},
		{
			name: "drain lists the pods the snapshot shows, and says it may not show all",
			prep: engine.NodePrepDrain,
			setup: func(r *facts.Rollout) {
				r.Nodes[0].DrainPods = []string{"shop/cache-0", "shop/web-1"}
			},
			want: []string{
				"CordonNode:node-0 DrainNode:node-0[shop/cache-0,shop/web-1] Recreate:agent-0 UncordonNode:node-0",
				"CordonNode:node-1 DrainNode:node-1 Recreate:agent-1 UncordonNode:node-1",
			},
			reason: map[string]string{
				"DrainNode:node-0": "the snapshot holds 2 (listed), but it may not hold every pod of the node",
				"DrainNode:node-1": "the snapshot holds none on this node, but it may not hold every pod of the node",
			},
		},
		{
			name: "a node cordoned by someone else: no write, and it stays cordoned (no UncordonNode)",
			prep: engine.NodePrepCordon,
			setup: func(r *facts.Rollout) {
				r.Nodes[0].Unschedulable = true
				r.Nodes[1].Unschedulable, r.Nodes[1].CordonedBy = true, "default/other"
			},
			want: []string{"CordonNode:node-0 Recreate:agent-0", "CordonNode:node-1 Recreate:agent-1"},
			reason: map[string]string{
				"CordonNode:node-0": "already cordoned, not by rollplan for this DaemonSet: it counts as prepared",
			},
		},
		{
			name:  "a node rollplan cordoned already: its pod goes first and is in flight from the start",
			prep:  engine.NodePrepDrain,
			nodes: 3,
			setup: func(r *facts.Rollout) {
				r.Nodes[2].Unschedulable, r.Nodes[2].CordonedBy = true, "default/agent"
			},
			want: []string{
				"CordonNode:node-2 DrainNode:node-2 Recreate:agent-2 UncordonNode:node-2",
				"CordonNode:node-0 DrainNode:node-0 Recreate:agent-0 UncordonNode:node-0",
				"CordonNode:node-1 DrainNode:node-1 Recreate:agent-1 UncordonNode:node-1",
			},
			reason: map[string]string{
				"CordonNode:node-2": "already cordoned for this DaemonSet (annotation rollplan.dev/cordoned-by=default/agent): nothing to write",
				"Recreate:agent-2":  "its pod has been in flight since, so it goes first, whatever the budget",
			},
		},
		{
			name: "policy now says none: a node rollplan cordoned is still uncordoned after its pod",
			prep: engine.NodePrepNone,
			setup: func(r *facts.Rollout) {
				r.Nodes[1].Unschedulable, r.Nodes[1].CordonedBy = true, "default/agent"
			},
			want: []string{"Recreate:agent-1 UncordonNode:node-1", "Recreate:agent-0"},
		},
		{
			name: "a node rollplan cordoned whose pod is updated: uncordoned in the first wave",
			prep: engine.NodePrepCordon,
			setup: func(r *facts.Rollout) {
				r.Nodes[0].Unschedulable, r.Nodes[0].CordonedBy = true, "default/agent"
				r.Pods[0].Updated, r.Pods[0].Revision, r.Pods[0].Changes = true, "agent-new", nil
			},
			want: []string{"UncordonNode:node-0 CordonNode:node-1 Recreate:agent-1 UncordonNode:node-1"},
			reason: map[string]string{
				"UncordonNode:node-0": "node node-0 is still cordoned for this DaemonSet (annotation rollplan.dev/cordoned-by=default/agent), and pod agent-0 runs the update revision and is available: uncordon it",
			},
		},
		{
			name: "everything updated, one node left cordoned: a wave with its UncordonNode alone",
			prep: engine.NodePrepCordon,
			setup: func(r *facts.Rollout) {
				r.Nodes[1].Unschedulable, r.Nodes[1].CordonedBy = true, "default/agent"
				for i := range r.Pods {
					r.Pods[i].Updated, r.Pods[i].Revision, r.Pods[i].Changes = true, "agent-new", nil
				}
				r.Pods[1].Ready, r.Pods[1].Available, r.Pods[1].ReadySeconds = false, false, -1
			},
			want: []string{"UncordonNode:node-1"},
			reason: map[string]string{
				"UncordonNode:node-1": "uncordon it once pod agent-1 runs the update revision and is available",
			},
		},
		{
			name: "in place: prepared the same way",
			prep: engine.NodePrepCordon,
			setup: func(r *facts.Rollout) {
				r.Workload.PodUpdatePolicy = "InPlaceIfPossible"
			},
			want: []string{
				"CordonNode:node-0 InPlaceUpdate:agent-0 UncordonNode:node-0",
				"CordonNode:node-1 InPlaceUpdate:agent-1 UncordonNode:node-1",
			},
		},
		{
			name: "a native (RollingUpdate) DaemonSet: not prepared, a warning",
			prep: engine.NodePrepDrain,
			setup: func(r *facts.Rollout) {
				r.Workload.Managed = false
				r.Workload.Strategy = facts.Strategy{Type: "RollingUpdate", MaxUnavailable: 1, MaxSurge: 0}
			},
			want: []string{"Recreate:agent-0", "Recreate:agent-1"},
			warn: `the policy answers node_preparation "drain", but nodes are prepared only by rollplan apply, which drives DaemonSets with updateStrategy OnDelete annotated rollplan.dev/managed="true"`,
		},
		{
			name: "not a DaemonSet: a warning, not an error",
			prep: engine.NodePrepCordon,
			setup: func(r *facts.Rollout) {
				r.Workload.Kind = "StatefulSet"
				r.Nodes = nil
				for i := range r.Pods {
					r.Pods[i].Ordinal, r.Pods[i].Index = i, i
				}
			},
			want: []string{"Recreate:agent-1", "Recreate:agent-0"},
			warn: `the policy answers node_preparation "cordon", but only DaemonSets prepare nodes: ignored for this StatefulSet`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := daemonSet(max(tt.nodes, 2))
			if tt.setup != nil {
				tt.setup(r)
			}
			wp := planWith(t, r, tt.prep)
			if got := steps(wp); !slices.Equal(got, tt.want) {
				t.Errorf("waves:\n  got  %q\n  want %q", got, tt.want)
			}
			hasWarn := slices.ContainsFunc(wp.Warnings, func(w string) bool { return tt.warn != "" && strings.Contains(w, tt.warn) })
			if tt.warn != "" && !hasWarn || tt.warn == "" && len(wp.Warnings) > 0 {
				t.Errorf("warnings %q, want %q", wp.Warnings, tt.warn)
			}
			for key, want := range tt.reason {
				found := false
				for _, w := range wp.Waves {
					for _, a := range w.Actions {
						what := a.Pod
						if what == "" {
							what = a.Node
						}
						if a.Type+":"+what == key {
							found = true
							if len(a.Reasons) == 0 || !strings.Contains(a.Reasons[0], want) {
								t.Errorf("%s: reasons %q, want the first to contain %q", key, a.Reasons, want)
							}
						}
					}
				}
				if !found {
					t.Errorf("no action %s", key)
				}
			}
			if wp.Summary.Waves != len(wp.Waves) {
				t.Errorf("summary counts %d waves, the plan has %d", wp.Summary.Waves, len(wp.Waves))
			}
		})
	}
}

// A prepared node's pod is in flight from the start: with max-unavailable
// 1, no other node is prepared before it completes, even when it sorts
// last.
func TestPreparedNodeHoldsTheBudget(t *testing.T) {
	r := daemonSet(3)
	r.Nodes[2].Unschedulable, r.Nodes[2].CordonedBy = true, "default/agent"
	wp := planWith(t, r, engine.NodePrepCordon)
	if len(wp.Waves) != 3 || wp.Waves[0].Actions[1].Pod != "agent-2" || len(wp.Waves[0].Actions) != 3 {
		t.Fatalf("waves %q: want agent-2 alone first", steps(wp))
	}
	if wp.Waves[1].Start == "0s" {
		t.Errorf("wave 2 starts at 0s: the prepared pod did not hold the budget")
	}
}

// upstreamOptions are the default estimates with the model of the
// workloads' own controllers that every caller plans with.
var upstreamOptions = func() plan.Options {
	o := plan.DefaultOptions
	o.Upstream = native.New()
	return o
}()
