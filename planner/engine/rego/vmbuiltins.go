package rego

import (
	"math/bits"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"

	"github.com/rollplan/rollplan/planner/facts"
)

// vbuiltin is a builtin as the VM calls it: native, for the common cases of
// the builtins policies use per pod, and else OPA's own implementation over
// converted values. native answers (nil, nil) when it leaves a case to OPA.
type vbuiltin struct {
	name   string
	native func(m *machine, args []any) any
	opa    topdown.BuiltinFunc
}

// impure are builtins whose answer is not a function of their arguments
// alone (besides those OPA marks non-deterministic): a bundle that uses one
// is interpreted.
var impure = map[string]bool{
	"print": true, "internal.print": true, "trace": true, "opa.runtime": true,
	"rego.metadata.chain": true, "rego.metadata.rule": true, "internal.test_case": true,
}

// lookupBuiltin is the VM's builtin name, or nil and why not.
func lookupBuiltin(name string) (*vbuiltin, string) {
	decl, ok := ast.BuiltinMap[name]
	if !ok {
		return nil, "builtin " + name + " is not one of OPA's"
	}
	if decl.Nondeterministic || impure[name] {
		return nil, "builtin " + name + " is not a pure function of its arguments"
	}
	fn := topdown.GetBuiltin(name)
	if fn == nil {
		return nil, "builtin " + name + " has no implementation"
	}
	return &vbuiltin{name: name, native: natives[name], opa: fn}, ""
}

func (m *machine) builtin(f []any, in *instr) (any, error) {
	args := m.args[:0]
	for _, a := range in.args {
		v := m.read(f, a)
		if v == nil {
			return nil, nil
		}
		args = append(args, v)
	}
	m.args = args
	var v any
	var err error
	if in.bi.native != nil {
		v = in.bi.native(m, args)
	}
	if v == nil {
		v, err = m.delegate(in.bi, args)
	}
	clear(args) // hold no value past the call
	return v, err
}

// delegate calls OPA's implementation of a builtin; an error is left to the
// interpreter, which words it.
func (m *machine) delegate(bi *vbuiltin, args []any) (any, error) {
	if m.conv == nil {
		m.conv = newConverter()
	}
	terms := make([]*ast.Term, len(args))
	for i, a := range args {
		if in, ok := a.(*vinput); ok {
			if _, err := in.object(); err != nil {
				return nil, errFallback
			}
		}
		terms[i] = ast.NewTerm(toAST(a, m.conv))
	}
	var out any
	bctx := topdown.BuiltinContext{Context: m.ctx, Cache: builtins.Cache{}}
	err := bi.opa(bctx, terms, func(t *ast.Term) error {
		out = fromAST(t.Value)
		return nil
	})
	if err != nil {
		return nil, errFallback
	}
	return out, nil
}

