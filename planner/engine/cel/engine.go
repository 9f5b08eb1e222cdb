package cel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/policies"
)

// Engine evaluates RolloutPolicy documents over the default strategy in CEL
// (policies/cel/defaults.yaml). It is safe for concurrent use: programs are
// shared, activations are per call.
type Engine struct {
	defaults *compiled
	policies []*compiled
	digest   string
	// noClock: no budget reads a clock fact (budgetsIgnoreClock).
	noClock bool
	timeout time.Duration
	// warnings: see Warnings.
	warnings []string
}

var (
	_ engine.Engine    = (*Engine)(nil)
	_ engine.ClockFree = (*Engine)(nil)
)

// Options tune the engine.
type Options struct {
	// CostLimit per expression evaluation; 0 means DefaultCostLimit.
	CostLimit uint64
	// Timeout bounds each Decide call (one workload); zero or negative:
	// engine.DefaultTimeout. Evaluation stops with an engine.TimeoutError.
	Timeout time.Duration
}

// New compiles the default strategy and the given policies (from Load).
func New(ps []*RolloutPolicy, o Options) (*Engine, error) {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	base, err := baseEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	defs, err := Parse("policies/cel/defaults.yaml", []byte(policies.CELDefaults))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	e := &Engine{timeout: engine.EvalTimeout(o.Timeout)}
	if e.defaults, err = compilePolicy(base, defs[0], o.CostLimit); err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "%s\x00%s\x00", "policies/cel/defaults.yaml", policies.CELDefaults)
	for _, p := range ps {
		c, err := compilePolicy(base, p, o.CostLimit)
		if err != nil {
			return nil, err
		}
		e.policies = append(e.policies, c)
		fmt.Fprintf(h, "%s\x00%s\x00", p.Metadata.Name, canonical(p))
	}
	e.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	e.noClock = e.budgetsIgnoreClock()
	e.warnings = overrideWarnings(e.policies)
	return e, nil
}

// Name implements engine.Engine.
func (e *Engine) Name() string { return engine.CEL }

// Digest implements engine.Engine.
func (e *Engine) Digest() string { return e.digest }

func (c *compiled) matches(w *facts.Workload) bool {
	mc := c.policy.Spec.MatchConstraints
	if mc == nil {
		return true
	}
	if len(mc.Kinds) > 0 && !slices.Contains(mc.Kinds, w.Kind) {
		return false
	}
	if len(mc.Namespaces) > 0 && !slices.Contains(mc.Namespaces, w.Namespace) {
		return false
	}
	return c.selector.Matches(labels.Set(w.Labels))
}

func workloadID(r *facts.Rollout) string {
	return fmt.Sprintf("%s %s/%s", r.Workload.Kind, r.Workload.Namespace, r.Workload.Name)
}

