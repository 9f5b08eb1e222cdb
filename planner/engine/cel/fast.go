package cel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/rollplan/rollplan/planner/facts"
)

// The fast path: per-pod expressions translated from their checked AST into
// Go closures over the activation (the pod, the workload view, the
// variables). A closure answers (value, true), or false when it meets
// anything it does not decide exactly: an evaluation error (overflow, a
// missing map key, an index out of range), a node the translator does not
// know, an over-long string. Then the cel-go program evaluates the whole
// expression: its answer and its error messages stay cel-go's, byte for
// byte. Expressions are pure, so evaluating one twice changes nothing.
//
// Translated expressions loop at most over pod.changes (all and exists,
// up to fastMaxList elements), so the policy timeout, checked between pods,
// still bounds Decide; and their cost has a static bound (costBound): an
// expression whose bound exceeds the cost limit is not translated, so the
// cost-limit error stays cel-go's too. Per-workload subexpressions are
// evaluated once per Decide call (fastSlot).

// fastProgram holds the closures of one expression; nil when not translated.
type fastProgram struct {
	b   bfn // bool expressions (scope, eligibility, halt)
	key kfn // the folded order expression
	// bails: the nodes the translator left to cel-go, described (they
	// cost a cel-go evaluation only when evaluation reaches them).
	bails []string
}

type (
	bfn func(*activation) (bool, bool)
	ifn func(*activation) (int64, bool)
	sfn func(*activation) (string, bool)
	mfn func(*activation) (map[string]string, bool)
	lfn func(*activation) ([]any, bool) // order keys (defaults.order)
	kfn func(*activation, []any) ([]any, bool)
)

// fastMaxStr and fastMaxList bound what a translated expression reads:
// longer strings and lists go to cel-go (see costBound).
const (
	fastMaxStr  = 1024
	fastMaxList = 64
)

type translator struct {
	ast     *celast.AST
	cc      *compiler
	nodes   int
	concats int
	bails   []string
	inSlot  bool
	// iterVar: the element of pod.changes in the comprehension being
	// translated ("" outside one).
	iterVar string
}

// translate builds the closures of a checked expression for the result
// kind its reader wants ("bool" or "key"), or returns why it cannot.
func (cc *compiler) translate(a *celast.AST, want string, costLimit uint64) (*fastProgram, string) {
	t := &translator{ast: a, cc: cc}
	fp := &fastProgram{}
	var why string
	switch want {
	case "bool":
		fp.b, why = t.boolean(a.Expr())
	case "key":
		fp.key, why = t.key(a.Expr())
	}
	if why != "" {
		return nil, why
	}
	if b := t.costBound(); b > costLimit {
		return nil, fmt.Sprintf("its cost bound %d exceeds the cost limit", b)
	}
	fp.bails = t.bails
	return fp, ""
}

// costBound over-estimates cel-go's runtime cost of the expression: every
// node costs at most 1 plus a tenth of the strings it reads (each at most
// fastMaxStr long, or a concatenation of them) plus the lists it walks.
func (t *translator) costBound() uint64 {
	str := uint64(fastMaxStr) * uint64(t.concats+1)
	return uint64(t.nodes) * (2 + 2*str/10 + 2 + fastMaxList)
}

// bail stands for a node left to cel-go.
func (t *translator) bail(e celast.Expr, why string) string {
	t.bails = append(t.bails, why)
	return why
}

// what names an expression the translator does not know.
func (t *translator) what(e celast.Expr) string {
	if e.Kind() == celast.ComprehensionKind {
		return "a comprehension"
	}
	return "an expression of type " + t.typeName(e)
}

func (t *translator) kind(e celast.Expr) types.Kind {
	if ty := t.ast.GetType(e.ID()); ty != nil {
		return ty.Kind()
	}
	return types.DynKind
}

// variable: the variable an expression refers to (variables.x), if any.
func (t *translator) variable(e celast.Expr) (int, bool) {
	name, ok := strings.CutPrefix(t.refName(e), "variables.")
	if !ok {
		return 0, false
	}
	i, ok := t.cc.c.varIndex[name]
	return i, ok
}

// refName: the declared name an identifier or a qualified select resolves to.
func (t *translator) refName(e celast.Expr) string {
	if r := t.ast.ReferenceMap()[e.ID()]; r != nil && len(r.OverloadIDs) == 0 {
		return r.Name
	}
	if e.Kind() == celast.IdentKind {
		return e.AsIdent()
	}
	return ""
}

// field: the struct select `pod.f`, `workload.f` or `workload.strategy.f`.
func (t *translator) field(e celast.Expr) (owner, name string, ok bool) {
	if e.Kind() != celast.SelectKind || e.AsSelect().IsTestOnly() || t.refName(e) != "" {
		return "", "", false
	}
	s := e.AsSelect()
	op := s.Operand()
	if t.iterVar != "" && op.Kind() == celast.IdentKind && op.AsIdent() == t.iterVar {
		return "change", s.FieldName(), true // it shadows any other name
	}
	switch t.refName(op) {
	case "pod", "workload":
		return t.refName(op), s.FieldName(), true
	}
	if op.Kind() == celast.SelectKind && !op.AsSelect().IsTestOnly() && op.AsSelect().FieldName() == "strategy" && t.refName(op.AsSelect().Operand()) == "workload" {
		return "strategy", s.FieldName(), true
	}
	return "", "", false
}

