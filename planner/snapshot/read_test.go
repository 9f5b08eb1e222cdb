package snapshot_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// readBothWays decodes data the old way (through YAML, sequentially) and
// the new (raw JSON, items in parallel) and fails unless both give the
// same snapshot, digest, warnings and error. It reports the error.
func readBothWays(t testing.TB, name string, data []byte) error {
	t.Helper()
	restore := snapshot.ReadOldWay()
	oldSnap, oldWarn, oldErr := snapshot.Decode(name, data)
	restore()
	newSnap, newWarn, newErr := snapshot.Decode(name, data)
	if (oldErr == nil) != (newErr == nil) || oldErr != nil && oldErr.Error() != newErr.Error() {
		t.Fatalf("%s: error\n%v\nread the old way:\n%v", name, newErr, oldErr)
	}
	if oldErr != nil {
		return oldErr
	}
	if !reflect.DeepEqual(oldWarn, newWarn) {
		t.Fatalf("%s: warnings %q, read the old way %q", name, newWarn, oldWarn)
	}
	if !reflect.DeepEqual(oldSnap, newSnap) {
		t.Fatalf("%s: the snapshot differs from the one read the old way", name)
	}
	d1, err1 := oldSnap.Digest()
	d2, err2 := newSnap.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("%s: digest %s (%v), read the old way %s (%v)", name, d2, err2, d1, err1)
	}
	return nil
}

