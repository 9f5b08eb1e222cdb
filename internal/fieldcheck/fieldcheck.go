// Package fieldcheck finds the first field of a decoded YAML or JSON
// document that its Go type does not accept, and says so in the terms of the
// file: the field's path (spec.budgets[0].maxUnavailable), the valid fields
// of an unknown one (with the one a typo likely meant), and what was
// expected. encoding/json names neither the list index nor the valid
// fields, and speaks of Go types.
package fieldcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Hook lets a caller judge a value itself: a field of its own shape (an
// expression, a path list). f is the struct field holding v, nil for a list
// element or map value. It returns handled false to let Check go on.
type Hook func(v any, t reflect.Type, f *reflect.StructField, path string) (p, msg string, handled bool)

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

// Check walks v (numbers as json.Number or float64) along t and returns
// the path of the first value t does not accept and what is wrong with it;
// "" when every value fits. Interfaces, json.RawMessage and types that
// decode themselves are not looked into. hook may be nil.
func Check(v any, t reflect.Type, path string, hook Hook) (string, string) {
	return check(v, t, nil, path, hook)
}

func check(v any, t reflect.Type, f *reflect.StructField, path string, hook Hook) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if hook != nil {
		if p, msg, ok := hook(v, t, f, path); ok {
			return p, msg
		}
	}
	if v == nil {
		return "", "" // null: the zero value, as encoding/json decodes it
	}
	if t == rawMessage || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return "", ""
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return path, "want a map, got " + Kind(v)
		}
		fields := map[string]reflect.StructField{}
		var names []string
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" || name == "-" || !sf.IsExported() {
				continue
			}
			fields[name] = sf
			names = append(names, name)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sf, ok := fields[k]
			if !ok {
				msg := fmt.Sprintf("unknown field %q", k)
				if s := Closest(k, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return path, msg + "; valid fields: " + strings.Join(names, ", ")
			}
			if p, msg := check(m[k], sf.Type, &sf, Join(path, k), hook); msg != "" {
				return p, msg
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return path, "want a map, got " + Kind(v)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if p, msg := check(m[k], t.Elem(), nil, fmt.Sprintf("%s[%s]", path, k), hook); msg != "" {
				return p, msg
			}
		}
	case reflect.Slice:
		xs, ok := v.([]any)
		if !ok {
			return path, "want a list, got " + Kind(v)
		}
		for i, x := range xs {
			if p, msg := check(x, t.Elem(), nil, fmt.Sprintf("%s[%d]", path, i), hook); msg != "" {
				return p, msg
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return path, "want a string, got " + Kind(v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return path, "want true or false, got " + Kind(v)
		}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		if !integer(v) {
			return path, "want an integer, got " + Kind(v)
		}
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case json.Number, float64:
		default:
			return path, "want a number, got " + Kind(v)
		}
	}
	return "", ""
}

func integer(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return !strings.ContainsAny(string(x), ".eE")
	case float64:
		return x == float64(int64(x))
	}
	return false
}

// Kind names a decoded value in YAML terms: "a map", "the number 2".
func Kind(v any) string {
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
	case float64:
		return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprintf("%v", v)
}

// Join appends a field to a path.
func Join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// Closest is the name within two edits of s (case aside), if one is: the
// name a typo meant.
func Closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := Distance(strings.ToLower(s), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b (bytes: field and
// rule names are ASCII).
func Distance(a, b string) int {
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
