package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/plan"
)

func TestShortfallString(t *testing.T) {
	unavailable := func(limit int) plan.Budget {
		return plan.Budget{Name: "maxUnavailable", Limit: limit, Type: "unavailable", Source: "annotation rollplan.dev/max-unavailable"}
	}
	pdb := plan.Budget{Name: "pdb/web", Limit: 1, Type: "unavailable", PDB: "web", Source: "PodDisruptionBudget web: maxUnavailable=1 of 4 expected pods"}
	for _, c := range []struct {
		name string
		s    shortfall
		want string
	}{
		{"one pod", shortfall{Budget: unavailable(1), Use: 2, Down: []string{"db-1"}},
			"budget maxUnavailable allows 1 pod unavailable, this would make 2 (already unavailable: db-1)"},
		{"pods", shortfall{Budget: unavailable(2), Use: 3, Down: []string{"db-1", "db-2"}},
			"budget maxUnavailable allows 2 pods unavailable, this would make 3 (already unavailable: db-1, db-2)"},
		{"one group", shortfall{Budget: plan.Budget{Name: "zones", Limit: 1, Type: "groups", GroupBy: "zone"}, Use: 2, Down: []string{"db-1"}},
			"budget zones allows 1 group (zone) with pods unavailable, this would make 2"},
		{"no room at all", shortfall{Budget: unavailable(0), Use: 1},
			"budget maxUnavailable allows 0 pods unavailable (annotation rollplan.dev/max-unavailable): it admits no disruption of an available pod"},
		{"a PDB's pods elsewhere, by name", shortfall{Budget: pdb, Use: 2, OtherWorkloads: 1, Elsewhere: []string{"cache-0"}},
			"budget pdb/web allows 1 pod unavailable, this would make 2 (already unavailable: cache-0 (other workloads' pod selected by PodDisruptionBudget web))"},
		{"a PDB's pods elsewhere, names unknown", shortfall{Budget: pdb, Use: 3, Down: []string{"web-1"}, OtherWorkloads: 2},
			"(already unavailable: web-1, 2 pod(s) of other workloads selected by PodDisruptionBudget web)"},
	} {
		if got := c.s.String(); !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// pdb selects the db pods (app=db) and any other pod so labelled.
func pdb(name string, maxUnavailable, minAvailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}}
}

