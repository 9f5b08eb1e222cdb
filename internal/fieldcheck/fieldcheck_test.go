package fieldcheck

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type doc struct {
	Name   string         `json:"name"`
	Count  int            `json:"count"`
	Items  []item         `json:"items"`
	Labels map[string]int `json:"labels"`
	Expr   string         `json:"expr" check:"custom"`
}

type item struct {
	On bool `json:"on"`
}

// Check names the first value the type refuses by its path, suggests the
// field a typo meant, and lets a hook judge fields of its own shape; both
// json.Number and float64 numbers are read.
func TestCheck(t *testing.T) {
	hook := func(v any, _ reflect.Type, f *reflect.StructField, path string) (string, string, bool) {
		if f == nil || f.Tag.Get("check") != "custom" {
			return "", "", false
		}
		if v != "ok" {
			return path, "custom says no", true
		}
		return "", "", true
	}
	cases := []struct {
		name, doc, path, msg string
	}{
		{"valid", `{"name": "a", "count": 2, "items": [{"on": true}], "labels": {"x": 1}, "expr": "ok"}`, "", ""},
		{"typo", `{"nmae": "a"}`, "", `unknown field "nmae" (did you mean "name"?); valid fields: name, count, items, labels, expr`},
		{"far from any", `{"zzzzzz": 1}`, "", `unknown field "zzzzzz"; valid fields: name, count, items, labels, expr`},
		{"list element", `{"items": [{"on": true}, {"on": "yes"}]}`, "items[1].on", `want true or false, got the string "yes"`},
		{"map value", `{"labels": {"x": 1.5}}`, "labels[x]", "want an integer, got the number 1.5"},
		{"not a list", `{"items": {"on": true}}`, "items", "want a list, got a map"},
		{"hook", `{"expr": "no"}`, "expr", "custom says no"},
		{"null is the zero value", `{"name": null}`, "", ""},
	}
	for _, c := range cases {
		for _, useNumber := range []bool{false, true} {
			t.Run(c.name, func(t *testing.T) {
				dec := json.NewDecoder(strings.NewReader(c.doc))
				if useNumber {
					dec.UseNumber()
				}
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				path, msg := Check(v, reflect.TypeFor[doc](), "", hook)
				if path != c.path || msg != c.msg {
					t.Errorf("useNumber %v: got (%q, %q), want (%q, %q)", useNumber, path, msg, c.path, c.msg)
				}
			})
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"scope", "eligibility", "order"}
	for in, want := range map[string]string{"scop": "scope", "Scope": "scope", "eligibilty": "eligibility", "budgets": "", "ordr": "order"} {
		if got := Closest(in, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance(kitten, sitting) = %d, want 3", d)
	}
}
