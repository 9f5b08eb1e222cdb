package rego

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// Engine is a prepared Rego policy bundle. It is safe for concurrent use.
type Engine struct {
	bundle  *Bundle
	query   rego.PreparedEvalQuery
	budgets rego.PreparedEvalQuery // the budgets rule alone (DecideBudgets)
	timeout time.Duration
	// noClock: the budgets rule reaches no clock fact (budgetsIgnoreClock).
	noClock bool
	// upstream: the points left to the shipped default strategy.
	upstream engine.Point
	// compiled and compiledBudgets run the queries on the VM (vm.go); nil:
	// interpreted throughout, and notes say why.
	compiled, compiledBudgets *program
	notes                     []string
	// interpret: the interpreter alone (tests compare both paths).
	interpret bool
}

var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.BudgetDecider = (*Engine)(nil)
	_ engine.ClockFree     = (*Engine)(nil)
	_ engine.Noter         = (*Engine)(nil)
)

// New compiles the bundle once.
func New(ctx context.Context, b *Bundle, timeout time.Duration) (*Engine, error) {
	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		pq, err := rego.New(b.options(query, rego.StrictBuiltinErrors(true))...).PrepareForEval(ctx)
		if err != nil {
			if where, msg, ok := regoError(err); ok && where != "" && !strings.HasPrefix(where, resolverFile+":") {
				return pq, fmt.Errorf("policy %s: %w", where, &lineError{line: msg, err: err})
			}
			return pq, fmt.Errorf("compile policy %s: %w", strings.Join(b.Sources, ", "), oneLineError(err))
		}
		return pq, nil
	}
	pq, err := prepare("data." + resolverPackage + ".decisions")
	if err != nil {
		return nil, err
	}
	bq, err := prepare("data." + resolverPackage + ".probe_budgets")
	if err != nil {
		return nil, err
	}
	timeout = engine.EvalTimeout(timeout)
	noClock, err := budgetsIgnoreClock(b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", strings.Join(b.Sources, ", "), err)
	}
	e := &Engine{bundle: b, query: pq, budgets: bq, timeout: timeout, noClock: noClock, upstream: b.upstream()}
	var note string
	if e.compiled, note = compile(ctx, b, "data."+resolverPackage+".decisions"); note != "" {
		e.notes = append(e.notes, note)
	}
	if e.compiledBudgets, note = compile(ctx, b, "data."+resolverPackage+".probe_budgets"); note != "" && e.compiled != nil {
		e.notes = append(e.notes, note)
	}
	return e, nil
}

// Notes are what the engine evaluates with OPA's interpreter rather than
// compiled, and why (engine.Noter): the answers are the same, only slower.
func (e *Engine) Notes() []string { return e.notes }

// Load parses the policy files under paths (none: the default strategy
// alone) and compiles them: LoadBundle, then New.
func Load(ctx context.Context, paths []string, timeout time.Duration) (*Engine, error) {
	b, err := LoadBundle(paths)
	if err != nil {
		return nil, err
	}
	return New(ctx, b, timeout)
}

// BudgetsIgnoreClock implements engine.ClockFree.
func (e *Engine) BudgetsIgnoreClock() bool { return e.noClock }

// DecideBudgets implements engine.BudgetDecider: the budgets rule alone,
// without the per-pod rules.
func (e *Engine) DecideBudgets(parent context.Context, r *facts.Rollout) ([]engine.Budget, error) {
	ctx, cancel := context.WithTimeout(parent, e.timeout)
	defer cancel()
	if e.compiledBudgets != nil && !e.interpret && !engine.Stopped(ctx) {
		// Anything the VM leaves (errFallback) is evaluated again below.
		if out, err := e.budgetsCompiled(ctx, r); err == nil {
			return out, nil
		}
	}
	in, err := inputValue(r)
	if err != nil {
		return nil, fmt.Errorf("%s: convert facts: %w", workloadID(r), err)
	}
	if engine.Stopped(ctx) { // a deadline already past, or the caller gone
		return nil, e.evalError(parent, ctx, r, context.DeadlineExceeded)
	}
	rs, err := e.budgets.Eval(ctx, rego.EvalVirtualCache(newRuleCache()), rego.EvalParsedInput(in), rego.EvalGenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }))
	if err != nil {
		return nil, e.evalError(parent, ctx, r, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, e.undefined("budgets", workloadID(r))
	}
	term, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("policy evaluation for %s: unexpected result %T", workloadID(r), rs[0].Expressions[0].Value)
	}
	out, err := decodeBudgets(term)
	if err != nil {
		return nil, fmt.Errorf("policy %s: rule budgets for %s: %w", e.bundle.where("budgets"), workloadID(r), err)
	}
	return out, nil
}

