package rego

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
)

// goInternals are words of Go's encoding/json and type names that a policy
// author cannot act on; no policy error may show them.
var goInternals = []string{"json:", "Go value", "Go struct", "engine.", "[]string", "unmarshal", "\n"}

func checkOneClearLine(t *testing.T, err error) {
	t.Helper()
	for _, w := range goInternals {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error %q shows %q", err, w)
		}
	}
}

// A bundle without the entry package would be ignored: the default plan
// with exit 0. Library packages beside an entry package are fine; one no
// file refers to is a warning.
func TestParseBundleEntryPackage(t *testing.T) {
	const entry = "package rollplan.strategy\n\nimport data.lib\n\npacing := lib.pacing\n"
	const lib = "package lib\n\npacing := \"wave\"\n"
	tests := []struct {
		name    string
		files   map[string]string
		wantErr []string
		warn    []string
	}{
		{"only another package", map[string]string{"p/a.rego": "package foo\n\nx := 1\n"},
			[]string{"policy test", "no file declares package rollplan.strategy", "p/a.rego has package foo", "the entry package must be rollplan.strategy"}, nil},
		{"two libraries, no entry", map[string]string{"p/a.rego": lib, "p/b.rego": "package foo\n\nx := data.lib.pacing\n"},
			[]string{"p/a.rego has package lib; p/b.rego has package foo"}, nil},
		{"entry and an imported library", map[string]string{"p/a.rego": entry, "p/lib.rego": lib}, nil, nil},
		{"library read as data.<package>", map[string]string{"p/a.rego": "package rollplan.strategy\n\npacing := data.lib.pacing\n", "p/lib.rego": lib}, nil, nil},
		{"entry and a package nothing reads", map[string]string{"p/a.rego": entry, "p/lib.rego": lib, "p/typo.rego": "package rollplan.stratgy\n\norder(pod) := [pod.name]\n"}, nil,
			[]string{"policy p/typo.rego: package rollplan.stratgy is not the entry package (rollplan.strategy) and no other policy file refers to it: it has no effect"}},
		{"the default library alone", map[string]string{"p/defaults.rego": "package rollplan.defaults\n\npacing := \"wave\"\n"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := parseBundle(tt.files, []string{"test"})
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("parseBundle succeeded, want an error containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				checkOneClearLine(t, err)
				return
			}
			if err != nil {
				t.Fatalf("parseBundle: %v", err)
			}
			if !reflect.DeepEqual(b.Warnings, tt.warn) {
				t.Errorf("warnings %q, want %q", b.Warnings, tt.warn)
			}
		})
	}
}

// The shipped examples load without warnings.
func TestExamplesLoadWithoutWarnings(t *testing.T) {
	dirs, err := filepath.Glob("../../../policies/examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, dir := range dirs {
		b, err := LoadBundle([]string{dir})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if len(b.Warnings) > 0 {
			t.Errorf("%s: warnings %q", dir, b.Warnings)
		}
	}
}

