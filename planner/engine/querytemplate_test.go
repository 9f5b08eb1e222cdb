package engine

import (
	"strings"
	"testing"
)

// The plan's queries are rendered once, here, escaped for the provider
// and with the template limits the analysis package applies: what the plan
// shows is what a provider sends, and a policy cannot stall planning.
func TestRenderQuery(t *testing.T) {
	target := NewQueryTarget("StatefulSet", "shop", "web", "web-7d", 2, []string{"web.0", "web-1"})
	for _, tc := range []struct {
		name    string
		m       Measurement
		want    string
		wantErr string
	}{
		{"PromQL: a dotted pod name is quoted for the regex, then for the string",
			Measurement{Name: "e", Provider: ProviderPrometheus, Query: `errors{namespace="{{.Namespace}}",pod=~"{{.PodRegex}}"}[{{.Window}}]`, Window: "5m"},
			`errors{namespace="shop",pod=~"web\\.0|web-1"}[5m]`, ""},
		{"web: values escaped for a URL",
			Measurement{Name: "w", Provider: ProviderWeb, Query: `http://m/q?ns={{.Namespace}}&pods={{.PodRegex}}&wave={{.Wave}}`},
			`http://m/q?ns=shop&pods=web%5C.0%7Cweb-1&wave=2`, ""},
		{"a window read but not declared",
			Measurement{Name: "n", Provider: ProviderPrometheus, Query: `rate(x[{{.Window}}])`},
			"", "{{.Window}}: the measurement has no window"},
		{"a loop is refused",
			Measurement{Name: "l", Provider: ProviderPrometheus, Query: `{{range 1000000000}}x{{end}}`},
			"", "range, define and template are not supported"},
		{"an unknown field is named",
			Measurement{Name: "u", Provider: ProviderPrometheus, Query: `{{.Podz}}`},
			"", "measurement u: query template: unknown field .Podz"},
		{"printf widths are bounded",
			Measurement{Name: "p", Provider: ProviderPrometheus, Query: `{{printf "%999999999d" 1}}`},
			"", "a width or precision over 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderQuery(tc.m, target)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q (rendered %q)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("rendered %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
