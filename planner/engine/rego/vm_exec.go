package rego

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/facts"
)

const (
	done     = -1 // a block ran to its end
	returned = -2 // a function returned
)

func (m *machine) read(f []any, o operand) any {
	if o.local < 0 {
		return o.k
	}
	return f[o.local]
}

// exec runs a block: done, returned, or the number of labels left to leave
// (0: this block's own).
func (m *machine) exec(f []any, b block) (int, error) {
	for i := range b {
		in := &b[i]
		switch in.op {
		case opAssignVar:
			f[in.target] = m.read(f, in.a)
		case opAssignVarOnce:
			v := m.read(f, in.a)
			if cur := f[in.target]; cur != nil {
				if !equal(cur, v) {
					return 0, errFallback // a conflict: the interpreter words it
				}
			}
			f[in.target] = v
		case opAssignInt:
			f[in.target] = in.k
		case opBlock:
			for _, nb := range in.blocks {
				r, err := m.exec(f, nb)
				if err != nil {
					return 0, err
				}
				if r == returned {
					return r, nil
				}
				if r > 0 {
					return r - 1, nil
				}
			}
		case opBreak:
			return int(in.n), nil
		case opCall:
			v, err := m.call(f, in)
			if err != nil {
				return 0, err
			}
			if v == nil {
				return 0, nil
			}
			f[in.target] = v
		case opBuiltin:
			v, err := m.builtin(f, in)
			if err != nil {
				return 0, err
			}
			if v == nil {
				return 0, nil
			}
			f[in.target] = v
		case opDot:
			src := m.read(f, in.a)
			if p, ok := src.(*facts.Pod); ok && in.n > 0 {
				f[in.target] = m.podFieldID(p, int(in.n))
				continue
			}
			v, err := m.dot(src, m.read(f, in.b))
			if err != nil {
				return 0, err
			}
			if v == nil {
				return 0, nil
			}
			f[in.target] = v
		case opLen:
			var n int
			switch x := m.read(f, in.a).(type) {
			case *varray:
				n = len(x.e)
			case *vobject:
				n = len(x.k)
			case *vset:
				n = len(x.e)
			case *vpods:
				n = len(x.pods)
			case *facts.Pod:
				n = len(podKeys)
			case *vinput:
				n = len(inputFields)
			default:
				return 0, errFallback
			}
			f[in.target] = intValue(int64(n))
		case opScan:
			r, err := m.scan(f, in)
			if err != nil {
				return 0, err
			}
			if r != done {
				return r, nil
			}
		case opNot:
			r, err := m.exec(f, in.blocks[0])
			if err != nil {
				return 0, err
			}
			switch {
			case r == returned:
				return r, nil
			case r == done:
				return 0, nil // the negated body held
			case r > 0:
				return r - 1, nil
			}
		case opEqual:
			if !equal(m.read(f, in.a), m.read(f, in.b)) {
				return 0, nil
			}
		case opNotEqual:
			if equal(m.read(f, in.a), m.read(f, in.b)) {
				return 0, nil
			}
		case opIsArray:
			switch m.read(f, in.a).(type) {
			case *varray, *vpods:
			default:
				return 0, nil
			}
		case opIsObject:
			switch m.read(f, in.a).(type) {
			case *vobject, *facts.Pod, *vinput:
			default:
				return 0, nil
			}
		case opIsSet:
			if _, ok := m.read(f, in.a).(*vset); !ok {
				return 0, nil
			}
		case opIsDefined:
			if f[in.a.local] == nil {
				return 0, nil
			}
		case opIsUndefined:
			if f[in.a.local] != nil {
				return 0, nil
			}
		case opMakeNull:
			f[in.target] = vnull{}
		case opMakeNumber:
			f[in.target] = in.k
		case opMakeArray:
			f[in.target] = newArray(int(in.n))
		case opMakeObject:
			f[in.target] = newObject()
		case opMakeSet:
			f[in.target] = &vset{}
		case opArrayAppend:
			a, ok := f[in.target].(*varray)
			if !ok {
				return 0, errFallback
			}
			a.e = append(a.e, m.read(f, in.a))
		case opObjectInsert:
			o, ok := f[in.target].(*vobject)
			if !ok {
				return 0, errFallback
			}
			o.insert(m.read(f, in.a), m.read(f, in.b))
		case opObjectInsertOnce:
			o, ok := f[in.target].(*vobject)
			if !ok {
				return 0, errFallback
			}
			k, v := m.read(f, in.a), m.read(f, in.b)
			if cur := o.get(k); cur != nil {
				if !equal(cur, v) {
					return 0, errFallback // a conflict: the interpreter words it
				}
				continue
			}
			o.insert(k, v)
		case opSetAdd:
			s, ok := f[in.target].(*vset)
			if !ok {
				return 0, errFallback
			}
			s.add(m.read(f, in.a))
		case opResetLocal:
			f[in.target] = nil
		case opReturn:
			return returned, nil
		case opResultSetAdd:
			m.results = append(m.results, f[in.a.local])
		case opNop:
		}
	}
	return done, nil
}

