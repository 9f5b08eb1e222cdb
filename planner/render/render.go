// Package render prints a plan in the formats `-o` accepts. One file per
// format; Get picks one.
package render

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

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

// YAML prints the plan as YAML (the JSON field names).
type YAML struct{}

// Render implements Renderer.
func (YAML) Render(w io.Writer, p *plan.Plan) error {
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
