package cel

import (
	"math"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

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
