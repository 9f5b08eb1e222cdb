package policytest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
)

// Inputs are the files `rollplan test` runs, found under its PATHs.
type Inputs struct {
	// Rego: every .rego file (tests and the policies they test).
	Rego []string
	// YAML: the .yaml and .yml files that mention RolloutPolicyTest (LoadFile
	// reads their suites and ignores documents of other kinds).
	YAML []string
}

// Discover finds the inputs under paths: files, or directories read
// recursively (skipping directories whose name starts with a dot). A path
// that does not exist is an error naming it.
func Discover(paths []string) (*Inputs, error) {
	in := &Inputs{}
	seen := map[string]bool{}
	add := func(path string, explicit bool) error {
		path = filepath.Clean(path)
		if seen[path] {
			return nil
		}
		ext := strings.ToLower(filepath.Ext(path))
		switch {
		case engine.FileKind(path) == engine.Rego: // tests and the policies they test
			seen[path] = true
			in.Rego = append(in.Rego, path)
		case ext == ".yaml" || ext == ".yml": // suites are YAML, whatever the engine
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte(Kind)) {
				seen[path] = true
				in.YAML = append(in.YAML, path)
			}
		default:
			if explicit {
				return fmt.Errorf("test path %s: not a .rego, .yaml or .yml file or a directory", path)
			}
		}
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("test path %s does not exist", p)
			}
			return nil, fmt.Errorf("test path %s: %w", p, err)
		}
		if !st.IsDir() {
			if err := add(p, true); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			return add(path, false)
		})
		if err != nil {
			return nil, fmt.Errorf("test path %s: %w", p, err)
		}
	}
	sort.Strings(in.Rego)
	sort.Strings(in.YAML)
	return in, nil
}
