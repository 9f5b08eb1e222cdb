package cel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
)

// Budgets the contract does not allow, and answers of the wrong type, are
// errors naming the policy file, the field, the budget and the workload in
// policy terms, as the Rego engine's are (engine.ValidateBudget).
func TestDecideBudgetErrors(t *testing.T) {
	const where = "policy p.yaml (RolloutPolicy p): spec.budgets[0]"
	const wl = " for StatefulSet prod/db"
	tests := []struct {
		name, spec, want string
	}{
		{"groupBy not in the contract", "  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: \"'rack'\"\n",
			where + `: budget "x": groupBy "rack": want "zone", "node" or "label:<key>"` + wl},
		{"groupBy label without key", "  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: \"'label:'\"\n",
			where + `: budget "x": groupBy "label:": the label key after "label:" is empty` + wl},
		{"maxGroups without groupBy", "  budgets:\n  - name: x\n    maxGroups: \"1\"\n",
			where + `: budget "x": maxGroups needs groupBy ("zone", "node" or "label:<key>")` + wl},
		{"empty name", "  budgets:\n  - nameExpression: \"''\"\n    maxUnavailable: \"1\"\n",
			where + ": a budget has no name: give every budget a non-empty name" + wl},
		{"fractional limit", "  params: {limit: 1.5}\n  budgets:\n  - name: x\n    maxUnavailable: params.limit\n",
			where + ".maxUnavailable: want a non-negative integer, got 1.5" + wl},
		{"percentage limit", "  params: {limit: \"50%\"}\n  budgets:\n  - name: x\n    maxSurge: params.limit\n",
			where + `.maxSurge: want a non-negative integer, got "50%"` + wl},
		{"negative limit", "  budgets:\n  - name: x\n    maxUnavailable: \"-1\"\n",
			where + ".maxUnavailable: want a non-negative integer up to 2147483647, got -1" + wl},
		{"forEach not a list", "  params: {items: {a: 1}}\n  budgets:\n  - forEach: params.items\n    nameExpression: \"'x'\"\n    maxUnavailable: \"1\"\n",
			where + ".forEach: want a list, got a map" + wl},
		{"groupBy not a string", "  params: {by: 1}\n  budgets:\n  - name: x\n    maxUnavailable: \"1\"\n    groupBy: params.by\n",
			where + ".groupBy: want a string, got 1" + wl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(context.Background(), rollout())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// An evaluation the policy timeout stops says so, naming the workload.
func TestDecideTimeout(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		timeout time.Duration
		want    string
		isTO    bool
	}{
		{"the policy timeout", context.Background(), time.Nanosecond, "policy evaluation for StatefulSet prod/db stopped after 1ns (policy timeout)", true},
		{"cancelled by the caller", cancelled, time.Minute, "policy evaluation for StatefulSet prod/db stopped: context canceled", false},
		{"cancelled, the default timeout", cancelled, 0, "policy evaluation for StatefulSet prod/db stopped: context canceled", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(nil, Options{Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(tt.ctx, rollout())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			var te *engine.TimeoutError
			if errors.As(err, &te) != tt.isTO {
				t.Errorf("errors.As(TimeoutError) = %t, want %t", !tt.isTO, tt.isTO)
			}
		})
	}
}

// Rego files handed to the CEL engine are named as such, not parsed as
// YAML; a directory without CEL policies is not the default strategy.
func TestLoadNotCEL(t *testing.T) {
	dir := t.TempDir()
	rego := filepath.Join(dir, "policy.rego")
	if err := os.WriteFile(rego, []byte("package rollplan.strategy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"a Rego file", []string{rego}, "policy " + rego + " is a Rego file, not a CEL policy (RolloutPolicy YAML): Rego policies run on the rego engine"},
		{"a directory of Rego files", []string{dir}, "policy " + dir + ": no CEL policy files (.yaml, .yml, .json) found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.paths)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "json:") {
				t.Errorf("error %q shows Go internals", err)
			}
		})
	}
}

// An expression that stays under the cost limit but loops for seconds is
// interrupted by the policy timeout, per pod, through a variable and per
// workload, and reports the timeout (not the interrupted expression).
func TestDecideTimeoutInterruptsExpressions(t *testing.T) {
	// A filter over 60,000 elements: well under the cost limit, seconds to run.
	const slow = "lists.range(60000).filter(i, i % 7 == 3).size() >= 0"
	tests := []struct{ name, spec string }{
		{"per-pod scope", "  scope:\n    expression: \"" + slow + " && pod.ordinal >= 0\"\n    messageExpression: \"'x'\"\n"},
		{"per-pod variable whose error an order key absorbs", "  variables:\n  - name: slow\n    expression: \"" + slow + " && pod.ordinal >= 0\"\n" +
			"  order:\n  - keys: [\"variables.slow || true\"]\n"},
		{"per-workload budget", "  budgets:\n  - name: b\n    maxUnavailable: \"" + slow + " ? 1 : 2\"\n"},
		{"per-pod halt", "  halt:\n  - expression: \"" + slow + " && pod.restarts > 100\"\n    messageExpression: \"'x'\"\n"},
	}
	const timeout = 200 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = e.Decide(context.Background(), rollout())
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Decide took %s under a %s policy timeout", took, timeout)
			}
			const want = "policy evaluation for StatefulSet prod/db stopped after 200ms (policy timeout)"
			if err == nil || err.Error() != want {
				t.Fatalf("error %v, want %q", err, want)
			}
			var te *engine.TimeoutError
			if !errors.As(err, &te) {
				t.Errorf("error %v is not an engine.TimeoutError", err)
			}
		})
	}
}

