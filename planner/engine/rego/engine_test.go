package rego

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// userFile is the file name the inline user modules are given.
const userFile = "user/strategy.rego"

// stsRollout is a managed, in-place StatefulSet default/web of three pods
// (ordinals 0..2, none updated, each with one in-place image change) and a
// partition of 1.
func stsRollout() *facts.Rollout {
	change := facts.Change{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}
	r := &facts.Rollout{
		SchemaVersion: facts.SchemaVersion,
		Now:           "2026-03-01T12:00:00Z",
		FeatureGates:  map[string]bool{"MaxUnavailableStatefulSet": false},
		Workload: facts.Workload{
			Kind:      "StatefulSet",
			Namespace: "default",
			Name:      "web",
			UID:       "uid-web",
			Labels:    map[string]string{"app": "web"},
			Replicas:  3,
			Strategy: facts.Strategy{
				Type:                 "RollingUpdate",
				MaxUnavailable:       1,
				MaxUnavailableSource: "spec.updateStrategy.rollingUpdate.maxUnavailable",
				Partition:            1,
				PartitionSource:      "spec.updateStrategy.rollingUpdate.partition",
				RollingUpdateSet:     true,
			},
			PodManagementPolicy:     "OrderedReady",
			ProgressDeadlineSeconds: 600,
			Managed:                 true,
			PodUpdatePolicy:         "InPlaceIfPossible",
			CurrentRevision:         "web-old",
			UpdateRevision:          "web-new",
		},
		Revisions: []facts.Revision{{Name: "web-old", Changes: []facts.Change{change}}},
	}
	for i := 0; i < 3; i++ {
		r.Pods = append(r.Pods, facts.Pod{
			Name:          fmt.Sprintf("web-%d", i),
			UID:           fmt.Sprintf("uid-web-%d", i),
			Revision:      "web-old",
			Ordinal:       i,
			Index:         i,
			Node:          fmt.Sprintf("node-%d", i),
			Zone:          "zone-a",
			Phase:         "Running",
			Scheduled:     true,
			Ready:         true,
			ReadySeconds:  3600,
			Available:     true,
			Owner:         "web",
			Labels:        map[string]string{"app": "web"},
			Colocated:     1,
			ReadyBucket:   41,
			CreatedBucket: 42,
			Changes:       []facts.Change{change},
		})
	}
	return r
}