// evalError reports an evaluation that failed: stopped by the engine's
// timeout (engine.TimeoutError), cancelled by the caller, or an error of the
// policy, as one line naming the workload.
func (e *Engine) evalError(parent, ctx context.Context, r *facts.Rollout, err error) error {
	id := workloadID(r)
	if terr := engine.Timeout(parent, ctx, id, e.timeout); terr != nil {
		return terr
	}
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("policy evaluation for %s stopped: %w", id, perr)
	}
	if where, msg, ok := regoError(err); ok && where != "" {
		return fmt.Errorf("policy %s: evaluation for %s: %w", where, id, &lineError{line: msg, err: err})
	}
	return fmt.Errorf("policy evaluation for %s: %w", id, oneLineError(err))
}

// options are the rego options of query over the bundle (Rego v1, the
// generated resolver and every module) and extra.
func (b *Bundle) options(query string, extra ...func(*rego.Rego)) []func(*rego.Rego) {
	opts := append([]func(*rego.Rego){rego.Query(query), rego.SetRegoVersion(ast.RegoV1), rego.ParsedModule(mustParse(b.resolver()))}, extra...)
	for _, m := range b.Modules {
		opts = append(opts, rego.ParsedModule(m))
	}
	return opts
}

func mustParse(src string) *ast.Module {
	m, err := ast.ParseModuleWithOpts(resolverFile, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		panic(fmt.Sprintf("generated resolver does not parse: %v\n%s", err, src))
	}
	return m
}

// Warnings are the bundle's warnings (see Bundle.Warnings), for the caller
// to show.
func (e *Engine) Warnings() []string { return e.bundle.Warnings }

// Name implements engine.Engine.
func (e *Engine) Name() string { return engine.Rego }

// Digest implements engine.Engine.
func (e *Engine) Digest() string { return e.bundle.Digest }

func workloadID(r *facts.Rollout) string {
	return fmt.Sprintf("%s %s/%s", r.Workload.Kind, r.Workload.Namespace, r.Workload.Name)
}

// Decide implements engine.Engine: one evaluation per workload.
func (e *Engine) Decide(parent context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	ctx, cancel := context.WithTimeout(parent, e.timeout)
	defer cancel()
	if e.compiled != nil && !e.interpret && !engine.Stopped(ctx) {
		// Anything the VM leaves (errFallback: an error, a conflict, an
		// answer that breaks the contract, the timeout) is evaluated again
		// below, which gives the canonical answer or error.
		if d, err := e.decideCompiled(ctx, r); err == nil {
			return d, nil
		}
	}
	in, err := inputValue(r)
	if err != nil {
		return nil, fmt.Errorf("%s: convert facts: %w", workloadID(r), err)
	}
	if engine.Stopped(ctx) { // a deadline already past, or the caller gone
		return nil, e.evalError(parent, ctx, r, context.DeadlineExceeded)
	}
	rs, err := e.query.Eval(ctx, rego.EvalVirtualCache(newRuleCache()), rego.EvalParsedInput(in), rego.EvalGenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }))
	if err != nil {
		return nil, e.evalError(parent, ctx, r, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, e.diagnoseUndefined(ctx, r, in)
	}
	term, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("policy evaluation for %s: unexpected result %T", workloadID(r), rs[0].Expressions[0].Value)
	}
	return e.decode(ctx, r, in, term)
}

// diagnoseUndefined finds the workload rule that has no value.
func (e *Engine) diagnoseUndefined(ctx context.Context, r *facts.Rollout, in ast.Value) error {
	for _, rule := range workloadRules {
		if rule == "analysis_verdict" {
			continue // never undefined in decisions: null for no verdict
		}
		if !e.defined(ctx, in, "data."+resolverPackage+".probe_"+rule) {
			return e.undefined(rule, workloadID(r))
		}
	}
	return fmt.Errorf("policy evaluation for %s: no decisions (undefined)", workloadID(r))
}