func (t *translator) call(e celast.Expr) (fn string, args []celast.Expr, ok bool) {
	if e.Kind() != celast.CallKind {
		return "", nil, false
	}
	c := e.AsCall()
	args = c.Args()
	if c.IsMemberFunction() {
		args = append([]celast.Expr{c.Target()}, args...)
	}
	return c.FunctionName(), args, true
}

func bailB(*activation) (bool, bool)              { return false, false }
func bailI(*activation) (int64, bool)             { return 0, false }
func bailS(*activation) (string, bool)            { return "", false }
func bailM(*activation) (map[string]string, bool) { return nil, false }
func bailL(*activation) ([]any, bool)             { return nil, false }
func bailK(_ *activation, k []any) ([]any, bool)  { return k, false }

// subB, subI and subS translate an operand: one the translator does not
// know becomes a closure that always hands the expression to cel-go.
func (t *translator) subB(e celast.Expr) bfn {
	if slot, ok := t.slot(e); ok {
		defer func() { t.inSlot = false }()
		f, why := t.boolean(e)
		f = orBail(f, why, bailB)
		return func(a *activation) (bool, bool) {
			c := &a.slots[slot]
			if !c.set {
				c.b, c.ok = f(a)
				c.set = true
			}
			return c.b, c.ok
		}
	}
	f, why := t.boolean(e)
	return orBail(f, why, bailB)
}

func (t *translator) subI(e celast.Expr) ifn {
	if slot, ok := t.slot(e); ok {
		defer func() { t.inSlot = false }()
		f, why := t.integer(e)
		f = orBail(f, why, bailI)
		return func(a *activation) (int64, bool) {
			c := &a.slots[slot]
			if !c.set {
				c.i, c.ok = f(a)
				c.set = true
			}
			return c.i, c.ok
		}
	}
	f, why := t.integer(e)
	return orBail(f, why, bailI)
}

func (t *translator) subS(e celast.Expr) sfn {
	if slot, ok := t.slot(e); ok {
		defer func() { t.inSlot = false }()
		f, why := t.str(e)
		f = orBail(f, why, bailS)
		return func(a *activation) (string, bool) {
			c := &a.slots[slot]
			if !c.set {
				c.s, c.ok = f(a)
				c.set = true
			}
			return c.s, c.ok
		}
	}
	f, why := t.str(e)
	return orBail(f, why, bailS)
}

// fastSlot caches a subexpression that does not depend on the pod: its
// value is the same for every pod of a Decide call (one activation).
type fastSlot struct {
	set, ok, b bool
	i          int64
	s          string
}

// slot reserves a cache slot for e when e is a call that reads nothing
// per pod (nor a budget's item), outside another cached expression.
func (t *translator) slot(e celast.Expr) (int, bool) {
	if t.inSlot || t.iterVar != "" || e.Kind() != celast.CallKind || !t.perWorkload(e) {
		return 0, false
	}
	t.inSlot = true
	t.cc.c.slots++
	return t.cc.c.slots - 1, true
}

func (t *translator) perWorkload(e celast.Expr) bool {
	ok := true
	refs := t.ast.ReferenceMap()
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		name := ""
		if r := refs[x.ID()]; r != nil && len(r.OverloadIDs) == 0 {
			name = r.Name
		} else if x.Kind() == celast.IdentKind {
			name = x.AsIdent()
		}
		switch {
		case name == "pod", name == "defaults.order", name == "item", t.cc.podVars[name]:
			ok = false
		case x.Kind() == celast.ComprehensionKind:
			ok = false // its variables are not in the reference map
		}
	}))
	return ok
}

func orBail[F any](f F, why string, bail F) F {
	if why != "" {
		return bail
	}
	return f
}

func (t *translator) typeName(e celast.Expr) string {
	if ty := t.ast.GetType(e.ID()); ty != nil {
		return ty.String()
	}
	return "dyn"
}

