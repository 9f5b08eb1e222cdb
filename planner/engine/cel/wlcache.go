package cel

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	celast "github.com/google/cel-go/common/ast"

	"github.com/rollplan/rollplan/planner/engine"
)

// Budgets are answered once per distinct input, not once per workload:
// the workloads of a cluster share a handful of strategies, and the
// default strategy's budgets are some fifty cel-go evaluations (variables,
// sources) that cost more per workload than deciding a few hundred pods on
// the fast path. The key holds every input a per-workload expression of
// the policy reads (wlDeps), so that equal keys give equal budgets; errors
// are not cached (they name the workload).

// wlDeps: the per-workload inputs of a policy's expressions.
type wlDeps struct {
	names []string // top-level names read (featureGates, pdbs, ...), sorted
	// workload: the fields of workload and workload.strategy read
	// ("kind", "strategy.type"), sorted; wholeWorkload: the view is read
	// as a value (or a field this analysis does not follow).
	workload      []string
	wholeWorkload bool
}

// inputs: the per-workload names baseEnv declares.
var inputs = map[string]bool{
	"workload": true, "pods": true, "pdbs": true, "revisions": true, "nodes": true, "replicaSets": true,
	"featureGates": true, "kubernetesVersion": true, "now": true, "params": true, "analysis": true,
}

// budgetCache maps a wlDeps key to its budgets; bounded, as an engine may
// live as long as a controller.
type budgetCache struct {
	mu sync.Mutex
	m  map[string][]engine.Budget
}

const budgetCacheSize = 4096

// dependencies collects wlDeps over the policy's per-workload programs.
func (c *compiled) dependencies() *wlDeps {
	names, fields := map[string]bool{}, map[string]bool{}
	d := &wlDeps{}
	add := func(p *program) {
		if p == nil || p.perPod {
			return
		}
		refs := p.ast.ReferenceMap()
		idents, selects, strategy, strategySelects := 0, 0, 0, 0
		celast.PreOrderVisit(p.ast.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
			// A comprehension variable that shadows an input is taken
			// for it: a key with more in it is still right.
			if n := refName(refs, e); inputs[n] {
				if n == "workload" {
					idents++
				} else {
					names[n] = true
				}
			}
			if e.Kind() != celast.SelectKind || refName(refs, e) != "" {
				return
			}
			s := e.AsSelect()
			op := s.Operand()
			if op.Kind() == celast.IdentKind && refName(refs, op) == "workload" {
				selects++
				if s.FieldName() == "strategy" {
					strategy++
				} else {
					fields[s.FieldName()] = true
				}
			}
			if op.Kind() == celast.SelectKind && op.AsSelect().FieldName() == "strategy" {
				if o := op.AsSelect().Operand(); o.Kind() == celast.IdentKind && refName(refs, o) == "workload" {
					strategySelects++
					fields["strategy."+s.FieldName()] = true
				}
			}
		}))
		if idents > selects || strategy > strategySelects {
			d.wholeWorkload = true
		}
	}
	for _, v := range c.vars {
		add(v)
	}
	for _, b := range c.budgets {
		for _, p := range []*program{b.forEach, b.when, b.name, b.maxUnavailable, b.maxSurge, b.groupBy, b.maxGroups, b.pdb, b.advise, b.source} {
			add(p)
		}
	}
	for n := range names {
		d.names = append(d.names, n)
	}
	for f := range fields {
		d.workload = append(d.workload, f)
	}
	sort.Strings(d.names)
	sort.Strings(d.workload)
	return d
}

// key renders the inputs wlDeps names for one Decide call, with %#v (Go
// syntax: strings quoted byte for byte, maps in key order); false when one
// is not there (then the budgets are evaluated).
func (d *wlDeps) key(a *activation) (string, bool) {
	var sb strings.Builder
	for _, n := range d.names {
		v, ok := a.ResolveName(n)
		if !ok {
			return "", false
		}
		fmt.Fprintf(&sb, "%s=%#v\x00", n, v)
	}
	if d.wholeWorkload {
		fmt.Fprintf(&sb, "workload=%#v\x00", *a.b.workload)
		return sb.String(), true
	}
	view := reflect.ValueOf(a.b.workload).Elem()
	for _, f := range d.workload {
		v, ok := jsonField(view, f)
		if !ok {
			return "", false
		}
		fmt.Fprintf(&sb, "workload.%s=%#v\x00", f, v)
	}
	return sb.String(), true
}

// jsonField reads a field of the workload view by its JSON path
// ("strategy.type").
func jsonField(v reflect.Value, path string) (any, bool) {
	for name := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for i := range v.NumField() {
			if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return v.Interface(), true
}

// cachedBudgets: a.budgets, answered from the policy's cache when the same
// inputs were seen.
func (a *activation) cachedBudgets() ([]engine.Budget, error) {
	c := a.c
	if c.wl == nil || len(c.budgets) == 0 {
		return a.budgets()
	}
	key, ok := c.wl.key(a)
	if !ok {
		return a.budgets()
	}
	c.budgetCache.mu.Lock()
	bs, hit := c.budgetCache.m[key]
	c.budgetCache.mu.Unlock()
	if hit {
		return copyBudgets(bs), nil
	}
	bs, err := a.budgets()
	if err != nil {
		return nil, err
	}
	c.budgetCache.mu.Lock()
	if len(c.budgetCache.m) >= budgetCacheSize {
		clear(c.budgetCache.m)
	}
	if c.budgetCache.m == nil {
		c.budgetCache.m = map[string][]engine.Budget{}
	}
	c.budgetCache.m[key] = copyBudgets(bs)
	c.budgetCache.mu.Unlock()
	return bs, nil
}

// copyBudgets: each Decide call gets budgets of its own (their limits are
// pointers).
func copyBudgets(bs []engine.Budget) []engine.Budget {
	if bs == nil {
		return nil
	}
	out := make([]engine.Budget, len(bs))
	for i, b := range bs {
		for _, p := range []**int{&b.MaxUnavailable, &b.MaxSurge, &b.MaxGroups} {
			if *p != nil {
				n := **p
				*p = &n
			}
		}
		out[i] = b
	}
	return out
}