// undefined reports a contract rule without a value for what (a workload,
// or a pod of one), at the rule's first definition, with the usual cause.
func (e *Engine) undefined(rule, what string) error {
	fields := workloadFields
	if slices.Contains(podRules, rule) {
		fields = podFields
	}
	return fmt.Errorf("policy %s: rule %s is undefined for %s (a reference to an input field that does not exist makes a rule undefined: check field names against the facts (%s) or add an else branch)",
		e.bundle.whereRule(rule), rule, what, fields)
}

// podFields and workloadFields list the facts' JSON names, from the Go
// types, so that the hint follows the contract.
var (
	podFields      = "pod fields: " + strings.Join(jsonFields(reflect.TypeFor[facts.Pod]()), ", ")
	workloadFields = "input.workload fields: " + strings.Join(jsonFields(reflect.TypeFor[facts.Workload]()), ", ")
)

func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && f.IsExported() {
			out = append(out, name)
		}
	}
	return out
}

func (e *Engine) defined(ctx context.Context, in ast.Value, query string) bool {
	rs, err := rego.New(e.bundle.options(query, rego.ParsedInput(in))...).Eval(ctx)
	return err == nil && len(rs) > 0
}

func (e *Engine) decode(ctx context.Context, r *facts.Rollout, in ast.Value, term *ast.Term) (*engine.Decisions, error) {
	id := workloadID(r)
	obj, ok := term.Value.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("policy evaluation for %s: decisions are not an object", id)
	}
	d := &engine.Decisions{Pods: make([]engine.PodDecision, len(r.Pods)), Upstream: e.upstream}
	seen := make([]bool, len(r.Pods))
	pods, _ := obj.Get(ast.StringTerm("pods")).Value.(*ast.Array)
	var derr error
	pods.Foreach(func(t *ast.Term) {
		if derr != nil {
			return
		}
		tuple := t.Value.(*ast.Array)
		i, _ := tuple.Elem(0).Value.(ast.Number).Int()
		p := &d.Pods[i]
		seen[i] = true
		name := r.Pods[i].Name
		if derr = decodeScope(tuple.Elem(1), p); derr != nil {
			derr = fmt.Errorf("policy %s: rule scope for pod %s of %s: %w", e.bundle.where("scope"), name, id, derr)
			return
		}
		if derr = decodeEligibility(tuple.Elem(2), p); derr != nil {
			derr = fmt.Errorf("policy %s: rule eligibility for pod %s of %s: %w", e.bundle.where("eligibility"), name, id, derr)
			return
		}
		if derr = decodeOrder(tuple.Elem(3), p); derr != nil {
			derr = fmt.Errorf("policy %s: rule order for pod %s of %s: %w", e.bundle.where("order"), name, id, derr)
		}
	})
	if derr != nil {
		return nil, derr
	}
	for i := range r.Pods {
		if !r.Pods[i].Updated && !seen[i] {
			return nil, e.diagnosePod(ctx, r, in, i)
		}
	}
	var err error
	if d.Budgets, err = decodeBudgets(obj.Get(ast.StringTerm("budgets"))); err != nil {
		return nil, fmt.Errorf("policy %s: rule budgets for %s: %w", e.bundle.where("budgets"), id, err)
	}
	if d.Pacing, ok = decodeString(obj.Get(ast.StringTerm("pacing"))); !ok || (d.Pacing != engine.PacingWave && d.Pacing != engine.PacingRolling) {
		return nil, fmt.Errorf("policy %s: rule pacing for %s: want \"wave\" or \"rolling\", got %s", e.bundle.where("pacing"), id, describe(obj.Get(ast.StringTerm("pacing"))))
	}
	if d.NodePreparation, ok = decodeString(obj.Get(ast.StringTerm("nodePreparation"))); !ok || !engine.ValidNodePreparation(d.NodePreparation) {
		return nil, fmt.Errorf("policy %s: rule node_preparation for %s: want \"none\", \"cordon\" or \"drain\", got %s", e.bundle.where("node_preparation"), id, describe(obj.Get(ast.StringTerm("nodePreparation"))))
	}
	if d.Analysis, d.Verdict, err = e.decodeAnalysisAnswers(r, obj.Get(ast.StringTerm("analysis")), obj.Get(ast.StringTerm("analysisVerdict"))); err != nil {
		return nil, err
	}
	if d.Halt, err = decodeStrings(obj.Get(ast.StringTerm("halt")), "reason"); err != nil {
		return nil, fmt.Errorf("policy %s: rule halt for %s: %w", e.bundle.where("halt"), id, err)
	}
	if d.Deny, err = decodeStrings(obj.Get(ast.StringTerm("deny")), "message"); err != nil {
		return nil, fmt.Errorf("policy %s: rule deny for %s: %w", e.bundle.where("deny"), id, err)
	}
	// A set answer arrives sorted; a list keeps the policy's order. Sorting
	// here keeps the plan independent of how the policy built it.
	sort.Strings(d.Deny)
	return d, nil
}

