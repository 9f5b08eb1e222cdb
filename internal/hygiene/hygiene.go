// Package hygiene holds checks on the repository's source itself that no
// compiler makes, run as tests (hygiene_test.go).
package hygiene

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MaxLines is the most lines a non-test Go file may have: a file past it
// holds more than one concern and is split by what its parts do.
const MaxLines = 800

// LongFile is a non-test Go file over a limit.
type LongFile struct {
	Path  string // slash-separated, relative to the root walked
	Lines int
}

// skipDir reports whether the walk leaves a directory out: the built
// control-plane sources under test/cluster (upstream code, not ours),
// vendored code, and what the go tool ignores (testdata, ".x", "_x").
func skipDir(rel, name string) bool {
	switch {
	case rel == "test/cluster", name == "vendor", name == "testdata":
		return true
	case rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")):
		return true
	}
	return false
}

// LongFiles walks root and returns its non-test Go files with more than
// limit lines, sorted by path.
func LongFiles(root string, limit int) ([]LongFile, error) {
	var long []LongFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("path %s relative to %s: %w", path, root, err)
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		n := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			n++ // a last line without its newline still counts
		}
		if n > limit {
			long = append(long, LongFile{Path: rel, Lines: n})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	sort.Slice(long, func(i, j int) bool { return long[i].Path < long[j].Path })
	return long, nil
}
