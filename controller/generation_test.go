package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

var api = key{capture.Deployment, ns, "api"}

// apiDeployment is a managed Deployment at generation gen whose rollout
// state is st.
func apiDeployment(gen int64, st live.RolloutState) *appsv1.Deployment {
	d := testobj.Deployment(ns, "api").Managed().Replicas(2).Obj()
	d.UID, d.Generation = "api-uid", gen
	d.Annotations[facts.AnnRolloutState] = st.Encode()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen - 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	return d
}

// The API server moves a Deployment's generation when its annotations
// change: the state write that recorded a halt at generation 7 left the
// Deployment at 8. The halt holds (the step is not taken again, no Lease),
// while a generation this replica did not cause ends it.
func TestDeploymentHaltSurvivesItsOwnStateWrite(t *testing.T) {
	halted := live.RolloutState{Phase: live.RolloutHalted, Generation: 7, Reasons: []string{"crash-looping"}}
	f := start(t, apiDeployment(8, halted), leaderLease("replica-a"))
	f.ctrl.ownGen[api] = [2]int64{7, 8}
	if _, err := f.ctrl.sync(context.Background(), api); err != nil {
		t.Fatal(err)
	}
	d, err := f.client.AppsV1().Deployments(ns).Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Annotations[facts.AnnRolloutState]; got != halted.Encode() {
		t.Errorf("state %s, want the halt kept: %s", got, halted.Encode())
	}
	if _, err := f.client.CoordinationV1().Leases(ns).Get(context.Background(), "rollplan-deployment-api", metav1.GetOptions{}); err == nil {
		t.Errorf("a driver Lease was taken for a halted Deployment")
	}

	f.ctrl.ownGen[api] = [2]int64{7, 9} // generation 8 is someone else's
	if got := f.ctrl.generation(api, d); got != 8 {
		t.Errorf("generation %d, want 8: a change this replica did not write counts", got)
	}
}

// writeState remembers the generation its write gave a Deployment only
// when that write alone moved it (read + 1).
func TestWriteStateRemembersOwnGeneration(t *testing.T) {
	st := live.RolloutState{Phase: live.RolloutInProgress, Generation: 3}
	f := start(t, apiDeployment(3, live.RolloutState{Phase: live.RolloutComplete, Generation: 3}), leaderLease("replica-a"))
	for _, c := range []struct {
		name     string
		returned int64
		want     [2]int64
		recorded bool
	}{
		{"only this write moved it", 4, [2]int64{3, 4}, true},
		{"a template change came in between", 5, [2]int64{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			delete(f.ctrl.ownGen, api)
			f.client.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				d := apiDeployment(c.returned, st)
				return true, d, nil
			})
			m := apiDeployment(3, live.RolloutState{Phase: live.RolloutComplete, Generation: 3})
			prev, _ := live.ParseRolloutState(m.Annotations[facts.AnnRolloutState])
			if err := f.ctrl.writeState(context.Background(), api, m, prev, st); err != nil {
				t.Fatal(err)
			}
			got, ok := f.ctrl.ownGen[api]
			if ok != c.recorded || got != c.want {
				t.Errorf("remembered %v (%t), want %v (%t)", got, ok, c.want, c.recorded)
			}
		})
	}
}
