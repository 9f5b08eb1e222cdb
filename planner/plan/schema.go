package plan

import _ "embed" // the schema file

//go:generate go run ../../internal/planschema/gen

// Schema is the JSON Schema (draft 2020-12) of the Plan, generated from
// these types and their doc comments (internal/planschema; `go generate
// ./planner/plan` writes it, a test fails when it is stale). `rollplan
// schema` prints it.
//
//go:embed plan.schema.json
var Schema []byte
