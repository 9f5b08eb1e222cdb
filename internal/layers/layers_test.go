package layers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepository fails when any non-test package of this module imports across a
// forbidden edge of docs/architecture.md.
func TestRepository(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var module string
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			module = strings.TrimSpace(m)
		}
	}
	if module == "" {
		t.Fatal("go.mod names no module")
	}
	graph, err := Graph(root, module)
	if err != nil {
		t.Fatal(err)
	}
	// The graph must see the packages the rules are about, or the check proves nothing.
	for _, want := range []string{"planner/plan", "planner/engine", "planner/facts", "planner/snapshot", "executor", "gate", "history", "cmd/rollplan"} {
		if _, ok := graph[want]; !ok {
			t.Errorf("import graph has no package %s; packages seen: %d", want, len(graph))
		}
	}
	if imports := graph["cmd/rollplan"]; !contains(imports, "planner/plan") {
		t.Errorf("cmd/rollplan imports %v, want planner/plan among them", imports)
	}
	for _, v := range Check(graph, Rules()) {
		t.Errorf("%s", v)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name     string
		pkg, imp string
		want     string // substring of the violation, "" for allowed
	}{
		{"plan to concrete engine", "planner/plan", "planner/engine/native", "plan reaches engines only through"},
		{"plan to engine contract", "planner/plan", "planner/engine", ""},
		{"plan to executor", "planner/plan", "executor", "never knows how its plans"},
		{"live state to gate", "planner/live", "gate", "never knows how its plans"},
		{"engine to plan", "planner/engine/rego", "planner/plan", "packing is above them"},
		{"engine contract to plan", "planner/engine", "planner/plan", "packing is above them"},
		{"snapshot to engine", "planner/snapshot/capture", "planner/engine", "knows nothing of policy"},
		{"snapshot to facts", "planner/snapshot", "planner/facts", "knows nothing of facts"},
		{"facts to engine", "planner/facts", "planner/engine/cel", "engine-neutral"},
		{"executor to gate", "executor", "gate", "meet only in the planner"},
		{"gate to executor", "gate", "executor", "meet only in the planner"},
		{"gate subpackage to executor", "gate/certs", "executor", "meet only in the planner"},
		{"history to gate", "history", "gate", "meet only in the planner"},
		{"executor to history", "executor", "history", "meet only in the planner"},
		{"controller to executor", "controller", "executor", ""},
		{"executor to controller", "executor", "controller", "meet only in the planner"},
		{"gate to cmd", "gate", "cmd/rollplan", "above the consumers"},
		{"cmd to anything", "cmd/rollplan", "executor", ""},
		{"executor to planner", "executor", "planner/live", ""},
		{"engine to facts", "planner/engine/rego", "planner/facts", ""},
		{"name prefix is not a folder", "planner/planx", "executor", "never knows how"},
		{"gatekeeper is not gate", "executor", "gatekeeper", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Check(map[string][]string{c.pkg: {c.imp}}, Rules())
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("%s -> %s: got %v, want allowed", c.pkg, c.imp, got)
			case c.want != "" && len(got) != 1:
				t.Errorf("%s -> %s: got %d violations %v, want one", c.pkg, c.imp, len(got), got)
			case c.want != "" && !strings.Contains(got[0].String(), c.want):
				t.Errorf("%s -> %s: got %q, want it to say %q", c.pkg, c.imp, got[0], c.want)
			}
		})
	}
}

// TestGraph checks that Graph skips test files, testdata and nested modules, and
// names the file it cannot read.
func TestGraph(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("gate/gate.go", "package gate\nimport (\n\t\"fmt\"\n\t\"example.com/m/planner/plan\"\n)\nvar _ = fmt.Sprint\nvar _ = plan.X\n")
	write("gate/gate_test.go", "package gate\nimport _ \"example.com/m/executor\"\n")
	write("gate/testdata/x.go", "package x\nimport _ \"example.com/m/executor\"\n")
	write("test/cluster/v1/go.mod", "module other\n")
	write("test/cluster/v1/main.go", "package main\nimport _ \"example.com/m/executor\"\n")
	graph, err := Graph(root, "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	if len(graph) != 1 || len(graph["gate"]) != 1 || graph["gate"][0] != "planner/plan" {
		t.Errorf("graph = %v, want only gate -> [planner/plan]", graph)
	}
	write("bad/bad.go", "package bad\nimport \"example.com/m/\n")
	if _, err := Graph(root, "example.com/m"); err == nil || !strings.Contains(err.Error(), "bad.go") {
		t.Errorf("Graph on a broken file: err = %v, want one naming bad.go", err)
	}
}