// boolean translates a bool-typed expression.
func (t *translator) boolean(e celast.Expr) (bfn, string) {
	t.nodes++
	if t.kind(e) != types.BoolKind {
		return nil, t.bail(e, "a value that is not a bool")
	}
	if e.Kind() == celast.LiteralKind {
		v, ok := e.AsLiteral().(types.Bool)
		if !ok {
			return nil, t.bail(e, "a literal")
		}
		return func(*activation) (bool, bool) { return bool(v), true }, ""
	}
	if i, ok := t.variable(e); ok {
		return func(a *activation) (bool, bool) {
			v, ok := a.variable(i).(types.Bool)
			return bool(v), ok
		}, ""
	}
	if owner, name, ok := t.field(e); ok {
		if g := boolFields[owner][name]; g != nil {
			return g, ""
		}
		return nil, t.bail(e, owner+"."+name)
	}
	if e.Kind() == celast.ComprehensionKind {
		return t.allOrExists(e)
	}
	fn, args, ok := t.call(e)
	if !ok {
		return nil, t.bail(e, t.what(e))
	}
	switch {
	case fn == "_&&_" || fn == "_||_":
		// CEL's && and || absorb an error on either side when the other
		// side decides; bailing on any error leaves those cases to cel-go.
		ps := make([]bfn, len(args))
		for i, x := range args {
			ps[i] = t.subB(x)
		}
		stop := fn == "_||_" // the value that decides
		return func(a *activation) (bool, bool) {
			for _, p := range ps {
				v, ok := p(a)
				if !ok {
					return false, false
				}
				if v == stop {
					return stop, true
				}
			}
			return !stop, true
		}, ""
	case fn == "!_" && len(args) == 1:
		p := t.subB(args[0])
		return func(a *activation) (bool, bool) { v, ok := p(a); return !v, ok }, ""
	case fn == "_?_:_" && len(args) == 3:
		c, x, y := t.subB(args[0]), t.subB(args[1]), t.subB(args[2])
		return func(a *activation) (bool, bool) {
			v, ok := c(a)
			if !ok {
				return false, false
			}
			if v {
				return x(a)
			}
			return y(a)
		}, ""
	case len(args) == 2 && isCompare(fn):
		return t.compare(e, fn, args[0], args[1])
	case fn == "@in" && len(args) == 2:
		return t.in(e, args[0], args[1])
	case (fn == "startsWith" || fn == "endsWith") && len(args) == 2 && t.kind(args[0]) == types.StringKind && t.kind(args[1]) == types.StringKind:
		s, p := t.subS(args[0]), t.subS(args[1])
		f := strings.HasPrefix
		if fn == "endsWith" {
			f = strings.HasSuffix
		}
		return func(a *activation) (bool, bool) {
			x, ok1 := s(a)
			y, ok2 := p(a)
			return f(x, y), ok1 && ok2
		}, ""
	}
	return nil, t.bail(e, "function "+fn)
}

// allOrExists translates pod.changes.all(c, p) and pod.changes.exists(c, p)
// (the macros' comprehensions), one level deep. Like && and ||, CEL's all
// and exists absorb an element's error when another element decides: any
// error goes to cel-go.
func (t *translator) allOrExists(e celast.Expr) (bfn, string) {
	c := e.AsComprehension()
	init, step, res := c.AccuInit(), c.LoopStep(), c.Result()
	if t.iterVar != "" || c.HasIterVar2() || init.Kind() != celast.LiteralKind || res.Kind() != celast.IdentKind || res.AsIdent() != c.AccuVar() {
		return nil, t.bail(e, t.what(e))
	}
	b0, ok := init.AsLiteral().(types.Bool)
	fn, args, isCall := t.call(step)
	cond, _, condCall := t.call(c.LoopCondition())
	want := "_&&_" // all: starts true, stops at false
	if !b0 {
		want = "_||_" // exists: starts false, stops at true
	}
	if !ok || !isCall || fn != want || len(args) != 2 || args[0].Kind() != celast.IdentKind || args[0].AsIdent() != c.AccuVar() || !condCall || cond != "@not_strictly_false" {
		return nil, t.bail(e, t.what(e))
	}
	if owner, name, ok := t.field(c.IterRange()); !ok || owner != "pod" || name != "changes" {
		return nil, t.bail(e, "a comprehension over anything but pod.changes")
	}
	t.iterVar = c.IterVar()
	n0 := t.nodes
	p := t.subB(args[1])
	t.iterVar = ""
	// The body runs once per change, at most fastMaxList times.
	t.nodes += (t.nodes-n0+3)*fastMaxList + 2
	stop := !bool(b0)
	return func(a *activation) (bool, bool) {
		if a.pod == nil || len(a.pod.Changes) > fastMaxList {
			return false, false
		}
		defer func(saved *facts.Change) { a.change = saved }(a.change)
		for i := range a.pod.Changes {
			a.change = &a.pod.Changes[i]
			v, ok := p(a)
			if !ok {
				return false, false
			}
			if v == stop {
				return stop, true
			}
		}
		return !stop, true
	}, ""
}

func isCompare(fn string) bool {
	switch fn {
	case "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_":
		return true
	}
	return false
}

func (t *translator) compare(e celast.Expr, fn string, l, r celast.Expr) (bfn, string) {
	lk, rk := t.kind(l), t.kind(r)
	if lk != rk {
		return nil, t.bail(e, "a comparison of mixed types")
	}
	switch lk {
	case types.IntKind:
		x, y := t.subI(l), t.subI(r)
		cmp := intCompare(fn)
		return func(a *activation) (bool, bool) {
			u, ok1 := x(a)
			v, ok2 := y(a)
			return cmp(u, v), ok1 && ok2
		}, ""
	case types.StringKind:
		x, y := t.subS(l), t.subS(r)
		cmp := strCompare(fn)
		return func(a *activation) (bool, bool) {
			u, ok1 := x(a)
			v, ok2 := y(a)
			return cmp(u, v), ok1 && ok2
		}, ""
	case types.BoolKind:
		if fn != "_==_" && fn != "_!=_" {
			break
		}
		x, y := t.subB(l), t.subB(r)
		eq := fn == "_==_"
		return func(a *activation) (bool, bool) {
			u, ok1 := x(a)
			v, ok2 := y(a)
			return (u == v) == eq, ok1 && ok2
		}, ""
	}
	return nil, t.bail(e, "a comparison of "+t.typeName(l))
}

