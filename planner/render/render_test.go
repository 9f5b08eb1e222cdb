package render

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// The format list is the one source of the help text, Get and Check.
func TestFormats(t *testing.T) {
	if got := List(); got != "table (or text), wide, json or yaml" {
		t.Errorf("List() = %q", got)
	}
	if got := PlanList(); got != "table (or text), wide, json, yaml, markdown or html" {
		t.Errorf("PlanList() = %q", got)
	}
	// text, what explain calls its layout, is the table everywhere.
	if r, err := Get("text"); err != nil || r != (Table{}) {
		t.Errorf("Get(text) = %v, %v: want the table", r, err)
	}
	if !Check("text") {
		t.Error("Check(text): want the table")
	}
	for _, f := range append(PlanFormats, "") {
		if _, err := Get(f); err != nil {
			t.Errorf("Get(%q): %v", f, err)
		}
	}
	if _, err := Get("xml"); err == nil || !strings.HasSuffix(err.Error(), "want table (or text), wide, json, yaml, markdown or html") {
		t.Errorf("Get(xml) = %v", err)
	}
	if !Check("yaml") || !Check("wide") || Check("") || Check("xml") || Check("html") || Check("markdown") {
		t.Error("Check accepts only the listed formats")
	}
}

// Value encodes in JSON and (key-sorted) YAML, and leaves the table to the
// caller's layout.
func TestValue(t *testing.T) {
	v := struct {
		B int `json:"b"`
		A int `json:"a"`
	}{1, 2}
	table := func(w io.Writer) error {
		_, err := io.WriteString(w, "layout\n")
		return err
	}
	for format, want := range map[string]string{
		"json":  "{\n  \"b\": 1,\n  \"a\": 2\n}\n",
		"yaml":  "a: 2\nb: 1\n",
		"table": "layout\n",
	} {
		var b bytes.Buffer
		if err := Value(&b, format, v, table); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("%s: %q, want %q", format, b.String(), want)
		}
	}
}
