package cel

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// checkFields walks a decoded document (json.Number for numbers) along a Go
// type and returns the first field that is unknown or of the wrong type:
// its path (spec.budgets[0].maxUnavailable) and what is wrong with it, in
// policy terms. encoding/json names neither the list index nor the valid
// fields, and calls an expression a Go string.
func checkFields(v any, t reflect.Type, path string) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return "", "" // null: the zero value, as encoding/json decodes it
	}
	if t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return "", "" // params, and metav1 types that decode themselves
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return path, "want an object, got " + valueKind(v)
		}
		fields := map[string]reflect.StructField{}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			fields[name] = f
			names = append(names, name)
		}
		for _, k := range sortedKeys(m) {
			f, ok := fields[k]
			if !ok {
				msg := fmt.Sprintf("unknown field %q", k)
				if s := closest(k, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return path, msg + "; valid fields: " + strings.Join(names, ", ")
			}
			if f.Tag.Get("cel") == "expr" {
				if p, msg := checkExpr(m[k], f.Type, join(path, k), k); msg != "" {
					return p, msg
				}
				continue
			}
			if p, msg := checkFields(m[k], f.Type, join(path, k)); msg != "" {
				return p, msg
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return path, "want an object, got " + valueKind(v)
		}
		for _, k := range sortedKeys(m) {
			if p, msg := checkFields(m[k], t.Elem(), fmt.Sprintf("%s[%s]", path, k)); msg != "" {
				return p, msg
			}
		}
	case reflect.Slice:
		xs, ok := v.([]any)
		if !ok {
			return path, "want a list, got " + valueKind(v)
		}
		for i, x := range xs {
			if p, msg := checkFields(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); msg != "" {
				return p, msg
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return path, "want a string, got " + valueKind(v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return path, "want true or false, got " + valueKind(v)
		}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		if n, ok := v.(json.Number); !ok || strings.ContainsAny(string(n), ".eE") {
			return path, "want an integer, got " + valueKind(v)
		}
	}
	return "", ""
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

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// valueKind names a decoded JSON value in YAML terms.
func valueKind(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case json.Number:
		return "the number " + string(x)
	}
	return fmt.Sprintf("%v", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// closest is the name within two edits of s (case aside), if one is: the
// field a typo meant.
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
