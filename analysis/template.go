package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
)

// fields are what a template may name, sorted; templateData has each as a
// field or a method.
var fields = []string{"Kind", "Name", "Namespace", "PodsRegex", "Revision", "Wave", "Window"}

// templateData is what a query template renders over. The strings are
// already escaped for where the template puts them.
type templateData struct {
	Namespace, Name, Kind, Revision string
	Wave                            int

	pods   []string
	window time.Duration
	escape func(string) string
}

// PodsRegex is an alternation of the wave's pod names, each quoted for a
// regular expression (Prometheus anchors =~ matchers at both ends), then
// escaped like the other strings. A wave without pods is an error: an empty
// regex would match every series without a pod label.
func (d templateData) PodsRegex() (string, error) {
	if len(d.pods) == 0 {
		return "", errors.New("{{.PodsRegex}}: the wave has no pods")
	}
	quoted := make([]string, len(d.pods))
	for i, p := range d.pods {
		if !utf8.ValidString(p) {
			return "", fmt.Errorf("{{.PodsRegex}}: pod name %q is not UTF-8", p)
		}
		quoted[i] = regexp.QuoteMeta(p)
	}
	return d.escape(strings.Join(quoted, "|")), nil
}

// Window is the measurement's window as a PromQL duration (5m, 1h30m).
func (d templateData) Window() (string, error) {
	if d.window <= 0 {
		return "", errors.New("{{.Window}}: the measurement has no window")
	}
	return model.Duration(d.window).String(), nil
}

// Escapers for where a rendered value lands.
var (
	// promQLString escapes for the inside of a double-quoted PromQL string,
	// whose escapes are Go's.
	promQLString = func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	// urlQuery escapes for a URL's query value or path segment.
	urlQuery = url.QueryEscape
	// jsonString escapes for the inside of a JSON string.
	jsonString = func(s string) string {
		b, _ := json.Marshal(s) // a string always marshals
		return string(b[1 : len(b)-1])
	}
)

// RenderQuery renders m's Query over t: for Prometheus with every value
// escaped for a double-quoted PromQL string (namespace="{{.Namespace}}",
// pod=~"{{.PodsRegex}}"), for the web provider escaped for a URL query.
// A Rendered query is returned as it is.
func RenderQuery(m Measurement, t Target) (string, error) {
	if m.Rendered {
		return m.Query, nil
	}
	escape := promQLString
	if m.Provider == ProviderWeb {
		escape = urlQuery
	}
	out, err := render("query", m.Query, m, t, escape)
	if err != nil {
		return "", fmt.Errorf("measurement %q: %w", m.Name, err)
	}
	return out, nil
}

// renderBody renders a web measurement's Body, values escaped for a JSON
// string.
func renderBody(m Measurement, t Target) (string, error) {
	out, err := render("body", m.Web.Body, m, t, jsonString)
	if err != nil {
		return "", fmt.Errorf("measurement %q: %w", m.Name, err)
	}
	return out, nil
}

func render(what, text string, m Measurement, t Target, escape func(string) string) (string, error) {
	tmpl, err := parseTemplate(what, text)
	if err != nil {
		return "", err
	}
	d := templateData{
		Namespace: escape(t.Namespace), Name: escape(t.Name), Kind: escape(t.Kind), Revision: escape(t.Revision),
		Wave: t.Wave, pods: t.Pods, window: m.Window, escape: escape,
	}
	b := &limitedBuilder{}
	if err := tmpl.Execute(b, d); err != nil {
		// text/template's own words name the field (at <.PodsRegex>: ...).
		return "", fmt.Errorf("%s template: %w", what, err)
	}
	return b.String(), nil
}

