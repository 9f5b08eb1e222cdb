package cel

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/rollplan/rollplan/planner/facts"
)

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
