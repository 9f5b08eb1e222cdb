package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	celpolicy "github.com/rollplan/rollplan/planner/engine/cel"
)

// policyPath is a --policy path and the engines its files are for: a file
// by its extension; a directory by the files under it, as the engines load
// them (*.rego for Rego, *.yaml, *.yml, *.json for CEL; *_test files
// aside). A directory may hold both (the shipped examples do: each engine
// then reads its own files).
type policyPath struct {
	path      string
	dir       bool
	rego, cel bool
}

// checkPolicyPaths refuses a --policy path that is not there, naming it as
// the flag took it ("--policy PATH: no such file or directory: pass a
// policy file or directory"), before an engine is picked or loads it. Every
// command taking --policy picks its engine through planFlags.engineKind,
// which calls it first.
func checkPolicyPaths(paths []string) error {
	for _, p := range paths {
		_, err := os.Stat(p)
		if err == nil {
			continue
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "no such file or directory", not "stat PATH: ..."
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--policy %s: %w: pass a policy file or directory", p, err)
		}
		return fmt.Errorf("--policy %s: %w", p, err)
	}
	return nil
}

func classifyPolicyPath(p string) policyPath {
	pp := policyPath{path: p}
	st, err := os.Stat(p)
	if err != nil {
		return pp // the engine's loader reports it
	}
	if !st.IsDir() {
		pp.rego = strings.EqualFold(filepath.Ext(p), ".rego")
		pp.cel = celpolicy.IsPolicyFile(p)
		return pp
	}
	pp.dir = true
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if strings.HasSuffix(path, ".rego") && !strings.HasSuffix(path, "_test.rego") {
			pp.rego = true
		}
		if celpolicy.IsPolicyFile(path) {
			pp.cel = true
		}
		if pp.rego && pp.cel {
			return filepath.SkipAll
		}
		return nil
	})
	return pp
}

// not says that the path holds no policy of the engine (Rego or CEL).
func (pp policyPath) not(engine string) string {
	if pp.dir {
		other := "CEL policies (.yaml)"
		if engine == "CEL" {
			other = "Rego files (.rego)"
		}
		return fmt.Sprintf("%s holds %s and no %s policy", pp.path, other, engine)
	}
	return fmt.Sprintf("%s is not a %s policy file", pp.path, engine)
}
