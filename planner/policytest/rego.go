package policytest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/rollplan/rollplan/policies"
)

// EmbeddedDefaults is the file name under which the embedded default
// library (package rollplan.defaults) is loaded into a Rego suite that does
// not hold it. It is left out of coverage reports.
const EmbeddedDefaults = "rollplan/defaults.rego"

const defaultsPackage = "data.rollplan.defaults"

// RegoSuite is one OPA test run: the Rego files of a policy and its tests.
type RegoSuite struct {
	// Root: the directory holding the suite's _test.rego files.
	Root string
	// Files: the .rego files of the suite, sorted.
	Files []string
}

// GroupRego splits .rego files into suites, one per policy, because several
// policies may each define the entry package rollplan.strategy and cannot
// be compiled together:
//
//   - every directory holding a _test.rego file is the root of a suite;
//   - each .rego file belongs to the suite of the nearest directory, itself
//     or above, that is a root;
//   - files under no root (e.g. a policy named next to a test directory:
//     rollplan test policy.rego tests/) join every suite.
//
// So `rollplan test policies/` runs policies/*.rego as one suite and each
// policies/examples/<name>/ as another.
func GroupRego(files []string) []RegoSuite {
	roots := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			roots[filepath.Dir(f)] = true
		}
	}
	byRoot := map[string][]string{}
	var shared []string
	for _, f := range files {
		dir := filepath.Dir(f)
		for {
			if roots[dir] {
				byRoot[dir] = append(byRoot[dir], f)
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				shared = append(shared, f)
				break
			}
			dir = parent
		}
	}
	var out []RegoSuite
	for _, root := range slices.Sorted(maps.Keys(roots)) {
		fs := append(byRoot[root], shared...)
		sort.Strings(fs)
		out = append(out, RegoSuite{Root: root, Files: fs})
	}
	return out
}

// RegoOptions steer RunRego.
type RegoOptions struct {
	// Coverage: compute coverage as `opa test --coverage` does.
	Coverage bool
	// Timeout per test (0: 30s).
	Timeout time.Duration
}

// RegoRun is the outcome of RunRego.
type RegoRun struct {
	Results []Result
	// Coverage over every file of the suites that compiled, except the
	// embedded default library (nil unless RegoOptions.Coverage).
	Coverage *cover.Report
}