// Answers of the wrong type or value are errors naming the policy file, the
// rule, the workload and the field, in policy terms, in Decide and in
// DecideBudgets alike.
func TestDecideAnswerErrors(t *testing.T) {
	const prefix = "policy " + userFile + " (package rollplan.strategy): rule "
	const wl = " for StatefulSet default/web: "
	tests := []struct {
		name, body, want string
	}{
		{"groupBy not in the contract", `budgets := [{"name": "x", "maxUnavailable": 1, "groupBy": "rack"}]`,
			prefix + "budgets" + wl + `budget "x": groupBy "rack": want "zone", "node" or "label:<key>"`},
		{"groupBy label without key", `budgets := [{"name": "x", "maxUnavailable": 1, "groupBy": "label:"}]`,
			prefix + "budgets" + wl + `budget "x": groupBy "label:": the label key after "label:" is empty`},
		{"budgets an object", `budgets := {"name": "x", "maxUnavailable": 1}`,
			prefix + "budgets" + wl + "want a list of budgets " + budgetShape + ", got an object"},
		{"budgets a string", `budgets := "x"`,
			prefix + "budgets" + wl + "want a list of budgets " + budgetShape + `, got "x"`},
		{"budget a string", `budgets := ["x"]`,
			prefix + "budgets" + wl + "budget 0: want an object " + budgetShape + `, got "x"`},
		{"fractional limit", `budgets := [{"name": "x", "maxUnavailable": 1.5}]`,
			prefix + "budgets" + wl + `budget "x": maxUnavailable: want a non-negative integer, got 1.5`},
		{"percentage limit", `budgets := [{"name": "x", "maxSurge": "50%"}]`,
			prefix + "budgets" + wl + `budget "x": maxSurge: want a non-negative integer, got "50%": budgets are resolved counts, scale the percentage by input.workload.replicas`},
		{"limit an object", `budgets := [{"name": "x", "maxGroups": {}, "groupBy": "zone"}]`,
			prefix + "budgets" + wl + `budget "x": maxGroups: want a non-negative integer, got an object`},
		{"name a number", `budgets := [{"name": 1, "maxUnavailable": 1}]`,
			prefix + "budgets" + wl + "budget 0: name: want a string, got 1"},
		{"advisory a string", `budgets := [{"name": "x", "maxUnavailable": 1, "advisory": "yes"}]`,
			prefix + "budgets" + wl + `budget "x": advisory: want true or false, got "yes"`},
		{"unknown field", `budgets := [{"name": "x", "maxUnavailable": 1, "group": "zone"}]`,
			prefix + "budgets" + wl + `budget "x": unknown field "group": a budget is ` + budgetShape},
		{"halt a string", `halt := "stop"`,
			prefix + "halt" + wl + `want a list (or set) of strings, got "stop"`},
		{"deny an object", `deny := {"a": 1}`,
			prefix + "deny" + wl + "want a list (or set) of strings, got an object"},
		{"deny a list of numbers", `deny := [1]`,
			prefix + "deny" + wl + "want a list (or set) of strings, got 1 at index 0"},
		{"pacing a number", `pacing := 1`,
			prefix + "pacing" + wl + `want "wave" or "rolling", got 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(tt.body))
			requireDecideError(t, e, tt.want, strings.Contains(tt.want, "rule budgets"))
		})
	}
}

// A set of budgets or halt reasons is as good as a list.
func TestDecideSetAnswers(t *testing.T) {
	e := newEngine(t, userPolicy(`budgets contains {"name": "x", "maxUnavailable": 1, "groupBy": "label:rack"}

halt contains "stop" if input.workload.kind == "StatefulSet"`))
	d, err := e.Decide(context.Background(), stsRollout())
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	if want := []engine.Budget{{Name: "x", MaxUnavailable: &one, GroupBy: "label:rack"}}; !reflect.DeepEqual(d.Budgets, want) {
		t.Errorf("budgets %+v, want %+v", d.Budgets, want)
	}
	if !reflect.DeepEqual(d.Halt, []string{"stop"}) {
		t.Errorf("halt %q, want [stop]", d.Halt)
	}
}

// Parse, compile and evaluation errors are one line naming the file and the
// row; several errors are the first and how many more.
func TestOneLineErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // exact, or a prefix when it ends in "..."
	}{
		{"syntax error", "package rollplan.strategy\n\norder(pod) := [pod.name\n",
			"policy " + userFile + `:4: parse error: unexpected eof token: expected "," or "]"...`},
		{"several syntax errors", "package rollplan.strategy\n\npacing := [\n\nhalt := {\n",
			"policy " + userFile + `:5: parse error: unexpected assign token: expected "," or "]" (and 1 more)`},
		{"conflicting defaults", "package rollplan.strategy\n\ndefault pacing := \"wave\"\n\ndefault pacing := \"rolling\"\n",
			"policy " + userFile + ":1: type error: multiple default rules data.rollplan.strategy.pacing found at " + userFile + ":3, " + userFile + ":5"},
		{"type error", "package rollplan.strategy\n\npacing := \"wave\" if {\n\t1 + \"a\"\n}\n",
			"policy " + userFile + ":4: type error: plus: invalid argument(s) (have: (number, string); want: (x: number, y: number, z: number))"},
		{"unsafe variable", "package rollplan.strategy\n\npacing := y\n",
			"policy " + userFile + ":3: unsafe var error: var y is unsafe"},
		{"conflicting values", "package rollplan.strategy\n\npacing := \"wave\" if input.workload.kind == \"StatefulSet\"\n\npacing := \"rolling\" if input.workload.replicas > 0\n",
			"policy " + userFile + ":5: evaluation for StatefulSet default/web: conflict error: rule data.rollplan.strategy.pacing produced conflicting values: \"wave\" at " + userFile + ":3, \"rolling\" at " + userFile + ":5"},
		{"builtin error", "package rollplan.strategy\n\nhalt := [x | x := to_number(\"abc\")]\n",
			"policy " + userFile + ":3: evaluation for StatefulSet default/web: builtin error: to_number: ..."},
		{"pod rule as a value", "package rollplan.strategy\n\nscope := {\"in\": true}\n",
			"policy " + userFile + ":3: rule scope must be a function of one pod, as scope(pod) := ..., got 0 argument(s)"},
		{"workload rule as a function", "package rollplan.strategy\n\nbudgets(x) := []\n",
			"policy " + userFile + ":3: rule budgets answers for the workload and takes no argument: write budgets := ... (read input.workload)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := func() error {
				b, err := parseBundle(map[string]string{userFile: tt.src}, []string{"test"})
				if err != nil {
					return err
				}
				e, err := New(context.Background(), b, time.Second)
				if err != nil {
					return err
				}
				_, err = e.Decide(context.Background(), stsRollout())
				return err
			}()
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			got := err.Error()
			if pre, suf, cut := strings.Cut(tt.want, "..."); cut {
				if !strings.HasPrefix(got, pre) || !strings.HasSuffix(got, suf) {
					t.Fatalf("error\n%s\nwant\n%s", got, tt.want)
				}
			} else if got != tt.want {
				t.Fatalf("error\n%s\nwant\n%s", got, tt.want)
			}
			checkOneClearLine(t, err)
		})
	}
}

// An evaluation the engine's timeout stops says so, naming the workload and
// the timeout; one the caller cancels does not blame the timeout.
func TestDecideTimeout(t *testing.T) {
	// Slow enough that evaluation is still running when the timeout
	// strikes, whenever the engine notices it.
	b, err := parseBundle(userPolicy(`budgets := [{"name": "x", "maxUnavailable": count([x | some x in numbers.range(1, 10000000)])}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), b, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		call    func(ctx context.Context) error
		timeout bool
		want    string
	}{
		{"Decide", context.Background(), func(ctx context.Context) error { _, err := e.Decide(ctx, stsRollout()); return err },
			true, "policy evaluation for StatefulSet default/web stopped after 1ns (policy timeout)"},
		{"DecideBudgets", context.Background(), func(ctx context.Context) error { _, err := e.DecideBudgets(ctx, stsRollout()); return err },
			true, "policy evaluation for StatefulSet default/web stopped after 1ns (policy timeout)"},
		{"cancelled by the caller", cancelled, func(ctx context.Context) error { _, err := e.Decide(ctx, stsRollout()); return err },
			false, "policy evaluation for StatefulSet default/web stopped: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(tt.ctx)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			var te *engine.TimeoutError
			if errors.As(err, &te) != tt.timeout {
				t.Errorf("errors.As(TimeoutError) = %t, want %t", !tt.timeout, tt.timeout)
			}
		})
	}
}

