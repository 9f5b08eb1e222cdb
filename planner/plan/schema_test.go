package plan_test

import (
	"bytes"
	"testing"

	"github.com/rollplan/rollplan/internal/planschema"
	"github.com/rollplan/rollplan/planner/plan"
)

// The embedded schema is the one the Go types and their doc comments give
// now: a field added or documented without `go generate ./planner/plan`
// fails here.
func TestSchemaIsFresh(t *testing.T) {
	want, err := planschema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plan.Schema, want) {
		t.Error("planner/plan/plan.schema.json is stale: run go generate ./planner/plan and commit it")
	}
	for _, s := range []string{`"$schema": "https://json-schema.org/draft/2020-12/schema"`, `"binding": {`, `"waitsFor": {`, `Binding: what kept the next pods out of this wave`} {
		if !bytes.Contains(plan.Schema, []byte(s)) {
			t.Errorf("schema lacks %s", s)
		}
	}
}
