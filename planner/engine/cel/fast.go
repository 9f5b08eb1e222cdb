package cel

import (
	"fmt"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
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
func (t *translator) refName(e celast.Expr) string { return refName(t.ast.ReferenceMap(), e) }

// refName: the name e refers to (an input, a variable: a qualified name),
// or an identifier's own name, which may be a comprehension variable
// shadowing an input (taken for it: every caller over-approximates).
func refName(refs map[int64]*celast.ReferenceInfo, e celast.Expr) string {
	if r := refs[e.ID()]; r != nil && len(r.OverloadIDs) == 0 {
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
		name := refName(refs, x)
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