// A CEL policy handed to the Rego engine is named as such, not parsed as
// Rego.
func TestLoadBundleNotRego(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ file, want string }{
		{"policy.yaml", " is not a Rego file (.rego): CEL policies (RolloutPolicy YAML) run on the cel engine"},
		{"policy.yml", " is not a Rego file (.rego): CEL policies (RolloutPolicy YAML) run on the cel engine"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			f := filepath.Join(dir, tt.file)
			if err := os.WriteFile(f, []byte("apiVersion: rollplan.dev/v1alpha1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadBundle([]string{f})
			if err == nil || err.Error() != "policy "+f+tt.want {
				t.Fatalf("error %v, want %q", err, "policy "+f+tt.want)
			}
		})
	}
}

// A rule of the entry package that is no decision point and that no rule
// uses has no effect: usually a misspelt contract rule, whose decision falls
// back to the defaults without a word. Helpers are used, by their short
// name in the package or by their path from another.
func TestUnreferencedRuleWarnings(t *testing.T) {
	const entry = "package rollplan.strategy\n\n"
	warn := func(row int, rule, hint string) string {
		w := fmt.Sprintf("policy %s:%d: rule %s is not a decision point of package rollplan.strategy and no rule uses it: it has no effect", userFile, row, rule)
		if hint != "" {
			w += " (did you mean " + hint + "?)"
		}
		return w
	}
	tests := []struct {
		name  string
		files map[string]string
		warn  []string
	}{
		{"plural scope", userPolicy(`scopes(pod) := {"in": false, "reason": "pinned"} if pod.labels.pinned == "true"`), []string{warn(3, "scopes", "scope")}},
		{"singular budgets", userPolicy(`budget := []`), []string{warn(3, "budget", "budgets")}},
		{"plural order", userPolicy(`orders(pod) := [pod.name]`), []string{warn(3, "orders", "order")}},
		{"camel case", userPolicy(`nodePreparation := "drain"`), []string{warn(3, "nodePreparation", "node_preparation")}},
		{"upper case", userPolicy(`Pacing := "rolling"`), []string{warn(3, "Pacing", "pacing")}},
		{"two edits", userPolicy(`eligibilty(pod) := {"action": "Recreate"}`), []string{warn(3, "eligibilty", "eligibility")}},
		{"unused and like no rule", userPolicy("order(pod) := [pod.name]\n\nunused := 1"), []string{warn(5, "unused", "")}},
		{"several definitions warn once", userPolicy("halts contains \"a\"\n\nhalts contains \"b\""), []string{warn(3, "halts", "halt")}},
		{"helper by its short name", userPolicy("key(pod) := 1\n\norder(pod) := [key(pod), pod.name]"), nil},
		{"helper in an else branch", userPolicy("limit := 2\n\npacing := \"wave\" if input.workload.replicas > limit\nelse := \"rolling\""), nil},
		{"helper of a helper", userPolicy("a := 1\n\nb := a + 1\n\nhalt := [\"x\"] if b > 5"), nil},
		{"helper in another file of the package", map[string]string{
			userFile: entry + "order(pod) := [rank(pod)]\n", "user/rank.rego": entry + "rank(pod) := pod.ordinal\n"}, nil},
		{"helper read by path from a library", map[string]string{
			userFile:        entry + "import data.lib\n\nlimit := 1\n\nbudgets := lib.budgets\n",
			"user/lib.rego": "package lib\n\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": data.rollplan.strategy.limit}]\n"}, nil},
		{"helper read through an import alias", map[string]string{
			userFile:        entry + "import data.lib\n\nlimit := 1\n\nbudgets := lib.budgets\n",
			"user/lib.rego": "package lib\n\nimport data.rollplan.strategy as s\n\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": s.limit}]\n"}, nil},
		{"helper imported by name", map[string]string{
			userFile:        entry + "import data.lib\n\nlimit := 1\n\nbudgets := lib.budgets\n",
			"user/lib.rego": "package lib\n\nimport data.rollplan.strategy.limit\n\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": limit}]\n"}, nil},
		{"package read as a whole", map[string]string{
			userFile:        entry + "import data.lib\n\nlimit := 1\n\nhalt := lib.halt\n",
			"user/lib.rego": "package lib\n\nhalt := [k | some k, _ in data.rollplan.strategy; k == \"stop\"]\n"}, nil},
		{"tests are for opa test", userPolicy("order(pod) := [pod.name]\n\ntest_order if order({\"name\": \"a\"}) == [\"a\"]"), nil},
		{"a library's rule of the same name", map[string]string{
			userFile:        entry + "import data.lib\n\nlimit := 1\n\nhalt := lib.halt\n",
			"user/lib.rego": "package lib\n\nlimit := 2\n\nhalt := [\"x\"] if limit > 5\n"},
			[]string{"policy " + userFile + ":5: rule limit is not a decision point of package rollplan.strategy and no rule uses it: it has no effect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := parseBundle(tt.files, []string{"test"})
			if err != nil {
				t.Fatalf("parseBundle: %v", err)
			}
			if !reflect.DeepEqual(b.Warnings, tt.warn) {
				t.Errorf("warnings\n%q\nwant\n%q", b.Warnings, tt.warn)
			}
		})
	}
}

