package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode checks that Decode never panics, that every error names the
// file, and that every snapshot it returns has a stable digest.
func FuzzDecode(f *testing.F) {
	seeds, err := filepath.Glob("../../testdata/scenarios/*/snapshot.yaml")
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) == 0 {
		f.Fatal("no seed snapshots under ../../testdata/scenarios")
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"---",
		"kind: List\nitems: [1]",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 5}",
		"{",
		"kind: Deployment\nmetadata: {name: [}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := Decode("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if s == nil {
			t.Fatal("Decode returned neither a snapshot nor an error")
		}
		d1, err := s.Digest()
		if err != nil {
			t.Fatalf("Digest of a decoded snapshot: %v", err)
		}
		d2, err := s.Digest()
		if err != nil {
			t.Fatalf("second Digest: %v", err)
		}
		if d1 != d2 {
			t.Fatalf("Digest is not stable: %s then %s", d1, d2)
		}
	})
}

func TestDecodeErrors(t *testing.T) {
	const (
		deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: default}\nspec: {replicas: 2}\n"
		pod        = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: [{name: app, image: nginx}]}\n"
	)
	tests := []struct {
		name string
		in   string
		// wantErr: substrings the error must contain; none means success.
		wantErr []string
		check   func(t *testing.T, s *Snapshot, warnings []string)
	}{
		{
			name:    "malformed YAML",
			in:      "kind: Deployment\nmetadata: {name: [}",
			wantErr: []string{"in.yaml", "document 1"},
		},
		{
			name:    "second document bad",
			in:      "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\nkind: [\n",
			wantErr: []string{"in.yaml", "document 2"},
		},
		{
			name:    "List with a bad item",
			in:      "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n- apiVersion: v1\n  metadata: {name: n2}\n",
			wantErr: []string{"in.yaml", "document 1", "items[1]", "has no kind"},
		},
		{
			name:    "List with a non-object item",
			in:      "kind: List\nitems: [1]",
			wantErr: []string{"in.yaml", "items[0]"},
		},
		{
			name:    "wrong field type",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: 5}",
			wantErr: []string{"in.yaml", "document 1", "Pod default/p", "spec.containers"},
		},
		{
			name:    "no kind",
			in:      "apiVersion: v1\nmetadata: {name: x}\n",
			wantErr: []string{"in.yaml", "has no kind"},
		},
		{
			name:    "no name",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\n",
			wantErr: []string{"in.yaml", "Pod has no metadata.name"},
		},
		{
			name:    "two different objects with one name",
			in:      pod + "---\n" + strings.Replace(pod, "nginx", "nginx:2", 1),
			wantErr: []string{"in.yaml: document 2", "Pod default/p is defined twice with different content", "first in in.yaml: document 1"},
		},
		{
			name:    "different resourceVersions are named",
			in:      strings.Replace(pod, "namespace: default", "namespace: default, resourceVersion: '10'", 1) + "---\n" + strings.Replace(pod, "namespace: default", "namespace: default, resourceVersion: '12'", 1),
			wantErr: []string{"Pod default/p is defined twice with different content", "resourceVersion 10 there, 12 here"},
		},
		{
			name: "identical objects are one",
			// The same Pod as YAML, then as JSON in a List with its keys in
			// another order: the decoded objects are equal.
			in: pod + "---\n" + `{"kind": "List", "apiVersion": "v1", "items": [{"spec": {"containers": [{"image": "nginx", "name": "app"}]}, "metadata": {"namespace": "default", "name": "p"}, "kind": "Pod", "apiVersion": "v1"}]}`,
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(s.Pods) != 1 {
					t.Errorf("len(Pods) = %d, want 1", len(s.Pods))
				}
			},
		},
		{
			name:    "a list is not an object",
			in:      "- apiVersion: v1\n  kind: Pod\n",
			wantErr: []string{"in.yaml: document 1: want a Kubernetes object (apiVersion, kind, metadata), got a list"},
		},
		{
			name:    "a string is not an object",
			in:      pod + "---\nhello\n",
			wantErr: []string{"in.yaml: document 2: want a Kubernetes object (apiVersion, kind, metadata), got a string"},
		},
		{
			name:    "a number is not an object",
			in:      "42\n",
			wantErr: []string{"in.yaml: document 1: want a Kubernetes object", "got a number"},
		},
		{
			name:    "kind of the wrong type",
			in:      "apiVersion: v1\nkind: [Pod]\nmetadata: {name: p}\n",
			wantErr: []string{"in.yaml: document 1: not a Kubernetes object: field kind: cannot use a JSON array as a string"},
		},
		{
			name: "unknown kind is skipped with a warning",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: {a: b}\n---\n" + pod,
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(warnings) != 1 || !strings.Contains(warnings[0], "ConfigMap") {
					t.Errorf("warnings = %q, want one mentioning ConfigMap", warnings)
				}
				if len(s.Pods) != 1 {
					t.Errorf("len(Pods) = %d, want 1", len(s.Pods))
				}
			},
		},
		{
			// A slip for a kind rollplan reads would leave the workload out
			// of the plan with a mere warning: it is an error naming the
			// object and the field.
			name:    "a kind spelt in the wrong case",
			in:      "apiVersion: apps/v1\nkind: Daemonset\nmetadata: {name: agent, namespace: prod}\n---\n" + pod,
			wantErr: []string{"in.yaml: document 1: Daemonset prod/agent: field kind: apps/v1 has no kind \"Daemonset\": did you mean DaemonSet?"},
		},
		{
			name:    "a kind one letter off, in a List",
			in:      "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pods, metadata: {name: p, namespace: default}}\n",
			wantErr: []string{"in.yaml: document 1, items[0]: Pods default/p: field kind: \"Pods\" is not a kind rollplan reads", "did you mean Pod?"},
		},
		{
			name:    "no other kind in the apps group",
			in:      "apiVersion: apps/v1\nkind: Rollout\nmetadata: {name: r}\n",
			wantErr: []string{"in.yaml: document 1: Rollout r: field kind: apps/v1 has no kind \"Rollout\" (it has Deployment, ReplicaSet, StatefulSet, DaemonSet and ControllerRevision)"},
		},
		{
			// Another group's kind of the same name (OpenKruise's
			// StatefulSet) is not a slip: left out, as other kinds are.
			name: "a kind of another group is skipped",
			in:   "apiVersion: apps.kruise.io/v1beta1\nkind: StatefulSet\nmetadata: {name: web, namespace: default}\n---\n" + pod,
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(warnings) != 1 || !strings.Contains(warnings[0], "apps.kruise.io/v1beta1 StatefulSet") || len(s.Pods) != 1 {
					t.Errorf("warnings = %q, pods %d: want one skipping apps.kruise.io/v1beta1 StatefulSet, and the pod", warnings, len(s.Pods))
				}
			},
		},
		{
			name: "List holding a Deployment and a Pod",
			in:   "apiVersion: v1\nkind: List\nitems:\n- " + indent(deployment) + "- " + indent(pod),
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(s.Deployments) != 1 || len(s.Pods) != 1 {
					t.Fatalf("got %d deployments and %d pods, want 1 and 1", len(s.Deployments), len(s.Pods))
				}
				if s.Deployments[0].Name != "d" || s.Pods[0].Name != "p" {
					t.Errorf("got deployment %q and pod %q", s.Deployments[0].Name, s.Pods[0].Name)
				}
				if len(warnings) != 0 {
					t.Errorf("warnings = %q, want none", warnings)
				}
			},
		},
		{
			name: "JSON input",
			in:   `{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}}`,
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(s.StatefulSets) != 1 {
					t.Fatalf("len(StatefulSets) = %d, want 1", len(s.StatefulSets))
				}
				if r := s.StatefulSets[0].Spec.Replicas; r == nil || *r != 3 {
					t.Errorf("spec.replicas = %v, want 3", r)
				}
			},
		},
		{
			name: "empty documents are skipped",
			in:   "---\n---\n# only a comment\n---\n" + pod,
			check: func(t *testing.T, s *Snapshot, warnings []string) {
				if len(s.Pods) != 1 {
					t.Errorf("len(Pods) = %d, want 1", len(s.Pods))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, warnings, err := Decode("in.yaml", []byte(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Decode succeeded, want an error containing %q", tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "in.yaml") {
					t.Errorf("error %q does not start with the file name", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if tt.check != nil {
				tt.check(t, s, warnings)
			}
		})
	}
}

// indent indents every line but the first by two spaces, to nest a YAML
// document as a list item.
func indent(doc string) string {
	return strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}

func TestLoadFilesDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pods.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: default}\n")
	write("nested/deeper/sts.json", `{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"}}`)
	// Not a snapshot file: it would fail to decode if it were read.
	write("nested/notes.txt", "kind: [ this is not YAML\n")

	s, warnings, err := LoadFiles([]string{dir})
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	if len(s.Pods) != 1 || s.Pods[0].Name != "p1" {
		t.Errorf("pods = %d, want p1 from pods.yaml", len(s.Pods))
	}
	if len(s.StatefulSets) != 1 || s.StatefulSets[0].Name != "web" {
		t.Errorf("statefulsets = %d, want web from nested/deeper/sts.json", len(s.StatefulSets))
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}

	t.Run("empty directory", func(t *testing.T) {
		empty := t.TempDir()
		if err := os.Mkdir(filepath.Join(empty, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadFiles([]string{empty})
		if err == nil {
			t.Fatal("LoadFiles of an empty directory succeeded")
		}
		if !strings.Contains(err.Error(), "no .yaml") || !strings.Contains(err.Error(), empty) {
			t.Errorf("error %q should name the directory and say it holds no .yaml", err)
		}
	})

	t.Run("nonexistent path", func(t *testing.T) {
		missing := filepath.Join(dir, "does-not-exist.yaml")
		_, _, err := LoadFiles([]string{missing})
		if err == nil {
			t.Fatal("LoadFiles of a missing path succeeded")
		}
		if want := missing + ": no such file or directory"; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %q is not fs.ErrNotExist", err)
		}
	})

	t.Run("files without objects", func(t *testing.T) {
		d := t.TempDir()
		files := map[string]string{
			"empty.yaml":     "",
			"comments.yaml":  "# a comment\n---\n# another\n",
			"emptylist.yaml": "apiVersion: v1\nkind: List\nitems: []\n",
			"cm.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			"node.yaml":      "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := func(names ...string) []string {
			var out []string
			for _, n := range names {
				out = append(out, filepath.Join(d, n))
			}
			return out
		}
		for _, c := range []struct {
			files   []string
			wantErr string
			warns   int
		}{
			{files: p("empty.yaml"), wantErr: p("empty.yaml")[0] + ": holds no Kubernetes objects"},
			{files: p("comments.yaml", "emptylist.yaml"), wantErr: strings.Join(p("comments.yaml", "emptylist.yaml"), ", ") + ": hold no Kubernetes objects"},
			{files: p("cm.yaml", "empty.yaml"), wantErr: "no object of a kind rollplan reads"},
			{files: p("node.yaml", "empty.yaml", "comments.yaml"), warns: 2},
		} {
			_, warnings, err := LoadFiles(c.files)
			if c.wantErr == "" {
				if err != nil || len(warnings) != c.warns {
					t.Errorf("%v: %v, warnings %q; want %d warnings", c.files, err, warnings, c.warns)
				}
				continue
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.files[0]) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", c.files, err, c.wantErr)
			}
		}
	})

	t.Run("objects in two files", func(t *testing.T) {
		d := t.TempDir()
		node := "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {zone: a}}\nstatus: {allocatable: {cpu: '2'}}\n"
		write := func(name, content string) string {
			f := filepath.Join(d, name)
			if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return f
		}
		a := write("a.yaml", node)
		b := write("b.yaml", strings.Replace(node, "'2'", "2000m", 1))
		s, _, err := LoadFiles([]string{a, b, a})
		if err != nil || len(s.Nodes) != 1 {
			t.Fatalf("one Node in three files: %v, %d nodes", err, len(s.Nodes))
		}
		c := write("c.yaml", strings.Replace(node, "zone: a", "zone: b", 1))
		_, _, err = LoadFiles([]string{a, c})
		if err == nil || !strings.Contains(err.Error(), c+": document 1: Node n1 is defined twice with different content (first in "+a+": document 1)") {
			t.Errorf("two different Nodes n1: %v", err)
		}
	})

	t.Run("decode error names the file", func(t *testing.T) {
		bad := t.TempDir()
		p := filepath.Join(bad, "bad.yml")
		if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n---\nkind: [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadFiles([]string{bad})
		if err == nil || !strings.Contains(err.Error(), p+": document 2") {
			t.Errorf("err = %v, want one naming %s: document 2", err, p)
		}
	})
}
