package fidelity

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/planner/plan"
)

func TestExpectedOps(t *testing.T) {
	n := func(v int) *int { return &v }
	wp := &plan.WorkloadPlan{Kind: "Deployment", Waves: []plan.Wave{
		{Index: 1, Start: "0s", Actions: []plan.Action{
			{Type: plan.ActionScaleRS, ReplicaSet: "new", From: n(0), To: n(3)},
			{Type: plan.ActionScaleRS, ReplicaSet: "old", From: n(10), To: n(8), Pods: []string{"old-a", "old-b"}},
			{Type: plan.ActionScaleRS, ReplicaSet: "new", From: n(3), To: n(5)},
		}},
		{Index: 2, Start: "5s", Actions: []plan.Action{{Type: plan.ActionScaleRS, ReplicaSet: "old", From: n(8), To: n(7), Pods: []string{"old-c"}}}},
		// Waits for availability: not part of the next step.
		{Index: 3, Start: "24h", Actions: []plan.Action{{Type: plan.ActionScaleRS, ReplicaSet: "new", From: n(5), To: n(10)}}},
	}}
	got, err := ExpectedOps(wp, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{"remove old-a", "remove old-b", "remove old-c", "scale new 0->5", "scale old 10->7"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deployment ops\n got %v\nwant %v", got, want)
	}

	ds := &plan.WorkloadPlan{Kind: "DaemonSet", Waves: []plan.Wave{{Index: 1, Start: "0s", Actions: []plan.Action{
		{Type: plan.ActionRecreate, Pod: "a", Node: "n1"},
		{Type: plan.ActionRecreate, Pod: "b", Surge: true},
		{Type: plan.ActionRecreate, Pod: "c", Node: "n3", Surge: true},
		{Type: plan.ActionDelete, Pod: "d", Node: "n4"},
	}}}}
	got, err = ExpectedOps(ds, map[string]string{"b": "n2"}, map[string]bool{"n3": true})
	if err != nil {
		t.Fatal(err)
	}
	want = []Op{"delete node=n3", "delete node=n4", "recreate node=n1", "surge node=n2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("daemonset ops\n got %v\nwant %v", got, want)
	}

	// A node whose old pod went between two steps: the plan's note says
	// the DaemonSet controller creates its pod, with no wave.
	missing := &plan.WorkloadPlan{Kind: "DaemonSet", Notes: []string{
		"node n5 should run a pod and has none: the DaemonSet controller creates it at the update revision; it counts against the budget until available",
		"node n6 runs 2 pods",
	}}
	got, err = ExpectedOps(missing, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Op{"surge node=n5"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("daemonset with a node missing its pod\n got %v\nwant %v", got, want)
	}

	// Replicas whose pods went between two steps: a Parallel set's
	// controller creates them at once; an OrderedReady one may not.
	parallel := &plan.WorkloadPlan{Kind: "StatefulSet", Notes: []string{
		"replica(s) app-1, app-3 have no pod: the StatefulSet controller creates them first, all at once (Parallel); they count as unavailable until available",
	}}
	got, err = ExpectedOps(parallel, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Op{"create app-1", "create app-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("parallel statefulset with replicas missing their pods\n got %v\nwant %v", got, want)
	}
	ordered := &plan.WorkloadPlan{Kind: "StatefulSet", Notes: []string{
		"replica(s) app-1 have no pod: the StatefulSet controller creates them first, one at a time, each once the previous is available (OrderedReady); they count as unavailable until available",
	}}
	if got, err := ExpectedOps(ordered, nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("ordered statefulset with a replica missing its pod: %v, %v; want no op", got, err)
	}

	if _, err := ExpectedOps(&plan.WorkloadPlan{Waves: []plan.Wave{{Start: "soon"}}}, nil, nil); err == nil {
		t.Fatal("a wave start that is not a duration must be an error")
	}
	inPlace := &plan.WorkloadPlan{Waves: []plan.Wave{{Start: "0s", Actions: []plan.Action{{Type: plan.ActionInPlace, Pod: "p"}}}}}
	if _, err := ExpectedOps(inPlace, nil, nil); err == nil || !strings.Contains(err.Error(), "no such action") {
		t.Fatalf("in-place action on a native workload: %v", err)
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name      string
		step      Step
		ok, exact bool
		diff      string
	}{
		{name: "same ops", step: Step{Expected: []Op{"recreate web-4"}, Observed: []Op{"recreate web-4"}}, ok: true, exact: true},
		{name: "both empty", step: Step{}, ok: true, exact: true},
		{name: "wrong pod", step: Step{Expected: []Op{"recreate web-4"}, Observed: []Op{"recreate web-3"}},
			diff: "  planned, not done: recreate web-4\n  done, not planned: recreate web-3\n"},
		{name: "one more than planned", step: Step{Expected: []Op{"recreate web-4"}, Observed: []Op{"recreate web-3", "recreate web-4"}},
			diff: "  done, not planned: recreate web-3\n"},
		{name: "random node among candidates", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"recreate node=n2"},
			Candidates: map[string]string{"node=n1": "old", "node=n2": "old"}}, ok: true},
		{name: "node outside the candidates", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"recreate node=n2"},
			Candidates: map[string]string{"node=n1": "old"}},
			diff: "  planned, not done: recreate node=n1\n  done, not planned: recreate node=n2\n"},
		{name: "candidates keep counts", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"recreate node=n2", "recreate node=n3"},
			Candidates: map[string]string{"node=n1": "old", "node=n2": "old", "node=n3": "old"}},
			diff: "  done, not planned: recreate node=n3\n"},
		{name: "candidates keep verbs", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"surge node=n2"},
			Candidates: map[string]string{"node=n1": "old", "node=n2": "old"}},
			diff: "  planned, not done: recreate node=n1\n  done, not planned: surge node=n2\n"},
		{name: "a node that should not run the pod, deleted early", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"delete node=n3", "recreate node=n2"},
			Candidates: map[string]string{"node=n1": "old", "node=n2": "old", "node=n3": "old"},
			Planned:    []Op{"recreate node=n1", "recreate node=n2", "delete node=n3"}}, ok: true},
		{name: "a delete the plan never makes", step: Step{
			Expected: []Op{"recreate node=n1"}, Observed: []Op{"delete node=n3", "recreate node=n1"},
			Candidates: map[string]string{"node=n1": "old", "node=n3": "old"},
			Planned:    []Op{"recreate node=n1", "recreate node=n3"}},
			diff: "  done, not planned: delete node=n3\n"},
		{name: "pods of another class", step: Step{
			Expected: []Op{"remove a"}, Observed: []Op{"remove b"},
			Candidates: map[string]string{"a": "rs available=true", "b": "rs available=false"}},
			diff: "  planned, not done: remove a\n  done, not planned: remove b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, exact, diff := Compare(tt.step)
			if ok != tt.ok || exact != tt.exact || diff != tt.diff {
				t.Fatalf("Compare = %v, %v, %q; want %v, %v, %q", ok, exact, diff, tt.ok, tt.exact, tt.diff)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"web-0": 0, "my-db-12": 12, "web": -1, "web-x": -1} {
		if got := ordinal(name); got != want {
			t.Errorf("ordinal(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestRankRaces(t *testing.T) {
	tests := []struct {
		ops  []Op
		want bool
	}{
		{[]Op{"remove a", "scale new 0->2", "scale old 4->3"}, true},
		{[]Op{"remove a", "scale old 4->3"}, false},
		{[]Op{"remove a", "remove b", "scale older 3->0", "scale old 10->8"}, true},
		{nil, false},
	}
	for _, tt := range tests {
		if got := rankRaces(tt.ops); got != tt.want {
			t.Errorf("rankRaces(%v) = %v, want %v", tt.ops, got, tt.want)
		}
	}
}