// OPA's sprintf is Go's fmt.Sprintf: a format with fewer values than verbs
// gives "%!s(MISSING)", no error. Such a string in an answer is an error
// naming the rule, the pod and the workload, not a reason in the plan.
func TestDecideFormattingErrors(t *testing.T) {
	const prefix = "policy " + userFile + " (package rollplan.strategy): rule "
	const pod = " for pod web-0 of StatefulSet default/web: "
	const wl = " for StatefulSet default/web: "
	tests := []struct {
		name, body, want string
	}{
		{"scope reason missing a value", `scope(pod) := {"in": false, "reason": sprintf("pod %s on %s is pinned", [pod.name])}`,
			prefix + "scope" + pod + `reason "pod web-0 on %!s(MISSING) is pinned" has a formatting error: sprintf got fewer values than its format has verbs`},
		{"eligibility reason with an extra value", `eligibility(pod) := {"action": "Recreate", "reasons": ["ok", sprintf("pod %s", [pod.name, pod.node])]}`,
			prefix + "eligibility" + pod + `reason "pod web-0%!(EXTRA string=node-0)" has a formatting error: sprintf got more values than its format has verbs`},
		{"order key of the wrong type", `order(pod) := [sprintf("%d", [pod.name])]`,
			prefix + "order" + pod + `order key "%!d(string=web-0)" has a formatting error: sprintf's %d cannot format a string (%v formats any value)`},
		{"halt reason with a bad index", `halt := [sprintf("%[2]s", ["a"])]`,
			prefix + "halt" + wl + `reason "%!s(BADINDEX)" has a formatting error: an argument index ([n]) of the sprintf format is out of range`},
		{"deny message ending in a lone percent", `deny := {sprintf("at most 25%", [])}`,
			prefix + "deny" + wl + `message "at most 25%!(NOVERB)" has a formatting error: the sprintf format ends in a lone % (write %% for a percent sign)`},
		{"budget source", `budgets := [{"name": "x", "maxUnavailable": 1, "source": sprintf("%s=%d", ["a"])}]`,
			prefix + "budgets" + wl + `budget "x": source "a=%!d(MISSING)" has a formatting error: sprintf got fewer values than its format has verbs`},
		{"budget name", `budgets := [{"name": sprintf("%s", []), "maxUnavailable": 1}]`,
			prefix + "budgets" + wl + `budget 0: name "%!s(MISSING)" has a formatting error: sprintf got fewer values than its format has verbs`},
		{"a number where a string goes", `halt := [sprintf("%s restarts", [3])]`,
			prefix + "halt" + wl + `reason "%!s(int64=3) restarts" has a formatting error: sprintf's %s cannot format an integer (%v formats any value)`},
		{"a percent and a bang", `deny := ["disk at 100%! (limit 90%)", sprintf("%d%%!", [5])]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(tt.body))
			_, err := e.Decide(context.Background(), stsRollout())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Decide: %v", err)
				}
				return
			}
			requireDecideError(t, e, tt.want, strings.Contains(tt.want, "rule budgets"))
		})
	}
}

// Every pod's answers pass the formatting check: a string without "%!"
// costs no allocation.
func TestFormattedDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = formatted("reason", "ordinal 0 below partition 1: 100% done") }); n != 0 {
		t.Errorf("formatted allocates %v times per call", n)
	}
}

// An undefined rule is named at its definition, with the usual cause (a
// misspelt input field) and the fields the facts have.
func TestUndefinedRuleHints(t *testing.T) {
	const hint = " (a reference to an input field that does not exist makes a rule undefined: check field names against the facts (%s) or add an else branch)"
	tests := []struct {
		name, body, want string
		budgets          bool
	}{
		{"misspelt pod field", "order(pod) := [pod.zones]",
			"policy " + userFile + ":3 (package rollplan.strategy): rule order is undefined for pod web-0 of StatefulSet default/web" + fmt.Sprintf(hint, podFields), false},
		{"second definition", "scope(pod) := {\"in\": true} if pod.zones == \"a\"\n\nscope(pod) := {\"in\": true} if pod.nodes == \"b\"",
			"policy " + userFile + ":3 (package rollplan.strategy): rule scope is undefined for pod web-0 of StatefulSet default/web" + fmt.Sprintf(hint, podFields), false},
		{"misspelt workload field", "pacing := \"wave\"\n\nhalt := [] if input.workload.kinds == \"StatefulSet\"",
			"policy " + userFile + ":5 (package rollplan.strategy): rule halt is undefined for StatefulSet default/web" + fmt.Sprintf(hint, workloadFields), false},
		{"budgets", "budgets := [] if input.workload.replica > 0",
			"policy " + userFile + ":3 (package rollplan.strategy): rule budgets is undefined for StatefulSet default/web" + fmt.Sprintf(hint, workloadFields), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, userPolicy(tt.body))
			requireDecideError(t, e, tt.want, tt.budgets)
		})
	}
	// The field lists are the facts' JSON names.
	for _, w := range []string{"pod fields: name, uid, revision, updated, ordinal, index, node, zone, ", "readySeconds", "pdbs"} {
		if !strings.Contains(podFields, w) {
			t.Errorf("pod fields %q lack %q", podFields, w)
		}
	}
	for _, w := range []string{"input.workload fields: kind, namespace, name, ", "replicas", "strategy"} {
		if !strings.Contains(workloadFields, w) {
			t.Errorf("workload fields %q lack %q", workloadFields, w)
		}
	}
}

// requireDecideError: Decide on stsRollout fails with exactly want, on one
// clear line; so does DecideBudgets when budgets (the budgets rule's own
// errors come through both).
func requireDecideError(t *testing.T, e *Engine, want string, budgets bool) {
	t.Helper()
	_, err := e.Decide(context.Background(), stsRollout())
	if err == nil || err.Error() != want {
		t.Fatalf("Decide: error\n%v\nwant\n%s", err, want)
	}
	checkOneClearLine(t, err)
	if budgets {
		if _, err := e.DecideBudgets(context.Background(), stsRollout()); err == nil || err.Error() != want {
			t.Fatalf("DecideBudgets: error\n%v\nwant\n%s", err, want)
		}
	}
}