// TestReadWays: raw JSON read in parallel gives what reading through YAML
// item by item gives, for files rollplan snapshot and kubectl write and
// for JSON that YAML reads otherwise or not at all.
func TestReadWays(t *testing.T) {
	files := map[string][]byte{}
	snap := synth.Snapshot(3000)
	for _, format := range []string{capture.FormatJSON, capture.FormatYAML} {
		data, err := capture.Marshal(snap, format)
		if err != nil {
			t.Fatal(err)
		}
		files["synth."+format] = data
	}
	scenarios, err := filepath.Glob("../../testdata/scenarios/*/snapshot.yaml")
	if err != nil || len(scenarios) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range scenarios {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
		files[f+".json"] = kubectlJSON(t, f, data)
	}
	for name, data := range files {
		if err := readBothWays(t, name, data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// kubectlJSON is a YAML file's documents as one List of kubectl get -o
// json: indented, HTML escaped.
func kubectlJSON(t *testing.T, name string, data []byte) []byte {
	var items []json.RawMessage
	err := snapshot.EachDocument(name, data, func(_ int, js []byte) error {
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &list); err != nil {
			return err
		}
		if list.Kind == "List" {
			items = append(items, list.Items...)
		} else {
			items = append(items, js)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items}, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readCases are JSON Lists that YAML reads otherwise than JSON, or not at
// all, or that are wrong: each must read (or fail) as it did through YAML.
var readCases = map[string]string{
	"float replicas":        `"spec": {"replicas": 2.0, "selector": {"matchLabels": {"app": "a"}}}`,
	"exponent":              `"spec": {"replicas": 2e0}`,
	"float quantity":        `"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 1.50}}}]}`,
	"big integer":           `"spec": {"replicas": 12345678901234567890}`,
	"minus zero":            `"spec": {"replicas": -0}`,
	"escaped slash":         `"spec": {"nodeName": "a\/b"}`,
	"surrogate pair":        `"spec": {"nodeName": "\ud83d\ude00"}`,
	"escapes":               `"spec": {"nodeName": "\u00e9\u003c\n\t\"\\"}`,
	"DEL":                   "\"spec\": {\"nodeName\": \"a\x7fb\"}",
	"C1 control":            "\"spec\": {\"nodeName\": \"a\u0086b\"}",
	"invalid UTF-8":         "\"spec\": {\"nodeName\": \"a\xffb\"}",
	"unknown field":         `"spec": {"replicaz": 3}`,
	"capitalized field":     `"spec": {"NodeName": "n1"}`,
	"both cases":            `"spec": {"nodeName": "n1", "NodeName": "n2"}`,
	"duplicate field":       `"spec": {"nodeName": "n1", "nodeName": "n2"}`,
	"duplicate label":       `"spec": {"nodeSelector": {"a": "1", "a": "2"}}`,
	"merge key":             `"spec": {"nodeSelector": {"<<": "1"}}`,
	"key line break":        "\"spec\": {\"nodeName\"\n: \"n1\"}",
	"tabs":                  "\"spec\":\t{\"nodeName\":\t\"n1\"}",
	"wrong type":            `"spec": {"nodeName": 5}`,
	"managed fields":        `"spec": {}, "x": 1`,
	"status null":           `"status": null`,
	"revision data spacing": `"data": { "spec" : {"b": 1,  "a": [ 2 ]} }`,
}

func TestReadWaysEdges(t *testing.T) {
	for name, rest := range readCases {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []string{`"apiVersion": "v1", "kind": "Pod"`, `"apiVersion": "apps/v1", "kind": "ControllerRevision"`, `"apiVersion": "apps/v1", "kind": "Deployment"`} {
				item := `{` + kind + `, "metadata": {"name": "p", "namespace": "default", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": { "f:b": {}, "f:a": {} }}}]}, ` + rest + `}`
				readBothWays(t, name+".json", []byte(`{"apiVersion": "v1", "kind": "List", "items": [`+item+`, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}]}`))
			}
		})
	}
}

// TestReadWaysLists: the List itself, and what is around it.
func TestReadWaysLists(t *testing.T) {
	const node = `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}`
	for _, in := range []string{
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `]}`,
		`  {"apiVersion": "v1", "kind": "List", "items": [` + node + `]}` + "\n\n",
		"\t{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [" + node + "]}",
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `]}` + "\t\n",
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `]} {}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `, ` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `, ` + strings.Replace(node, "n1", "n1\", \"labels\": {\"a\": \"b\"}, \"x\": \"", 1) + `]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `, 1, null]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [{"kind": "List", "items": [` + node + `]}]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]}`,
		`{"apiVersion": "v1", "kind": "List", "items": []}`,
		`{"apiVersion": "v1", "kind": "List", "items": null}`,
		`{"apiVersion": "v1", "kind": "List", "Items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "kind": "List", "items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `], "extra": 1}`,
		`{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "items": []}`,
		`{"apiVersion": "v1", "kind": "List", "metadata": {"name": 5}, "items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "metadata": {"annotations": {"rollplan.dev/captured-at": "2026-03-01T12:00:00Z", "rollplan.dev/kubernetes-version": "v1.37.2"}}, "items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "metadata": {"annotations": {"rollplan.dev/captured-at": "yesterday"}}, "items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "metadata": {"Annotations": {"rollplan.dev/captured-at": "2026-03-01T12:00:00Z"}}, "items": [` + node + `]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `,]}`,
		`{"apiVersion": "v1", "kind": "List", "items": [` + node,
		"{\"apiVersion\": \"v1\", \"kind\"\n: \"List\", \"items\": [" + node + "]}",
		`{"apiVersion": "v1", "kind": "List", "items": [` + node + `]}` + "\n---\n" + node,
	} {
		readBothWays(t, "in.json", []byte(in))
	}
}

// TestReadWaysYAML: a YAML List whose items are converted one by one
// reads as the List converted whole, or fails alike.
func TestReadWaysYAML(t *testing.T) {
	const node = "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
	const pod = "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n    namespace: default\n"
	for _, in := range []string{
		"apiVersion: v1\nitems:\n" + node + pod + "kind: List\nmetadata:\n  resourceVersion: \"\"\n",
		"apiVersion: v1\nkind: List\nitems:\n" + node + pod,
		"apiVersion: v1\nkind: List\nitems:\n" + node + "\n\n" + pod + "\n",
		"apiVersion: v1\nkind: List\nitems:\n  " + strings.ReplaceAll(node, "\n", "\n  ") + "\n",
		"apiVersion: v1\nkind: List\nitems:\n" + node + "# a comment\n" + pod,
		"apiVersion: v1\nkind: List\nitems:\n" + node + "  # a comment\n" + pod,
		"apiVersion: v1\nkind: List\nitems:\n" + node + "items:\n" + pod,
		"apiVersion: v1\nkind: List\nitems: []\n",
		"apiVersion: v1\nkind: List\nitems:\n",
		"apiVersion: v1\nkind: List\nItems:\n" + node,
		"apiVersion: v1\nkind: List\nmetadata: {name: 5}\nitems:\n" + node,
		"apiVersion: v1\nkind: List\nmetadata:\n  annotations:\n    rollplan.dev/captured-at: yesterday\nitems:\n" + node,
		"apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nitems:\n" + node,
		"apiVersion: v1\nkind: List\nitems:\n- &n\n  apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n- *n\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: 'n1\nn2'\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n    annotations:\n      a: |+\n        text\n\n\n" + pod,
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n    name: n2\n",
		"apiVersion: v1\nkind: List\nitems:\n" + node + node,
		"apiVersion: v1\nkind: List\nitems:\n" + node + strings.Replace(node, "n1", "n1\n    labels: {a: b}", 1),
		"apiVersion: v1\nkind: List\nitems:\n- 1\n- null\n",
		"apiVersion: v1\nkind: List\nitems:\n- kind: List\n  items:\n  " + strings.ReplaceAll(node, "\n", "\n  ") + "\n",
		"apiVersion: v1\nkind: List\nitems:\n-\n  apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n\tkind: Node\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec: {containers: 5}\n" + node,
		"apiVersion: v1\r\nkind: List\r\nitems:\r\n" + node,
		"kind: List\nitems:\n" + node + "---\nkind: List\nitems:\n" + pod,
	} {
		readBothWays(t, "in.yaml", []byte(in))
	}
}

// FuzzReadWays: any input reads alike both ways.
func FuzzReadWays(f *testing.F) {
	for _, rest := range readCases {
		f.Add([]byte(`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, ` + rest + `}]}`))
	}
	snap, err := capture.Marshal(synth.Snapshot(30), capture.FormatJSON)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	if snap, err = capture.Marshal(synth.Snapshot(30), capture.FormatYAML); err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add(bytes.ReplaceAll(snap, []byte("    "), []byte("\t")))
	f.Fuzz(func(t *testing.T, data []byte) {
		readBothWays(t, "fuzz.json", data)
	})
}

// TestLoadFilesReporting: a load reports the bytes it read and the objects
// it decoded, ending with the whole file and every object, and reads the
// same snapshot as without reports.
func TestLoadFilesReporting(t *testing.T) {
	snap := synth.Snapshot(3000)
	dir := t.TempDir()
	for _, format := range []string{capture.FormatJSON, capture.FormatYAML} {
		data, err := capture.Marshal(snap, format)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "snap."+format)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		last := map[string]snapshot.Status{}
		got, _, err := snapshot.LoadFilesReporting([]string{file}, nil, func(st snapshot.Status) {
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := last[st.Stage]; ok && prev.Done > st.Done && st.Stage == snapshot.StageReading {
				t.Errorf("%s: read %d bytes after %d", file, st.Done, prev.Done)
			}
			if prev := last[st.Stage]; st.Done > prev.Done {
				last[st.Stage] = st
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := snapshot.LoadFiles([]string{file})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reporting changed the snapshot", file)
		}
		objects := int64(len(want.Deployments) + len(want.ReplicaSets) + len(want.StatefulSets) + len(want.DaemonSets) + len(want.ControllerRevisions) + len(want.Pods) + len(want.Nodes) + len(want.PDBs))
		for stage, w := range map[string]snapshot.Status{
			snapshot.StageReading:  {File: file, Stage: snapshot.StageReading, Done: int64(len(data)), Total: int64(len(data))},
			snapshot.StageDecoding: {File: file, Stage: snapshot.StageDecoding, Done: objects, Total: objects},
		} {
			if last[stage] != w {
				t.Errorf("%s: last %s report %+v, want %+v", file, stage, last[stage], w)
			}
		}
	}
}