func intCompare(fn string) func(x, y int64) bool {
	switch fn {
	case "_==_":
		return func(x, y int64) bool { return x == y }
	case "_!=_":
		return func(x, y int64) bool { return x != y }
	case "_<_":
		return func(x, y int64) bool { return x < y }
	case "_<=_":
		return func(x, y int64) bool { return x <= y }
	case "_>_":
		return func(x, y int64) bool { return x > y }
	}
	return func(x, y int64) bool { return x >= y }
}

// strCompare orders strings by bytes, as cel-go's strings.Compare does.
func strCompare(fn string) func(x, y string) bool {
	switch fn {
	case "_==_":
		return func(x, y string) bool { return x == y }
	case "_!=_":
		return func(x, y string) bool { return x != y }
	case "_<_":
		return func(x, y string) bool { return x < y }
	case "_<=_":
		return func(x, y string) bool { return x <= y }
	case "_>_":
		return func(x, y string) bool { return x > y }
	}
	return func(x, y string) bool { return x >= y }
}

// in: a string in a map of strings (its keys) or in a list literal of
// strings or ints.
func (t *translator) in(e celast.Expr, x, coll celast.Expr) (bfn, string) {
	switch {
	case t.kind(coll) == types.MapKind && t.kind(x) == types.StringKind:
		m, why := t.stringMap(coll)
		if why != "" {
			return nil, why
		}
		k := t.subS(x)
		return func(a *activation) (bool, bool) {
			key, ok1 := k(a)
			mm, ok2 := m(a)
			_, in := mm[key]
			return in, ok1 && ok2
		}, ""
	case coll.Kind() == celast.ListKind && len(coll.AsList().OptionalIndices()) == 0:
		elems := coll.AsList().Elements()
		t.nodes++
		switch t.kind(x) {
		case types.StringKind:
			k := t.subS(x)
			vs := make([]sfn, len(elems))
			for i, el := range elems {
				if t.kind(el) != types.StringKind {
					return nil, t.bail(e, "in over a list of mixed types")
				}
				vs[i] = t.subS(el)
			}
			return func(a *activation) (bool, bool) {
				key, ok := k(a)
				if !ok {
					return false, false
				}
				// CEL evaluates the whole list: any element's error is the answer.
				in := false
				for _, v := range vs {
					s, ok := v(a)
					if !ok {
						return false, false
					}
					in = in || s == key
				}
				return in, true
			}, ""
		case types.IntKind:
			k := t.subI(x)
			vs := make([]ifn, len(elems))
			for i, el := range elems {
				if t.kind(el) != types.IntKind {
					return nil, t.bail(e, "in over a list of mixed types")
				}
				vs[i] = t.subI(el)
			}
			return func(a *activation) (bool, bool) {
				key, ok := k(a)
				if !ok {
					return false, false
				}
				in := false
				for _, v := range vs {
					n, ok := v(a)
					if !ok {
						return false, false
					}
					in = in || n == key
				}
				return in, true
			}, ""
		}
	}
	return nil, t.bail(e, "in over "+t.typeName(coll))
}

func (t *translator) stringMap(e celast.Expr) (mfn, string) {
	t.nodes++
	if owner, name, ok := t.field(e); ok {
		if g := mapFields[owner][name]; g != nil {
			return g, ""
		}
	}
	return bailM, t.bail(e, "a map other than labels or annotations")
}

// integer translates an int-typed expression, with CEL's overflow errors
// left to cel-go.
func (t *translator) integer(e celast.Expr) (ifn, string) {
	t.nodes++
	if t.kind(e) != types.IntKind {
		return nil, t.bail(e, "a value that is not an int")
	}
	if e.Kind() == celast.LiteralKind {
		v, ok := e.AsLiteral().(types.Int)
		if !ok {
			return nil, t.bail(e, "a literal")
		}
		return func(*activation) (int64, bool) { return int64(v), true }, ""
	}
	if i, ok := t.variable(e); ok {
		return func(a *activation) (int64, bool) {
			v, ok := a.variable(i).(types.Int)
			return int64(v), ok
		}, ""
	}
	if owner, name, ok := t.field(e); ok {
		if g := intFields[owner][name]; g != nil {
			return g, ""
		}
		return nil, t.bail(e, owner+"."+name)
	}
	fn, args, ok := t.call(e)
	if !ok {
		return nil, t.bail(e, t.what(e))
	}
	switch {
	case fn == "-_" && len(args) == 1:
		x := t.subI(args[0])
		return func(a *activation) (int64, bool) {
			v, ok := x(a)
			return -v, ok && v != math.MinInt64
		}, ""
	case fn == "_?_:_" && len(args) == 3:
		c, x, y := t.subB(args[0]), t.subI(args[1]), t.subI(args[2])
		return func(a *activation) (int64, bool) {
			v, ok := c(a)
			if !ok {
				return 0, false
			}
			if v {
				return x(a)
			}
			return y(a)
		}, ""
	case len(args) == 2 && arith(fn) != nil && t.kind(args[0]) == types.IntKind && t.kind(args[1]) == types.IntKind:
		x, y, op := t.subI(args[0]), t.subI(args[1]), arith(fn)
		return func(a *activation) (int64, bool) {
			u, ok1 := x(a)
			v, ok2 := y(a)
			if !ok1 || !ok2 {
				return 0, false
			}
			return op(u, v)
		}, ""
	case fn == "size" && len(args) == 1:
		return t.size(e, args[0])
	case fn == "int" && len(args) == 1 && t.kind(args[0]) == types.IntKind:
		return t.subI(args[0]), ""
	}
	return nil, t.bail(e, "function "+fn)
}