// newEngine parses the given user modules (file name → source) with the
// embedded defaults and compiles them.
func newEngine(t *testing.T, files map[string]string) *Engine {
	t.Helper()
	if files == nil {
		files = map[string]string{}
	}
	b, err := parseBundle(files, []string{"test"})
	if err != nil {
		t.Fatalf("parseBundle: %v", err)
	}
	e, err := New(context.Background(), b, time.Second)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func userPolicy(body string) map[string]string {
	return map[string]string{userFile: "package rollplan.strategy\n\n" + body + "\n"}
}

func findBudget(bs []engine.Budget, name string) (engine.Budget, bool) {
	for _, b := range bs {
		if b.Name == name {
			return b, true
		}
	}
	return engine.Budget{}, false
}

func TestDecideDefaults(t *testing.T) {
	e := newEngine(t, nil)
	if e.Name() != "rego" {
		t.Errorf("Name() = %q", e.Name())
	}
	if !strings.HasPrefix(e.Digest(), "sha256:") {
		t.Errorf("Digest() = %q, want sha256:...", e.Digest())
	}
	r := stsRollout()
	d, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if len(d.Pods) != len(r.Pods) {
		t.Fatalf("got %d pod decisions for %d pods", len(d.Pods), len(r.Pods))
	}

	p0 := d.Pods[0]
	if p0.InScope || !strings.Contains(p0.HeldReason, "below partition") {
		t.Errorf("web-0: InScope=%v HeldReason=%q, want held below partition", p0.InScope, p0.HeldReason)
	}
	for i := 1; i < 3; i++ {
		p := d.Pods[i]
		if !p.InScope {
			t.Errorf("web-%d: held (%q), want in scope", i, p.HeldReason)
		}
		if p.Action != engine.InPlace {
			t.Errorf("web-%d: action %q (reasons %q), want InPlace", i, p.Action, p.Reasons)
		}
		if len(p.Reasons) == 0 {
			t.Errorf("web-%d: no reasons", i)
		}
		// Managed StatefulSet: [available, -ordinal].
		if want := []any{int64(1), int64(-i)}; !reflect.DeepEqual(p.Order, want) {
			t.Errorf("web-%d: order %#v, want %#v", i, p.Order, want)
		}
	}
	if d.Pacing != engine.PacingWave {
		t.Errorf("pacing = %q, want wave (OrderedReady)", d.Pacing)
	}
	if len(d.Budgets) == 0 {
		t.Fatal("no budgets")
	}
	b, ok := findBudget(d.Budgets, "maxUnavailable")
	if !ok || b.MaxUnavailable == nil || *b.MaxUnavailable != 1 {
		t.Errorf("budgets = %+v, want maxUnavailable 1", d.Budgets)
	}
	if len(d.Halt) != 0 {
		t.Errorf("halt = %q, want none", d.Halt)
	}

	t.Run("parallel paces rolling", func(t *testing.T) {
		r := stsRollout()
		r.Workload.PodManagementPolicy = "Parallel"
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		if d.Pacing != engine.PacingRolling {
			t.Errorf("pacing = %q, want rolling", d.Pacing)
		}
	})

	t.Run("updated pods get no decision", func(t *testing.T) {
		r := stsRollout()
		r.Pods[2].Updated = true
		r.Pods[2].Revision = "web-new"
		r.Pods[2].Changes = nil
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		if len(d.Pods) != 3 || d.Pods[1].Action != engine.InPlace || d.Pods[2].Action != "" {
			t.Errorf("pods = %+v", d.Pods)
		}
	})
}

func TestDecideUserOrderFallsBackToDefaults(t *testing.T) {
	e := newEngine(t, userPolicy("order(pod) := [pod.name]"))
	d, err := e.Decide(context.Background(), stsRollout())
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	for i, p := range d.Pods {
		if want := []any{fmt.Sprintf("web-%d", i)}; !reflect.DeepEqual(p.Order, want) {
			t.Errorf("web-%d: order %#v, want %#v (from the user policy)", i, p.Order, want)
		}
	}
	// Everything else comes from the defaults.
	if d.Pods[0].InScope || !strings.Contains(d.Pods[0].HeldReason, "below partition") {
		t.Errorf("web-0 not held by the default scope: %+v", d.Pods[0])
	}
	if d.Pods[1].Action != engine.InPlace {
		t.Errorf("web-1 action %q, want InPlace from the default eligibility", d.Pods[1].Action)
	}
	if b, ok := findBudget(d.Budgets, "maxUnavailable"); !ok || b.MaxUnavailable == nil || *b.MaxUnavailable != 1 {
		t.Errorf("budgets = %+v, want the default maxUnavailable 1", d.Budgets)
	}
	if d.Pacing != engine.PacingWave {
		t.Errorf("pacing = %q, want wave from the defaults", d.Pacing)
	}
}

// TestDecideNodePreparation: the default answers none; an entry policy's
// answer replaces it, whatever the kind (the planner decides who honours it).
func TestDecideNodePreparation(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`order(pod) := [pod.name]`, engine.NodePrepNone},
		{`node_preparation := "cordon"`, engine.NodePrepCordon},
		{`node_preparation := "drain" if input.workload.kind == "StatefulSet"
else := "none"`, engine.NodePrepDrain},
	} {
		d, err := newEngine(t, userPolicy(tc.body)).Decide(context.Background(), stsRollout())
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if d.NodePreparation != tc.want {
			t.Errorf("%s: node preparation %q, want %q", tc.body, d.NodePreparation, tc.want)
		}
	}
}

