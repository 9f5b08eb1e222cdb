package rego

import (
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
)

// The VM runs a query planned to OPA's IR (plan.go) over the facts, without
// converting the pods to OPA values: it is the engine's fast path. It
// handles what the shipped policies need and stops (errFallback) at anything
// else it meets while evaluating; the engine then evaluates the workload with
// OPA's interpreter, which gives the canonical answer or error. Constructs it
// cannot run at all are found when the bundle is compiled (unsupported), and
// the bundle is then interpreted throughout.
//
// Control flow follows OPA's Wasm compiler (internal/compiler/wasm), the
// reference semantics of the IR: every block is a label; an undefined
// statement leaves the innermost label; BreakStmt{n} leaves n+1 labels; a
// scan's body is a loop whose label 0 is "next element" and label 1 "end of
// the scan".

// errFallback: the VM met something it leaves to the interpreter.
var errFallback = errors.New("rego VM: fall back to the interpreter")

// program is one planned query, ready to run.
type program struct {
	funcs   []*vfunc
	plan    []block
	nlocals int // the plan's
}

type vfunc struct {
	name    string
	params  []int
	ret     int
	blocks  []block
	nlocals int
	memo    bool // a function of input and data alone: computed once per evaluation
	id      int
}

type block []instr

type opcode uint8

const (
	opAssignVar opcode = iota
	opAssignVarOnce
	opAssignInt
	opBlock
	opBreak
	opCall
	opBuiltin
	opDot
	opLen
	opScan
	opNot
	opEqual
	opNotEqual
	opIsArray
	opIsObject
	opIsSet
	opIsDefined
	opIsUndefined
	opMakeNull
	opMakeNumber // and every other constant (see constant)
	opMakeArray
	opMakeObject
	opMakeSet
	opArrayAppend
	opObjectInsert
	opObjectInsertOnce
	opSetAdd
	opResetLocal
	opReturn
	opResultSetAdd
	opNop
)

// operand: a local, or a constant when local < 0.
type operand struct {
	local int
	k     any
}

type instr struct {
	op     opcode
	a, b   operand
	target int
	n      int64
	k      any // a constant (MakeNumberRef, AssignInt)
	blocks []block
	fn     *vfunc
	bi     *vbuiltin
	args   []operand
	scan   [3]int // source, key, value
}

// unsupported is a construct the VM cannot run, found at compile time.
type unsupported struct {
	rule, where, what string
}

func (u *unsupported) Error() string {
	return fmt.Sprintf("the policy is interpreted, not compiled (same answers, slower), because of rule %s (%s): %s", u.rule, u.where, u.what)
}

type compiler struct {
	// mutations: how many statements of the function being compiled
	// mutate each local (append, insert, add); copies: the locals each
	// local is assigned to.
	mutations map[ir.Local]int
	copies    map[ir.Local][]ir.Local
	policy    *ir.Policy
	funcs     map[string]*vfunc
	strings   []any
	cur       string // the function being compiled, for notes
	maxLoc    int
}

// compileProgram compiles a planned query; an *unsupported error names the
// first construct it cannot run.
func compileProgram(p *ir.Policy) (*program, error) {
	c := &compiler{policy: p, funcs: map[string]*vfunc{}}
	for _, s := range p.Static.Strings {
		c.strings = append(c.strings, s.Value)
	}
	prog := &program{}
	if p.Funcs != nil {
		for i, f := range p.Funcs.Funcs {
			vf := &vfunc{name: f.Name, ret: int(f.Return), memo: len(f.Params) == 2, id: i}
			for _, l := range f.Params {
				vf.params = append(vf.params, int(l))
			}
			c.funcs[f.Name] = vf
			prog.funcs = append(prog.funcs, vf)
		}
		for _, f := range p.Funcs.Funcs {
			vf := c.funcs[f.Name]
			c.cur, c.maxLoc = f.Name, int(f.Return)
			c.scanMutations(f.Blocks)
			for _, l := range f.Params {
				c.maxLoc = max(c.maxLoc, int(l))
			}
			for _, b := range f.Blocks {
				cb, err := c.block(b)
				if err != nil {
					return nil, err
				}
				vf.blocks = append(vf.blocks, cb)
			}
			vf.nlocals = c.maxLoc + 1
		}
	}
	if p.Plans == nil || len(p.Plans.Plans) != 1 {
		return nil, &unsupported{rule: "query", what: "not exactly one plan"}
	}
	c.cur, c.maxLoc = "query", 1
	c.scanMutations(p.Plans.Plans[0].Blocks)
	for _, b := range p.Plans.Plans[0].Blocks {
		cb, err := c.block(b)
		if err != nil {
			return nil, err
		}
		prog.plan = append(prog.plan, cb)
	}
	prog.nlocals = c.maxLoc + 1
	return prog, nil
}

