// Package rego evaluates rollout policies written in Rego (OPA v1).
//
// A policy bundle is the embedded default library (package
// rollplan.defaults) plus the user's modules, whose entry package is
// rollplan.strategy. Go generates a small resolver module that answers every
// decision point from the entry package when it defines the rule and from the
// defaults otherwise, so one prepared query per run answers everything.
//
// New compiles that query twice: for OPA's interpreter (topdown), and to
// OPA's IR (plan.go), which a small Go VM (vm.go) runs over the facts
// without converting the pods to OPA values (input.go's conversion costs
// more than the whole VM evaluation). Decide runs the VM; whatever it does
// not take on falls back to the interpreter, the reference: per workload, an
// evaluation that fails or answers outside the contract (the interpreter
// then words the error); per bundle, a construct the VM does not run (an
// impure builtin, with), which Notes names.
package rego

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/internal/fieldcheck"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/policies"
)

// Package paths of the contract.
const (
	EntryPackage    = "rollplan.strategy"
	DefaultsPackage = "rollplan.defaults"
	resolverPackage = "rollplan.resolved"
	// resolverFile names the generated resolver module in messages.
	resolverFile = "rollplan/resolver.rego"
)

// Per-pod rules (functions of one pod) and workload rules of the contract.
var (
	podRules      = []string{"scope", "eligibility", "order"}
	workloadRules = []string{"budgets", "pacing", "node_preparation", "analysis", "halt", "deny", "analysis_verdict"}
)

// Bundle is a parsed set of policy modules.
type Bundle struct {
	// Modules by file name.
	Modules map[string]*ast.Module
	// Defines: the contract rules the entry package defines, and in which file.
	Defines map[string]string
	// Digest: sha256 over file names and contents.
	Digest string
	// Sources: the user's policy paths, for messages.
	Sources []string
	// Warnings: files of the bundle that cannot take part in any decision
	// (a package neither contract package nor referred to by another file).
	Warnings []string
	// shippedDefaults: the default library is the embedded one, not a
	// rollplan.defaults package of the user's.
	shippedDefaults bool
}

// upstream: the points the bundle leaves to the shipped default strategy
// (engine.Decisions.Upstream).
func (b *Bundle) upstream() engine.Point {
	if !b.shippedDefaults {
		return 0
	}
	var p engine.Point
	for rule, point := range map[string]engine.Point{"scope": engine.PointScope, "eligibility": engine.PointEligibility, "order": engine.PointOrder, "pacing": engine.PointPacing, "budgets": engine.PointBudgets} {
		if _, own := b.Defines[rule]; !own {
			p |= point
		}
	}
	return p
}

// checkRuleShape: the per-pod rules of the contract are functions of one
// pod, the workload rules are values.
func checkRuleShape(file string, r *ast.Rule, name string) error {
	loc := file
	if r.Location != nil {
		loc = fmt.Sprintf("%s:%d", file, r.Location.Row)
	}
	args := len(r.Head.Args)
	for _, p := range podRules {
		if name == p && args != 1 {
			return fmt.Errorf("policy %s: rule %s must be a function of one pod, as %s(pod) := ..., got %d argument(s)", loc, name, name, args)
		}
	}
	for _, w := range workloadRules {
		if name == w && args != 0 {
			return fmt.Errorf("policy %s: rule %s answers for the workload and takes no argument: write %s := ... (read input.workload)", loc, name, name)
		}
	}
	return nil
}

// unreferencedPackages warns about each file whose package is neither a
// contract package nor referred to (imported, or read as data.<package>) by
// another file: it has no effect, which is usually a misspelt package name.
func unreferencedPackages(names []string, modules map[string]*ast.Module) []string {
	var refs []ast.Ref
	for _, n := range names {
		m := modules[n]
		self := m.Package.Path
		for _, imp := range m.Imports {
			if r, ok := imp.Path.Value.(ast.Ref); ok {
				refs = append(refs, r)
			}
		}
		for _, rule := range m.Rules {
			ast.WalkRefs(rule, func(r ast.Ref) bool {
				if r.HasPrefix(ast.DefaultRootRef) && !r.HasPrefix(self) {
					refs = append(refs, r.ConstantPrefix())
				}
				return false
			})
		}
	}
	var out []string
	for _, n := range names {
		path := modules[n].Package.Path
		pkg := strings.TrimPrefix(path.String(), "data.")
		if pkg == EntryPackage || pkg == DefaultsPackage {
			continue
		}
		used := false
		for _, r := range refs {
			if r.HasPrefix(path) || path.HasPrefix(r) {
				used = true
				break
			}
		}
		if !used {
			out = append(out, fmt.Sprintf("policy %s: package %s is not the entry package (%s) and no other policy file refers to it: it has no effect", n, pkg, EntryPackage))
		}
	}
	return out
}