// arith: CEL's checked int64 arithmetic; false on overflow or division by
// zero (cel-go reports the error).
func arith(fn string) func(x, y int64) (int64, bool) {
	switch fn {
	case "_+_":
		return func(x, y int64) (int64, bool) {
			s := x + y
			return s, (y > 0) == (s > x) || y == 0
		}
	case "_-_":
		return func(x, y int64) (int64, bool) {
			d := x - y
			return d, (y > 0) == (d < x) || y == 0
		}
	case "_*_":
		return func(x, y int64) (int64, bool) {
			if x == 0 || y == 0 {
				return 0, true
			}
			p := x * y
			if (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) || p/y != x {
				return 0, false
			}
			return p, true
		}
	case "_/_":
		return func(x, y int64) (int64, bool) {
			if y == 0 || (x == math.MinInt64 && y == -1) {
				return 0, false
			}
			return x / y, true
		}
	case "_%_":
		return func(x, y int64) (int64, bool) {
			if y == 0 || (x == math.MinInt64 && y == -1) {
				return 0, false
			}
			return x % y, true
		}
	}
	return nil
}

func (t *translator) size(e celast.Expr, x celast.Expr) (ifn, string) {
	switch t.kind(x) {
	case types.StringKind:
		s := t.subS(x)
		return func(a *activation) (int64, bool) {
			v, ok := s(a)
			return int64(utf8.RuneCountInString(v)), ok
		}, ""
	case types.MapKind:
		m, why := t.stringMap(x)
		if why != "" {
			return nil, why
		}
		return func(a *activation) (int64, bool) { v, ok := m(a); return int64(len(v)), ok }, ""
	case types.ListKind:
		t.nodes++
		if owner, name, ok := t.field(x); ok && owner == "pod" {
			switch name {
			case "changes":
				return func(a *activation) (int64, bool) {
					if a.pod == nil {
						return 0, false
					}
					return int64(len(a.pod.Changes)), true
				}, ""
			case "pdbs":
				return func(a *activation) (int64, bool) {
					if a.pod == nil {
						return 0, false
					}
					return int64(len(a.pod.PDBs)), true
				}, ""
			}
		}
		if t.refName(x) == "defaults.order" {
			l := t.keys(x)
			return func(a *activation) (int64, bool) { v, ok := l(a); return int64(len(v)), ok }, ""
		}
	}
	return nil, t.bail(e, "size of "+t.typeName(x))
}

// str translates a string-typed expression.
func (t *translator) str(e celast.Expr) (sfn, string) {
	t.nodes++
	if t.kind(e) != types.StringKind {
		return nil, t.bail(e, "a value that is not a string")
	}
	if e.Kind() == celast.LiteralKind {
		v, ok := e.AsLiteral().(types.String)
		if !ok {
			return nil, t.bail(e, "a literal")
		}
		return func(*activation) (string, bool) { return string(v), true }, ""
	}
	if i, ok := t.variable(e); ok {
		return func(a *activation) (string, bool) {
			v, ok := a.variable(i).(types.String)
			return string(v), ok && len(v) <= fastMaxStr
		}, ""
	}
	if owner, name, ok := t.field(e); ok {
		if g := strFields[owner][name]; g != nil {
			return g, ""
		}
		return nil, t.bail(e, owner+"."+name)
	}
	fn, args, ok := t.call(e)
	if !ok {
		return nil, t.bail(e, t.what(e))
	}
	switch {
	case fn == "_+_" && len(args) == 2 && t.kind(args[0]) == types.StringKind && t.kind(args[1]) == types.StringKind:
		t.concats++
		x, y := t.subS(args[0]), t.subS(args[1])
		return func(a *activation) (string, bool) {
			u, ok1 := x(a)
			v, ok2 := y(a)
			return u + v, ok1 && ok2
		}, ""
	case fn == "_?_:_" && len(args) == 3:
		c, x, y := t.subB(args[0]), t.subS(args[1]), t.subS(args[2])
		return func(a *activation) (string, bool) {
			v, ok := c(a)
			if !ok {
				return "", false
			}
			if v {
				return x(a)
			}
			return y(a)
		}, ""
	case fn == "_[_]" && len(args) == 2 && t.kind(args[0]) == types.MapKind && t.kind(args[1]) == types.StringKind:
		m, why := t.stringMap(args[0])
		if why != "" {
			return nil, why
		}
		k := t.subS(args[1])
		return func(a *activation) (string, bool) {
			key, ok1 := k(a)
			mm, ok2 := m(a)
			v, in := mm[key]
			return v, ok1 && ok2 && in && len(v) <= fastMaxStr
		}, ""
	case fn == "string" && len(args) == 1 && t.kind(args[0]) == types.IntKind:
		x := t.subI(args[0])
		return func(a *activation) (string, bool) {
			v, ok := x(a)
			return strconv.FormatInt(v, 10), ok
		}, ""
	case fn == "string" && len(args) == 1 && t.kind(args[0]) == types.StringKind:
		return t.subS(args[0]), ""
	}
	return nil, t.bail(e, "function "+fn)
}

