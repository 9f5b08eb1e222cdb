package cel

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/rollplan/rollplan/internal/fieldcheck"
)

// checkFields finds the first field of a decoded RolloutPolicy (json.Number
// for numbers) that its Go type does not accept (fieldcheck.Check), and
// judges the fields tagged cel:"expr" as CEL expressions (checkExpr).
func checkFields(v any, t reflect.Type, path string) (string, string) {
	return fieldcheck.Check(v, t, path, func(v any, t reflect.Type, f *reflect.StructField, path string) (string, string, bool) {
		if f == nil || f.Tag.Get("cel") != "expr" {
			return "", "", false
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, msg := checkExpr(v, t, path, key)
		return p, msg, true
	})
}

// checkExpr checks a field that holds a CEL expression (a string) or a list
// of them. YAML reads an unquoted 2 or true as a number or a boolean, not
// as the expression "2": say how to quote it.
func checkExpr(v any, t reflect.Type, path, key string) (string, string) {
	if xs, ok := v.([]any); ok && t.Kind() == reflect.Slice {
		for i, x := range xs {
			if p, msg := checkExpr(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i), ""); msg != "" {
				return p, msg
			}
		}
		return "", ""
	}
	if t.Kind() == reflect.Slice {
		return path, "want a list of CEL expressions (strings), got " + valueKind(v)
	}
	literal, how := "...", "write the whole expression as one quoted string" // a map or a list
	switch x := v.(type) {
	case nil, string:
		return "", ""
	case json.Number:
		literal, how = string(x), "quote it"
	case bool:
		literal, how = fmt.Sprint(x), "quote it"
	}
	as := fmt.Sprintf("- %q", literal) // a list item
	if key != "" {
		as = fmt.Sprintf("%s: %q", key, literal)
	}
	return path, fmt.Sprintf("must be a CEL expression string, got %s: %s, as in %s", valueKind(v), how, as)
}

// valueKind names a decoded value in YAML terms.
func valueKind(v any) string { return fieldcheck.Kind(v) }
