package render

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rollplan/rollplan/planner/plan"
)

// JSON prints the plan as indented JSON.
type JSON struct{}

// Render implements Renderer.
func (JSON) Render(w io.Writer, p *plan.Plan) error {
	return JSONValue(w, p)
}

// JSONValue prints v as indented JSON and a newline.
func JSONValue(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