// unreferencedRules warns about each rule of the entry package that is no
// decision point and that no rule of the bundle uses: the resolver never asks
// for it, which is usually a misspelt contract rule (scopes, nodePreparation)
// whose decision silently falls back to the defaults.
func unreferencedRules(names []string, modules map[string]*ast.Module) []string {
	entry := ast.MustParseRef("data." + EntryPackage)
	used := map[string]bool{}
	whole := false // something reads the entry package as a document: any rule may be used
	// use marks what a reference to data reaches.
	use := func(r ast.Ref) {
		c := r.ConstantPrefix()
		switch {
		case len(c) > len(entry) && c.HasPrefix(entry):
			if s, ok := c[len(entry)].Value.(ast.String); ok {
				used[string(s)] = true
			}
		case entry.HasPrefix(c):
			whole = true
		}
	}
	for _, n := range names {
		m := modules[n]
		aliases := map[ast.Var]ast.Ref{}
		for _, imp := range m.Imports {
			if r, ok := imp.Path.Value.(ast.Ref); ok && r.HasPrefix(ast.DefaultRootRef) {
				aliases[imp.Name()] = r
				// An import of one rule may be used as a bare variable,
				// which is no ref.
				if len(r) > len(entry) {
					use(r)
				}
			}
		}
		inEntry := m.Package.Path.Equal(entry)
		for _, rule := range m.Rules {
			for _, x := range ruleParts(rule) {
				ast.WalkRefs(x, func(r ast.Ref) bool {
					head, _ := r[0].Value.(ast.Var)
					if path, ok := aliases[head]; ok {
						use(path.Concat(r[1:]))
					} else if r.HasPrefix(ast.DefaultRootRef) {
						use(r)
					}
					return false
				})
				if inEntry {
					// Within the package a rule is called by its short name.
					ast.WalkVars(x, func(v ast.Var) bool {
						used[string(v)] = true
						return false
					})
				}
			}
		}
	}
	if whole {
		return nil
	}
	var out []string
	warned := map[string]bool{}
	for _, n := range names {
		m := modules[n]
		if !m.Package.Path.Equal(entry) {
			continue
		}
		for _, r := range m.Rules {
			name := ruleName(r)
			if used[name] || warned[name] || isContractRule(name) || strings.HasPrefix(name, "test_") || strings.HasPrefix(name, "todo_test_") {
				continue // tests (test_*) are for opa test
			}
			warned[name] = true
			loc := n
			if r.Location != nil {
				loc = fmt.Sprintf("%s:%d", n, r.Location.Row)
			}
			w := fmt.Sprintf("policy %s: rule %s is not a decision point of package %s and no rule uses it: it has no effect", loc, name, EntryPackage)
			if c := closestContractRule(name); c != "" {
				w += " (did you mean " + c + "?)"
			}
			out = append(out, w)
		}
	}
	return out
}

// ruleParts are the parts of a rule that can use other rules: everything
// but its own name.
func ruleParts(r *ast.Rule) []any {
	var out []any
	for ; r != nil; r = r.Else {
		out = append(out, r.Body, r.Head.Args)
		if r.Head.Key != nil {
			out = append(out, r.Head.Key)
		}
		if r.Head.Value != nil {
			out = append(out, r.Head.Value)
		}
		if len(r.Head.Reference) > 1 {
			out = append(out, r.Head.Reference[1:])
		}
	}
	return out
}

// ruleName is the first segment of a rule's name (a for a.b.c := ...).
func ruleName(r *ast.Rule) string {
	name := r.Head.Name.String()
	if name == "" && len(r.Head.Reference) > 0 {
		name = r.Head.Reference[0].String()
	}
	return name
}

func isContractRule(name string) bool {
	for _, rs := range [][]string{podRules, workloadRules} {
		for _, r := range rs {
			if name == r {
				return true
			}
		}
	}
	return false
}

// closestContractRule is the contract rule a name likely misspells ("" for
// none): the same up to case, underscores and a plural s (Scope,
// nodePreparation, budget), or within two edits (eligibilty).
func closestContractRule(name string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "") }
	n := norm(name)
	best, bestDist := "", 3
	for _, rs := range [][]string{podRules, workloadRules} {
		for _, r := range rs {
			c := norm(r)
			if n == c || strings.TrimSuffix(n, "s") == strings.TrimSuffix(c, "s") {
				return r
			}
			if d := fieldcheck.Distance(n, c); d < bestDist {
				best, bestDist = r, d
			}
		}
	}
	return best
}