func (e *Engine) diagnosePod(ctx context.Context, r *facts.Rollout, in ast.Value, i int) error {
	obj := in.(ast.Object)
	pods := obj.Get(kPods).Value.(*ast.Array)
	single := ast.NewObject()
	obj.Foreach(func(k, v *ast.Term) {
		if !k.Equal(kPods) {
			single.Insert(k, v)
		}
	})
	single.Insert(kPods, ast.ArrayTerm(pods.Elem(i)))
	for _, rule := range podRules {
		if !e.defined(ctx, single, fmt.Sprintf("data.%s.probe_%s(input.pods[0])", resolverPackage, rule)) {
			return e.undefined(rule, "pod "+r.Pods[i].Name+" of "+workloadID(r))
		}
	}
	return fmt.Errorf("policy evaluation for %s: no decision for pod %s", workloadID(r), r.Pods[i].Name)
}

func decodeScope(t *ast.Term, p *engine.PodDecision) error {
	o, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf("want an object {\"in\": bool, \"reason\": string}, got %v", t)
	}
	inTerm := o.Get(ast.StringTerm("in"))
	if inTerm == nil {
		return fmt.Errorf("want \"in\" to be a boolean, got %v", t)
	}
	in, ok := inTerm.Value.(ast.Boolean)
	if !ok {
		return fmt.Errorf("want \"in\" to be a boolean, got %v", t)
	}
	p.InScope = bool(in)
	if r := o.Get(ast.StringTerm("reason")); r != nil {
		s, ok := r.Value.(ast.String)
		if !ok {
			return fmt.Errorf("want \"reason\" to be a string, got %v", r)
		}
		p.HeldReason = string(s)
		if err := formatted("reason", p.HeldReason); err != nil {
			return err
		}
	}
	if !p.InScope && p.HeldReason == "" {
		return errors.New("a held pod needs a reason")
	}
	return nil
}

func decodeEligibility(t *ast.Term, p *engine.PodDecision) error {
	o, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf("want an object {\"action\", \"reasons\"}, got %v", t)
	}
	a := o.Get(ast.StringTerm("action"))
	if a == nil {
		return errors.New("no \"action\"")
	}
	s, ok := a.Value.(ast.String)
	if !ok || (string(s) != engine.InPlace && string(s) != engine.Recreate) {
		return fmt.Errorf("action must be \"InPlace\" or \"Recreate\", got %v", a)
	}
	p.Action = string(s)
	if rs := o.Get(ast.StringTerm("reasons")); rs != nil {
		arr, ok := rs.Value.(*ast.Array)
		if !ok {
			return fmt.Errorf("reasons must be a list of strings, got %v", rs)
		}
		p.Reasons = make([]string, 0, arr.Len())
		for i := 0; i < arr.Len(); i++ {
			s, ok := arr.Elem(i).Value.(ast.String)
			if !ok {
				return fmt.Errorf("reasons must be strings, got %v", arr.Elem(i))
			}
			if err := formatted("reason", string(s)); err != nil {
				return err
			}
			p.Reasons = append(p.Reasons, string(s))
		}
	}
	return nil
}

func decodeOrder(t *ast.Term, p *engine.PodDecision) error {
	arr, ok := t.Value.(*ast.Array)
	if !ok {
		return fmt.Errorf("want a list of numbers or strings, got %v", t)
	}
	p.Order = make([]any, arr.Len())
	for i := 0; i < arr.Len(); i++ {
		switch v := arr.Elem(i).Value.(type) {
		case ast.Number:
			if n, ok := v.Int64(); ok {
				p.Order[i] = n
			} else if f, ok := v.Float64(); ok && !math.IsInf(f, 0) {
				p.Order[i] = f
			} else {
				return fmt.Errorf("order key %v is out of range", v)
			}
		case ast.String:
			if err := formatted("order key", string(v)); err != nil {
				return err
			}
			p.Order[i] = string(v)
		default:
			return fmt.Errorf("order keys must be numbers or strings, got %v", v)
		}
	}
	return nil
}
