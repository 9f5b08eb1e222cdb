package cel

import (
	"context"
	"testing"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine"
)

// Decisions.Upstream names the points no matching policy of the user's
// answers: the planner need not derive upstream's answers again for those.
func TestDecisionsUpstream(t *testing.T) {
	rs, err := scenario.Rollouts("../../../testdata/scenarios", "example-one-zone-at-a-time")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		policy string // an example's policy.yaml; "" for none
		want   engine.Point
	}{
		{"no policy", "", engine.ControllerPoints},
		{"one zone at a time: order and budgets", "one-zone-at-a-time", engine.PointScope | engine.PointEligibility | engine.PointPacing},
		{"cordon nodes: node preparation only", "cordon-nodes", engine.ControllerPoints},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ps []*RolloutPolicy
			if c.policy != "" {
				if ps, err = Load([]string{"../../../policies/examples/" + c.policy + "/policy.yaml"}); err != nil {
					t.Fatal(err)
				}
			}
			e, err := New(ps, Options{})
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(context.Background(), rs[0])
			if err != nil {
				t.Fatal(err)
			}
			if d.Upstream != c.want {
				t.Errorf("upstream %05b, want %05b", d.Upstream, c.want)
			}
		})
	}
}