// keys translates a list of order keys: defaults.order or a slice of it.
func (t *translator) keys(e celast.Expr) lfn {
	t.nodes++
	if t.refName(e) == "defaults.order" {
		return func(a *activation) ([]any, bool) {
			if a.defaults == nil || a.pod == nil {
				return nil, false
			}
			k, err := a.defaultOrder()
			return k, err == nil && len(k) <= fastMaxList
		}
	}
	if fn, args, ok := t.call(e); ok && fn == "slice" && len(args) == 3 && t.kind(args[1]) == types.IntKind && t.kind(args[2]) == types.IntKind {
		l, from, to := t.keys(args[0]), t.subI(args[1]), t.subI(args[2])
		return func(a *activation) ([]any, bool) {
			k, ok1 := l(a)
			i, ok2 := from(a)
			j, ok3 := to(a)
			if !ok1 || !ok2 || !ok3 || i < 0 || j < i || j > int64(len(k)) {
				return nil, false
			}
			return k[i:j], true
		}
	}
	t.bail(e, "a list other than defaults.order")
	return bailL
}

// key translates the folded order expression (compiler.order): conditionals
// over dyn list literals whose elements become the key as appendKey makes it.
func (t *translator) key(e celast.Expr) (kfn, string) {
	t.nodes++
	fn, args, ok := t.call(e)
	switch {
	case e.Kind() == celast.ListKind && len(e.AsList().OptionalIndices()) == 0:
		elems := e.AsList().Elements()
		fs := make([]kfn, len(elems))
		for i, el := range elems {
			fs[i] = t.element(el)
		}
		return func(a *activation, k []any) ([]any, bool) {
			for _, f := range fs {
				var ok bool
				if k, ok = f(a, k); !ok {
					return k, false
				}
			}
			return k, true
		}, ""
	case ok && fn == "dyn" && len(args) == 1:
		return t.key(args[0])
	case ok && fn == "_?_:_" && len(args) == 3:
		c := t.subB(args[0])
		x, why := t.key(args[1])
		if why != "" {
			x = bailK
		}
		y, why := t.key(args[2])
		if why != "" {
			y = bailK
		}
		return func(a *activation, k []any) ([]any, bool) {
			v, ok := c(a)
			if !ok {
				return k, false
			}
			if v {
				return x(a, k)
			}
			return y(a, k)
		}, ""
	}
	return nil, t.bail(e, "an order expression that is not a list")
}

// element appends one key of an order list literal.
func (t *translator) element(e celast.Expr) kfn {
	if f := t.podElement(e); f != nil {
		return f
	}
	switch t.kind(e) {
	case types.BoolKind:
		b := t.subB(e)
		return func(a *activation, k []any) ([]any, bool) {
			v, ok := b(a)
			if v {
				return append(k, boxedInt(1)), ok
			}
			return append(k, boxedInt(0)), ok
		}
	case types.IntKind:
		n := t.subI(e)
		return func(a *activation, k []any) ([]any, bool) {
			v, ok := n(a)
			return append(k, boxedInt(v)), ok
		}
	case types.StringKind:
		s, box := t.subS(e), t.boxSlot()
		return func(a *activation, k []any) ([]any, bool) {
			v, ok := s(a)
			return append(k, a.box(box, v)), ok
		}
	case types.ListKind:
		l := t.keys(e)
		return func(a *activation, k []any) ([]any, bool) {
			v, ok := l(a)
			if !ok {
				return k, false
			}
			for _, x := range v {
				var ok bool
				if k, ok = appendKeyValue(k, x); !ok {
					return k, false
				}
			}
			return k, true
		}
	case types.DynKind:
		// defaults.order[i]
		if fn, args, ok := t.call(e); ok && fn == "_[_]" && len(args) == 2 && t.kind(args[1]) == types.IntKind {
			t.nodes++
			l, i := t.keys(args[0]), t.subI(args[1])
			return func(a *activation, k []any) ([]any, bool) {
				v, ok1 := l(a)
				j, ok2 := i(a)
				if !ok1 || !ok2 || j < 0 || j >= int64(len(v)) {
					return k, false
				}
				return appendKeyValue(k, v[j])
			}
		}
	}
	t.bail(e, "an order key of type "+t.typeName(e))
	return bailK
}

