package parity

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// A plan with node preparation (CordonNode, DrainNode, UncordonNode around
// the pod actions, a node cordoned earlier whose pod goes first) keeps
// every invariant: node actions name no pod of the workload.
func TestNodePreparationKeepsInvariants(t *testing.T) {
	data, err := os.ReadFile("../../testdata/scenarios/example-cordon-nodes/snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	rollouts, err := facts.Build(snap, facts.Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := rego.Load(context.Background(), []string{"../../policies/examples/cordon-nodes"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := plan.Build(context.Background(), rollouts, eng, plan.Metadata{}, upstreamOptions)
	if err != nil {
		t.Fatal(err)
	}
	nodeActions := 0
	for wi := range res.Plan.Workloads {
		for _, w := range res.Plan.Workloads[wi].Waves {
			for _, a := range w.Actions {
				if a.Pod == "" && a.Node != "" {
					nodeActions++
				}
			}
		}
		for _, v := range CheckWorkload(&res.Plan.Workloads[wi], res.Details[wi], plan.DefaultOptions) {
			t.Error(v)
		}
	}
	if nodeActions == 0 {
		t.Fatal("the plan prepares no node: the test proves nothing")
	}
}
