package analysis

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var wave = Target{Namespace: "shop", Name: "web", Kind: "StatefulSet", Revision: "web-7d9f", Wave: 2, Pods: []string{"web-3", "web-4"}}

func TestRenderQuery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m        Measurement
		target   Target
		want     string
		wantErrs []string // each a substring of the error
	}{
		{
			name: "every field, PromQL",
			m: Measurement{Name: "errors", Provider: ProviderPrometheus, Window: 5 * time.Minute,
				Query: `sum(rate(e{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}",rev="{{.Revision}}",kind="{{.Kind}}",app="{{.Name}}"}[{{.Window}}])) # wave {{.Wave}}`},
			target: wave,
			want:   `sum(rate(e{namespace="shop",pod=~"web-3|web-4",rev="web-7d9f",kind="StatefulSet",app="web"}[5m])) # wave 2`,
		},
		{
			name:   "a compound window",
			m:      Measurement{Name: "w", Provider: ProviderPrometheus, Window: 90 * time.Minute, Query: `[{{.Window}}]`},
			target: wave,
			want:   `[1h30m]`,
		},
		{
			// A dot is a regex metacharacter, quoted for the regex, and the
			// quoting backslash escaped for the PromQL string.
			name:   "pod names are regex-quoted, then PromQL-escaped",
			m:      Measurement{Name: "p", Provider: ProviderPrometheus, Query: `pod=~"{{.PodRegex}}"`},
			target: Target{Pods: []string{"a.b", "c+d"}},
			want:   `pod=~"a\\.b|c\\+d"`,
		},
		{
			name:   "a quote in a value cannot end the PromQL string",
			m:      Measurement{Name: "q", Provider: ProviderPrometheus, Query: `ns="{{.Namespace}}"`},
			target: Target{Namespace: `x"} or vector(1) #`},
			want:   `ns="x\"} or vector(1) #"`,
		},
		{
			name:   "web URLs escape for a query",
			m:      Measurement{Name: "u", Provider: ProviderWeb, Query: `https://m/api?ns={{.Namespace}}&pods={{.PodRegex}}`},
			target: Target{Namespace: "a&b=c", Pods: []string{"p.1", "p 2"}},
			want:   `https://m/api?ns=a%26b%3Dc&pods=p%5C.1%7Cp+2`,
		},
		{
			name:   "range and with rebind the dot; $ still reaches the target",
			m:      Measurement{Name: "r", Provider: ProviderPrometheus, Query: `{{with .Name}}{{.}}/{{$.Namespace}}{{end}}`},
			target: wave,
			want:   `web/shop`,
		},
		{
			name:     "an unknown field names the measurement and the field",
			m:        Measurement{Name: "typo", Provider: ProviderPrometheus, Query: `x{ns="{{.Namespce}}"} {{if .Revison}}{{end}}`},
			target:   wave,
			wantErrs: []string{`measurement "typo"`, "unknown field .Namespce, .Revison", "known: .Interval, .Kind, .Name, .Namespace, .PodRegex, .Pods, .Revision, .Wave, .Window"},
		},
		{
			name:     "an unknown field through $",
			m:        Measurement{Name: "dollar", Provider: ProviderPrometheus, Query: `{{with .Name}}{{$.Podz}}{{end}}`},
			target:   wave,
			wantErrs: []string{`measurement "dollar"`, "unknown field .Podz"},
		},
		{
			name:     "a syntax error names the measurement",
			m:        Measurement{Name: "broken", Provider: ProviderPrometheus, Query: `x{ns="{{.Namespace"}`},
			target:   wave,
			wantErrs: []string{`measurement "broken"`, "query template", "query:1"},
		},
		{
			name:     "no pods",
			m:        Measurement{Name: "empty", Provider: ProviderPrometheus, Query: `pod=~"{{.PodRegex}}"`},
			target:   Target{Namespace: "x"},
			wantErrs: []string{`measurement "empty"`, "PodRegex", "the wave has no pods"},
		},
		{
			name:     "no window",
			m:        Measurement{Name: "nowin", Provider: ProviderPrometheus, Query: `rate(x[{{.Window}}])`},
			target:   wave,
			wantErrs: []string{`measurement "nowin"`, "<.Window>", "no window"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderQuery(tc.m, tc.target)
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("rendered %q, want an error", got)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("rendered\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRenderBodyEscapesJSON(t *testing.T) {
	m := Measurement{Name: "b", Provider: ProviderWeb, Web: WebRequest{Body: `{"ns":"{{.Namespace}}","pods":"{{.PodRegex}}"}`}}
	got, err := renderBody(m, Target{Namespace: `a"b\c`, Pods: []string{"p.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ns":"a\"b\\c","pods":"p\\.1"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	ok := Measurement{Name: "m", Provider: ProviderPrometheus, Query: "up", Count: 3, Interval: time.Minute}
	for _, tc := range []struct {
		name    string
		edit    func(*Measurement)
		wantErr string // empty: valid
	}{
		{"valid", func(*Measurement) {}, ""},
		{"a valid range query", func(m *Measurement) { m.Aggregation, m.Window = AggregationMax, time.Minute }, ""},
		{"a valid web measurement", func(m *Measurement) { m.Provider, m.Web.JSONPath = ProviderWeb, ".v" }, ""},
		{"no name", func(m *Measurement) { m.Name = "" }, "without a name"},
		{"unknown provider", func(m *Measurement) { m.Provider = "datadog" }, `provider "datadog"`},
		{"no query", func(m *Measurement) { m.Query = "" }, "no query"},
		{"count 0", func(m *Measurement) { m.Count = 0 }, "count 0"},
		{"several without an interval", func(m *Measurement) { m.Interval = 0 }, "want a positive interval"},
		{"negative window", func(m *Measurement) { m.Window = -time.Second }, "negative duration"},
		{"unknown aggregation", func(m *Measurement) { m.Aggregation, m.Window = "p99", time.Minute }, `aggregation "p99"`},
		{"aggregation without window", func(m *Measurement) { m.Aggregation = AggregationAvg }, "without a window"},
		{"aggregation on web", func(m *Measurement) {
			m.Provider, m.Web.JSONPath, m.Aggregation, m.Window = ProviderWeb, ".v", AggregationAvg, time.Minute
		}, "only Prometheus range queries"},
		{"web without JSONPath", func(m *Measurement) { m.Provider = ProviderWeb }, "without a JSONPath"},
		{"web bad JSONPath", func(m *Measurement) { m.Provider, m.Web.JSONPath = ProviderWeb, "{.a[}" }, "jsonpath {.a[}"},
		{"web PUT", func(m *Measurement) { m.Provider, m.Web.JSONPath, m.Web.Method = ProviderWeb, ".v", "PUT" }, `method "PUT"`},
		{"unknown field in the body", func(m *Measurement) {
			m.Provider, m.Web.JSONPath, m.Web.Body = ProviderWeb, ".v", `{{.Nmae}}`
		}, "body template: unknown field .Nmae"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok
			tc.edit(&m)
			err := m.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr != "" && m.Name != "" && !strings.Contains(err.Error(), `measurement "m"`):
				t.Errorf("error %v does not name the measurement", err)
			}
		})
	}
}

// FuzzPodRegex: whatever the pod names, {{.PodRegex}} inside a PromQL
// string unquotes (as Prometheus's lexer does, with Go's rules) to a regex
// that, anchored as Prometheus anchors it, matches each pod and nothing
// else.
func FuzzPodRegex(f *testing.F) {
	f.Add("web-0", "web-1", "web-2")
	f.Add("a.b", "a+b", "axb")
	f.Add(`x"y`, `back\slash`, "x\ny")
	f.Add("(", "|", "")
	f.Add("\xff", "é", "$^")
	f.Fuzz(func(t *testing.T, a, b, other string) {
		pods := []string{a, b}
		got, err := RenderQuery(Measurement{Name: "f", Provider: ProviderPrometheus, Query: `"{{.PodRegex}}"`}, Target{Pods: pods})
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			if err == nil {
				t.Errorf("pods %q (not UTF-8) rendered %s, want an error", pods, got)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		s, err := strconv.Unquote(got)
		if err != nil {
			t.Fatalf("%s is not a valid PromQL string: %v", got, err)
		}
		re, err := regexp.Compile("^(?:" + s + ")$")
		if err != nil {
			t.Fatalf("regex %q: %v", s, err)
		}
		for _, p := range pods {
			if !re.MatchString(p) {
				t.Errorf("regex %q does not match pod %q", s, p)
			}
		}
		if other != a && other != b && re.MatchString(other) {
			t.Errorf("regex %q matches %q, not a pod of %q", s, other, pods)
		}
	})
}

// FuzzRender: any template renders or fails without panicking, and a value
// placed inside a PromQL string comes back unchanged when unquoted.
func FuzzRender(f *testing.F) {
	f.Add(`x{ns="{{.Namespace}}"}`, "default")
	f.Add(`{{range .Name}}{{.}}{{end}}`, `a"b`)
	f.Add(`{{template "x" .}}{{define "x"}}{{.Wave}}{{end}}`, "\\")
	f.Add(`{{.Window}}{{.PodRegex}}{{printf "%q" .Kind}}`, "\x00")
	f.Add(`{{$x := .Namespace}}{{$x.Foo}}`, "")
	f.Fuzz(func(t *testing.T, tmpl, ns string) {
		target := Target{Namespace: ns, Name: "n", Kind: "Deployment", Revision: "r", Wave: 1, Pods: []string{"p"}}
		_, _ = RenderQuery(Measurement{Name: "f", Provider: ProviderPrometheus, Query: tmpl, Window: time.Minute}, target)
		got, err := RenderQuery(Measurement{Name: "f", Provider: ProviderPrometheus, Query: `"{{.Namespace}}"`}, target)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := strconv.Unquote(got); err != nil || back != ns {
			t.Errorf("namespace %q rendered as %s, unquotes to %q, %v", ns, got, back, err)
		}
	})
}

// A template cannot stall or exhaust the process that renders it.
func TestRenderBounded(t *testing.T) {
	for _, tc := range []struct{ query, wantErr, want string }{
		{`{{range 1000000000}}{{end}}`, "range, define and template are not supported", ""},
		{`{{if .Name}}{{range 3}}{{end}}{{end}}`, "range, define and template are not supported", ""},
		{`{{define "a"}}{{template "a"}}{{template "a"}}{{end}}{{template "a"}}`, "range, define and template are not supported", ""},
		{`{{with .Name}}{{block "b" .}}{{end}}{{end}}`, "range, define and template are not supported", ""},
		{`{{printf "%999999999d" 1}}`, "width or precision over 1000", ""},
		{`{{printf "%.9999f" 1.0}}`, "width or precision over 1000", ""},
		{`{{printf "%*d" 999999999 1}}`, "* widths are not supported", ""},
		{`{{printf "%[1]*d" 999999999 1}}`, "* widths are not supported", ""},
		{`{{printf "%900d" 1}}{{printf "%900d" 1}}`, "", strings.Repeat(" ", 899) + "1" + strings.Repeat(" ", 899) + "1"},
		{`{{printf "rate(x[3600s]) %5.2f%% %s" 1.5 .Name}}`, "", "rate(x[3600s])  1.50% web"},
		{strings.Repeat(`{{printf "%1000d" 1}}`, 70), "over 65536 bytes", ""},
	} {
		got, err := RenderQuery(Measurement{Name: "b", Provider: ProviderPrometheus, Query: tc.query}, wave)
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%.40s: rendered %q, %v; want %q", tc.query, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%.40s: error %v, want one saying %q", tc.query, err, tc.wantErr)
		}
	}
}
