package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"k8s.io/client-go/util/jsonpath"
)

// extractNumber picks the one JSON number path selects in body.
func extractNumber(body []byte, path string) (f float64, err error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("jsonpath %s: the body is not JSON (%v): %s", path, err, excerpt(body))
	}
	jp, err := parseJSONPath(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		// The parser is another project's; a panic on odd input must fail
		// this measurement, not the process running the rollout.
		if r := recover(); r != nil {
			f, err = 0, fmt.Errorf("jsonpath %s: %v", path, r)
		}
	}()
	results, err := jp.FindResults(doc)
	if err != nil {
		return 0, fmt.Errorf("jsonpath %s: %w", path, err)
	}
	var found []reflect.Value
	for _, r := range results {
		found = append(found, r...)
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("jsonpath %s: %d values, want exactly one number", path, len(found))
	}
	v := found[0]
	for v.IsValid() && v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() != reflect.Float64 {
		return 0, fmt.Errorf("jsonpath %s: %s, want a number", path, describe(v))
	}
	if err := finite(v.Float()); err != nil {
		return 0, fmt.Errorf("jsonpath %s: %w", path, err)
	}
	return v.Float(), nil
}

// parseJSONPath parses a kubectl-style JSONPath; the braces are optional.
func parseJSONPath(path string) (*jsonpath.JSONPath, error) {
	text := path
	if !strings.Contains(text, "{") {
		text = "{" + text + "}"
	}
	jp := jsonpath.New("measurement").AllowMissingKeys(false)
	if err := jp.Parse(text); err != nil {
		return nil, fmt.Errorf("jsonpath %s: %w", path, err)
	}
	return jp, nil
}

// describe names what a JSONPath picked that is not a number.
func describe(v reflect.Value) string {
	if !v.IsValid() {
		return "null"
	}
	switch v.Kind() {
	case reflect.String:
		return fmt.Sprintf("the string %q", excerpt([]byte(v.String())))
	case reflect.Bool:
		return fmt.Sprintf("the boolean %v", v.Bool())
	case reflect.Map:
		return "an object"
	case reflect.Slice:
		return "an array"
	}
	return v.Kind().String()
}

// excerpt is the start of a body, for an error.
func excerpt(b []byte) string {
	const most = 200
	b = bytes.TrimSpace(b)
	if len(b) <= most {
		return string(b)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}
