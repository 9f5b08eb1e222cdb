package hygiene

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRepositoryFileLength fails when a non-test Go file of this
// repository is over MaxLines (issue 30: files a reader can hold).
func TestRepositoryFileLength(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module root: %v", root, err)
	}
	// The walk must reach the files the rule is about, or it proves nothing.
	all, err := LongFiles(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range all {
		seen[f.Path] = true
	}
	for _, want := range []string{"planner/engine/cel/fast.go", "planner/plan/pods.go", "test/node/node.go", "cmd/rollplan/main.go"} {
		if !seen[want] {
			t.Errorf("the walk did not reach %s (%d files seen)", want, len(all))
		}
	}
	long, err := LongFiles(root, MaxLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s has %d lines, more than %d: split it by what its parts do", f.Path, f.Lines, MaxLines)
	}
}

func TestLongFiles(t *testing.T) {
	lines := func(n int) string { return strings.Repeat("x\n", n) }
	files := map[string]string{
		"a.go":                   lines(5),
		"b.go":                   lines(4),
		"noeol.go":               lines(4) + "x", // 5 lines, the last without newline
		"a_test.go":              lines(9),
		"notes.txt":              lines(9),
		"sub/c.go":               lines(6),
		"sub/testdata/d.go":      lines(9),
		"vendor/e.go":            lines(9),
		".hidden/f.go":           lines(9),
		"_scratch/g.go":          lines(9),
		"test/cluster/v1/etc.go": lines(9),
		"test/node/h.go":         lines(7),
	}
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		limit int
		want  []LongFile
	}{
		{limit: 9, want: nil},
		{limit: 6, want: []LongFile{{"test/node/h.go", 7}}},
		{limit: 4, want: []LongFile{{"a.go", 5}, {"noeol.go", 5}, {"sub/c.go", 6}, {"test/node/h.go", 7}}},
		{limit: 3, want: []LongFile{{"a.go", 5}, {"b.go", 4}, {"noeol.go", 5}, {"sub/c.go", 6}, {"test/node/h.go", 7}}},
	}
	for _, c := range cases {
		got, err := LongFiles(root, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("LongFiles(limit %d) = %v, want %v", c.limit, got, c.want)
		}
	}
}