func (c *compiler) local(l ir.Local) int {
	c.maxLoc = max(c.maxLoc, int(l))
	return int(l)
}

func (c *compiler) operand(o ir.Operand) operand {
	switch v := o.Value.(type) {
	case ir.Local:
		return operand{local: c.local(v)}
	case ir.Bool:
		return operand{local: -1, k: bool(v)}
	case ir.StringIndex:
		return operand{local: -1, k: c.strings[v]}
	}
	panic(fmt.Sprintf("rego VM: operand %T", o.Value))
}

func (c *compiler) unsupported(loc *ir.Location, what string) error {
	rule := strings.TrimPrefix(c.cur, "g0.")
	if i := strings.Index(rule, "data."); i >= 0 {
		rule = rule[i:]
	}
	where := "?"
	if loc != nil && loc.File >= 0 && loc.File < len(c.policy.Static.Files) {
		where = fmt.Sprintf("%s:%d", c.policy.Static.Files[loc.File].Value, loc.Row)
	}
	return &unsupported{rule: rule, where: where, what: what}
}

func (c *compiler) block(b *ir.Block) (block, error) {
	out := make(block, 0, len(b.Stmts))
	for i := 0; i < len(b.Stmts); i++ {
		s := b.Stmts[i]
		if in, n, ok := c.constant(b.Stmts[i:]); ok {
			out = append(out, in)
			i += n - 1
			continue
		}
		in, err := c.stmt(s)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

func (c *compiler) blocks(bs ...*ir.Block) ([]block, error) {
	out := make([]block, len(bs))
	for i, b := range bs {
		cb, err := c.block(b)
		if err != nil {
			return nil, err
		}
		out[i] = cb
	}
	return out, nil
}

func (c *compiler) stmt(s ir.Stmt) (instr, error) {
	var err error
	switch s := s.(type) {
	case *ir.AssignVarStmt:
		return instr{op: opAssignVar, a: c.operand(s.Source), target: c.local(s.Target)}, nil
	case *ir.AssignVarOnceStmt:
		return instr{op: opAssignVarOnce, a: c.operand(s.Source), target: c.local(s.Target)}, nil
	case *ir.AssignIntStmt:
		return instr{op: opAssignInt, k: intValue(s.Value), target: c.local(s.Target)}, nil
	case *ir.BlockStmt:
		in := instr{op: opBlock}
		in.blocks, err = c.blocks(s.Blocks...)
		return in, err
	case *ir.BreakStmt:
		return instr{op: opBreak, n: int64(s.Index)}, nil
	case *ir.CallStmt:
		args := make([]operand, len(s.Args))
		for i, a := range s.Args {
			args[i] = c.operand(a)
		}
		in := instr{args: args, target: c.local(s.Result)}
		if f, ok := c.funcs[s.Func]; ok {
			in.op, in.fn = opCall, f
			return in, nil
		}
		bi, why := lookupBuiltin(s.Func)
		if bi == nil {
			return in, c.unsupported(s.GetLocation(), why)
		}
		in.op, in.bi = opBuiltin, bi
		return in, nil
	case *ir.DotStmt:
		in := instr{op: opDot, a: c.operand(s.Source), b: c.operand(s.Key), target: c.local(s.Target)}
		if k, ok := in.b.k.(string); ok && in.b.local < 0 {
			in.n = int64(podFieldIDs[k]) // a pod's field read without a lookup by name
		}
		return in, nil
	case *ir.LenStmt:
		return instr{op: opLen, a: c.operand(s.Source), target: c.local(s.Target)}, nil
	case *ir.ScanStmt:
		in := instr{op: opScan, scan: [3]int{c.local(s.Source), c.local(s.Key), c.local(s.Value)}}
		in.blocks, err = c.blocks(s.Block)
		return in, err
	case *ir.NotStmt:
		in := instr{op: opNot}
		in.blocks, err = c.blocks(s.Block)
		return in, err
	case *ir.EqualStmt:
		return instr{op: opEqual, a: c.operand(s.A), b: c.operand(s.B)}, nil
	case *ir.NotEqualStmt:
		return instr{op: opNotEqual, a: c.operand(s.A), b: c.operand(s.B)}, nil
	case *ir.IsArrayStmt:
		return instr{op: opIsArray, a: c.operand(s.Source)}, nil
	case *ir.IsObjectStmt:
		return instr{op: opIsObject, a: c.operand(s.Source)}, nil
	case *ir.IsSetStmt:
		return instr{op: opIsSet, a: c.operand(s.Source)}, nil
	case *ir.IsDefinedStmt:
		return instr{op: opIsDefined, a: operand{local: c.local(s.Source)}}, nil
	case *ir.IsUndefinedStmt:
		return instr{op: opIsUndefined, a: operand{local: c.local(s.Source)}}, nil
	case *ir.MakeNullStmt:
		return instr{op: opMakeNull, target: c.local(s.Target)}, nil
	case *ir.MakeNumberIntStmt:
		return instr{op: opMakeNumber, k: intValue(s.Value), target: c.local(s.Target)}, nil
	case *ir.MakeNumberRefStmt:
		return instr{op: opMakeNumber, k: numberValue(ast.Number(c.policy.Static.Strings[s.Index].Value)), target: c.local(s.Target)}, nil
	case *ir.MakeArrayStmt:
		return instr{op: opMakeArray, n: int64(s.Capacity), target: c.local(s.Target)}, nil
	case *ir.MakeObjectStmt:
		return instr{op: opMakeObject, target: c.local(s.Target)}, nil
	case *ir.MakeSetStmt:
		return instr{op: opMakeSet, target: c.local(s.Target)}, nil
	case *ir.ArrayAppendStmt:
		return instr{op: opArrayAppend, a: c.operand(s.Value), target: c.local(s.Array)}, nil
	case *ir.ObjectInsertStmt:
		return instr{op: opObjectInsert, a: c.operand(s.Key), b: c.operand(s.Value), target: c.local(s.Object)}, nil
	case *ir.ObjectInsertOnceStmt:
		return instr{op: opObjectInsertOnce, a: c.operand(s.Key), b: c.operand(s.Value), target: c.local(s.Object)}, nil
	case *ir.SetAddStmt:
		return instr{op: opSetAdd, a: c.operand(s.Value), target: c.local(s.Set)}, nil
	case *ir.ResetLocalStmt:
		return instr{op: opResetLocal, target: c.local(s.Target)}, nil
	case *ir.ReturnLocalStmt:
		return instr{op: opReturn, a: operand{local: c.local(s.Source)}}, nil
	case *ir.ResultSetAddStmt:
		return instr{op: opResultSetAdd, a: operand{local: c.local(s.Value)}}, nil
	case *ir.NopStmt:
		return instr{op: opNop}, nil
	case *ir.WithStmt:
		return instr{}, c.unsupported(s.GetLocation(), "a with statement")
	case *ir.CallDynamicStmt:
		return instr{}, c.unsupported(s.GetLocation(), "a rule reference with a variable path")
	case *ir.ObjectMergeStmt:
		return instr{}, c.unsupported(s.GetLocation(), "a package read as a whole document (an object merge)")
	}
	return instr{}, c.unsupported(s.GetLocation(), fmt.Sprintf("IR statement %T", s))
}

// scanMutations records, for the constant folding of constant, which locals
// the blocks mutate and copy.
func (c *compiler) scanMutations(bs []*ir.Block) {
	c.mutations, c.copies = map[ir.Local]int{}, map[ir.Local][]ir.Local{}
	var walk func(bs []*ir.Block)
	walk = func(bs []*ir.Block) {
		for _, b := range bs {
			for _, s := range b.Stmts {
				switch s := s.(type) {
				case *ir.ArrayAppendStmt:
					c.mutations[s.Array]++
				case *ir.ObjectInsertStmt:
					c.mutations[s.Object]++
				case *ir.ObjectInsertOnceStmt:
					c.mutations[s.Object]++
				case *ir.SetAddStmt:
					c.mutations[s.Set]++
				case *ir.ObjectMergeStmt:
					c.mutations[s.A]++
					c.mutations[s.B]++
				case *ir.AssignVarStmt:
					if l, ok := s.Source.Value.(ir.Local); ok {
						c.copies[l] = append(c.copies[l], s.Target)
					}
				case *ir.AssignVarOnceStmt:
					if l, ok := s.Source.Value.(ir.Local); ok {
						c.copies[l] = append(c.copies[l], s.Target)
					}
				case *ir.BlockStmt:
					walk(s.Blocks)
				case *ir.ScanStmt:
					walk([]*ir.Block{s.Block})
				case *ir.NotStmt:
					walk([]*ir.Block{s.Block})
				case *ir.WithStmt:
					walk([]*ir.Block{s.Block})
				}
			}
		}
	}
	walk(bs)
}

// mutatedElsewhere: l, or a local it is copied to, is mutated by more than
// the n statements that build it.
func (c *compiler) mutatedElsewhere(l ir.Local, n int, seen map[ir.Local]bool) bool {
	if seen[l] {
		return false
	}
	seen[l] = true
	if c.mutations[l] > n {
		return true
	}
	for _, u := range c.copies[l] {
		if c.mutatedElsewhere(u, 0, seen) {
			return true
		}
	}
	return false
}

// constant folds a collection built of constants alone ({"in": true},
// [0]) that nothing mutates afterwards into one value made at compile time
// and shared by every evaluation: it is never written again (its sorted
// order and index are made here), so sharing it across goroutines is safe.
// n: the statements it replaces.
func (c *compiler) constant(stmts []ir.Stmt) (instr, int, bool) {
	var t ir.Local
	var v any
	switch s := stmts[0].(type) {
	case *ir.MakeObjectStmt:
		t, v = s.Target, &vobject{}
	case *ir.MakeArrayStmt:
		t, v = s.Target, &varray{}
	case *ir.MakeSetStmt:
		t, v = s.Target, &vset{}
	default:
		return instr{}, 0, false
	}
	constOp := func(o ir.Operand) (any, bool) {
		switch x := o.Value.(type) {
		case ir.Bool:
			return bool(x), true
		case ir.StringIndex:
			return c.strings[x], true
		}
		return nil, false
	}
	n := 1
loop:
	for ; n < len(stmts); n++ {
		switch s := stmts[n].(type) {
		case *ir.ObjectInsertStmt, *ir.ObjectInsertOnceStmt:
			var key, val ir.Operand
			var obj ir.Local
			once := false
			if ins, ok := s.(*ir.ObjectInsertStmt); ok {
				key, val, obj = ins.Key, ins.Value, ins.Object
			} else {
				ins := s.(*ir.ObjectInsertOnceStmt)
				key, val, obj, once = ins.Key, ins.Value, ins.Object, true
			}
			o, isObj := v.(*vobject)
			k, ok1 := constOp(key)
			x, ok2 := constOp(val)
			if obj != t || !isObj || !ok1 || !ok2 {
				break loop
			}
			if cur := o.get(k); once && cur != nil && !equal(cur, x) {
				return instr{}, 0, false // a conflict: at run time
			}
			o.insert(k, x)
		case *ir.ArrayAppendStmt:
			a, isArr := v.(*varray)
			x, ok := constOp(s.Value)
			if s.Array != t || !isArr || !ok {
				break loop
			}
			a.e = append(a.e, x)
		case *ir.SetAddStmt:
			set, isSet := v.(*vset)
			x, ok := constOp(s.Value)
			if s.Set != t || !isSet || !ok {
				break loop
			}
			set.add(x)
		default:
			break loop
		}
	}
	if c.mutatedElsewhere(t, n-1, map[ir.Local]bool{}) {
		return instr{}, 0, false
	}
	switch x := v.(type) {
	case *vobject:
		x.sortedKeys()
	case *vset:
		x.sortedElems()
	}
	return instr{op: opMakeNumber, k: v, target: c.local(t)}, n, true
}