var natives = map[string]func(m *machine, args []any) any{
	"equal": func(_ *machine, a []any) any { return equal(a[0], a[1]) },
	"neq":   func(_ *machine, a []any) any { return !equal(a[0], a[1]) },
	"gt":    func(_ *machine, a []any) any { return compare(a[0], a[1]) > 0 },
	"gte":   func(_ *machine, a []any) any { return compare(a[0], a[1]) >= 0 },
	"lt":    func(_ *machine, a []any) any { return compare(a[0], a[1]) < 0 },
	"lte":   func(_ *machine, a []any) any { return compare(a[0], a[1]) <= 0 },
	"plus": func(_ *machine, a []any) any {
		x, y, ok := ints(a)
		if !ok {
			return nil
		}
		r := x + y
		if (x >= 0) == (y >= 0) && (r >= 0) != (x >= 0) {
			return nil // overflow: OPA's big numbers
		}
		return intValue(r)
	},
	"minus": func(_ *machine, a []any) any {
		x, y, ok := ints(a)
		if !ok {
			return nil
		}
		r := x - y
		if (x >= 0) != (y >= 0) && (r >= 0) != (x >= 0) {
			return nil
		}
		return intValue(r)
	},
	"mul": func(_ *machine, a []any) any {
		x, y, ok := ints(a)
		if !ok {
			return nil
		}
		hi, lo := bits.Mul64(uint64(abs(x)), uint64(abs(y)))
		if hi != 0 || lo > 1<<62 || x == -1<<63 || y == -1<<63 {
			return nil
		}
		r := int64(lo)
		if (x < 0) != (y < 0) {
			r = -r
		}
		return intValue(r)
	},
	"to_number": func(_ *machine, a []any) any {
		switch x := a[0].(type) {
		case bool:
			if x {
				return intValue(1)
			}
			return intValue(0)
		case int64:
			return x
		case vnull:
			return intValue(0)
		}
		return nil
	},
	"is_number": func(_ *machine, a []any) any {
		switch a[0].(type) {
		case int64, ast.Number:
			return true
		}
		return false
	},
	"is_string": func(_ *machine, a []any) any { _, ok := a[0].(string); return ok },
	"is_boolean": func(_ *machine, a []any) any {
		_, ok := a[0].(bool)
		return ok
	},
	"is_null": func(_ *machine, a []any) any { _, ok := a[0].(vnull); return ok },
	"is_array": func(_ *machine, a []any) any {
		switch a[0].(type) {
		case *varray, *vpods:
			return true
		}
		return false
	},
	"is_object": func(_ *machine, a []any) any {
		switch a[0].(type) {
		case *vobject, *facts.Pod, *vinput:
			return true
		}
		return false
	},
	"is_set": func(_ *machine, a []any) any { _, ok := a[0].(*vset); return ok },
	"internal.member_2": func(_ *machine, a []any) any {
		switch c := a[1].(type) {
		case *varray:
			for _, e := range c.e {
				if equal(a[0], e) {
					return true
				}
			}
			return false
		case *vset:
			return c.find(a[0]) >= 0
		case *vobject:
			for _, e := range c.v {
				if equal(a[0], e) {
					return true
				}
			}
			return false
		}
		return nil
	},
	"count": func(_ *machine, a []any) any {
		switch c := a[0].(type) {
		case *varray:
			return intValue(int64(len(c.e)))
		case *vset:
			return intValue(int64(len(c.e)))
		case *vobject:
			return intValue(int64(len(c.k)))
		case *vpods:
			return intValue(int64(len(c.pods)))
		}
		return nil
	},
	"endswith": func(_ *machine, a []any) any {
		s, ok1 := a[0].(string)
		suf, ok2 := a[1].(string)
		if !ok1 || !ok2 {
			return nil
		}
		return strings.HasSuffix(s, suf)
	},
	"startswith": func(_ *machine, a []any) any {
		s, ok1 := a[0].(string)
		pre, ok2 := a[1].(string)
		if !ok1 || !ok2 {
			return nil
		}
		return strings.HasPrefix(s, pre)
	},
	"trim_suffix": func(_ *machine, a []any) any {
		s, ok1 := a[0].(string)
		suf, ok2 := a[1].(string)
		if !ok1 || !ok2 {
			return nil
		}
		return strings.TrimSuffix(s, suf)
	},
}

func init() {
	// object.get reads a pod field in place (a key that is a path, or
	// another kind of object, goes to OPA).
	natives["object.get"] = func(m *machine, a []any) any {
		switch a[0].(type) {
		case *vobject, *facts.Pod, *vinput:
		default:
			return nil // OPA's error
		}
		path, ok := a[1].(*varray)
		if !ok {
			v, err := m.dot(a[0], a[1])
			if err != nil {
				return nil
			}
			if v == nil {
				return a[2]
			}
			return v
		}
		// A path: each step as Term.Get (objects by key, arrays by index,
		// sets by member), as m.dot reads. A pod's label is read from its
		// map, without building the labels object.
		cur, steps := a[0], path.e
		if p, ok := cur.(*facts.Pod); ok && len(steps) >= 2 && steps[0] == "labels" {
			k, ok := steps[1].(string)
			if !ok {
				return a[2] // label keys are strings
			}
			v, ok := p.Labels[k]
			if !ok {
				return a[2]
			}
			cur, steps = v, steps[2:]
		}
		for _, k := range steps {
			v, err := m.dot(cur, k)
			if err != nil {
				return nil
			}
			if v == nil {
				return a[2]
			}
			cur = v
		}
		return cur
	}
	natives["array.concat"] = func(_ *machine, a []any) any {
		x, ok1 := a[0].(*varray)
		y, ok2 := a[1].(*varray)
		switch {
		case !ok1 || !ok2:
			return nil
		case len(x.e) == 0:
			return y
		case len(y.e) == 0:
			return x
		}
		out := newArray(len(x.e) + len(y.e))
		out.e = append(append(out.e, x.e...), y.e...)
		return out
	}
	natives["array.slice"] = func(_ *machine, a []any) any {
		x, ok := a[0].(*varray)
		start, ok1 := a[1].(int64)
		stop, ok2 := a[2].(int64)
		if !ok || !ok1 || !ok2 {
			return nil
		}
		l := int64(len(x.e))
		stop = min(max(stop, 0), l)
		start = min(max(start, 0), stop)
		if start == 0 && stop >= l {
			return x
		}
		// A view of x: values are not written once built, and the capacity
		// ends with the view, so an append copies.
		return &varray{e: x.e[start:stop:stop]}
	}
}

func ints(a []any) (int64, int64, bool) {
	x, ok1 := a[0].(int64)
	y, ok2 := a[1].(int64)
	return x, y, ok1 && ok2
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