func TestDecideErrors(t *testing.T) {
	const wl = "StatefulSet default/web"
	tests := []struct {
		name string
		body string
		want []string
	}{
		{
			name: "negative budget",
			body: `budgets := [{"name": "x", "maxUnavailable": -1}]`,
			want: []string{"budgets", "must be greater than or equal to 0", userFile, wl},
		},
		{
			name: "budget without a limit",
			body: `budgets := [{"name": "x"}]`,
			want: []string{"budgets", "sets none of", userFile, wl},
		},
		{
			name: "budget with an unknown field",
			body: `budgets := [{"name": "x", "maxUnavailable": 1, "maxUnavailabel": 2}]`,
			want: []string{"budgets", "maxUnavailabel", userFile, wl},
		},
		{
			name: "bad pacing",
			body: `pacing := "fast"`,
			want: []string{"pacing", "fast", userFile, wl},
		},
		{
			name: "bad node preparation",
			body: `node_preparation := "reboot"`,
			want: []string{"rule node_preparation", `want "none", "cordon" or "drain"`, "reboot", userFile, wl},
		},
		{
			name: "node preparation not a string",
			body: `node_preparation := true`,
			want: []string{"rule node_preparation", userFile, wl},
		},
		{
			name: "held without a reason",
			body: `scope(pod) := {"in": false}`,
			want: []string{"rule scope", "pod web-0", wl, "reason", userFile},
		},
		{
			name: "bad action",
			body: `eligibility(pod) := {"action": "Maybe"}`,
			want: []string{"eligibility", "Maybe", "pod web-0", wl, userFile},
		},
		{
			name: "order undefined for one pod",
			body: `order(pod) := [pod.name] if pod.ordinal > 0`,
			want: []string{"rule order is undefined for pod web-0", wl, userFile},
		},
		{
			name: "order with a non-scalar key",
			body: `order(pod) := [{"a": 1}]`,
			want: []string{"rule order", "pod web-0", wl},
		},
		{
			name: "workload rule undefined",
			body: `halt := [] if input.workload.kind == "Deployment"`,
			want: []string{"rule halt is undefined", wl, userFile},
		},
		{
			name: "halt not strings",
			body: `halt := [1]`,
			want: []string{"halt", wl, userFile},
		},
		{
			name: "runtime builtin error",
			body: `halt := [x | x := to_number("abc")]`,
			want: []string{wl, "to_number"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(tt.body))
			d, err := e.Decide(context.Background(), stsRollout())
			if err == nil {
				t.Fatalf("Decide succeeded (%+v), want an error containing %q", d, tt.want)
			}
			t.Logf("error: %v", err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseBundleErrors(t *testing.T) {
	t.Run("syntax error", func(t *testing.T) {
		_, err := parseBundle(map[string]string{"bad.rego": "package rollplan.strategy\n\norder(pod) := [pod.name\n"}, []string{"test"})
		if err == nil || !strings.Contains(err.Error(), "bad.rego") {
			t.Fatalf("err = %v, want a parse error naming bad.rego", err)
		}
	})
	t.Run("reserved package", func(t *testing.T) {
		_, err := parseBundle(map[string]string{"mine.rego": "package rollplan.resolved\n\nx := 1\n"}, []string{"test"})
		if err == nil || !strings.Contains(err.Error(), "reserved") || !strings.Contains(err.Error(), "mine.rego") {
			t.Fatalf("err = %v, want one saying the package is reserved", err)
		}
	})
	t.Run("compile error", func(t *testing.T) {
		b, err := parseBundle(userPolicy("order(pod) := [undefined_function(pod)]"), []string{"test"})
		if err != nil {
			t.Fatalf("parseBundle: %v", err)
		}
		_, err = New(context.Background(), b, time.Second)
		if err == nil || !strings.Contains(err.Error(), "undefined_function") {
			t.Fatalf("err = %v, want a compile error naming undefined_function", err)
		}
	})
}

func TestBundleDigest(t *testing.T) {
	src := "package rollplan.strategy\n\norder(pod) := [pod.name]\n"
	digest := func(files map[string]string) string {
		t.Helper()
		b, err := parseBundle(files, []string{"test"})
		if err != nil {
			t.Fatalf("parseBundle: %v", err)
		}
		return b.Digest
	}
	d1 := digest(map[string]string{"p.rego": src})
	d2 := digest(map[string]string{"p.rego": src})
	if d1 != d2 {
		t.Errorf("same files give %s and %s", d1, d2)
	}
	if !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digest %q does not start with sha256:", d1)
	}
	changed := strings.Replace(src, "pod.name", "pod.nama", 1)
	if d3 := digest(map[string]string{"p.rego": changed}); d3 == d1 {
		t.Errorf("a changed byte gives the same digest %s", d3)
	}
	if d4 := digest(map[string]string{"q.rego": src}); d4 == d1 {
		t.Errorf("a renamed file gives the same digest %s", d4)
	}
	if d5 := digest(map[string]string{}); d5 == d1 {
		t.Errorf("the default bundle has the user bundle's digest %s", d5)
	}
}

// decideNoPanic runs Decide and turns a panic into a returned value.
func decideNoPanic(e *Engine, r *facts.Rollout) (d *engine.Decisions, panicked any, err error) {
	defer func() { panicked = recover() }()
	d, err = e.Decide(context.Background(), r)
	return d, nil, err
}

// A scope answer without "in" must be an error naming the rule, the pod and
// the workload, not a panic.
func TestDecideScopeWithoutIn(t *testing.T) {
	e := newEngine(t, userPolicy(`scope(pod) := {"reason": "x"}`))
	_, p, err := decideNoPanic(e, stsRollout())
	if p != nil {
		t.Fatalf("Decide panicked: %v", p)
	}
	if err == nil {
		t.Fatal("Decide succeeded, want an error")
	}
	for _, w := range []string{"rule scope", "pod web-0", "StatefulSet default/web", `"in"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// An order key that is a number Go cannot represent is an error, never a
// silent nil key.
func TestDecideOrderHugeNumber(t *testing.T) {
	e := newEngine(t, userPolicy(`order(pod) := [1e400]`))
	d, p, err := decideNoPanic(e, stsRollout())
	if p != nil {
		t.Fatalf("Decide panicked: %v", p)
	}
	if err == nil {
		t.Fatalf("Decide succeeded with keys %v, want an error naming rule order", d.Pods[1].Order)
	}
	if !strings.Contains(err.Error(), "rule order") || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("error %q does not name rule order and the range", err)
	}
}