// dot is the value at key of v; nil: none.
func (m *machine) dot(v, key any) (any, error) {
	switch x := v.(type) {
	case *vobject:
		return x.get(key), nil
	case *vinput:
		if s, ok := key.(string); ok {
			v, err := x.field(s)
			if err != nil {
				return nil, errFallback
			}
			return v, nil
		}
		return nil, nil
	case *facts.Pod:
		if s, ok := key.(string); ok {
			return m.podField(x, s), nil
		}
		return nil, nil
	case *varray:
		i, ok := key.(int64)
		if !ok {
			if _, num := key.(ast.Number); num {
				return nil, errFallback
			}
			return nil, nil
		}
		if i < 0 || i >= int64(len(x.e)) {
			return nil, nil
		}
		return x.e[i], nil
	case *vpods:
		i, ok := key.(int64)
		if !ok {
			if _, num := key.(ast.Number); num {
				return nil, errFallback
			}
			return nil, nil
		}
		if i < 0 || i >= int64(len(x.pods)) {
			return nil, nil
		}
		return &x.pods[i], nil
	case *vset:
		if x.find(key) >= 0 {
			return key, nil
		}
		return nil, nil
	}
	return nil, nil
}

// materialize turns a pod into an object (for a scan over its keys).
func (m *machine) materialize(p *facts.Pod) *vobject {
	o := &vobject{k: make([]any, len(podKeys)), v: make([]any, len(podKeys))}
	for i, k := range podKeys {
		o.k[i] = k
		o.v[i] = m.podField(p, k)
	}
	o.reindex()
	return o
}

// tick checks every so many elements whether the evaluation should stop.
func (m *machine) tick() error {
	m.ticks++
	if m.ticks&1023 == 0 && m.ctx.Err() != nil {
		return errFallback
	}
	return nil
}

func (m *machine) scan(f []any, in *instr) (int, error) {
	src, key, val := in.scan[0], in.scan[1], in.scan[2]
	body := in.blocks[0]
	// each runs the body for one element: done to go on, or labels left.
	each := func(k, v any) (int, error) {
		if err := m.tick(); err != nil {
			return 0, err
		}
		f[key], f[val] = k, v
		r, err := m.exec(f, body)
		if err != nil || r == returned {
			return r, err
		}
		if r <= 0 {
			return done, nil // next element
		}
		return r, nil
	}
	var r int
	var err error
	src0 := f[src]
	if in, ok := src0.(*vinput); ok {
		o, err := in.object()
		if err != nil {
			return 0, errFallback
		}
		src0 = o
	}
	switch x := src0.(type) {
	case *varray:
		for i, v := range x.e {
			if r, err = each(intValue(int64(i)), v); err != nil || r != done {
				break
			}
		}
	case *vpods:
		for i := range x.pods {
			if r, err = each(intValue(int64(i)), &x.pods[i]); err != nil || r != done {
				break
			}
		}
	case *vobject:
		for _, i := range x.sortedKeys() {
			if r, err = each(x.k[i], x.v[i]); err != nil || r != done {
				break
			}
		}
	case *facts.Pod:
		o := m.materialize(x)
		for _, i := range o.sortedKeys() {
			if r, err = each(o.k[i], o.v[i]); err != nil || r != done {
				break
			}
		}
	case *vset:
		for _, i := range x.sortedElems() {
			if r, err = each(x.e[i], x.e[i]); err != nil || r != done {
				break
			}
		}
	default:
		return done, nil
	}
	if err != nil || r == returned {
		return r, err
	}
	if r == 1 {
		return done, nil // the scan's own end
	}
	if r > 1 {
		return r - 2, nil
	}
	return done, nil
}
