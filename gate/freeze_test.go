package gate

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/cel"
	"github.com/rollplan/rollplan/planner/engine/rego"
)

// The change-freeze example, in both languages, through the gate: during
// its weekend window a template change of a managed workload is denied,
// naming the window and its end; a change that keeps the template, and
// any change outside the window, is admitted.
func TestChangeFreezeExample(t *testing.T) {
	const dir = "../policies/examples/change-freeze"
	regoEng, err := rego.Load(context.Background(), []string{dir + "/policy.rego"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cel.Load([]string{dir + "/policy.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	celEng, err := cel.New(ps, cel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, eng := range map[string]engine.Engine{"rego": regoEng, "cel": celEng} {
		t.Run(name, func(t *testing.T) {
			objs := statefulSet(3)
			f := newFixture(t, Options{Engine: eng}, objs...)
			set := objs[0].(*appsv1.StatefulSet)
			update := func(change func(*appsv1.StatefulSet)) *admissionv1.AdmissionRequest { return stsUpdate(set, change) }
			image := func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "example.com/db:v2" }
			label := func(s *appsv1.StatefulSet) { s.Labels["team"] = "x" }
			at := func(s string) {
				clock, err := time.Parse(time.RFC3339, s)
				if err != nil {
					t.Fatal(err)
				}
				f.gate.opts.Now = func() time.Time { return clock }
			}

			at("2026-02-28T12:00:00Z") // Saturday, inside the weekend window
			resp, _ := f.review(update(image))
			if resp.Allowed {
				t.Fatal("a template change during the weekend freeze was admitted")
			}
			if want := `change freeze "weekend" until 2026-03-02T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends`; !strings.Contains(resp.Result.Message, want) {
				t.Errorf("denial %q, want it to say %q", resp.Result.Message, want)
			}
			if resp, _ := f.review(update(label)); !resp.Allowed {
				t.Errorf("a label change (same template) during the freeze was refused: %v", resp.Result)
			}

			at("2026-03-02T07:00:00Z") // Monday 08:00 in Berlin: the window has closed
			if resp, _ := f.review(update(image)); !resp.Allowed {
				t.Errorf("a template change after the freeze was refused: %v", resp.Result)
			}
		})
	}
}