// Decide implements engine.Engine. Composition (DESIGN: conservative): the
// default strategy and every matching policy answer; scope is the
// intersection, Recreate beats InPlace, budgets, halts and denials add up;
// order, pacing and node preparation come from the first matching policy
// (by name) that defines them, else from the default strategy.
func (e *Engine) Decide(parent context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	id := workloadID(r)
	ctx, cancel := context.WithTimeout(parent, e.timeout)
	defer cancel()
	// stopped reports a deadline or cancellation, checked between
	// evaluations; comprehensions check it too (interruptEvery).
	stopped := func() error {
		if !engine.Stopped(ctx) {
			return nil
		}
		if err := engine.Timeout(parent, ctx, id, e.timeout); err != nil {
			return err
		}
		if err := parent.Err(); err != nil {
			return fmt.Errorf("policy evaluation for %s stopped: %w", id, err)
		}
		return fmt.Errorf("policy evaluation for %s stopped: %w", id, context.DeadlineExceeded)
	}
	d, err := e.decide(ctx, r, id, stopped)
	if err != nil {
		// An interrupted expression fails with whatever error it was
		// wrapped in (or one its reader made of it): report the
		// timeout or the cancellation instead.
		if serr := stopped(); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	return d, nil
}

func (e *Engine) decide(ctx context.Context, r *facts.Rollout, id string, stopped func() error) (*engine.Decisions, error) {
	wv, err := workloadView(&r.Workload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	b := &bindings{workload: wv, rollout: r, featureGates: r.FeatureGates}
	if ctx.Done() != nil {
		// Only a context that can end needs the interruptible evaluation.
		b.ctx = ctx
	}
	if b.featureGates == nil {
		b.featureGates = map[string]bool{}
	}
	all := []*compiled{e.defaults}
	for _, c := range e.policies {
		if c.matches(&r.Workload) {
			all = append(all, c)
		}
	}
	acts := make([]*activation, len(all))
	for i, c := range all {
		acts[i] = newActivation(c, b)
	}
	for _, a := range acts[1:] {
		a.defaults = acts[0]
	}
	orderBy, pacingBy, prepBy := acts[0], acts[0], acts[0]
	for _, a := range acts[1:] {
		if a.c.orderAll != nil && orderBy == acts[0] {
			orderBy = a
		}
		if a.c.pacing != nil && pacingBy == acts[0] {
			pacingBy = a
		}
		if a.c.nodePreparation != nil && prepBy == acts[0] {
			prepBy = a
		}
	}

	d := &engine.Decisions{Pods: make([]engine.PodDecision, len(r.Pods)), Upstream: upstream(acts[1:], orderBy, pacingBy, acts[0])}
	done := ctx.Done()
	for i := range r.Pods {
		select {
		case <-done:
			return nil, stopped()
		default:
		}
		if i%1024 == 0 {
			// A context's timer may fire late: also look at the clock.
			if err := stopped(); err != nil {
				return nil, err
			}
		}
		p := &r.Pods[i]
		if p.Updated {
			continue
		}
		for _, a := range acts {
			a.setPod(p)
		}
		if err := decidePod(acts, orderBy, &d.Pods[i]); err != nil {
			return nil, fmt.Errorf("%w for pod %s of %s", err, p.Name, id)
		}
	}
	for _, a := range acts {
		a.setPod(nil)
	}
	if err := stopped(); err != nil {
		return nil, err
	}
	for _, a := range acts {
		bs, err := a.budgets()
		if err != nil {
			return nil, fmt.Errorf("%w for %s", err, id)
		}
		d.Budgets = append(d.Budgets, bs...)
	}
	d.Budgets = nonNilSlice(d.Budgets)
	if d.Pacing, err = pacingBy.str(pacingBy.c.pacing); err != nil {
		return nil, fmt.Errorf("%w for %s", err, id)
	}
	if d.Pacing != engine.PacingWave && d.Pacing != engine.PacingRolling {
		return nil, fmt.Errorf("%s: %s for %s: want \"wave\" or \"rolling\", got %q", pacingBy.c.policy.where(), pacingBy.c.pacing.field, id, d.Pacing)
	}
	if prepBy.c.nodePreparation == nil {
		return nil, fmt.Errorf("%s: spec.nodePreparation is not defined for %s", prepBy.c.policy.where(), id)
	}
	if d.NodePreparation, err = prepBy.str(prepBy.c.nodePreparation); err != nil {
		return nil, fmt.Errorf("%w for %s", err, id)
	}
	if !engine.ValidNodePreparation(d.NodePreparation) {
		return nil, fmt.Errorf("%s: %s for %s: want \"none\", \"cordon\" or \"drain\", got %q", prepBy.c.policy.where(), prepBy.c.nodePreparation.field, id, d.NodePreparation)
	}
	for _, a := range acts {
		if d.Halt, err = a.messages(a.c.halt, r.Pods, d.Halt); err != nil {
			return nil, fmt.Errorf("%w of %s", err, id)
		}
		if d.Deny, err = a.messages(a.c.deny, nil, d.Deny); err != nil {
			return nil, fmt.Errorf("%w of %s", err, id)
		}
	}
	if err := stopped(); err != nil {
		return nil, err
	}
	d.Halt, d.Deny = sortedSet(d.Halt), sortedSet(d.Deny)
	return d, nil
}

// upstream: the points no matching policy of the user's answers, left to
// the shipped default strategy (engine.Decisions.Upstream).
func upstream(own []*activation, orderBy, pacingBy, defaults *activation) engine.Point {
	p := engine.ControllerPoints
	if orderBy != defaults {
		p &^= engine.PointOrder
	}
	if pacingBy != defaults {
		p &^= engine.PointPacing
	}
	for _, a := range own {
		if a.c.scope != nil {
			p &^= engine.PointScope
		}
		if a.c.inPlace != nil {
			p &^= engine.PointEligibility
		}
		if len(a.c.budgets) > 0 {
			p &^= engine.PointBudgets
		}
	}
	return p
}

func decidePod(acts []*activation, orderBy *activation, pd *engine.PodDecision) error {
	pd.InScope = true
	for _, a := range acts {
		if a.c.scope == nil {
			continue
		}
		in, err := a.boolean(a.c.scope)
		if err != nil {
			return err
		}
		if !in && pd.InScope {
			pd.InScope = false
			if pd.HeldReason, err = a.str(a.c.scopeMsg); err != nil {
				return err
			}
			if pd.HeldReason == "" {
				return fmt.Errorf("%s: %s: a held pod needs a reason, got \"\"", a.c.policy.where(), a.c.scopeMsg.field)
			}
		}
	}
	var inPlace, recreate []string
	answered, anyRecreate := false, false
	for _, a := range acts {
		if a.c.inPlace == nil {
			continue
		}
		answered = true
		ok, reasons, err := a.eligibility()
		if err != nil {
			return err
		}
		if ok {
			inPlace = append(inPlace, reasons...)
		} else {
			anyRecreate = true
			recreate = append(recreate, reasons...)
		}
	}
	switch {
	case !answered:
		return fmt.Errorf("no policy answers eligibility")
	case anyRecreate:
		pd.Action, pd.Reasons = engine.Recreate, nonNil(recreate)
	default:
		pd.Action, pd.Reasons = engine.InPlace, nonNil(inPlace)
	}
	key, err := orderBy.orderKey()
	if err != nil {
		return err
	}
	pd.Order = key
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sortedSet(s []string) []string {
	if s == nil {
		return []string{}
	}
	sort.Strings(s)
	return slices.Compact(s)
}

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

func newActivation(c *compiled, b *bindings) *activation {
	return &activation{c: c, b: b, vars: make([]ref.Val, len(c.vars)), varGen: make([]int, len(c.vars)), gen: 1, defGen: -1}
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
	case "params":
		return a.c.policy.Spec.Params, true
	case "item":
		return a.item, a.hasItem
	case "defaults.order":
		if a.defaults == nil || a.pod == nil {
			return nil, false
		}
		if a.defGen != a.gen {
			k, err := a.defaults.orderKey()
			if err != nil {
				return types.WrapErr(err), true
			}
			a.defOrder, a.defGen = k, a.gen
		}
		return a.defOrder, true
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
	out, err := a.run(prg)
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
// program used it, BenchmarkDecideTimeout).
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

func (a *activation) boolean(p *program) (bool, error) {
	v, err := a.eval(p)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%s: %s: want true or false, got %s", a.c.policy.where(), p.field, describe(v))
	}
	return bool(b), nil
}

func (a *activation) str(p *program) (string, error) {
	v, err := a.eval(p)
	if err != nil {
		return "", err
	}
	s, ok := v.(types.String)
	if !ok {
		return "", fmt.Errorf("%s: %s: want a string, got %s", a.c.policy.where(), p.field, describe(v))
	}
	return string(s), nil
}

func (a *activation) integer(p *program) (int, error) {
	v, err := a.eval(p)
	if err != nil {
		return 0, err
	}
	n, ok := v.(types.Int)
	if !ok {
		return 0, fmt.Errorf("%s: %s: want a non-negative integer, got %s", a.c.policy.where(), p.field, describe(v))
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%s: %s: want a non-negative integer up to %d, got %d", a.c.policy.where(), p.field, math.MaxInt32, n)
	}
	return int(n), nil
}

func (a *activation) strings(p *program) ([]string, error) {
	v, err := a.eval(p)
	if err != nil {
		return nil, err
	}
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("%s: %s: want a list of strings, got %s", a.c.policy.where(), p.field, describe(v))
	}
	n := int(l.Size().(types.Int))
	out := make([]string, 0, n)
	for i := range n {
		s, ok := l.Get(types.Int(i)).(types.String)
		if !ok {
			return nil, fmt.Errorf("%s: %s: want a list of strings, got %s at index %d", a.c.policy.where(), p.field, describe(l.Get(types.Int(i))), i)
		}
		out = append(out, string(s))
	}
	return out, nil
}

type eligibilityAnswer struct {
	inPlace bool
	reasons []string
}

// eligibility answers once per revision and change list when the policy
// reads the pod only through its revision and changes (the default
// strategy does).
func (a *activation) eligibility() (bool, []string, error) {
	rev := a.pod.Revision
	memo := a.c.eligibilityByRevision && rev != ""
	key := memoKey{revision: rev}
	if cs := a.pod.Changes; len(cs) > 0 {
		key.first, key.n = &cs[0], len(cs)
	}
	if memo {
		if ans, ok := a.eligibilityMemo[key]; ok {
			return ans.inPlace, slices.Clone(ans.reasons), nil
		}
	}
	ok, err := a.boolean(a.c.inPlace)
	if err != nil {
		return false, nil, err
	}
	var reasons []string
	if a.c.reasons != nil {
		if reasons, err = a.strings(a.c.reasons); err != nil {
			return false, nil, err
		}
	}
	if memo {
		if a.eligibilityMemo == nil {
			a.eligibilityMemo = map[memoKey]eligibilityAnswer{}
		}
		a.eligibilityMemo[key] = eligibilityAnswer{ok, reasons}
	}
	return ok, reasons, nil
}

// orderKey evaluates the first matching order variant (all variants are
// one expression, see compiler.order); list-valued keys are spliced in.
func (a *activation) orderKey() ([]any, error) {
	v, err := a.eval(a.c.orderAll)
	if err != nil {
		return nil, err
	}
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("%s: spec.order: no variant applies", a.c.policy.where())
	}
	n := int(l.Size().(types.Int))
	key := make([]any, 0, n)
	for i := range n {
		if key, err = appendKey(key, l.Get(types.Int(i)), false); err != nil {
			return nil, fmt.Errorf("%s: spec.order: key %d: %w", a.c.policy.where(), i, err)
		}
	}
	return key, nil
}

// appendKey converts a key to the Go values the planner compares (the same
// as the Rego engine's: int64, float64 when not integral, string); false
// and true sort as 0 and 1.
func appendKey(key []any, v ref.Val, nested bool) ([]any, error) {
	switch x := v.(type) {
	case types.Int:
		return append(key, int64(x)), nil
	case types.Uint:
		return append(key, int64(x)), nil
	case types.Double:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("order key %v is out of range", f)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return append(key, int64(f)), nil
		}
		return append(key, f), nil
	case types.String:
		return append(key, string(x)), nil
	case types.Bool:
		if x {
			return append(key, int64(1)), nil
		}
		return append(key, int64(0)), nil
	case traits.Lister:
		if nested {
			return nil, fmt.Errorf("order keys nest lists at most one level deep")
		}
		n := int(x.Size().(types.Int))
		for i := range n {
			var err error
			if key, err = appendKey(key, x.Get(types.Int(i)), true); err != nil {
				return nil, err
			}
		}
		return key, nil
	}
	return nil, fmt.Errorf("order key of type %s: want int, double, string or bool", v.Type())
}

