// Package planschema generates the JSON Schema (draft 2020-12) of the Plan
// (planner/plan) from its Go types, with each field's description taken
// from its Go doc comment: `go generate ./planner/plan` writes it to
// planner/plan/plan.schema.json, which rollplan embeds (plan.Schema) and
// prints (`rollplan schema`). The source is not there at run time, hence
// the committed file; a test in planner/plan fails when it is stale.
//
// Required fields are the ones without omitempty.
package planschema

import (
	"encoding/json"
	"fmt"

	"github.com/invopop/jsonschema"

	"github.com/rollplan/rollplan/planner/plan"
)

// ID is the schema's $id.
const ID = "https://rollplan.dev/schemas/v1alpha1/plan.schema.json"

// planImport is the import path of the package whose types the schema
// describes.
const planImport = "github.com/rollplan/rollplan/planner/plan"

// Generate returns the schema, indented, with a final newline. It reads
// the doc comments of the Go files in the current directory, which must be
// planner/plan's (go generate and the package's tests run there).
func Generate() ([]byte, error) {
	r := &jsonschema.Reflector{}
	if err := r.AddGoComments(planImport, "."); err != nil {
		return nil, fmt.Errorf("read the doc comments of %s: %w", planImport, err)
	}
	if len(r.CommentMap) == 0 {
		return nil, fmt.Errorf("no doc comments of %s found in the current directory: run in planner/plan (go generate ./planner/plan)", planImport)
	}
	s := r.Reflect(&plan.Plan{})
	s.ID = ID
	s.Title = "rollplan Plan (" + plan.APIVersion + ")"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