// freezeEngine: a policy whose only budget lets no pod go.
func freezeEngine(t *testing.T) engine.Engine {
	dir := t.TempDir()
	freeze := "package rollplan.strategy\n\nbudgets := [{\"name\": \"freeze\", \"maxUnavailable\": 0, \"source\": \"policy freeze.rego\"}]\n"
	if err := os.WriteFile(filepath.Join(dir, "freeze.rego"), []byte(freeze), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := rego.Load(context.Background(), []string{dir}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// Denials say what to do next: retry when pods come back, unless the
// budget admits no disruption at all; then which budget to change, or how
// to let the gate admit it. Warn mode, which admitted the request, gives
// no advice. A PDB's count of other workloads' pods names them.
func TestDenialMessages(t *testing.T) {
	zero, one, three := intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(3)
	// cache-0: another workload's pod the PDB selects, not Ready.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-0", UID: "cache-0-uid", Labels: map[string]string{"app": "db"}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "cache:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	annotate := "kubectl annotate --overwrite statefulset db -n shop rollplan.dev/gate-enforcement=warn (or dryrun)"
	for _, c := range []struct {
		name      string
		o         Options
		engine    func(*testing.T) engine.Engine
		objs      []runtime.Object
		message   []string // in the denial, or in the warning when admitted
		forbidden []string // nowhere in them
	}{
		{"room later: retry", Options{}, nil, statefulSet(5, "db-3", "db-4"),
			[]string{"budget maxUnavailable allows 2 pods unavailable, this would make 3", "; retry once pods are available again"}, nil},
		{"PDB maxUnavailable 0", Options{}, nil, append(statefulSet(3), pdb("db-pdb", &zero, nil)),
			[]string{"deletion of pod shop/db-0 denied: StatefulSet shop/db budget pdb/db-pdb allows 0 pods unavailable (PodDisruptionBudget db-pdb: maxUnavailable=0 of 3 expected pods): it admits no disruption of an available pod",
				"retrying will not help: change PodDisruptionBudget shop/db-pdb to allow a disruption", annotate},
			[]string{"retry once"}},
		{"PDB minAvailable = replicas", Options{}, nil, append(statefulSet(3), pdb("db-pdb", nil, &three)),
			[]string{"budget pdb/db-pdb allows 0 pods unavailable", "change PodDisruptionBudget shop/db-pdb", annotate}, []string{"retry once"}},
		{"the workload's budget 0", Options{}, freezeEngine, statefulSet(3),
			[]string{"budget freeze allows 0 pods unavailable (policy freeze.rego): it admits no disruption", "change the budget of StatefulSet shop/db (policy freeze.rego)", annotate},
			[]string{"retry once"}},
		{"warn mode: no advice", Options{Enforcement: Warn}, nil, append(statefulSet(3), pdb("db-pdb", &zero, nil)),
			[]string{"rollplan gate: deletion of pod shop/db-0 would be denied in deny mode: StatefulSet shop/db budget pdb/db-pdb allows 0 pods unavailable"},
			[]string{"retry", "kubectl annotate", "would deny"}},
		{"PDB counting another workload's pod", Options{}, nil, append(statefulSet(3), pdb("db-pdb", &one, nil), other),
			[]string{"budget pdb/db-pdb allows 1 pod unavailable, this would make 2 (already unavailable: cache-0 (other workloads' pod selected by PodDisruptionBudget db-pdb))"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.engine != nil {
				c.o.Engine = c.engine(t)
			}
			f := newFixture(t, c.o, c.objs...)
			req := &admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: "db-0", Resource: podResource(), Operation: admissionv1.Delete,
				OldObject: runtime.RawExtension{Raw: f.podJSON("db-0", nil)}}
			resp, d := f.review(req)
			said := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				said += resp.Result.Message
			}
			if d != Denied && d != WouldDeny {
				t.Fatalf("decision %s, want a denial: %s", d, said)
			}
			for _, want := range c.message {
				if !strings.Contains(said, want) {
					t.Errorf("response says\n%s\nwant it to say %q", said, want)
				}
			}
			for _, dont := range c.forbidden {
				if strings.Contains(said, dont) {
					t.Errorf("response says\n%s\nwant it not to say %q", said, dont)
				}
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	recreate := func(pod, why string) plan.Action {
		return plan.Action{Type: plan.ActionRecreate, Pod: pod, Reasons: []string{why}}
	}
	for _, c := range []struct {
		name string
		wp   plan.WorkloadPlan
		why  map[string]string
		want string
	}{
		{"one pod, one wave", plan.WorkloadPlan{Summary: plan.Summary{ToUpdate: 1, Recreate: 1, Waves: 1},
			Waves: []plan.Wave{{Actions: []plan.Action{recreate("db-0", "spec.containers[app].env changed")}}}}, nil,
			"will update 1 pod in 1 wave: 1 recreated (spec.containers[app].env changed)"},
		{"pods, waves", plan.WorkloadPlan{Summary: plan.Summary{ToUpdate: 2, InPlace: 2, Waves: 2},
			Waves: []plan.Wave{{Actions: []plan.Action{{Type: plan.ActionInPlace, Pod: "db-0"}}}, {Actions: []plan.Action{{Type: plan.ActionInPlace, Pod: "db-1"}}}}}, nil,
			"will update 2 pods in 2 waves: 2 in place"},
		{"some pods blocked: the parts add up", plan.WorkloadPlan{Summary: plan.Summary{ToUpdate: 3, InPlace: 1, Deleted: 1, Blocked: 1, Waves: 1},
			Waves:   []plan.Wave{{Actions: []plan.Action{{Type: plan.ActionInPlace, Pod: "db-2"}, {Type: plan.ActionDelete, Pod: "db-9"}}}},
			Blocked: []plan.Held{{Pod: "db-1", Reason: "stalled after 20s: pod db-1 cannot start without exceeding budget maxUnavailable"}}}, nil,
			"will update 3 pods in 1 wave: 1 in place, 1 deleted, 1 blocked (stalled after 20s: pod db-1 cannot start without exceeding budget maxUnavailable)"},
		{"nothing planned, one pod", plan.WorkloadPlan{Summary: plan.Summary{ToUpdate: 1}, Notes: []string{"budget freeze allows none"}}, nil,
			"1 pod to update, nothing planned: budget freeze allows none"},
		{"a Deployment's scale-downs, with why their pods are updated", plan.WorkloadPlan{Summary: plan.Summary{ToUpdate: 2, Recreate: 2, Waves: 1},
			Waves: []plan.Wave{{Actions: []plan.Action{
				{Type: plan.ActionScaleRS, ReplicaSet: "web-new", Reasons: []string{"scale up within maxSurge"}},
				{Type: plan.ActionScaleRS, ReplicaSet: "web-old", Pods: []string{"web-old-0", "web-old-1"}, Reasons: []string{"scale down within maxUnavailable"}},
			}}}}, map[string]string{"web-old-0": "spec.containers[web].image changed", "web-old-1": "spec.containers[web].image changed"},
			"will update 2 pods in 1 wave: 2 recreated (spec.containers[web].image changed)"},
	} {
		if got := summarise(c.wp, c.why); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A Deployment's plan warning says why its pods are recreated, as the
// other kinds' do.
func TestDeploymentUpdateWarningSaysWhy(t *testing.T) {
	objs := rollingDeployment()
	f := newFixture(t, Options{}, objs...)
	old := objs[0].(*appsv1.Deployment)
	cur := old.DeepCopy()
	cur.Spec.Template.Spec.Containers[0].Image = "example.com/front:v3"
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(cur)
	resp, _ := f.review(&admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Name: "front", Operation: admissionv1.Update,
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		OldObject: runtime.RawExtension{Raw: o}, Object: runtime.RawExtension{Raw: n}})
	if want := "rollplan: will update 5 pods in 3 waves: 5 recreated (spec.containers[front].image changed)"; strings.Join(resp.Warnings, "\n") != want {
		t.Errorf("warnings %q, want %q", resp.Warnings, want)
	}
}