func (a *activation) budgets() ([]engine.Budget, error) {
	var out []engine.Budget
	for _, bp := range a.c.budgets {
		items := []any{nil}
		if bp.forEach != nil {
			v, err := a.eval(bp.forEach)
			if err != nil {
				return nil, err
			}
			l, ok := v.(traits.Lister)
			if !ok {
				return nil, fmt.Errorf("%s: %s: want a list, got %s", a.c.policy.where(), bp.forEach.field, describe(v))
			}
			n := int(l.Size().(types.Int))
			items = make([]any, n)
			for i := range n {
				items[i] = l.Get(types.Int(i))
			}
		}
		for _, it := range items {
			a.item, a.hasItem = it, bp.forEach != nil
			b, ok, err := a.budget(bp)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, b)
			}
		}
		a.item, a.hasItem = nil, false
	}
	return out, nil
}

func (a *activation) budget(bp budgetProgram) (engine.Budget, bool, error) {
	b := engine.Budget{Name: bp.spec.Name}
	if bp.when != nil {
		ok, err := a.boolean(bp.when)
		if err != nil || !ok {
			return b, false, err
		}
	}
	var err error
	if bp.name != nil {
		if b.Name, err = a.str(bp.name); err != nil {
			return b, false, err
		}
	}
	for _, f := range []struct {
		p   *program
		out **int
	}{{bp.maxUnavailable, &b.MaxUnavailable}, {bp.maxSurge, &b.MaxSurge}, {bp.maxGroups, &b.MaxGroups}} {
		if f.p == nil {
			continue
		}
		n, err := a.integer(f.p)
		if err != nil {
			return b, false, err
		}
		*f.out = &n
	}
	for _, f := range []struct {
		p   *program
		out *string
	}{{bp.groupBy, &b.GroupBy}, {bp.pdb, &b.PDB}, {bp.source, &b.Source}} {
		if f.p == nil {
			continue
		}
		if *f.out, err = a.str(f.p); err != nil {
			return b, false, err
		}
	}
	if bp.advise != nil {
		if b.Advisory, err = a.boolean(bp.advise); err != nil {
			return b, false, err
		}
	}
	if err := engine.ValidateBudget(b); err != nil {
		return b, false, fmt.Errorf("%s: %s: %w", a.c.policy.where(), bp.field, err)
	}
	return b, true, nil
}

