package cel

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// The answers of a policy: each decision point's programs evaluated
// through the activation and decoded into the contract's types
// (engine.Decisions), with errors naming the policy and the field. The
// Rego engine's counterpart is rego/decode.go; the rules both apply live
// in the contract (engine.ValidateBudget, engine.ValidNodePreparation).
// The values differ (CEL's typed ints and doubles, Rego's JSON numbers),
// so the decoding itself is each engine's.

// boolean evaluates p, which must answer true or false.
func (a *activation) boolean(p *program) (bool, error) {
	if p.fast != nil {
		if v, ok := p.fast.b(a); ok {
			return v, nil
		}
	}
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
		// The pods of a revision share its reasons, as the native
		// engine's do: len == cap, so an append by a caller copies.
		if ans, ok := a.eligibilityMemo[key]; ok {
			return ans.inPlace, ans.reasons, nil
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
		reasons = slices.Clip(reasons)
		a.eligibilityMemo[key] = eligibilityAnswer{ok, reasons}
	}
	return ok, reasons, nil
}

// orderKey evaluates the first matching order variant (all variants are
// one expression, see compiler.order); list-valued keys are spliced in.
func (a *activation) orderKey() ([]any, error) {
	return a.orderKeyKept(true)
}

// orderKeyKept: with keep false, a key from the fast path is only valid
// until the next call (defaults.order, which its reader copies).
func (a *activation) orderKeyKept(keep bool) ([]any, error) {
	if f := a.c.orderAll.fast; f != nil {
		k, ok := f.key(a, a.keyScratch[:0])
		a.keyScratch = k[:0]
		if ok {
			if !keep {
				return k, nil
			}
			return a.keepKey(k), nil
		}
	}
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
