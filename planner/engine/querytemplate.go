package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// The one renderer of measurement templates: the plan renders every gate's
// queries with it (RenderQuery), and the analysis package renders with it
// when used on its own, so what the plan shows is what a provider sends.

// queryFields are what a template may name, sorted; queryData has each as
// a field or a method.
var queryFields = []string{"Interval", "Kind", "Name", "Namespace", "PodRegex", "Pods", "Revision", "Wave", "Window"}

// Escapers for where a rendered value lands.
var (
	// EscapePromQL escapes for the inside of a double-quoted PromQL string,
	// whose escapes are Go's: a pod named web.0 quoted for a regex
	// (web\.0) becomes web\\.0 there.
	EscapePromQL = func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
	// EscapeURL escapes for a URL's query value or path segment.
	EscapeURL = url.QueryEscape
	// EscapeJSON escapes for the inside of a JSON string.
	EscapeJSON = func(s string) string {
		b, _ := json.Marshal(s) // a string always marshals
		return string(b[1 : len(b)-1])
	}
)

// EscapeFor is the escaper of a provider's query: PromQL for prometheus,
// a URL for web.
func EscapeFor(provider string) func(string) string {
	if provider == ProviderWeb {
		return EscapeURL
	}
	return EscapePromQL
}

// queryData is what a template renders over: the target's values, already
// escaped for where the template puts them.
type queryData struct {
	Kind, Namespace, Name, Revision string
	Wave                            int
	Pods                            []string

	podRegex, window, interval string
}

// PodRegex is the target's PodRegex (regex metacharacters quoted), escaped
// like the other values. Empty is an error: an empty regex would match
// every series without a pod label.
func (d queryData) PodRegex() (string, error) {
	if d.podRegex == "" {
		return "", errors.New("{{.PodRegex}}: the wave has no pods")
	}
	return d.podRegex, nil
}

// Window is the measurement's window; a template that reads it needs one.
func (d queryData) Window() (string, error) {
	if d.window == "" {
		return "", errors.New("{{.Window}}: the measurement has no window")
	}
	return d.window, nil
}

// Interval is the measurement's interval as the policy wrote it.
func (d queryData) Interval() string { return d.interval }

// RenderTemplate renders text (a query, a URL, a request body; what names
// it in errors) over t with every value passed through escape. Templates
// may name only the target's fields, may not loop (range, define,
// template: the fields are single values, and {{range 1000000000}} would
// stall a rollout) and render at most maxRendered bytes.
func RenderTemplate(what, text string, t QueryTarget, escape func(string) string) (string, error) {
	tmpl, err := parseQueryTemplate(what, text)
	if err != nil {
		return "", err
	}
	d := queryData{
		Kind: escape(t.Kind), Namespace: escape(t.Namespace), Name: escape(t.Name), Revision: escape(t.Revision),
		Wave: t.Wave, podRegex: escape(t.PodRegex), window: escape(t.Window), interval: escape(t.Interval),
	}
	for _, p := range t.Pods {
		if !utf8.ValidString(p) {
			return "", fmt.Errorf("%s template: pod name %q is not UTF-8", what, p)
		}
		d.Pods = append(d.Pods, escape(p))
	}
	b := &limitedBuilder{}
	if err := tmpl.Execute(b, d); err != nil {
		// text/template's own words name the field (at <.PodRegex>: ...).
		return "", fmt.Errorf("%s template: %w", what, err)
	}
	return b.String(), nil
}

// CheckTemplate reports what RenderTemplate would refuse in text before
// any target is known: a parse error, an unknown field, a loop.
func CheckTemplate(what, text string) error {
	_, err := parseQueryTemplate(what, text)
	return err
}

// parseQueryTemplate parses text and checks that it names only known
// fields of the target (where the dot is the target: outside range and
// with) and does not loop.
func parseQueryTemplate(what, text string) (*template.Template, error) {
	tmpl, err := template.New(what).Option("missingkey=error").Funcs(template.FuncMap{"printf": boundedPrintf}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s template: %w", what, err)
	}
	if tmpl.Tree == nil {
		return tmpl, nil // only {{define}}s, or nothing: renders empty
	}
	if len(tmpl.Templates()) > 1 || hasLoop(tmpl.Tree.Root) {
		return nil, fmt.Errorf("%s template: range, define and template are not supported: the fields are single values", what)
	}
	var unknown []string
	checkFields(tmpl.Tree.Root, true, &unknown)
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s template: unknown field %s (known: .%s)", what,
			strings.Join(slices.Compact(unknown), ", "), strings.Join(queryFields, ", ."))
	}
	return tmpl, nil
}

// checkFields appends to unknown the fields n names that queryData does
// not have. rootDot says whether the dot is the template's data there.
func checkFields(n parse.Node, rootDot bool, unknown *[]string) {
	check := func(name string) {
		if !slices.Contains(queryFields, name) {
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