// RunRego runs the test rules (test_*, todo_* skipped) of each suite with
// OPA's tester, the way `opa test` does (Rego v1), with the embedded
// default library added to suites that do not define package
// rollplan.defaults. A suite that does not parse or compile gives one Error
// result naming its root.
func RunRego(ctx context.Context, suites []RegoSuite, o RegoOptions) (*RegoRun, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	run := &RegoRun{}
	var cov *cover.Cover
	if o.Coverage {
		cov = cover.New()
	}
	covered := map[string]*ast.Module{}
	for _, s := range suites {
		modules, err := parseSuite(s)
		if err == nil {
			var results []Result
			results, err = runSuite(ctx, s, modules, cov, o)
			run.Results = append(run.Results, results...)
			if err == nil {
				for name, m := range modules {
					covered[name] = m
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			run.Results = append(run.Results, Result{
				File: s.Root, Class: s.Root, Name: "(compile)", ID: s.Root + " (compile)",
				Status: Error, Location: s.Root, Detail: err.Error(),
			})
		}
	}
	if cov != nil {
		rep := cov.Report(covered)
		delete(rep.Files, EmbeddedDefaults)
		rep.CoveredLines, rep.NotCoveredLines, rep.Coverage = 0, 0, 0
		for _, fr := range rep.Files {
			rep.CoveredLines += fr.CoveredLines
			rep.NotCoveredLines += fr.NotCoveredLines
		}
		if total := rep.CoveredLines + rep.NotCoveredLines; total > 0 {
			rep.Coverage = 100 * float64(rep.CoveredLines) / float64(total)
		}
		run.Coverage = &rep
	}
	return run, nil
}

func parseSuite(s RegoSuite) (map[string]*ast.Module, error) {
	popts := ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}
	modules := map[string]*ast.Module{}
	hasDefaults := false
	var errs []string
	for _, f := range s.Files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m, err := ast.ParseModuleWithOpts(f, string(src), popts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if m.Package.Path.String() == defaultsPackage {
			hasDefaults = true
		}
		modules[f] = m
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	if !hasDefaults {
		m, err := ast.ParseModuleWithOpts(EmbeddedDefaults, policies.Defaults, popts)
		if err != nil {
			return nil, fmt.Errorf("embedded default policy: %w", err)
		}
		modules[EmbeddedDefaults] = m
	}
	return modules, nil
}

func runSuite(ctx context.Context, s RegoSuite, modules map[string]*ast.Module, cov *cover.Cover, o RegoOptions) ([]Result, error) {
	// The compiler `opa test` builds, less what rollplan does not use
	// (schemas, custom capabilities, a data store).
	compiler := ast.NewCompiler().
		WithEnablePrintStatements(true).
		WithCapabilities(ast.CapabilitiesForThisVersion()).
		WithUseTypeCheckAnnotations(true)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetDefaultRegoVersion(ast.RegoV1).
		CapturePrintOutput(true).
		StackTraces(true).
		SetModules(modules).
		SetTimeout(o.Timeout).
		SetParallel(runtime.GOMAXPROCS(0))
	if cov != nil {
		runner.SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []Result
	var failing []string
	for tr := range ch {
		out = append(out, regoResults(tr)...)
		if tr.Fail && tr.Error == nil {
			failing = append(failing, tr.Package+"."+tr.Name)
		}
	}
	if len(failing) > 0 {
		// Coverage and tracing exclude each other: run the failing tests
		// again, traced, to say where they failed.
		lines := failureLines(ctx, modules, failing, o.Timeout)
		for i := range out {
			if l, ok := lines[out[i].Class+"."+strings.SplitN(out[i].Name, "/", 2)[0]]; ok && out[i].Status == Fail {
				first, rest, _ := strings.Cut(out[i].Detail, "\n")
				out[i].Detail = strings.TrimSuffix(first+"\n"+l+"\n"+rest, "\n")
			}
		}
	}
	return out, nil
}

// failureLines runs the named tests with tracing and returns, per test, the
// last expression that failed, as `opa test --var-values` shows it.
func failureLines(ctx context.Context, modules map[string]*ast.Module, ids []string, timeout time.Duration) map[string]string {
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = regexp.QuoteMeta(id)
	}
	runner := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithEnablePrintStatements(true).WithCapabilities(ast.CapabilitiesForThisVersion()).WithUseTypeCheckAnnotations(true)).
		SetDefaultRegoVersion(ast.RegoV1).
		EnableTracing(true).
		SetModules(modules).
		SetTimeout(timeout).
		Filter("^(" + strings.Join(quoted, "|") + ")$")
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for tr := range ch {
		for _, e := range slices.Backward(tr.Trace) {
			if e.Op != topdown.FailOp || e.Location == nil || e.QueryID == 0 {
				continue
			}
			if expr, ok := e.Node.(*ast.Expr); ok {
				if _, every := expr.Terms.(*ast.Every); every {
					continue
				}
			}
			out[tr.Package+"."+tr.Name] = fmt.Sprintf("failed at %s:%d: %s", e.Location.File, e.Location.Row, strings.TrimSpace(string(e.Location.Text)))
			break
		}
	}
	return out
}

// regoResults turns one tester result into results, one per leaf test case
// when the test has sub-results (counted as `opa test` counts them).
func regoResults(tr *tester.Result) []Result {
	base := Result{Class: tr.Package, Name: tr.Name, ID: tr.Package + "." + tr.Name, Duration: tr.Duration}
	if tr.Location != nil {
		base.File, base.Line = tr.Location.File, tr.Location.Row
		base.Location = fmt.Sprintf("%s:%d", tr.Location.File, tr.Location.Row)
	}
	// detail: the message, then what the test printed.
	detail := func(msg ...string) string {
		if len(tr.Output) > 0 {
			msg = append(msg, "output:", indent(strings.TrimSpace(string(tr.Output)), "  "))
		}
		return strings.Join(msg, "\n")
	}
	switch {
	case tr.Skip:
		base.Status = Skip
		return []Result{base}
	case tr.Error != nil:
		base.Status = Error
		msg := []string{tr.Error.Error()}
		if topdown.IsCancel(tr.Error) {
			msg[0] += " (the test ran past rollplan test --timeout: raise it, or make the policy cheaper)"
		}
		var tdErr *topdown.Error
		if errors.As(tr.Error, &tdErr) && len(tdErr.StackTrace) > 0 {
			msg = append(msg, "Traceback:")
			for _, f := range tdErr.StackTrace {
				msg = append(msg, fmt.Sprintf("  %v", f))
			}
		}
		base.Detail = detail(msg...)
		return []Result{base}
	}
	if len(tr.SubResults) == 0 {
		if tr.Fail {
			base.Status = Fail
			base.Detail = detail("the test rule is false or undefined")
		} else {
			base.Status = Pass
		}
		return []Result{base}
	}
	var out []Result
	for fullName, sr := range tr.SubResults.Iter {
		if len(sr.SubResults) > 0 {
			continue
		}
		r := base
		r.Name = base.Name + "/" + strings.Join(fullName, "/")
		r.ID = base.ID + "/" + strings.Join(fullName, "/")
		if sr.Fail {
			r.Status = Fail
			r.Detail = detail("the test case is false or undefined")
		}
		out = append(out, r)
	}
	return out
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
