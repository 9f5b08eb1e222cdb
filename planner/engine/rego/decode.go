package rego

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/engine"
)

// budgetShape is a budget as the contract writes it, for messages.
const budgetShape = "{name, maxUnavailable?, maxSurge?, groupBy?, maxGroups?, pdb?, advisory?, source?}"

// decodeBudgets reads the budgets answer (a list, or a set, of budget
// objects) and validates each budget. Errors say what the contract wants in
// policy terms; the caller names the policy, the rule and the workload.
func decodeBudgets(t *ast.Term) ([]engine.Budget, error) {
	elems, ok := listElems(t)
	if !ok {
		return nil, fmt.Errorf("want a list of budgets %s, got %s", budgetShape, describe(t))
	}
	out := make([]engine.Budget, 0, len(elems))
	for i, el := range elems {
		b, err := decodeBudget(i, el)
		if err != nil {
			return nil, err
		}
		if err := engine.ValidateBudget(b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func decodeBudget(i int, t *ast.Term) (engine.Budget, error) {
	var b engine.Budget
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return b, fmt.Errorf("budget %d: want an object %s, got %s", i, budgetShape, describe(t))
	}
	// The name first, so that the other messages can name the budget.
	which := fmt.Sprintf("budget %d", i)
	if n := obj.Get(ast.StringTerm("name")); n != nil {
		s, ok := n.Value.(ast.String)
		if !ok {
			return b, fmt.Errorf("%s: name: want a string, got %s", which, describe(n))
		}
		b.Name = string(s)
		if err := formatted("name", b.Name); err != nil {
			return b, fmt.Errorf("%s: %w", which, err)
		}
		if b.Name != "" {
			which = fmt.Sprintf("budget %q", b.Name)
		}
	}
	var err error
	for _, k := range obj.Keys() {
		v := obj.Get(k)
		key, _ := k.Value.(ast.String)
		if _, null := v.Value.(ast.Null); null && key != "name" {
			continue // as unset
		}
		switch string(key) {
		case "name":
		case "maxUnavailable":
			b.MaxUnavailable, err = budgetLimit(v)
		case "maxSurge":
			b.MaxSurge, err = budgetLimit(v)
		case "maxGroups":
			b.MaxGroups, err = budgetLimit(v)
		case "groupBy":
			err = stringField(v, &b.GroupBy)
		case "pdb":
			err = stringField(v, &b.PDB)
		case "source":
			err = stringField(v, &b.Source)
		case "advisory":
			a, ok := v.Value.(ast.Boolean)
			if !ok {
				err = fmt.Errorf("want true or false, got %s", describe(v))
			}
			b.Advisory = bool(a)
		default:
			return b, fmt.Errorf("%s: unknown field %s: a budget is %s", which, k, budgetShape)
		}
		if err != nil {
			return b, fmt.Errorf("%s: %s: %w", which, string(key), err)
		}
	}
	if err := formatted("source", b.Source); err != nil {
		return b, fmt.Errorf("%s: %w", which, err)
	}
	return b, nil
}

// budgetLimit reads a count: a whole number (negative ones are left to
// engine.ValidateBudget, which names the limit).
func budgetLimit(t *ast.Term) (*int, error) {
	const want = "want a non-negative integer"
	switch v := t.Value.(type) {
	case ast.Number:
		n, ok := v.Int64()
		if !ok {
			f, fok := v.Float64()
			if !fok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				return nil, fmt.Errorf("%s, got %s", want, v)
			}
			n = int64(f)
		}
		if n > math.MaxInt32 || n < math.MinInt32 {
			return nil, fmt.Errorf("%s up to %d, got %s", want, math.MaxInt32, v)
		}
		i := int(n)
		return &i, nil
	case ast.String:
		if strings.HasSuffix(string(v), "%") {
			return nil, fmt.Errorf("%s, got %s: budgets are resolved counts, scale the percentage by input.workload.replicas", want, v)
		}
	}
	return nil, fmt.Errorf("%s, got %s", want, describe(t))
}

func stringField(t *ast.Term, into *string) error {
	s, ok := t.Value.(ast.String)
	if !ok {
		return fmt.Errorf("want a string, got %s", describe(t))
	}
	*into = string(s)
	return nil
}

// decodeStrings reads a list (or set) of strings, the answer of halt and
// deny; what names one ("reason", "message").
func decodeStrings(t *ast.Term, what string) ([]string, error) {
	elems, ok := listElems(t)
	if !ok {
		return nil, fmt.Errorf("want a list (or set) of strings, got %s", describe(t))
	}
	out := make([]string, 0, len(elems))
	for i, el := range elems {
		s, ok := el.Value.(ast.String)
		if !ok {
			return nil, fmt.Errorf("want a list (or set) of strings, got %s at index %d", describe(el), i)
		}
		if err := formatted(what, string(s)); err != nil {
			return nil, err
		}
		out = append(out, string(s))
	}
	return out, nil
}

// formatted fails when a string of an answer holds the mark Go's fmt leaves
// for a verb it could not fill: OPA's sprintf is fmt.Sprintf, so a format
// with fewer values than verbs yields "%!s(MISSING)" and no error. what names
// the string ("reason"). The substring test keeps the common path free of
// allocations: every pod's answers pass here.
func formatted(what, s string) error {
	if !strings.Contains(s, "%!") {
		return nil
	}
	return fmtMark(what, s)
}

func fmtMark(what, s string) error {
	for rest := s; ; {
		i := strings.Index(rest, "%!")
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
		// A verb, then the mark; NOVERB, EXTRA, BADWIDTH and BADPREC have
		// no verb.
		verb, m := "", rest
		if m != "" && m[0] != '(' {
			_, n := utf8.DecodeRuneInString(m)
			verb, m = m[:n], m[n:]
		}
		m, ok := strings.CutPrefix(m, "(")
		if !ok {
			continue
		}
		var why string
		switch {
		case verb != "" && strings.HasPrefix(m, "MISSING)"):
			why = "sprintf got fewer values than its format has verbs"
		case verb == "" && strings.HasPrefix(m, "EXTRA "):
			why = "sprintf got more values than its format has verbs"
		case verb != "" && strings.HasPrefix(m, "BADINDEX)"):
			why = "an argument index ([n]) of the sprintf format is out of range"
		case verb == "" && strings.HasPrefix(m, "NOVERB)"):
			why = "the sprintf format ends in a lone % (write %% for a percent sign)"
		case verb == "" && (strings.HasPrefix(m, "BADWIDTH)") || strings.HasPrefix(m, "BADPREC)")):
			why = "a width or precision (*) of the sprintf format is not a number"
		case verb != "":
			// %!d(string=abc): the value does not suit the verb.
			typ, _, ok := strings.Cut(m, "=")
			if !ok || typ == "" || strings.ContainsAny(typ, " ()") {
				continue
			}
			why = fmt.Sprintf("sprintf's %%%s cannot format %s (%%v formats any value)", verb, regoType(typ))
		default:
			continue
		}
		return fmt.Errorf("%s %q has a formatting error: %s", what, s, why)
	}
}

// regoType names the Go type OPA's sprintf hands fmt for a value in policy
// terms.
func regoType(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int64", "*big.Int":
		return "an integer"
	case "float64":
		return "a number with a fraction"
	}
	return "a " + goType
}

// decodeString reads a string answer (pacing, node_preparation).
func decodeString(t *ast.Term) (string, bool) {
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}

// listElems: the elements of an array, or of a set in its sorted order.
func listElems(t *ast.Term) ([]*ast.Term, bool) {
	if t == nil {
		return nil, false
	}
	var arr *ast.Array
	switch v := t.Value.(type) {
	case *ast.Array:
		arr = v
	case ast.Set:
		arr = v.Sorted()
	default:
		return nil, false
	}
	out := make([]*ast.Term, arr.Len())
	for i := range out {
		out[i] = arr.Elem(i)
	}
	return out, true
}

// describe names a value in policy terms: scalars as written, collections by
// kind ("an object", "a list", "a set").
func describe(t *ast.Term) string {
	if t == nil {
		return "nothing (undefined)"
	}
	switch v := t.Value.(type) {
	case ast.Object:
		return "an object"
	case *ast.Array:
		return "a list"
	case ast.Set:
		return "a set"
	case ast.String:
		s := v.String()
		if len(s) > 60 {
			s = s[:57] + `..."`
		}
		return s
	case ast.Number, ast.Boolean, ast.Null:
		return v.String()
	}
	s := t.String()
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
