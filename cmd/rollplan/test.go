package main

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/policytest"
)

type testOptions struct {
	output    string
	verbose   bool
	coverage  bool
	failUnder float64
	timeout   time.Duration
	// kubernetesVersion: the version of the YAML cases that name none.
	kubernetesVersion string
}

func newTestCommand() *cobra.Command {
	var o testOptions
	cmd := &cobra.Command{
		Use:   "test PATH...",
		Short: "Run policy tests: Rego _test.rego files and RolloutPolicyTest YAML suites",
		Long: `Run the policy test suites under the PATHs (files, or directories read recursively).

Rego: every directory holding _test.rego files is one OPA test run over the
.rego files in it and below it (a subdirectory with its own _test.rego files
is a run of its own), with the default library (package rollplan.defaults)
loaded when the run does not hold it; .rego files under no such directory
(rollplan test policy.rego tests/) join every run. Test rules are test_*
(todo_* are skipped), as for opa test; only .rego files are loaded, no data
files. --coverage reports the Rego files' coverage as opa test --coverage
computes it.

YAML: documents with apiVersion rollplan.dev/v1alpha1 and kind
RolloutPolicyTest plan a snapshot with a policy and compare the decisions or
the plan with what they expect; other YAML files are ignored. A test that
fails or cannot run, or coverage below --fail-under, exits 1 (the table
below).`,
		Example: `  rollplan test policies/
  rollplan test -v --coverage policies/examples/leader-last
  rollplan test -o junit policies/ > report.xml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("test takes at least one PATH: a policy directory, a _test.rego file or a RolloutPolicyTest YAML file")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.kubernetesVersion != "" {
				if _, err := kubeversion.Parse(o.kubernetesVersion); err != nil {
					return usageError{fmt.Errorf("--kubernetes-version %w", err)}
				}
			}
			switch o.output {
			case "text", "junit":
			default:
				return usageError{fmt.Errorf("unknown output format %q: want text or junit", o.output)}
			}
			if cmd.Flags().Changed("fail-under") {
				if o.failUnder < 0 || o.failUnder > 100 {
					return usageError{fmt.Errorf("--fail-under %v: want a percentage between 0 and 100", o.failUnder)}
				}
				o.coverage = true
			} else {
				o.failUnder = -1
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runTests(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.output, "output", "o", "text", "output format: text or junit (JUnit XML on stdout, one testsuite per file)")
	fl.BoolVarP(&o.verbose, "verbose", "v", false, "list passing tests too")
	fl.BoolVar(&o.coverage, "coverage", false, "report the coverage of the Rego files per file and overall, as opa test --coverage computes it")
	fl.Float64Var(&o.failUnder, "fail-under", 0, "fail when the overall Rego coverage is below this percentage (implies --coverage; like opa test --threshold)")
	durationVar(fl, &o.timeout, "timeout", 30*time.Second, positive, "deadline for each test")
	fl.StringVar(&o.kubernetesVersion, "kubernetes-version", "", "Kubernetes version ("+kubeversion.SupportedList()+") the RolloutPolicyTest cases that set no kubernetesVersion plan for; default: the version their snapshot records, else "+kubeversion.Newest.String())
	return cmd
}

// errTestsFailed makes the exit status 1 after the report is printed.
var errTestsFailed = errors.New("policy tests failed")

// warnOnce prints each warning once, as a "warning: ..." line.
func warnOnce(w io.Writer) func(string) {
	seen := map[string]bool{}
	return func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			fmt.Fprintf(w, "warning: %s\n", msg)
		}
	}
}

func runTests(ctx context.Context, stdout, stderr io.Writer, paths []string, o testOptions) error {
	in, err := policytest.Discover(paths)
	if err != nil {
		return err
	}
	var results []policytest.Result
	suites := policytest.GroupRego(in.Rego)
	warn := warnOnce(stderr)
	for _, s := range suites {
		// What plan would warn about the policy under test (a rule
		// nothing uses, say a misspelt scopes), tests warn about too.
		var policy []string
		for _, f := range s.Files {
			if !strings.HasSuffix(f, "_test.rego") {
				policy = append(policy, f)
			}
		}
		if b, err := rego.LoadBundle(policy); err == nil && len(policy) > 0 {
			for _, w := range b.Warnings {
				warn(w)
			}
		}
	}
	rr, err := policytest.RunRego(ctx, suites, policytest.RegoOptions{Coverage: o.coverage, Timeout: o.timeout})
	if err != nil {
		return err
	}
	results = append(results, rr.Results...)
	runner := &policytest.Runner{Timeout: o.timeout, KubernetesVersion: o.kubernetesVersion, Warn: warn}
	for _, f := range in.YAML {
		suites, err := policytest.LoadFile(f)
		if err != nil {
			results = append(results, policytest.Result{File: f, Class: f, Name: "(load)", ID: f, Status: policytest.Error, Detail: err.Error()})
			continue
		}
		for _, s := range suites {
			results = append(results, runner.Run(ctx, s)...)
		}
	}
	if len(results) == 0 {
		return fmt.Errorf("no tests found under %s: want _test.rego files or RolloutPolicyTest YAML files", strings.Join(paths, ", "))
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.ID < b.ID
	})

	var counts [4]int
	for _, r := range results {
		counts[r.Status]++
	}
	failed := counts[policytest.Fail]+counts[policytest.Error] > 0
	coverageLow := false
	if rr.Coverage != nil && o.failUnder >= 0 && rr.Coverage.Coverage < o.failUnder {
		coverageLow = true
	}

	if o.output == "junit" {
		if err := writeJUnit(stdout, results); err != nil {
			return err
		}
		if rr.Coverage != nil {
			printCoverage(stderr, rr, o.failUnder)
		}
	} else {
		for _, r := range results {
			if r.Status == policytest.Pass && !o.verbose {
				continue
			}
			if r.Status == policytest.Skip && !o.verbose {
				continue
			}
			fmt.Fprintf(stdout, "%s %s", r.Status, r.ID)
			if o.verbose {
				fmt.Fprintf(stdout, " (%s)", r.Duration.Round(time.Microsecond))
			}
			fmt.Fprintln(stdout)
			if r.Status == policytest.Fail || r.Status == policytest.Error {
				if r.Location != "" {
					fmt.Fprintln(stdout, indentLines(r.Location, "    "))
				}
				if r.Detail != "" {
					fmt.Fprintln(stdout, indentLines(r.Detail, "    "))
				}
			}
		}
		if rr.Coverage != nil {
			printCoverage(stdout, rr, o.failUnder)
		}
		summary := fmt.Sprintf("%d passed, %d failed", counts[policytest.Pass], counts[policytest.Fail])
		if n := counts[policytest.Error]; n > 0 {
			summary += ", " + plural.Count(n, "error", "errors")
		}
		if n := counts[policytest.Skip]; n > 0 {
			summary += fmt.Sprintf(", %d skipped", n)
		}
		fmt.Fprintln(stdout, summary)
	}
	switch {
	case failed:
		return errTestsFailed
	case coverageLow:
		return fmt.Errorf("coverage %.2f%% is below --fail-under %v", rr.Coverage.Coverage, o.failUnder)
	}
	return nil
}

func printCoverage(w io.Writer, rr *policytest.RegoRun, failUnder float64) {
	c := rr.Coverage
	files := make([]string, 0, len(c.Files))
	for f := range c.Files {
		files = append(files, f)
	}
	sort.Strings(files)
	fmt.Fprintln(w, "coverage:")
	for _, f := range files {
		fr := c.Files[f]
		fmt.Fprintf(w, "  %6.2f%%  %s (%d of %s)\n", fr.Coverage, f, fr.CoveredLines, plural.Count(fr.CoveredLines+fr.NotCoveredLines, "line", "lines"))
	}
	line := fmt.Sprintf("  %6.2f%%  total (%d of %s)", c.Coverage, c.CoveredLines, plural.Count(c.CoveredLines+c.NotCoveredLines, "line", "lines"))
	if failUnder >= 0 {
		line += fmt.Sprintf(", --fail-under %v", failUnder)
	}
	fmt.Fprintln(w, line)
}

func indentLines(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// JUnit XML, the subset CI systems read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *struct{}     `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",cdata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeJUnit writes one testsuite per file (results are sorted by file).
func writeJUnit(w io.Writer, results []policytest.Result) error {
	doc := junitSuites{Name: "rollplan test"}
	var total time.Duration
	for _, r := range results {
		if n := len(doc.Suites); n == 0 || doc.Suites[n-1].Name != filepath.ToSlash(r.File) {
			doc.Suites = append(doc.Suites, junitSuite{Name: filepath.ToSlash(r.File)})
		}
		s := &doc.Suites[len(doc.Suites)-1]
		c := junitCase{Name: r.Name, Classname: r.Class, Time: seconds(r.Duration)}
		first, _, _ := strings.Cut(r.Detail, "\n")
		body := strings.TrimSpace(r.Location + "\n" + r.Detail)
		switch r.Status {
		case policytest.Fail:
			c.Failure = &junitMessage{Message: strings.TrimSuffix(first, ":"), Body: body}
			s.Failures++
		case policytest.Error:
			c.Error = &junitMessage{Message: strings.TrimSuffix(first, ":"), Body: body}
			s.Errors++
		case policytest.Skip:
			c.Skipped = &struct{}{}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
		total += r.Duration
	}
	for i := range doc.Suites {
		s := &doc.Suites[i]
		var d time.Duration
		for _, r := range results {
			if filepath.ToSlash(r.File) == s.Name {
				d += r.Duration
			}
		}
		s.Time = seconds(d)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
