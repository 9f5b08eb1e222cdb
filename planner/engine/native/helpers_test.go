package native

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/facts"
)

// regoDefaults is the Rego engine with the default policy only, compiled once
// per test binary.
var regoDefaults = sync.OnceValues(func() (*rego.Engine, error) {
	return rego.Load(context.Background(), nil, 10*time.Minute)
})

func regoEngine(tb testing.TB) *rego.Engine {
	tb.Helper()
	e, err := regoDefaults()
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// requireParity runs both engines on r and fails unless they agree: both
// fail, or both succeed with reflect.DeepEqual decisions. It returns the
// native decisions (nil when both failed).
func requireParity(t *testing.T, r *facts.Rollout) *engine.Decisions {
	t.Helper()
	ctx := context.Background()
	want, werr := regoEngine(t).Decide(ctx, r)
	got, gerr := New().Decide(ctx, r)
	switch {
	case werr != nil && gerr != nil:
		t.Logf("%s: both engines fail:\n  rego:   %v\n  native: %v", wid(r), werr, gerr)
		return nil
	case werr != nil:
		t.Fatalf("%s: rego fails (%v), native succeeds", wid(r), werr)
	case gerr != nil:
		t.Fatalf("%s: native fails (%v), rego succeeds", wid(r), gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: native decisions differ from rego's:\n%s", wid(r), diffDecisions(r, want, got))
	}
	return got
}

func wid(r *facts.Rollout) string {
	return fmt.Sprintf("%s %s/%s", r.Workload.Kind, r.Workload.Namespace, r.Workload.Name)
}

// diffDecisions lists the fields that differ, a line each (pod name + field),
// at most 40 lines.
func diffDecisions(r *facts.Rollout, want, got *engine.Decisions) string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if len(want.Pods) != len(got.Pods) {
		add("len(Pods): rego %d, native %d", len(want.Pods), len(got.Pods))
	}
	for i := 0; i < len(want.Pods) && i < len(got.Pods); i++ {
		w, g := want.Pods[i], got.Pods[i]
		name := fmt.Sprintf("pod %d", i)
		if i < len(r.Pods) {
			name = "pod " + r.Pods[i].Name
		}
		if w.InScope != g.InScope {
			add("%s: InScope: rego %v, native %v", name, w.InScope, g.InScope)
		}
		if w.HeldReason != g.HeldReason {
			add("%s: HeldReason: rego %q, native %q", name, w.HeldReason, g.HeldReason)
		}
		if w.Action != g.Action {
			add("%s: Action: rego %q, native %q", name, w.Action, g.Action)
		}
		if !reflect.DeepEqual(w.Reasons, g.Reasons) {
			add("%s: Reasons: rego %#v, native %#v", name, w.Reasons, g.Reasons)
		}
		if !reflect.DeepEqual(w.Order, g.Order) {
			add("%s: Order: rego %#v, native %#v", name, w.Order, g.Order)
		}
	}
	if !reflect.DeepEqual(want.Budgets, got.Budgets) {
		add("Budgets:\n  rego   %s\n  native %s", fmtBudgets(want.Budgets), fmtBudgets(got.Budgets))
	}
	if want.Pacing != got.Pacing {
		add("Pacing: rego %q, native %q", want.Pacing, got.Pacing)
	}
	if want.NodePreparation != got.NodePreparation {
		add("NodePreparation: rego %q, native %q", want.NodePreparation, got.NodePreparation)
	}
	if !reflect.DeepEqual(want.Halt, got.Halt) {
		add("Halt: rego %#v, native %#v", want.Halt, got.Halt)
	}
	if !reflect.DeepEqual(want.Deny, got.Deny) {
		add("Deny: rego %#v, native %#v", want.Deny, got.Deny)
	}
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("... and %d more", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}

// fmtBudgets prints budgets with their pointers dereferenced, and says
// whether the slice is nil.
func fmtBudgets(bs []engine.Budget) string {
	if bs == nil {
		return "nil"
	}
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("{%s mu=%s ms=%s groupBy=%q maxGroups=%s pdb=%q advisory=%v source=%q}",
			b.Name, ptr(b.MaxUnavailable), ptr(b.MaxSurge), b.GroupBy, ptr(b.MaxGroups), b.PDB, b.Advisory, b.Source)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func ptr(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