// LoadBundle parses the default library and the Rego files under paths
// (files or directories, recursively; *_test.rego files are skipped).
func LoadBundle(paths []string) (*Bundle, error) {
	files := map[string]string{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
		if !st.IsDir() {
			if engine.FileKind(p) == engine.CEL {
				return nil, fmt.Errorf("policy %s is not a Rego file (.rego): CEL policies (RolloutPolicy YAML) run on the cel engine", p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read policy %s: %w", p, err)
			}
			files[p] = string(b)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !engine.IsPolicyFile(engine.Rego, path) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = string(b)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read policy directory %s: %w", p, err)
		}
	}
	if len(paths) > 0 && len(files) == 0 {
		return nil, fmt.Errorf("policy %s: no .rego files found", strings.Join(paths, ", "))
	}
	return parseBundle(files, paths)
}

func parseBundle(files map[string]string, sources []string) (*Bundle, error) {
	b := &Bundle{Modules: map[string]*ast.Module{}, Defines: map[string]string{}, Sources: sources}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	hasDefaults, hasEntry := false, false
	var others []string // "FILE has package P" for the files in neither contract package
	for _, n := range names {
		m, err := ast.ParseModuleWithOpts(n, files[n], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			if where, msg, ok := regoError(err); ok && where != "" {
				return nil, fmt.Errorf("policy %s: %w", where, &lineError{line: msg, err: err})
			}
			return nil, fmt.Errorf("policy %s: %w", n, oneLineError(err))
		}
		if m == nil || m.Package == nil {
			return nil, fmt.Errorf("policy %s: no package declaration: the entry package is %s", n, EntryPackage)
		}
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		switch pkg {
		case DefaultsPackage:
			hasDefaults = true
		case EntryPackage:
			hasEntry = true
			for _, r := range m.Rules {
				name := ruleName(r)
				if err := checkRuleShape(n, r, name); err != nil {
					return nil, err
				}
				if _, ok := b.Defines[name]; !ok {
					b.Defines[name] = n
				}
			}
		case resolverPackage:
			return nil, fmt.Errorf("policy %s: package %s is reserved for rollplan", n, resolverPackage)
		default:
			others = append(others, fmt.Sprintf("%s has package %s", n, pkg))
		}
		b.Modules[n] = m
	}
	if !hasEntry && len(others) > 0 {
		// Library packages are fine beside an entry package; without one,
		// nothing of the policy would run.
		return nil, fmt.Errorf("policy %s: no file declares package %s (%s): the entry package must be %s; library packages it imports may sit beside it",
			strings.Join(sources, ", "), EntryPackage, strings.Join(others, "; "), EntryPackage)
	}
	b.Warnings = append(unreferencedPackages(names, b.Modules), unreferencedRules(names, b.Modules)...)
	b.shippedDefaults = !hasDefaults
	if !hasDefaults {
		const n = "rollplan/defaults.rego"
		m, err := ast.ParseModuleWithOpts(n, policies.Defaults, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("embedded default policy: %w", err)
		}
		b.Modules[n] = m
		files[n] = policies.Defaults
		names = append(names, n)
		sort.Strings(names)
	}
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00%s", filepath.ToSlash(n), len(files[n]), files[n])
	}
	b.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return b, nil
}

// source names the package that answers a rule.
func (b *Bundle) source(rule string) string {
	if _, ok := b.Defines[rule]; ok {
		return "s"
	}
	return "d"
}

// where names the file that answers a rule, for error messages.
func (b *Bundle) where(rule string) string {
	if f, ok := b.Defines[rule]; ok {
		return fmt.Sprintf("%s (package %s)", f, EntryPackage)
	}
	return "the default strategy (package " + DefaultsPackage + ")"
}

// whereRule is where plus the row of the rule's first definition, when the
// entry package defines it.
func (b *Bundle) whereRule(rule string) string {
	f, ok := b.Defines[rule]
	if !ok {
		return b.where(rule)
	}
	if m := b.Modules[f]; m != nil {
		for _, r := range m.Rules {
			if ruleName(r) == rule && r.Location != nil {
				return fmt.Sprintf("%s:%d (package %s)", f, r.Location.Row, EntryPackage)
			}
		}
	}
	return b.where(rule)
}

// resolver generates the module that picks each rule's answer.
func (b *Bundle) resolver() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "package %s\n\n", resolverPackage)
	if len(b.Defines) > 0 {
		fmt.Fprintf(&sb, "import data.%s as s\n", EntryPackage)
	}
	fmt.Fprintf(&sb, "import data.%s as d\n\n", DefaultsPackage)
	fmt.Fprintf(&sb, "pods := [[i, %s.scope(p), %s.eligibility(p), %s.order(p)] | some i, p in input.pods; p.updated == false]\n\n",
		b.source("scope"), b.source("eligibility"), b.source("order"))
	// The verdict is asked only while a wave is judged: null otherwise,
	// and null when the policy's rule is undefined for the wave judged
	// (decode reports that).
	fmt.Fprintf(&sb, "analysis_verdict := v if {\n\tinput.analysis.wave > 0\n\tv := %s.analysis_verdict\n} else := null\n\n", b.source("analysis_verdict"))
	fmt.Fprintf(&sb, "decisions := {\"pods\": pods, \"budgets\": %s.budgets, \"pacing\": %s.pacing, \"nodePreparation\": %s.node_preparation, \"analysis\": %s.analysis, \"analysisVerdict\": analysis_verdict, \"halt\": %s.halt, \"deny\": %s.deny}\n",
		b.source("budgets"), b.source("pacing"), b.source("node_preparation"), b.source("analysis"), b.source("halt"), b.source("deny"))
	for _, r := range podRules {
		fmt.Fprintf(&sb, "\nprobe_%s(p) := %s.%s(p)\n", r, b.source(r), r)
	}
	for _, r := range workloadRules {
		fmt.Fprintf(&sb, "\nprobe_%s := %s.%s\n", r, b.source(r), r)
	}
	return sb.String()
}
