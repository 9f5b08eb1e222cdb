package engines

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rollplan/rollplan/planner/engine"
)

// A suite or --policy that names no engine gets the one its paths are
// for: files by extension, directories by their policy files (tests
// aside); paths for both engines are a MixedError.
func TestInfer(t *testing.T) {
	dir := t.TempDir()
	celDir := filepath.Join(dir, "cel")
	regoDir := filepath.Join(dir, "rego")
	for _, f := range []string{filepath.Join(celDir, "p.yaml"), filepath.Join(regoDir, "p.rego"), filepath.Join(regoDir, "p_test.yaml")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{nil, engine.Rego},
		{[]string{"x/policy.yaml"}, engine.CEL},
		{[]string{"x/policy.YML"}, engine.CEL},
		{[]string{"x/policy.json"}, engine.CEL},
		{[]string{"x/policy.rego"}, engine.Rego},
		{[]string{celDir}, engine.CEL},
		{[]string{regoDir}, engine.Rego},
	} {
		if got, err := Infer(c.paths); err != nil || got != c.want {
			t.Errorf("Infer(%q) = %s, %v, want %s", c.paths, got, err, c.want)
		}
	}
	var mixed *MixedError
	if _, err := Infer([]string{regoDir, celDir}); !errors.As(err, &mixed) || mixed.Rego != regoDir || mixed.CEL != celDir {
		t.Errorf("Infer(rego, cel): %v, want a MixedError", err)
	}
}

// Every engine the contract names opens by that name, and answers to it.
func TestOpen(t *testing.T) {
	for _, kind := range engine.Kinds {
		e, err := Open(context.Background(), kind, nil, Options{})
		if err != nil {
			t.Fatalf("Open(%s): %v", kind, err)
		}
		if e.Name() != kind {
			t.Errorf("Open(%s).Name() = %s", kind, e.Name())
		}
	}
	if _, err := Open(context.Background(), "opa", nil, Options{}); err == nil || err.Error() != `unknown engine "opa": want rego, cel or native` {
		t.Errorf("Open(opa): %v", err)
	}
	if _, err := Open(context.Background(), engine.Native, []string{"p.rego"}, Options{}); err == nil {
		t.Error("Open(native, p.rego): no error")
	}
}
