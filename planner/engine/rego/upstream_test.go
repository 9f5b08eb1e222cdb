package rego

import (
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/policies"
)

// Decisions.Upstream names the points the user's policy leaves to the
// shipped default strategy: the planner skips re-deriving upstream's
// answers for those.
func TestBundleUpstream(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  engine.Point
	}{
		{"no policy", map[string]string{}, engine.ControllerPoints},
		{"order of its own", map[string]string{"p.rego": "package rollplan.strategy\n\norder(p) := [p.name]\n"}, engine.ControllerPoints &^ engine.PointOrder},
		{"budgets and pacing of its own", map[string]string{"p.rego": "package rollplan.strategy\n\nbudgets := []\n\npacing := \"wave\"\n"}, engine.PointScope | engine.PointEligibility | engine.PointOrder},
		{"halt only", map[string]string{"p.rego": "package rollplan.strategy\n\nhalt := []\n"}, engine.ControllerPoints},
		// A default library of the user's is not the one that reproduces upstream.
		{"own default library", map[string]string{"d.rego": policies.Defaults}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sources []string
			for f := range c.files {
				sources = append(sources, f)
			}
			b, err := parseBundle(c.files, sources)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.upstream(); got != c.want {
				t.Errorf("upstream %05b, want %05b", got, c.want)
			}
		})
	}
}
