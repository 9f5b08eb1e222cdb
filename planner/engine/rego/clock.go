package rego

import (
	"fmt"
	"maps"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/dependencies"

	"github.com/rollplan/rollplan/planner/engine"
)

// budgetsIgnoreClock reports whether the budgets rule, and every rule and
// function it reaches, never names a fact that changes with time alone
// (engine.ClockFacts) nor reads the clock (time.now_ns). The analysis
// errs one way: a package referred to as a whole counts with all its
// rules, and any mention of such a field counts, read or not.
func budgetsIgnoreClock(b *Bundle) (bool, error) {
	modules := maps.Clone(b.Modules)
	modules["rollplan/resolver.rego"] = mustParse(b.resolver())
	c := ast.NewCompiler().WithEnablePrintStatements(false)
	if c.Compile(modules); c.Failed() {
		return false, fmt.Errorf("analyse policy: %v", c.Errors)
	}
	start := ast.MustParseRef("data." + resolverPackage + ".probe_budgets")
	seen := map[*ast.Rule]bool{}
	queue := append([]*ast.Rule(nil), c.GetRules(start)...)
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if seen[r] {
			continue
		}
		seen[r] = true
		refs, err := dependencies.Virtual(c, r)
		if err != nil {
			return false, err
		}
		for _, ref := range refs {
			queue = append(queue, c.GetRules(ref)...)
		}
	}
	clock := false
	for r := range seen {
		ast.WalkTerms(r, func(t *ast.Term) bool {
			switch v := t.Value.(type) {
			case ast.String:
				if engine.ClockFacts[string(v)] {
					clock = true
				}
			case ast.Ref:
				if v.HasPrefix(ast.MustParseRef("time.now_ns")) {
					clock = true
				}
			}
			return clock
		})
	}
	return !clock, nil
}