// parseTemplate parses text and checks that it names only known fields of
// the target (where the dot is the target: outside range and with).
func parseTemplate(what, text string) (*template.Template, error) {
	tmpl, err := template.New(what).Option("missingkey=error").Funcs(template.FuncMap{"printf": boundedPrintf}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s template: %w", what, err)
	}
	if tmpl.Tree == nil {
		return tmpl, nil // only {{define}}s, or nothing: renders empty
	}
	if len(tmpl.Templates()) > 1 || hasLoop(tmpl.Tree.Root) {
		// Over the target's single values, range has nothing to iterate but
		// integers and {{template}} nothing to reuse; {{range 1000000000}}
		// or a {{define}} calling itself twice would stall the rollout.
		return nil, fmt.Errorf("%s template: range, define and template are not supported: the fields are single values", what)
	}
	var unknown []string
	checkFields(tmpl.Tree.Root, true, &unknown)
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s template: unknown field %s (known: .%s)", what,
			strings.Join(slices.Compact(unknown), ", "), strings.Join(fields, ", ."))
	}
	return tmpl, nil
}

// checkFields appends to unknown the fields n names that templateData does
// not have. rootDot says whether the dot is the template's data there.
func checkFields(n parse.Node, rootDot bool, unknown *[]string) {
	check := func(name string) {
		if !slices.Contains(fields, name) {
			*unknown = append(*unknown, "."+name)
		}
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			checkFields(c, rootDot, unknown)
		}
	case *parse.ActionNode:
		checkFields(n.Pipe, rootDot, unknown)
	case *parse.TemplateNode:
		checkFields(n.Pipe, rootDot, unknown)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			checkFields(c, rootDot, unknown)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			checkFields(a, rootDot, unknown)
		}
	case *parse.IfNode:
		checkBranch(&n.BranchNode, rootDot, rootDot, unknown)
	case *parse.RangeNode:
		checkBranch(&n.BranchNode, rootDot, false, unknown)
	case *parse.WithNode:
		checkBranch(&n.BranchNode, rootDot, false, unknown)
	case *parse.FieldNode:
		if rootDot {
			check(n.Ident[0])
		}
	case *parse.VariableNode:
		if n.Ident[0] == "$" && len(n.Ident) > 1 {
			check(n.Ident[1])
		}
	case *parse.ChainNode:
		checkFields(n.Node, rootDot, unknown)
	}
}

// checkBranch checks an if, range or with: its pipeline with the outer dot,
// its body with bodyDot, its else with the outer dot.
func checkBranch(b *parse.BranchNode, rootDot, bodyDot bool, unknown *[]string) {
	checkFields(b.Pipe, rootDot, unknown)
	checkFields(b.List, bodyDot, unknown)
	checkFields(b.ElseList, rootDot, unknown)
}

// hasLoop reports whether the tree under n has a range or a template call.
func hasLoop(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		return slices.ContainsFunc(n.Nodes, hasLoop)
	case *parse.RangeNode, *parse.TemplateNode:
		return true
	case *parse.IfNode:
		return hasLoop(n.List) || hasLoop(n.ElseList)
	case *parse.WithNode:
		return hasLoop(n.List) || hasLoop(n.ElseList)
	}
	return false
}

// maxRendered bounds a rendered template: a query is a line or two.
const maxRendered = 64 << 10

// limitedBuilder is a strings.Builder that refuses to grow past maxRendered.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRendered {
		return 0, fmt.Errorf("rendered query over %d bytes", maxRendered)
	}
	return b.Builder.Write(p)
}

// maxWidth bounds printf's widths and precisions, which fmt would otherwise
// honour by allocating them ({{printf "%999999999d" 1}}).
const maxWidth = 1000

// boundedPrintf is text/template's printf with widths and precisions of at
// most maxWidth, and none taken from an argument (*).
func boundedPrintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		for i < len(format) && strings.IndexByte("0123456789.*[]", format[i]) >= 0 {
			n := 0
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				if n = n*10 + int(format[i]-'0'); n > maxWidth {
					return "", fmt.Errorf("printf: a width or precision over %d", maxWidth)
				}
				i++
			}
			if i < len(format) && format[i] == '*' {
				return "", errors.New("printf: * widths are not supported")
			}
			if i < len(format) && strings.IndexByte(".[]", format[i]) >= 0 {
				i++
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}
