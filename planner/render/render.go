// Package render prints what rollplan commands print, in the formats `-o`
// accepts. One file per format; Get picks a plan's renderer, Value prints
// any other result (a rollout status, a revision list) in the same formats.
package render

import (
	"fmt"
	"io"
	"slices"
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
}

// planFormats are the formats a plan prints in: every format of formats,
// then the pull-request summary and the HTML page (a plan only: Value has
// neither for other results, so status and history do not offer them).
var planFormats = append(formats[:len(formats):len(formats)], []struct {
	name string
	plan Renderer
}{{"markdown", Markdown{}}, {"html", HTML{}}}...)

// PlanFormats lists the names Get accepts, the default first: Formats,
// markdown and html.
var PlanFormats = func() []string {
	names := make([]string, len(planFormats))
	for i, f := range planFormats {
		names[i] = f.name
	}
	return names
}()

// PlanList names the plan formats for help and error text: "table (or
// text), wide, json, yaml, markdown or html".
func PlanList() string { return formatList(PlanFormats) }

// textAlias: -o text is the table, as explain calls its own layout, so
// that one name works for every command.
const textAlias = "text"

// Canonical is the format an -o name stands for: the table for text.
func Canonical(format string) string {
	if format == textAlias {
		return formats[0].name
	}
	return format
}

// formatList words names for help and error text, with the table's alias.
func formatList(names []string) string {
	words := slices.Clone(names)
	words[0] += " (or " + textAlias + ")"
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// ResultRenderer is a Renderer that also draws what the plan's details
// know (the HTML page: every pod's zone and node, its explain). p is the
// plan to print, which may hold workloads res does not (those that could
// not be planned).
type ResultRenderer interface {
	Renderer
	RenderResult(w io.Writer, p *plan.Plan, res *plan.Result) error
}

// Formats lists the formats of every result (Value, Check), the default
// first.
var Formats = func() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}()

// List names the formats for help and error text: "table (or text),
// wide, json or yaml".
func List() string { return formatList(Formats) }

// Get returns the plan renderer for a format name (one of PlanFormats,
// or text); "" is the table.
func Get(format string) (Renderer, error) {
	if format == "" {
		return formats[0].plan, nil
	}
	for _, f := range planFormats {
		if f.name == Canonical(format) {
			return f.plan, nil
		}
	}
	return nil, fmt.Errorf("unknown output format %q: want %s", format, PlanList())
}

// Check reports whether format is one of Formats, or text.
func Check(format string) bool {
	for _, f := range Formats {
		if f == Canonical(format) {
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
