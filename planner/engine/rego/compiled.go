package rego

import (
	"context"
	"math"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// compile plans and compiles query for the VM; nil and a note when the VM
// cannot run it (the engine then interprets it).
func compile(ctx context.Context, b *Bundle, query string) (*program, string) {
	p, err := planQuery(ctx, b, query)
	if err != nil {
		return nil, "the policy is interpreted, not compiled (same answers, slower): planning " + query + ": " + oneLineError(err).Error()
	}
	prog, err := compileProgram(p)
	if err != nil {
		return nil, err.Error()
	}
	return prog, ""
}

// vmInput is the input of one workload, read lazily (vinput).
func vmInput(r *facts.Rollout) (any, error) {
	return &vinput{r: r}, nil
}

// runCompiled runs prog over r's facts: the query's value, or errFallback.
func runCompiled(ctx context.Context, prog *program, r *facts.Rollout) (any, error) {
	in, err := vmInput(r)
	if err != nil {
		return nil, errFallback
	}
	rs, err := run(ctx, prog, in)
	if err != nil {
		return nil, err
	}
	// One result: an object binding the query's one term.
	if len(rs) != 1 {
		return nil, errFallback
	}
	o, ok := rs[0].(*vobject)
	if !ok || len(o.v) != 1 {
		return nil, errFallback
	}
	return o.v[0], nil
}

// decideCompiled is Decide on the VM; errFallback for anything it leaves to
// the interpreter, which also words every error of the policy's answers.
func (e *Engine) decideCompiled(ctx context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	v, err := runCompiled(ctx, e.compiled, r)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(*vobject)
	if !ok {
		return nil, errFallback
	}
	d := &engine.Decisions{Pods: make([]engine.PodDecision, len(r.Pods)), Upstream: e.upstream}
	seen := make([]bool, len(r.Pods))
	pods, ok := obj.get("pods").(*varray)
	if !ok {
		return nil, errFallback
	}
	elig := map[*vobject]eligibility{}
	for _, t := range pods.e {
		tuple, ok := t.(*varray)
		if !ok || len(tuple.e) != 4 {
			return nil, errFallback
		}
		i, ok := tuple.e[0].(int64)
		if !ok || i < 0 || i >= int64(len(r.Pods)) {
			return nil, errFallback
		}
		p := &d.Pods[i]
		seen[i] = true
		if !vmScope(tuple.e[1], p) || !vmEligibility(tuple.e[2], p, elig) || !vmOrder(tuple.e[3], p) {
			return nil, errFallback
		}
	}
	for i := range r.Pods {
		if !r.Pods[i].Updated && !seen[i] {
			return nil, errFallback
		}
	}
	budgets := obj.get("budgets")
	if budgets == nil {
		return nil, errFallback
	}
	if d.Budgets, err = decodeBudgets(ast.NewTerm(toAST(budgets, nil))); err != nil {
		return nil, errFallback
	}
	if d.Pacing, ok = obj.get("pacing").(string); !ok || (d.Pacing != engine.PacingWave && d.Pacing != engine.PacingRolling) {
		return nil, errFallback
	}
	if d.NodePreparation, ok = obj.get("nodePreparation").(string); !ok || !engine.ValidNodePreparation(d.NodePreparation) {
		return nil, errFallback
	}
	an, verdict := obj.get("analysis"), obj.get("analysisVerdict")
	if an == nil || verdict == nil {
		return nil, errFallback
	}
	if d.Analysis, d.Verdict, err = e.decodeAnalysisAnswers(r, ast.NewTerm(toAST(an, nil)), ast.NewTerm(toAST(verdict, nil))); err != nil {
		return nil, errFallback
	}
	for _, s := range []struct {
		key, what string
		into      *[]string
	}{{"halt", "reason", &d.Halt}, {"deny", "message", &d.Deny}} {
		v := obj.get(s.key)
		if v == nil {
			return nil, errFallback
		}
		if *s.into, err = decodeStrings(ast.NewTerm(toAST(v, nil)), s.what); err != nil {
			return nil, errFallback
		}
	}
	sort.Strings(d.Deny)
	return d, nil
}

func vmScope(v any, p *engine.PodDecision) bool {
	o, ok := v.(*vobject)
	if !ok {
		return false
	}
	in, ok := o.get("in").(bool)
	if !ok {
		return false
	}
	p.InScope = in
	if r := o.get("reason"); r != nil {
		s, ok := r.(string)
		if !ok || formatted("reason", s) != nil {
			return false
		}
		p.HeldReason = s
	}
	return p.InScope || p.HeldReason != ""
}

// eligibility is a decoded eligibility answer: the default strategy answers
// every pod of a revision with one value, decoded once.
type eligibility struct {
	action  string
	reasons []string
	has     bool // reasons given (else nil)
}

func vmEligibility(v any, p *engine.PodDecision, cache map[*vobject]eligibility) bool {
	o, ok := v.(*vobject)
	if !ok {
		return false
	}
	e, ok := cache[o]
	if !ok {
		s, ok := o.get("action").(string)
		if !ok || (s != engine.InPlace && s != engine.Recreate) {
			return false
		}
		e.action = s
		if rs := o.get("reasons"); rs != nil {
			arr, ok := rs.(*varray)
			if !ok {
				return false
			}
			e.has = true
			e.reasons = make([]string, 0, len(arr.e))
			for _, x := range arr.e {
				s, ok := x.(string)
				if !ok || formatted("reason", s) != nil {
					return false
				}
				e.reasons = append(e.reasons, s)
			}
		}
		cache[o] = e
	}
	p.Action = e.action
	if e.has {
		// Shared by the pods of one answer, as the native engine shares
		// them: len == cap, so that appending to one pod's copies.
		p.Reasons = e.reasons[:len(e.reasons):len(e.reasons)]
	}
	return true
}

func vmOrder(v any, p *engine.PodDecision) bool {
	arr, ok := v.(*varray)
	if !ok {
		return false
	}
	// Keys that are int64s and strings already are the answer: the array
	// itself becomes the pod's keys (len == cap, and nothing writes to
	// either afterwards).
	plain := true
	for _, x := range arr.e {
		switch k := x.(type) {
		case int64:
		case string:
			if formatted("order key", k) != nil {
				return false
			}
		default:
			plain = false
		}
	}
	if plain {
		p.Order = arr.e[:len(arr.e):len(arr.e)]
		return true
	}
	p.Order = make([]any, len(arr.e))
	for i, x := range arr.e {
		switch k := x.(type) {
		case int64, string:
			p.Order[i] = x
		case ast.Number:
			if n, ok := k.Int64(); ok {
				p.Order[i] = n
			} else if f, ok := k.Float64(); ok && !math.IsInf(f, 0) {
				p.Order[i] = f
			} else {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// budgetsCompiled is DecideBudgets on the VM.
func (e *Engine) budgetsCompiled(ctx context.Context, r *facts.Rollout) ([]engine.Budget, error) {
	v, err := runCompiled(ctx, e.compiledBudgets, r)
	if err != nil {
		return nil, err
	}
	out, err := decodeBudgets(ast.NewTerm(toAST(v, nil)))
	if err != nil {
		return nil, errFallback
	}
	return out, nil
}
