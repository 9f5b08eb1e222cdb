package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/plan"
)

// planScenario plans a golden scenario (for the newest Kubernetes, as
// internal/scenario reads them) with its policy.
func planScenario(t *testing.T, name string) *plan.Result {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("../../testdata/scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range sc.Policies {
		paths = append(paths, filepath.Join("../..", p))
	}
	eng, err := rego.Load(context.Background(), paths, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o := plan.DefaultOptions
	o.Upstream = native.New()
	res, err := plan.Build(context.Background(), sc.Rollouts, eng, plan.Metadata{}, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func explainPod(t *testing.T, res *plan.Result, pod string) Explanation {
	t.Helper()
	wi, pi, err := FindPod(res, nil, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	return Pod(res, wi, pi)
}

func text(t *testing.T, e Explanation) string {
	t.Helper()
	var b bytes.Buffer
	if err := e.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A pod of a later wave says which budget kept it out of the wave before,
// in the structure and in the text; a pod of the first wave says nothing
// of the kind.
func TestPodWaited(t *testing.T) {
	cases := []struct {
		scenario, pod string
		wave          int
		waited        *plan.Wait
		line          string // the text's waited line, "" for none
	}{
		{"sts-partition-gate-off", "web-3", 2, &plan.Wait{Wave: 1, Budget: "maxUnavailable"},
			"  waited:      wave 1 was full: maxUnavailable 2/2: 2 pod(s) unavailable, and web-3 would make 3\n"},
		{"sts-partition-gate-off", "web-5", 1, nil, ""},
		{"ds-maxunavailable-int", "agent-dmp4p", 2, &plan.Wait{Wave: 1, Budget: "maxUnavailable", Behind: "agent-9fw8k"},
			"  waited:      wave 1 was full: maxUnavailable 2/2: 2 pod(s) unavailable, and agent-9fw8k would make 3; this pod comes after agent-9fw8k in policy order\n"},
		{"example-one-zone-at-a-time", "agent-m5vgg", 2, &plan.Wait{Wave: 1, Budget: "one-zone-at-a-time"},
			"  waited:      wave 1 was full: one-zone-at-a-time 1/1: 1 group(s) by zone in flight, and agent-m5vgg (zone \"zone-b\") would make 2\n"},
	}
	for _, c := range cases {
		t.Run(c.scenario+"/"+c.pod, func(t *testing.T) {
			e := explainPod(t, planScenario(t, c.scenario), c.pod)
			if e.Wave == nil || e.Wave.Index != c.wave {
				t.Fatalf("wave %+v, want %d", e.Wave, c.wave)
			}
			switch {
			case c.waited == nil && e.Waited != nil:
				t.Errorf("waited %+v, want none", *e.Waited)
			case c.waited != nil && (e.Waited == nil || e.Waited.Wave != c.waited.Wave || e.Waited.Budget != c.waited.Budget || e.Waited.Behind != c.waited.Behind):
				t.Errorf("waited %+v, want %+v", e.Waited, *c.waited)
			}
			out := text(t, e)
			if c.line != "" && !strings.Contains(out, c.line) {
				t.Errorf("text lacks %q:\n%s", c.line, out)
			}
			if c.line == "" && strings.Contains(out, "waited:") {
				t.Errorf("text of a first-wave pod says it waited:\n%s", out)
			}
			// The waited line sits between the wave and the actions.
			if c.line != "" && !strings.Contains(out, "pacing "+e.Wave.Pacing+"\n"+c.line+"  action:") {
				t.Errorf("waited line out of place:\n%s", out)
			}
		})
	}
}

// Where a pod's story ends, the explanation ends: a held pod has a scope
// and no eligibility or wave; the text stops at the scope.
func TestHeldPodStopsAtScope(t *testing.T) {
	e := explainPod(t, planScenario(t, "sts-partition-gate-off"), "default/web-1")
	if e.Scope == nil || e.Scope.InRollout || e.Scope.HeldReason == "" || e.Eligibility != nil || e.Wave != nil {
		t.Fatalf("held pod explained as %+v", e)
	}
	out := text(t, e)
	if !strings.HasSuffix(out, "  scope:       held: "+e.Scope.HeldReason+"\n") {
		t.Errorf("text goes on after the scope:\n%s", out)
	}
}

// The JSON field names are the documented, lowerCamel ones.
func TestJSONFieldNames(t *testing.T) {
	e := explainPod(t, planScenario(t, "ds-maxunavailable-int"), "agent-dmp4p")
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"actions", "budgets", "changes", "eligibility", "namespace", "orderKey", "pod", "revision", "scope", "state", "updateRevision", "waited", "wave", "workload"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	waited := m["waited"].(map[string]any)
	if waited["wave"] != 1.0 || waited["budget"] != "maxUnavailable" || waited["behind"] != "agent-9fw8k" {
		t.Errorf("waited %v", waited)
	}
}

// FindPod names where a pod of that name is when it is not where asked.
func TestFindPodErrors(t *testing.T) {
	res := planScenario(t, "sts-partition-gate-off")
	if _, _, err := FindPod(res, nil, "web-4", "other"); err == nil || !strings.Contains(err.Error(), `a pod of that name is in namespace "default": explain default/web-4, or pass -n default`) {
		t.Errorf("web-4 in namespace other: %v", err)
	}
	if _, _, err := FindPod(res, nil, "nope", ""); err == nil || !strings.Contains(err.Error(), "pod nope is not a pod of any") {
		t.Errorf("nope: %v", err)
	}
}
