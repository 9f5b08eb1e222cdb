package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/plan"
)

// planSchema compiles what rollplan schema prints.
func planSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	out, _, err := run(t, "schema")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(plan.Schema) {
		t.Fatal("rollplan schema does not print the embedded schema")
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("plan.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("plan.schema.json")
	if err != nil {
		t.Fatalf("the plan schema does not compile: %v", err)
	}
	return s
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every golden plan, as YAML and as rollplan plan -o json prints it, is
// valid against the schema rollplan schema prints.
func TestGoldenPlansMatchTheSchema(t *testing.T) {
	s := planSchema(t)
	dirs, err := filepath.Glob("testdata/scenarios/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			y, err := os.ReadFile(filepath.Join(dir, "plan.golden.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(y)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(decodeJSON(t, js)); err != nil {
				t.Errorf("plan.golden.yaml: %v", err)
			}
			out, _ := runScenario(t, dir, append([]string{"plan", "-o", "json", "-f", filepath.Join(dir, "snapshot.yaml")}, scenarioArgs(t, dir)...)...)
			if err := s.Validate(decodeJSON(t, []byte(out))); err != nil {
				t.Errorf("plan -o json: %v", err)
			}
		})
	}
}

// The validator rejects a broken plan: a required field missing, a field
// of the wrong type, a field the schema does not know.
func TestSchemaRejectsBrokenPlans(t *testing.T) {
	s := planSchema(t)
	y, err := os.ReadFile("testdata/scenarios/deploy-rolling-10-25pct/plan.golden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		breakIt func(p map[string]any)
		want    string
	}{
		{"workload without waves", func(p map[string]any) { delete(workload(p), "waves") }, "missing property 'waves'"},
		{"wave without budgets", func(p map[string]any) { delete(wave(p), "budgets") }, "missing property 'budgets'"},
		{"index a string", func(p map[string]any) { wave(p)["index"] = "one" }, "want integer"},
		{"inUse a string", func(p map[string]any) {
			wave(p)["budgets"].([]any)[0].(map[string]any)["inUse"] = "2"
		}, "want integer"},
		{"binding.waitsFor not a list", func(p map[string]any) {
			wave(p)["binding"].(map[string]any)["waitsFor"] = "web-1"
		}, "want array"},
		{"unknown field", func(p map[string]any) { wave(p)["bindings"] = true }, "additional properties 'bindings' not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p map[string]any
			if err := json.Unmarshal(js, &p); err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(p); err != nil {
				t.Fatalf("the plan is invalid before it is broken: %v", err)
			}
			c.breakIt(p)
			b, _ := json.Marshal(p)
			err := s.Validate(decodeJSON(t, b))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("validation error %v, want one with %q", err, c.want)
			}
		})
	}
}

func workload(p map[string]any) map[string]any {
	return p["workloads"].([]any)[0].(map[string]any)
}

func wave(p map[string]any) map[string]any {
	return workload(p)["waves"].([]any)[0].(map[string]any)
}
