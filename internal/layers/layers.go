// Package layers states the import rules of docs/architecture.md as data and checks a
// module's non-test Go files against them. The test beside it runs the check over this
// repository, so `make lint` and `make test` fail when a package imports across a
// forbidden edge.
package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Rule forbids packages under From to import packages under To. Paths are relative to
// the module root; a path matches itself and everything below it. Except lists
// explains the rule to whoever breaks it.
type Rule struct {
	From, To string
	Why      string
}

// consumers carry plans out or read them for people; they meet only in the planner.
var consumers = []string{"executor", "gate", "history", "controller"}

// Rules is the layering of docs/architecture.md.
func Rules() []Rule {
	rules := []Rule{
		{From: "planner/plan", To: "planner/engine/", Why: "plan reaches engines only through the engine contract (the upstream model comes in as an option)"},
		{From: "planner/engine", To: "planner/plan", Why: "engines answer decision points; packing is above them"},
		{From: "planner/snapshot", To: "planner/engine", Why: "reading the cluster knows nothing of policy"},
		{From: "planner/snapshot", To: "planner/facts", Why: "reading the cluster knows nothing of facts"},
		{From: "planner/facts", To: "planner/engine", Why: "facts are engine-neutral"},
		{From: "planner", To: "cmd", Why: "the planner is below every command"},
	}
	for _, c := range consumers {
		rules = append(rules, Rule{From: "planner", To: c, Why: "the planner never knows how its plans are carried out or enforced"})
		for _, other := range consumers {
			if other == c {
				continue
			}
			if c == "controller" && other == "executor" {
				continue // the controller runs the executor's step for every managed workload
			}
			rules = append(rules, Rule{From: c, To: other, Why: "the consumers meet only in the planner"})
		}
		rules = append(rules, Rule{From: c, To: "cmd", Why: "commands sit above the consumers"})
	}
	return rules
}

// matches reports whether rel is pattern or below it. A pattern ending in "/" matches
// only what is below it (planner/engine/ is the concrete engines, not the contract).
func matches(rel, pattern string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(rel, pattern)
	}
	return rel == pattern || strings.HasPrefix(rel, pattern+"/")
}

// Violation is one forbidden import.
type Violation struct {
	Package, Import string
	Rule            Rule
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", v.Package, v.Import, v.Rule.Why)
}

// Check returns the imports of graph (package -> imports, module-relative) that break
// rules, sorted.
func Check(graph map[string][]string, rules []Rule) []Violation {
	var out []Violation
	for pkg, imports := range graph {
		for _, imp := range imports {
			for _, r := range rules {
				if matches(pkg, r.From) && matches(imp, r.To) {
					out = append(out, Violation{Package: pkg, Import: imp, Rule: r})
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		return out[i].Import < out[j].Import
	})
	return out
}

// Graph reads the imports of every non-test Go file under root that belong to module,
// keyed by package directory relative to root. Folders named testdata, vendor or
// starting with "." or "_" are skipped, as the go command does.
func Graph(root, module string) (map[string][]string, error) {
	graph := map[string][]string{}
	seen := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			// A nested module (test/cluster/v1.37) is not part of this one.
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("read imports of %s: %w", path, err)
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		if seen[dir] == nil {
			seen[dir] = map[string]bool{}
			graph[dir] = nil
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, spec.Path.Value, err)
			}
			rel, ok := strings.CutPrefix(p, module+"/")
			if !ok || seen[dir][rel] {
				continue
			}
			seen[dir][rel] = true
			graph[dir] = append(graph[dir], rel)
		}
		return nil
	})
	return graph, err
}