// A cost-limit error names the policy once, the expression that ran over
// (the variable, and who read it), the limit and what to do.
func TestCostLimitMessage(t *testing.T) {
	const big = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, a+b+c > 0)))"
	const where = "policy p.yaml (RolloutPolicy p): "
	const why = ": CEL cost limit exceeded: one evaluation of this expression costs more than the per-call limit of 1,000: " +
		"simplify it (fewer elements, fewer nested comprehensions), or move work into variables " +
		"(each variable is a call of its own, and one that does not read pod is evaluated once per workload)"
	tests := []struct{ name, spec, want string }{
		{"a halt rule", "  halt:\n  - expression: \"" + big + "\"\n    messageExpression: \"'x'\"\n",
			where + "spec.halt[0].expression" + why + " of StatefulSet prod/db"},
		{"a variable a budget reads", "  variables:\n  - name: big\n    expression: \"" + big + "\"\n  budgets:\n  - name: b\n    maxUnavailable: \"variables.big ? 1 : 2\"\n",
			where + "spec.variables[0] (big).expression, read by spec.budgets[0].maxUnavailable" + why + " for StatefulSet prod/db"},
		{"a variable read through another by scope", "  variables:\n  - name: big\n    expression: \"" + big + "\"\n  - name: mid\n    expression: \"variables.big && pod.ordinal >= 0\"\n" +
			"  scope:\n    expression: variables.mid\n    messageExpression: \"'x'\"\n",
			where + "spec.variables[0] (big).expression, read by spec.scope.expression" + why + " for pod db-0 of StatefulSet prod/db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(policy(t, tt.spec), Options{CostLimit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(context.Background(), rollout())
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// YAML that does not fit a RolloutPolicy names the file, the policy, the
// field path, the valid fields of an unknown one, and how to quote a value
// YAML read as a number or a boolean where an expression belongs.
func TestParseFieldErrors(t *testing.T) {
	const head = "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: slow\n"
	const where = "policy slow.yaml (RolloutPolicy slow): "
	tests := []struct{ name, doc, want string }{
		{"unknown budget field", head + "spec:\n  budgets:\n  - name: a\n    maxUnavailble: \"1\"\n",
			where + `spec.budgets[0]: unknown field "maxUnavailble" (did you mean "maxUnavailable"?); valid fields: name, nameExpression, forEach, when, maxUnavailable, maxSurge, groupBy, maxGroups, pdb, advisory, source`},
		{"unknown spec field", head + "spec:\n  pacng: {expression: \"'wave'\"}\n",
			where + `spec: unknown field "pacng" (did you mean "pacing"?); valid fields: matchConstraints, params, variables, scope, eligibility, order, budgets, pacing, nodePreparation, analysis, halt, deny`},
		{"unknown field far from any", head + "spec:\n  scope:\n    expression: \"true\"\n    messageExpression: \"'x'\"\n    zzz: 1\n",
			where + `spec.scope: unknown field "zzz"; valid fields: expression, messageExpression`},
		{"unknown field before the name", "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: slow}\nspecs: {}\n",
			where + `unknown field "specs" (did you mean "spec"?); valid fields: apiVersion, kind, metadata, spec`},
		{"no name yet: the document", "apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  nme: slow\nspec: {}\n",
			"policy slow.yaml: document 1: metadata: unknown field \"nme\" (did you mean \"name\"?); valid fields: name, generateName, namespace, selfLink, uid, resourceVersion, generation, " +
				"creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, labels, annotations, ownerReferences, finalizers, managedFields"},
		{"a number for an expression", head + "spec:\n  budgets:\n  - name: a\n    maxUnavailable: 2\n",
			where + `spec.budgets[0].maxUnavailable: must be a CEL expression string, got the number 2: quote it, as in maxUnavailable: "2"`},
		{"a boolean for an expression", head + "spec:\n  budgets:\n  - name: a\n    maxUnavailable: \"1\"\n    advisory: true\n",
			where + `spec.budgets[0].advisory: must be a CEL expression string, got the boolean true: quote it, as in advisory: "true"`},
		{"a number for an order key", head + "spec:\n  order:\n  - keys: [pod.name, 1]\n",
			where + `spec.order[0].keys[1]: must be a CEL expression string, got the number 1: quote it, as in - "1"`},
		{"a map for an expression", head + "spec:\n  scope:\n    expression: {pod: 1}\n    messageExpression: \"'x'\"\n",
			where + `spec.scope.expression: must be a CEL expression string, got a map: write the whole expression as one quoted string, as in expression: "..."`},
		{"a string for a list", head + "spec:\n  matchConstraints:\n    kinds: StatefulSet\n",
			where + `spec.matchConstraints.kinds: want a list, got the string "StatefulSet"`},
		{"a document that is not an object", "- a\n",
			"policy slow.yaml: document 1: want a RolloutPolicy (apiVersion, kind, metadata, spec), got a list"},
		{"another kind: no field errors", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
			`policy slow.yaml: document 1: want apiVersion rollplan.dev/v1alpha1, kind RolloutPolicy; got apiVersion "v1", kind "Pod"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("slow.yaml", []byte(tt.doc))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}
