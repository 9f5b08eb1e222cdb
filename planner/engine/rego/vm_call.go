package rego

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ir"
)

// machine is one evaluation.
type machine struct {
	ctx     context.Context
	stack   []any
	sp      int
	memo    []any
	results []any
	changes map[changesKey]*varray
	conv    *converter // for builtins OPA evaluates: pods as inputValue builds them
	args    []any      // a builtin's arguments (builtins do not nest)
	ticks   int
}

// run evaluates prog over input; the answer is the result set's elements.
func run(ctx context.Context, prog *program, input any) ([]any, error) {
	// A small first stack: a workload of a few pods is the gate's common
	// case; deeper calls get new segments (call).
	m := &machine{ctx: ctx, memo: make([]any, len(prog.funcs)), changes: map[changesKey]*varray{}, stack: make([]any, 256)}
	frame := make([]any, max(prog.nlocals, 2))
	frame[ir.Input] = input
	frame[ir.Data] = &vobject{}
	for _, b := range prog.plan {
		if _, err := m.exec(frame, b); err != nil {
			return nil, err
		}
	}
	return m.results, nil
}

// call runs a function of the policy; nil: undefined.
func (m *machine) call(f []any, in *instr) (any, error) {
	fn := in.fn
	if fn.memo {
		if v := m.memo[fn.id]; v != nil {
			return v, nil
		}
	}
	base := m.sp
	if base+fn.nlocals > len(m.stack) {
		// A new stack segment: frames below keep the old one.
		old, oldSP := m.stack, m.sp
		m.stack, m.sp = make([]any, max(2*len(old), fn.nlocals+1024)), 0
		v, err := m.call(f, in)
		m.stack, m.sp = old, oldSP
		return v, err
	}
	frame := m.stack[base : base+fn.nlocals : base+fn.nlocals]
	clear(frame)
	for i, p := range fn.params {
		frame[p] = m.read(f, in.args[i])
	}
	m.sp += fn.nlocals
	var err error
	for _, b := range fn.blocks {
		var r int
		if r, err = m.exec(frame, b); err != nil || r == returned {
			break
		}
	}
	v := frame[fn.ret]
	m.sp = base
	if err != nil {
		return nil, err
	}
	if fn.memo && v != nil {
		m.memo[fn.id] = v
	}
	return v, nil
}