// podElement: a key that is a pod field (or its negation) in one closure,
// without the generic layers in between.
func (t *translator) podElement(e celast.Expr) kfn {
	neg := false
	if fn, args, ok := t.call(e); ok && fn == "-_" && len(args) == 1 && t.kind(e) == types.IntKind {
		neg, e = true, args[0]
		t.nodes++
	}
	owner, name, ok := t.field(e)
	if !ok || owner != "pod" {
		return nil
	}
	t.nodes++
	if g := podInts[name]; g != nil {
		if neg {
			return func(a *activation, k []any) ([]any, bool) {
				if a.pod == nil {
					return k, false
				}
				v := g(a.pod)
				return append(k, boxedInt(-v)), v != math.MinInt64
			}
		}
		return func(a *activation, k []any) ([]any, bool) {
			if a.pod == nil {
				return k, false
			}
			return append(k, boxedInt(g(a.pod))), true
		}
	}
	if neg {
		return nil
	}
	if g := podBools[name]; g != nil {
		return func(a *activation, k []any) ([]any, bool) {
			if a.pod == nil {
				return k, false
			}
			if g(a.pod) {
				return append(k, boxedInt(1)), true
			}
			return append(k, boxedInt(0)), true
		}
	}
	if g := podStrs[name]; g != nil {
		box := t.boxSlot()
		return func(a *activation, k []any) ([]any, bool) {
			if a.pod == nil {
				return k, false
			}
			v := g(a.pod)
			return append(k, a.box(box, v)), len(v) <= fastMaxStr
		}
	}
	return nil
}

// boxSlot reserves a slot for the last string a key element boxed.
func (t *translator) boxSlot() int {
	t.cc.c.boxes++
	return t.cc.c.boxes - 1
}

// box returns s as an interface, one boxed for an earlier pod when the
// string is one of the last few: keys like pod.zone take a few values, and
// boxing a string allocates.
func (a *activation) box(slot int, s string) any {
	b := &a.boxes[slot]
	for i := range b.v {
		if b.v[i] != nil && b.s[i] == s {
			return b.v[i]
		}
	}
	i := b.next
	b.s[i], b.v[i], b.next = s, s, (i+1)%len(b.v)
	return b.v[i]
}

// boxedString: the last strings a key element boxed, replaced in turn.
type boxedString struct {
	s    [4]string
	v    [4]any
	next int
}

// appendKeyValue appends an element of another order key as appendKey
// would after the round trip through CEL (int64, string, float64 when not
// integral); anything else goes to cel-go.
func appendKeyValue(k []any, x any) ([]any, bool) {
	switch v := x.(type) {
	case int64, string:
		return append(k, v), true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) || (v == math.Trunc(v) && math.Abs(v) < 1<<53) {
			return k, false
		}
		return append(k, v), true
	}
	return k, false
}

// Order keys are boxed into interfaces; small ints come from a table
// instead of an allocation (as the native engine's do).
const boxMin, boxMax = -1024, 1024

var boxed = func() (t [boxMax - boxMin]any) {
	for i := range t {
		t[i] = int64(i + boxMin)
	}
	return t
}()

func boxedInt(x int64) any {
	if x >= boxMin && x < boxMax {
		return boxed[x-boxMin]
	}
	return x
}

// The fields of pod, workload and workload.strategy by JSON name, read
// without reflection (fields_test.go checks them against the structs).
// The pod's fields, read directly by order keys.
var (
	podBools = map[string]func(*facts.Pod) bool{
		"updated":     func(p *facts.Pod) bool { return p.Updated },
		"scheduled":   func(p *facts.Pod) bool { return p.Scheduled },
		"ready":       func(p *facts.Pod) bool { return p.Ready },
		"available":   func(p *facts.Pod) bool { return p.Available },
		"terminating": func(p *facts.Pod) bool { return p.Terminating },
		"terminal":    func(p *facts.Pod) bool { return p.Terminal },
	}
	podInts = map[string]func(*facts.Pod) int64{
		"ordinal":            func(p *facts.Pod) int64 { return int64(p.Ordinal) },
		"index":              func(p *facts.Pod) int64 { return int64(p.Index) },
		"readySeconds":       func(p *facts.Pod) int64 { return p.ReadySeconds },
		"unavailableSeconds": func(p *facts.Pod) int64 { return p.UnavailableSeconds },
		"restarts":           func(p *facts.Pod) int64 { return int64(p.Restarts) },
		"sidecarRestarts":    func(p *facts.Pod) int64 { return int64(p.SidecarRestarts) },
		"deletionCost":       func(p *facts.Pod) int64 { return int64(p.DeletionCost) },
		"colocated":          func(p *facts.Pod) int64 { return int64(p.Colocated) },
		"readyBucket":        func(p *facts.Pod) int64 { return int64(p.ReadyBucket) },
		"createdBucket":      func(p *facts.Pod) int64 { return int64(p.CreatedBucket) },
	}
	podStrs = map[string]func(*facts.Pod) string{
		"name":     func(p *facts.Pod) string { return p.Name },
		"uid":      func(p *facts.Pod) string { return p.UID },
		"revision": func(p *facts.Pod) string { return p.Revision },
		"node":     func(p *facts.Pod) string { return p.Node },
		"zone":     func(p *facts.Pod) string { return p.Zone },
		"phase":    func(p *facts.Pod) string { return p.Phase },
		"owner":    func(p *facts.Pod) string { return p.Owner },
	}
)

