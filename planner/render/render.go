// Package render prints what rollplan commands print, in the formats `-o`
// accepts. One file per format; Get picks a plan's renderer, Value prints
// any other result (a rollout status, a revision list) in the same formats.
package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/rollplan/rollplan/planner/plan"
)

// Renderer writes a plan.
type Renderer interface {
	Render(w io.Writer, p *plan.Plan) error
}

// formats is the one list of output formats: Formats, Get, Check and the
// `-o` help of every command come from it. The first is the default.
var formats = []struct {
	name string
	plan Renderer
}{
	{"table", Table{}},
	{"wide", Table{Wide: true}},
	{"json", JSON{}},
	{"yaml", YAML{}},
	{"markdown", Markdown{}},
}

// Formats lists the names Get accepts, the default first.
var Formats = func() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}()

// List names the formats for help and error text: "table, wide, json or yaml".
func List() string {
	return strings.Join(Formats[:len(Formats)-1], ", ") + " or " + Formats[len(Formats)-1]
}

// Get returns the renderer for a format name; "" is the table.
func Get(format string) (Renderer, error) {
	if format == "" {
		return formats[0].plan, nil
	}
	for _, f := range formats {
		if f.name == format {
			return f.plan, nil
		}
	}
	return nil, fmt.Errorf("unknown output format %q: want %s", format, List())
}

// Check reports whether format is one of Formats.
func Check(format string) bool {
	for _, f := range Formats {
		if f == format {
			return true
		}
	}
	return false
}

// Value prints v, a result other than a plan, in format: JSON and YAML
// encode v (JSONValue, YAMLValue); the table (and wide) is v's own layout,
// table.
func Value(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "json":
		return JSONValue(w, v)
	case "yaml":
		return YAMLValue(w, v)
	}
	return table(w)
}
