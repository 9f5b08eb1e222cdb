package cel

import (
	"regexp"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
)

// clockWord matches a clock fact (engine.ClockFacts) as a whole word.
var clockWord = func() *regexp.Regexp {
	var words []string
	for w := range engine.ClockFacts {
		words = append(words, regexp.QuoteMeta(w))
	}
	return regexp.MustCompile(`\b(` + strings.Join(words, "|") + `)\b`)
}()

// budgetsIgnoreClock: no budget expression of any policy (the defaults
// included), nor any variable a budget may read, names a clock fact. A
// variable counts whether a budget reads it or not: the check errs towards
// "reads the clock".
func (e *Engine) budgetsIgnoreClock() bool {
	for _, c := range append([]*compiled{e.defaults}, e.policies...) {
		var exprs []string
		for _, v := range c.policy.Spec.Variables {
			exprs = append(exprs, v.Expression)
		}
		for _, b := range c.policy.Spec.Budgets {
			exprs = append(exprs, b.NameExpression, b.ForEach, b.When, b.MaxUnavailable, b.MaxSurge, b.GroupBy, b.MaxGroups, b.PDB, b.Advisory, b.Source)
		}
		for _, x := range exprs {
			if clockWord.MatchString(x) {
				return false
			}
		}
	}
	return true
}

// BudgetsIgnoreClock implements engine.ClockFree.
func (e *Engine) BudgetsIgnoreClock() bool { return e.noClock }
