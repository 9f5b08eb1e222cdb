package cel

import (
	"strings"
	"sync"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// A variable that reads nothing of the workload (only now, params and
// other such variables: a change freeze's windows, a calendar) has one
// value per snapshot time, yet a Decide call computes its variables once
// per workload: with the change-freeze example's eight such variables,
// cel-go's interpreter spent more on them than the fast path on 150k pods.
// They are computed once per distinct now and shared by every workload's
// activation (CEL values are immutable; errors are not cached, as they
// name the workload that met them).

// readsOnlyNow: the checked expression refers to no input but now and
// params, and to no variable outside globals. A comprehension variable
// that shadows an input counts as that input: the answer errs towards
// "no".
func readsOnlyNow(ast *celast.AST, globals map[string]bool) bool {
	refs := ast.ReferenceMap()
	only := true
	celast.PreOrderVisit(ast.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		name := refName(refs, e)
		switch {
		case name == "now" || name == "params":
		case inputs[name], name == "pod", name == "item", name == "defaults.order":
			only = false
		case strings.HasPrefix(name, "variables.") && !globals[name]:
			only = false
		}
	}))
	return only
}

// globalCache holds the values of a policy's now-only variables per
// snapshot time; bounded, as an engine may live as long as a controller
// (each step plans at a new now).
type globalCache struct {
	mu sync.Mutex
	m  map[string][]ref.Val // now → values by variable index (nil: not yet)
}

const globalCacheSize = 64

func (g *globalCache) get(now string, i int) ref.Val {
	g.mu.Lock()
	defer g.mu.Unlock()
	if vs := g.m[now]; vs != nil {
		return vs[i]
	}
	return nil
}

func (g *globalCache) put(now string, i, n int, v ref.Val) {
	if types.IsError(v) || types.IsUnknown(v) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || (len(g.m) >= globalCacheSize && g.m[now] == nil) {
		g.m = map[string][]ref.Val{}
	}
	vs := g.m[now]
	if vs == nil {
		vs = make([]ref.Val, n)
		g.m[now] = vs
	}
	vs[i] = v
}
