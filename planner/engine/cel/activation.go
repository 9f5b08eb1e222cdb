package cel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/rollplan/rollplan/planner/facts"
)

// bindings are the workload-level names, shared by a call's activations.
type bindings struct {
	workload     *Workload
	rollout      *facts.Rollout
	featureGates map[string]bool
	// ctx: the call's context when it can end (then every evaluation
	// watches it), else nil.
	ctx context.Context
}

// activation resolves names for one policy during one Decide call: it is
// reused for every pod (no per-pod allocation), and variables are computed
// on first use (per workload, or per pod for those that read pod).
type activation struct {
	c        *compiled
	b        *bindings
	defaults *activation // the default strategy, for defaults.order

	pod      *facts.Pod
	gen      int // bumped per pod: per-pod variables cached at an older gen are stale
	item     any
	hasItem  bool
	vars     []ref.Val
	varGen   []int
	defOrder []any
	defGen   int

	eligibilityMemo map[memoKey]eligibilityAnswer

	// keyScratch and keyBlock: the fast path builds an order key in the
	// scratch slice and keeps it in the block, shared by many pods' keys
	// (each a full slice: an append by a caller cannot spill into the next).
	keyScratch []any
	keyBlock   []any
	pods       int
	slots      []fastSlot
	boxes      []boxedString
	change     *facts.Change // the element of a translated all or exists
}

// memoKey: a revision name and a change list (its backing array and
// length). facts.Build gives the pods of a revision one shared list, except
// pods whose revision is not in the snapshot: their changes are their own
// and may differ from pod to pod, so the memo is per list.
type memoKey struct {
	revision string
	first    *facts.Change
	n        int
}

func newActivation(c *compiled, b *bindings, pods int) *activation {
	return &activation{c: c, b: b, vars: make([]ref.Val, len(c.vars)), varGen: make([]int, len(c.vars)), gen: 1, defGen: -1, pods: pods, slots: make([]fastSlot, c.slots), boxes: make([]boxedString, c.boxes)}
}

// keepKey copies a key built in keyScratch into the block.
func (a *activation) keepKey(k []any) []any {
	n := len(k)
	if len(a.keyBlock) < n {
		a.keyBlock = make([]any, n*min(max(a.pods, 1), 4096))
	}
	out := a.keyBlock[:n:n]
	a.keyBlock = a.keyBlock[n:]
	copy(out, k)
	return out
}

// defaultOrder: the default strategy's order key for the pod, computed
// once per pod.
func (a *activation) defaultOrder() ([]any, error) {
	if a.defGen != a.gen {
		k, err := a.defaults.orderKeyKept(false)
		if err != nil {
			return nil, err
		}
		a.defOrder, a.defGen = k, a.gen
	}
	return a.defOrder, nil
}

func (a *activation) setPod(p *facts.Pod) {
	a.pod = p
	a.gen++
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "pod":
		if a.pod == nil {
			return nil, false
		}
		return a.pod, true
	case "workload":
		return a.b.workload, true
	case "pods":
		return len(a.b.rollout.Pods), true
	case "pdbs":
		return nonNilSlice(a.b.rollout.PDBs), true
	case "revisions":
		return nonNilSlice(a.b.rollout.Revisions), true
	case "nodes":
		return nonNilSlice(a.b.rollout.Nodes), true
	case "replicaSets":
		return nonNilSlice(a.b.rollout.ReplicaSets), true
	case "featureGates":
		return a.b.featureGates, true
	case "kubernetesVersion":
		return a.b.rollout.KubernetesVersion, true
	case "now":
		return a.b.rollout.Now, true
	case "analysis":
		return &a.b.rollout.Analysis, true
	case "params":
		return a.c.policy.Spec.Params, true
	case "item":
		return a.item, a.hasItem
	case "defaults.order":
		if a.defaults == nil || a.pod == nil {
			return nil, false
		}
		k, err := a.defaultOrder()
		if err != nil {
			return types.WrapErr(err), true
		}
		return k, true
	}
	if v, ok := strings.CutPrefix(name, "variables."); ok {
		i, ok := a.c.varIndex[v]
		if !ok {
			return nil, false
		}
		return a.variable(i), true
	}
	return nil, false
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) variable(i int) ref.Val {
	prg := a.c.vars[i]
	want := 0 // workload-level: computed once
	if prg.perPod {
		want = a.gen
	}
	if a.vars[i] != nil && a.varGen[i] == want {
		return a.vars[i]
	}
	if prg.nowOnly {
		if v := a.c.globals.get(a.b.rollout.Now, i); v != nil {
			a.vars[i], a.varGen[i] = v, want
			return v
		}
	}
	out, err := a.run(prg)
	if err == nil && prg.nowOnly {
		a.c.globals.put(a.b.rollout.Now, i, len(a.c.vars), out)
	}
	if err != nil {
		out = types.WrapErr(a.evalErr(prg, err))
	}
	a.vars[i], a.varGen[i] = out, want
	return out
}

// run evaluates p; under a context that can end, its comprehensions
// check it every interruptEvery iterations. Programs without one run
// without the context: it could not stop them, and ContextEval allocates
// on every call (a third more CPU for the default strategy when every
// program used it, measured with BenchmarkDecideTimeout in dd9efe9).
func (a *activation) run(p *program) (ref.Val, error) {
	if a.b.ctx != nil && p.loops {
		out, _, err := p.prg.ContextEval(a.b.ctx, a)
		return out, err
	}
	out, _, err := p.prg.Eval(a)
	return out, err
}

func (a *activation) eval(p *program) (ref.Val, error) {
	out, err := a.run(p)
	if err != nil {
		return nil, a.evalErr(p, err)
	}
	return out, nil
}

// evalErr names the policy and the field of an expression that failed.
// When the failure comes from a variable it read, the variable's error
// already names them: it is kept, with p as its reader.
func (a *activation) evalErr(p *program, err error) error {
	var inner *evalError
	if errors.As(err, &inner) {
		e := *inner // a cached variable's error may have other readers
		e.readBy = p.field
		if w := a.c.policy.where(); w != e.where {
			e.readBy += " of " + w
		}
		return &e
	}
	return &evalError{where: a.c.policy.where(), field: p.field, limit: a.c.costLimit, err: err}
}

// evalError: an expression that did not evaluate, named once however many
// variables it went through.
type evalError struct {
	where, field string
	// readBy: the expression that read the failing variable, if any.
	readBy string
	limit  uint64
	err    error
}

func (e *evalError) Error() string {
	field := e.field
	if e.readBy != "" {
		field += ", read by " + e.readBy
	}
	var ce interpreter.EvalCancelledError
	if errors.As(e.err, &ce) && ce.Cause == interpreter.CostLimitExceeded {
		// The limit is per call (docs/policy-contract.md): splitting the
		// work into variables is a way out, not only simplifying.
		return fmt.Sprintf("%s: %s: CEL cost limit exceeded: one evaluation of this expression costs more than the per-call limit of %s: "+
			"simplify it (fewer elements, fewer nested comprehensions), "+
			"or move work into variables (each variable is a call of its own, and one that does not read pod is evaluated once per workload)",
			e.where, field, thousands(e.limit))
	}
	return fmt.Sprintf("%s: %s: %v", e.where, field, e.err)
}

func (e *evalError) Unwrap() error { return e.err }

// thousands writes n with comma separators, as the contract writes the limit.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