func podFields[G, F any](get map[string]G, wrap func(G) F) map[string]F {
	out := make(map[string]F, len(get))
	for name, g := range get {
		out[name] = wrap(g)
	}
	return out
}

var (
	boolFields = map[string]map[string]bfn{
		"pod": podFields(podBools, podBool),
		"workload": {
			"paused":  wlBool(func(w *Workload) bool { return w.Paused }),
			"managed": wlBool(func(w *Workload) bool { return w.Managed }),
		},
		"strategy": {
			"rollingUpdateSet": wlBool(func(w *Workload) bool { return w.Strategy.RollingUpdateSet }),
		},
		"change": {
			"inPlace": func(a *activation) (bool, bool) {
				if a.change == nil {
					return false, false
				}
				return a.change.InPlace, true
			},
		},
	}
	intFields = map[string]map[string]ifn{
		"pod": podFields(podInts, podInt),
		"workload": {
			"replicas":                wlInt(func(w *Workload) int64 { return int64(w.Replicas) }),
			"minReadySeconds":         wlInt(func(w *Workload) int64 { return int64(w.MinReadySeconds) }),
			"progressDeadlineSeconds": wlInt(func(w *Workload) int64 { return int64(w.ProgressDeadlineSeconds) }),
			"ordinalsStart":           wlInt(func(w *Workload) int64 { return int64(w.OrdinalsStart) }),
		},
		"strategy": {
			"partition": wlInt(func(w *Workload) int64 { return int64(w.Strategy.Partition) }),
		},
	}
	strFields = map[string]map[string]sfn{
		"pod": podFields(podStrs, podStr),
		"workload": {
			"kind":                wlStr(func(w *Workload) string { return w.Kind }),
			"namespace":           wlStr(func(w *Workload) string { return w.Namespace }),
			"name":                wlStr(func(w *Workload) string { return w.Name }),
			"uid":                 wlStr(func(w *Workload) string { return w.UID }),
			"podManagementPolicy": wlStr(func(w *Workload) string { return w.PodManagementPolicy }),
			"podUpdatePolicy":     wlStr(func(w *Workload) string { return w.PodUpdatePolicy }),
			"currentRevision":     wlStr(func(w *Workload) string { return w.CurrentRevision }),
			"updateRevision":      wlStr(func(w *Workload) string { return w.UpdateRevision }),
			"policy":              wlStr(func(w *Workload) string { return w.Policy }),
		},
		"strategy": {
			"type":                 wlStr(func(w *Workload) string { return w.Strategy.Type }),
			"maxSurge":             wlStr(func(w *Workload) string { return w.Strategy.MaxSurge }),
			"maxUnavailable":       wlStr(func(w *Workload) string { return w.Strategy.MaxUnavailable }),
			"maxUnavailableSource": wlStr(func(w *Workload) string { return w.Strategy.MaxUnavailableSource }),
			"maxSurgeSource":       wlStr(func(w *Workload) string { return w.Strategy.MaxSurgeSource }),
			"partitionSource":      wlStr(func(w *Workload) string { return w.Strategy.PartitionSource }),
		},
		"change": {
			"path":   changeStr(func(c *facts.Change) string { return c.Path }),
			"class":  changeStr(func(c *facts.Change) string { return c.Class }),
			"detail": changeStr(func(c *facts.Change) string { return c.Detail }),
		},
	}
	mapFields = map[string]map[string]mfn{
		"pod": {
			"labels": func(a *activation) (map[string]string, bool) {
				if a.pod == nil {
					return nil, false
				}
				return a.pod.Labels, true
			},
		},
		"workload": {
			"labels":      func(a *activation) (map[string]string, bool) { return a.b.workload.Labels, true },
			"annotations": func(a *activation) (map[string]string, bool) { return a.b.workload.Annotations, true },
		},
	}
)

// A pod field read without a pod (a per-workload evaluation) is cel-go's
// error to report.
func podBool(f func(*facts.Pod) bool) bfn {
	return func(a *activation) (bool, bool) {
		if a.pod == nil {
			return false, false
		}
		return f(a.pod), true
	}
}

func podInt(f func(*facts.Pod) int64) ifn {
	return func(a *activation) (int64, bool) {
		if a.pod == nil {
			return 0, false
		}
		return f(a.pod), true
	}
}

func podStr(f func(*facts.Pod) string) sfn {
	return func(a *activation) (string, bool) {
		if a.pod == nil {
			return "", false
		}
		s := f(a.pod)
		return s, len(s) <= fastMaxStr
	}
}

func changeStr(f func(*facts.Change) string) sfn {
	return func(a *activation) (string, bool) {
		if a.change == nil {
			return "", false
		}
		v := f(a.change)
		return v, len(v) <= fastMaxStr
	}
}

func wlBool(f func(*Workload) bool) bfn {
	return func(a *activation) (bool, bool) { return f(a.b.workload), true }
}

func wlInt(f func(*Workload) int64) ifn {
	return func(a *activation) (int64, bool) { return f(a.b.workload), true }
}

func wlStr(f func(*Workload) string) sfn {
	return func(a *activation) (string, bool) {
		s := f(a.b.workload)
		return s, len(s) <= fastMaxStr
	}
}
