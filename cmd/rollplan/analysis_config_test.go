package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The controller's --analysis-config: a file that does not exist (the
// manifests' optional ConfigMap absent) is no providers and a log line
// naming it; a file that exists is loaded, and a bad one is an error.
func TestControllerAnalysisConfig(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))

	missing := filepath.Join(dir, "analysis", "analysis.yaml")
	r, err := controllerAnalysisConfig(missing, log)
	if err != nil || r != nil {
		t.Fatalf("missing file: %v, %v; want no providers and no error", r, err)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if line["level"] != "WARN" || line["file"] != missing || !strings.Contains(line["msg"].(string), "never passes") {
		t.Errorf("log line %v: want a warning naming %s and saying gates never pass", line, missing)
	}
	if _, err := controllerAnalysisConfig(missing, log); err != nil {
		t.Fatal(err)
	}

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("providers:\n  prometheus:\n    address: http://127.0.0.1:9090\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	r, err = controllerAnalysisConfig(good, log)
	if err != nil || r == nil {
		t.Fatalf("good file: %v, %v; want providers", r, err)
	}
	if p, err := r.Provider("", "prometheus"); err != nil || p == nil {
		t.Errorf("good file: provider prometheus: %v, %v", p, err)
	}
	if buf.Len() != 0 {
		t.Errorf("good file logged %q", buf.String())
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers:\n  prometheus:\n    adress: http://127.0.0.1:9090\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := controllerAnalysisConfig(bad, log); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file: %v, want an error naming it", err)
	}
	if r, err := controllerAnalysisConfig("", log); r != nil || err != nil {
		t.Errorf("no flag: %v, %v; want nothing", r, err)
	}
}