// messages evaluates halt or deny rules; a rule that reads pod runs for
// every pod.
func (a *activation) messages(rules []messageProgram, pods []facts.Pod, out []string) ([]string, error) {
	for _, m := range rules {
		if !m.when.perPod && !m.msg.perPod {
			a.setPod(nil)
			msg, ok, err := a.message(m)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, msg)
			}
			continue
		}
		for i := range pods {
			a.setPod(&pods[i])
			msg, ok, err := a.message(m)
			if err != nil {
				return nil, fmt.Errorf("%w for pod %s", err, pods[i].Name)
			}
			if ok {
				out = append(out, msg)
			}
		}
		a.setPod(nil)
	}
	return out, nil
}

func (a *activation) message(m messageProgram) (string, bool, error) {
	ok, err := a.boolean(m.when)
	if err != nil || !ok {
		return "", false, err
	}
	msg, err := a.str(m.msg)
	return msg, err == nil, err
}

// canonical renders a policy for the digest (its decoded form, so that
// comments and formatting do not change the digest).
func canonical(p *RolloutPolicy) string {
	b, _ := json.Marshal(p.Spec) // maps marshal in key order
	return string(b)
}

// describe names a value in policy terms: scalars as written, lists and
// maps by kind.
func describe(v ref.Val) string {
	switch x := v.(type) {
	case types.String:
		q := strconv.Quote(string(x))
		if len(q) > 60 {
			q = q[:57] + `..."`
		}
		return q
	case types.Int, types.Uint, types.Double, types.Bool:
		return fmt.Sprint(x.Value())
	case types.Null:
		return "null"
	case traits.Lister:
		return "a list"
	case traits.Mapper:
		return "a map"
	}
	return "a value of type " + v.Type().TypeName()
}
