package cel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

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
	_ engine.Noter     = (*Engine)(nil)
)

// Options tune the engine.
type Options struct {
	// CostLimit per expression evaluation; 0 means DefaultCostLimit.
	CostLimit uint64
	// Timeout bounds each Decide call (one workload); zero or negative:
	// engine.DefaultTimeout. Evaluation stops with an engine.TimeoutError.
	Timeout time.Duration

	// celOnly: no fast path (fast.go); every expression runs on cel-go.
	// The parity tests compare the two.
	celOnly bool
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
	if e.defaults, err = compilePolicy(base, defs[0], o.CostLimit, !o.celOnly); err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "%s\x00%s\x00", "policies/cel/defaults.yaml", policies.CELDefaults)
	for _, p := range ps {
		c, err := compilePolicy(base, p, o.CostLimit, !o.celOnly)
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

// Notes says which per-pod expressions of the user's policies the fast path
// leaves to cel-go (the answers are the same, only slower). The default
// strategy's are not listed: its eligibility is decided once per revision.
func (e *Engine) Notes() []string {
	var out []string
	for _, c := range e.policies {
		out = append(out, c.notes...)
	}
	return out
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
// order, pacing, node preparation and analysis come from the first matching
// policy (by name) that defines them, else from the default strategy.
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
		acts[i] = newActivation(c, b, len(r.Pods))
	}
	for _, a := range acts[1:] {
		a.defaults = acts[0]
	}
	orderBy, pacingBy, prepBy, analysisBy := acts[0], acts[0], acts[0], acts[0]
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
		if a.c.analysis != nil && analysisBy == acts[0] {
			analysisBy = a
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
		bs, err := a.cachedBudgets()
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
	if err := analysisBy.decideAnalysis(d); err != nil {
		return nil, fmt.Errorf("%w for %s", err, id)
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
		// One answer (the usual case) is kept as it is: no copy per pod.
		if ok {
			inPlace = join(inPlace, reasons)
		} else {
			anyRecreate = true
			recreate = join(recreate, reasons)
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

// join appends b to a; with a nil it is b itself (whose len == cap, so a
// later append copies).
func join(a, b []string) []string {
	if a == nil {
		return slices.Clip(b)
	}
	return append(a, b...)
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

// canonical renders a policy for the digest (its decoded form, so that
// comments and formatting do not change the digest).
func canonical(p *RolloutPolicy) string {
	b, _ := json.Marshal(p.Spec) // maps marshal in key order
	return string(b)
}
