// Package render prints a plan in the formats `-o` accepts. One file per
// format; Get picks one.
package render

import (
	"encoding/json"
	"fmt"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/rollplan/rollplan/planner/plan"
)

// Renderer writes a plan.
type Renderer interface {
	Render(w io.Writer, p *plan.Plan) error
}

// Formats lists the names Get accepts.
var Formats = []string{"table", "json", "yaml"}

// Get returns the renderer for a format name.
func Get(format string) (Renderer, error) {
	switch format {
	case "table", "":
		return Table{}, nil
	case "json":
		return JSON{}, nil
	case "yaml":
		return YAML{}, nil
	}
	return nil, fmt.Errorf("unknown output format %q: want table, json or yaml", format)
}

// JSON prints the plan as indented JSON.
type JSON struct{}

// Render implements Renderer.
func (JSON) Render(w io.Writer, p *plan.Plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// YAML prints the plan as YAML with the JSON field names, in schema order
// (JSON is YAML: decoding it into a node keeps the order of the fields).
type YAML struct{}

// Render implements Renderer.
func (YAML) Render(w io.Writer, p *plan.Plan) error {
	js, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(js, &n); err != nil {
		return err
	}
	plainStyle(&n)
	enc := yamlv3.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

// plainStyle drops the JSON flow style and quoting so the output reads as
// ordinary block YAML.
func plainStyle(n *yamlv3.Node) {
	n.Style &^= yamlv3.FlowStyle | yamlv3.DoubleQuotedStyle
	for _, c := range n.Content {
		plainStyle(c)
	}
}
