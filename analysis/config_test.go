package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name, file       string
		options, kind    string
		wantErr, lookErr string
	}{
		{name: "prometheus by its own name", file: "providers:\n  prometheus:\n    address: http://prom:9090\n    timeout: 5s\n", kind: "prometheus"},
		{name: "named options of type web", file: "providers:\n  status-api:\n    type: web\n    headers: {X-Team: a}\n", options: "status-api", kind: "web"},
		{name: "unknown field", file: "providers:\n  prometheus:\n    adress: http://prom:9090\n", wantErr: `unknown field "adress"`},
		{name: "bad address", file: "providers:\n  prometheus:\n    address: prom:9090\n", wantErr: "providers[prometheus]: prometheus address"},
		{name: "bad timeout", file: "providers:\n  prometheus:\n    address: http://p:1\n    timeout: soon\n", wantErr: `providers[prometheus].timeout "soon"`},
		{name: "unknown type", file: "providers:\n  x:\n    type: graphite\n", wantErr: `providers[x]: type "graphite"`},
		{name: "options not configured", file: "providers:\n  prometheus:\n    address: http://p:1\n", options: "thanos", kind: "prometheus", lookErr: `provider options "thanos" are not configured (the analysis config has: prometheus)`},
		{name: "options of another kind", file: "providers:\n  prometheus:\n    address: http://p:1\n", kind: "web", options: "prometheus", lookErr: "configure a prometheus provider, the measurement wants web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "analysis.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := LoadConfig(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err %v, want one naming %s and saying %q", err, path, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Provider(tt.options, tt.kind)
			if tt.lookErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.lookErr) {
					t.Fatalf("err %v, want %q", err, tt.lookErr)
				}
				return
			}
			if err != nil || p == nil {
				t.Fatalf("provider %v, err %v", p, err)
			}
		})
	}
	if _, err := (*Resolver)(nil).Provider("", "prometheus"); err == nil || !strings.Contains(err.Error(), "--analysis-config") {
		t.Errorf("nil resolver: err %v, want one pointing at --analysis-config", err)
	}
}

// A Rendered query reaches the server as the plan rendered it: template
// text in it is not executed again.
func TestRenderedQueryIsSentAsIs(t *testing.T) {
	m := Measurement{Name: "e", Provider: ProviderPrometheus, Query: `up{pod=~"web-0|web-1"}`, Count: 1, Rendered: true}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := RenderQuery(m, Target{})
	if err != nil || got != m.Query {
		t.Fatalf("rendered %q, %v; want %q as is", got, err, m.Query)
	}
	m.Query, m.Rendered = "{{.PodRegex}}", false
	if _, err := RenderQuery(m, Target{}); err == nil {
		t.Fatal("an unrendered template over no pods rendered")
	}
}
