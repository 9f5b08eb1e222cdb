package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"encoding/json"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// LoadFiles reads files and directories (recursively: *.yaml, *.yml,
// *.json) into a snapshot. It returns one warning per kind it skipped and
// per file that holds no object. Files that together hold no object
// rollplan reads are an error naming them: planning nothing from a wrong
// path must not look like success.
func LoadFiles(paths []string) (*Snapshot, []string, error) {
	return LoadFilesFrom(paths, os.Stdin)
}

// Stdin is the path that names the standard input, as for kubectl -f -.
const Stdin = "-"

// LoadFilesFrom is LoadFiles reading the path "-" from stdin (once).
func LoadFilesFrom(paths []string, stdin io.Reader) (*Snapshot, []string, error) {
	return LoadFilesReporting(paths, stdin, nil)
}

// Status is where a load is: reading a file (Done of Total bytes; Total
// is 0 for the standard input) or decoding its objects (Done of Total).
type Status struct {
	File        string
	Stage       string // StageReading or StageDecoding
	Done, Total int64
}

// The stages of a load.
const (
	StageReading  = "reading"
	StageDecoding = "decoding"
)

// LoadFilesReporting is LoadFilesFrom telling report, when not nil, where
// it is (from the goroutines that decode, too), for a progress line.
func LoadFilesReporting(paths []string, stdin io.Reader, report func(Status)) (*Snapshot, []string, error) {
	l := newLoader()
	l.report = report
	var all, empty []string
	readStdin := false
	for _, p := range paths {
		files := []string{p}
		if p != Stdin {
			var err error
			if files, err = expand(p); err != nil {
				return nil, nil, err
			}
		} else if readStdin {
			return nil, nil, fmt.Errorf("-f -: the standard input can be read once: name it once")
		}
		for _, f := range files {
			var data []byte
			var err error
			if f == Stdin {
				readStdin = true
				f = "<stdin>"
				if data, err = l.readAll(f, stdin, 0); err != nil {
					return nil, nil, fmt.Errorf("read the standard input: %w", err)
				}
			} else if data, err = l.readFile(f); err != nil {
				return nil, nil, pathError(f, err)
			}
			l.file = f
			before := l.objects
			if err := l.add(f, data); err != nil {
				return nil, nil, err
			}
			all = append(all, f)
			if l.objects == before {
				empty = append(empty, f)
			}
		}
	}
	if l.read == 0 {
		err := l.nothingRead(all)
		if l.objects == 0 {
			l.snap.Sort()
			return nil, nil, &EmptyError{err: err, Snapshot: l.snap}
		}
		return nil, nil, err
	}
	warnings := l.warnings()
	for _, f := range empty {
		warnings = append(warnings, fmt.Sprintf("%s holds no Kubernetes object (only empty or comment-only documents, or an empty List)", f))
	}
	l.snap.Sort()
	return l.snap, warnings, nil
}

// EmptyError: the files hold no Kubernetes object at all (empty
// documents, an empty List: rollplan snapshot of an empty namespace).
// Snapshot is the empty snapshot they make, with the capture time and
// version their List records, for a caller that accepts one.
type EmptyError struct {
	err      error
	Snapshot *Snapshot
}

func (e *EmptyError) Error() string { return e.err.Error() }

// nothingRead is the error of files that hold no object rollplan reads.
func (l *loader) nothingRead(files []string) error {
	names := strings.Join(files, ", ")
	if len(files) > 3 {
		names = fmt.Sprintf("%s and %d more files", strings.Join(files[:3], ", "), len(files)-3)
	}
	if l.objects == 0 {
		verb := "holds"
		if len(files) > 1 {
			verb = "hold"
		}
		return fmt.Errorf("%s: %s no Kubernetes objects (only empty or comment-only documents, or an empty List): pass the output of rollplan snapshot or kubectl get -o yaml", names, verb)
	}
	kinds := make([]string, 0, len(l.skipped))
	for k := range l.skipped {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return fmt.Errorf("%s: no object of a kind rollplan reads (%s), only %s: pass the output of rollplan snapshot or kubectl get deploy,rs,sts,ds,controllerrevisions,pods,nodes,pdb -o yaml", names, readKinds, strings.Join(kinds, ", "))
}

// readKinds are the kinds a snapshot is made of.
const readKinds = "Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision, Pod, Node and PodDisruptionBudget"

// pathError is err about path, as one line that starts with the path:
// "snap.yaml: no such file or directory", not the *fs.PathError's
// "stat snap.yaml: no such file or directory".
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

func newLoader() *loader {
	return &loader{snap: &Snapshot{}, skipped: map[string]int{}, names: map[string]seen{}}
}

// Decode reads one file's content (used by fuzzing and by callers that
// already hold the bytes); name is used in error messages.
func Decode(name string, data []byte) (*Snapshot, []string, error) {
	l := newLoader()
	if err := l.add(name, data); err != nil {
		return nil, nil, err
	}
	l.snap.Sort()
	return l.snap, l.warnings(), nil
}

// ManifestFiles lists the *.yaml, *.yml and *.json files under dir, at
// any depth, sorted: the files of a snapshot directory (-f) and of a
// change directory (plan --change).
func ManifestFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, pathError(p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	out, err := ManifestFiles(p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pathError(pe.Path, err)
		}
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("snapshot directory %s holds no .yaml, .yml or .json file", p)
	}
	return out, nil
}

type loader struct {
	snap    *Snapshot
	skipped map[string]int
	// names: "Kind ns/name" → where it was first read and what, to merge
	// or report duplicates.
	names map[string]seen
	// objects counts every object read (skipped kinds too); read counts
	// those of the kinds rollplan reads.
	objects, read int
	// report, when not nil, is told where the load is; file is the file
	// being decoded.
	report func(Status)
	file   string
}

// readFile is os.ReadFile, reporting the bytes read.
func (l *loader) readFile(name string) ([]byte, error) {
	if l.report == nil {
		return os.ReadFile(name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return l.readAll(name, f, size)
}

// readChunk: progress is reported every readChunk bytes.
const readChunk = 4 << 20

// readAll reads r whole (size bytes, when known), reporting the bytes read.
func (l *loader) readAll(name string, r io.Reader, size int64) ([]byte, error) {
	if l.report == nil {
		return io.ReadAll(r)
	}
	data := make([]byte, 0, max(size+1, 512))
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):min(cap(data), len(data)+readChunk)])
		data = data[:len(data)+n]
		l.report(Status{File: name, Stage: StageReading, Done: int64(len(data)), Total: size})
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decoded returns what a decoding worker calls after each of total
// objects; it reports every 256 objects and the last.
func (l *loader) decoded(total int) func() {
	if l.report == nil {
		return func() {}
	}
	var done atomic.Int64
	file := l.file
	return func() {
		if n := done.Add(1); n%256 == 0 || n == int64(total) {
			l.report(Status{File: file, Stage: StageDecoding, Done: n, Total: int64(total)})
		}
	}
}

// seen is an object already in the snapshot.
type seen struct {
	where string
	obj   any
}

func (l *loader) warnings() []string {
	kinds := make([]string, 0, len(l.skipped))
	for k := range l.skipped {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("skipped %d object(s) of kind %s: rollplan reads %s", l.skipped[k], k, readKinds))
	}
	return out
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

func (l *loader) add(file string, data []byte) error {
	if ok, err := l.addRawJSON(file, data); ok {
		return err
	}
	return eachRawDocument(file, data, func(doc int, raw []byte) error {
		where := fmt.Sprintf("%s: document %d", file, doc)
		if ok, err := l.addYAMLList(where, raw); ok {
			return err
		}
		js, err := documentJSON(file, doc, raw)
		if err != nil || js == nil {
			return err
		}
		return l.addJSON(where, js)
	})
}

// EachDocument calls fn with each document of a multi-document YAML or JSON
// file, converted to JSON, numbered from 1; empty and comment-only
// documents are skipped. Duplicate keys are an error (strict YAML). Snapshot
// files, CEL policies and policy tests all read their files through it, so
// that "file: document N" means the same everywhere.
func EachDocument(file string, data []byte, fn func(doc int, js []byte) error) error {
	return eachRawDocument(file, data, func(doc int, raw []byte) error {
		js, err := documentJSON(file, doc, raw)
		if err != nil || js == nil {
			return err
		}
		return fn(doc, js)
	})
}

// eachRawDocument calls fn with each document of a multi-document file as
// it is written, numbered from 1, empty ones left out.
func eachRawDocument(file string, data []byte, fn func(doc int, raw []byte) error) error {
	if oneDocument(data) {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		return fn(1, data)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := fn(doc, raw); err != nil {
			return err
		}
	}
}

// oneDocument reports whether the YAML reader would return data as it is,
// one document, so that it need not be copied (a 150,000-pod snapshot is
// 120 MB): no line starts with "---", no CR (the reader writes CR LF as
// LF), and the last line ends (the reader ends it).
func oneDocument(data []byte) bool {
	return len(data) > 0 && data[len(data)-1] == '\n' && bytes.IndexByte(data, '\r') < 0 &&
		!bytes.HasPrefix(data, []byte("---")) && !bytes.Contains(data, []byte("\n---"))
}

// documentJSON converts a document to JSON; nil for a comment-only one.
func documentJSON(file string, doc int, raw []byte) ([]byte, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: document %d: not valid YAML or JSON: %s", file, doc, strings.Join(strings.Fields(err.Error()), " "))
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	return js, nil
}

// capturedAt reads a List's AnnCapturedAt annotation (written by rollplan
// snapshot); of several, the latest wins. A List whose metadata has another
// shape is read as before.
func (l *loader) capturedAt(where string, js []byte) error {
	var lm struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &lm) != nil {
		return nil
	}
	if raw, ok := lm.Metadata.Annotations[AnnKubernetesVersion]; ok {
		var v string
		if json.Unmarshal(raw, &v) != nil || v == "" {
			return fmt.Errorf("%s: metadata.annotations[%s]: %s is not a version string such as \"v1.37.2\"", where, AnnKubernetesVersion, raw)
		}
		if l.snap.KubernetesVersion != "" && l.snap.KubernetesVersion != v {
			return fmt.Errorf("%s: metadata.annotations[%s] is %q but another file of the snapshot records %q: plan files captured from one cluster together", where, AnnKubernetesVersion, v, l.snap.KubernetesVersion)
		}
		l.snap.KubernetesVersion = v
	}
	raw, ok := lm.Metadata.Annotations[AnnCapturedAt]
	if !ok {
		return nil
	}
	var v string
	_ = json.Unmarshal(raw, &v)
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return fmt.Errorf("%s: metadata.annotations[%s]: %s is not an RFC 3339 time such as 2026-03-01T12:00:00Z", where, AnnCapturedAt, raw)
	}
	if t = t.UTC(); t.After(l.snap.CapturedAt) {
		l.snap.CapturedAt = t
	}
	return nil
}

// jsonKind names the JSON value a document or list item holds when it is
// not an object.
func jsonKind(js []byte) string {
	b := bytes.TrimSpace(js)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return ""
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (l *loader) addJSON(where string, js []byte) error {
	if got := jsonKind(js); got != "" {
		return fmt.Errorf("%s: want a Kubernetes object (apiVersion, kind, metadata), got %s", where, got)
	}
	if head, items, ok := splitList(js); ok {
		return l.addList(where, head, items)
	}
	var tm typeMeta
	if err := strictUnmarshal(js, &tm); err != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %w", where, err)
	}
	if tm.Kind == "" {
		return fmt.Errorf("%s: object has no kind", where)
	}
	if strings.HasSuffix(tm.Kind, "List") {
		if err := l.capturedAt(where, js); err != nil {
			return err
		}
		for i, item := range tm.Items {
			if err := l.addJSON(fmt.Sprintf("%s, items[%d]", where, i), item); err != nil {
				return err
			}
		}
		return nil
	}
	return l.merge(where, decodeObject(where, js, &tm))
}

// object is one object of a document decoded off the loader (in parallel
// for a List's items) and merged into the snapshot in document order.
type object struct {
	apiVersion, kind string
	// obj is the typed object; nil for a kind rollplan does not read.
	obj metav1.Object
	// err is the object's decoding error, reported when it is merged so
	// that the first error in document order wins.
	err error
	// list is an item that is itself a List, read when merged.
	list []byte
}

// newObject is the typed object of a kind rollplan reads, nil for others.
func newObject(apiVersion, kind string) metav1.Object {
	group := apiVersion
	if i := strings.Index(group, "/"); i >= 0 {
		group = group[:i]
	} else {
		group = ""
	}
	switch {
	case kind == "Deployment" && group == "apps":
		return &appsv1.Deployment{}
	case kind == "ReplicaSet" && group == "apps":
		return &appsv1.ReplicaSet{}
	case kind == "StatefulSet" && group == "apps":
		return &appsv1.StatefulSet{}
	case kind == "DaemonSet" && group == "apps":
		return &appsv1.DaemonSet{}
	case kind == "ControllerRevision" && group == "apps":
		return &appsv1.ControllerRevision{}
	case kind == "Pod" && group == "":
		return &corev1.Pod{}
	case kind == "Node" && group == "":
		return &corev1.Node{}
	case kind == "PodDisruptionBudget" && group == "policy":
		return &policyv1.PodDisruptionBudget{}
	}
	return nil
}

// decodeObject decodes one document or List item (JSON) whose type
// metadata tm has been read and is not a List. It touches no loader state.
func decodeObject(where string, js []byte, tm *typeMeta) object {
	d := object{apiVersion: tm.APIVersion, kind: tm.Kind, obj: newObject(tm.APIVersion, tm.Kind)}
	if d.obj == nil {
		// A slip would leave a workload out with a mere warning.
		d.err = CheckKind(where, tm.APIVersion, tm.Kind, tm.Metadata.Namespace, tm.Metadata.Name, readKindList, "a kind rollplan reads ("+readKinds+")")
		return d
	}
	if tm.Metadata.Name == "" {
		d.err = fmt.Errorf("%s: %s has no metadata.name", where, tm.Kind)
		return d
	}
	if err := strictUnmarshal(js, d.obj); err != nil {
		d.err = fmt.Errorf("%s: %s: %w", where, objectID(tm.Kind, tm.Metadata.Namespace, tm.Metadata.Name), err)
	}
	return d
}

// decodeItem is decodeObject for a List item, type metadata included.
func decodeItem(where string, js []byte) object {
	if got := jsonKind(js); got != "" {
		return object{err: fmt.Errorf("%s: want a Kubernetes object (apiVersion, kind, metadata), got %s", where, got)}
	}
	var tm typeMeta
	if err := strictUnmarshal(js, &tm); err != nil {
		return object{err: fmt.Errorf("%s: not a Kubernetes object: %w", where, err)}
	}
	if tm.Kind == "" {
		return object{err: fmt.Errorf("%s: object has no kind", where)}
	}
	if strings.HasSuffix(tm.Kind, "List") {
		return object{list: js}
	}
	return decodeObject(where, js, &tm)
}

func objectID(kind, ns, name string) string {
	if ns != "" {
		return kind + " " + ns + "/" + name
	}
	return kind + " " + name
}

// merge adds a decoded object to the snapshot: an object already read is
// left out when it is the same (see same), and an error when it is not.
func (l *loader) merge(where string, d object) error {
	if d.list != nil {
		return l.addJSON(where, d.list)
	}
	if d.err != nil {
		return d.err
	}
	l.objects++
	if d.obj == nil {
		l.skipped[d.apiVersion+" "+d.kind]++
		return nil
	}
	l.read++
	id := objectID(d.kind, d.obj.GetNamespace(), d.obj.GetName())
	if prev, dup := l.names[id]; dup {
		if same(prev.obj, d.obj) {
			return nil
		}
		return fmt.Errorf("%s: %s is defined twice with different content (first in %s%s): keep one copy, or capture the objects once (rollplan snapshot -A, or one -l selector)", where, id, prev.where, versions(prev.obj, d.obj))
	}
	l.names[id] = seen{where: where, obj: d.obj}
	switch o := d.obj.(type) {
	case *appsv1.Deployment:
		l.snap.Deployments = append(l.snap.Deployments, o)
	case *appsv1.ReplicaSet:
		l.snap.ReplicaSets = append(l.snap.ReplicaSets, o)
	case *appsv1.StatefulSet:
		l.snap.StatefulSets = append(l.snap.StatefulSets, o)
	case *appsv1.DaemonSet:
		l.snap.DaemonSets = append(l.snap.DaemonSets, o)
	case *appsv1.ControllerRevision:
		l.snap.ControllerRevisions = append(l.snap.ControllerRevisions, o)
	case *corev1.Pod:
		l.snap.Pods = append(l.snap.Pods, o)
	case *corev1.Node:
		l.snap.Nodes = append(l.snap.Nodes, o)
	case *policyv1.PodDisruptionBudget:
		l.snap.PDBs = append(l.snap.PDBs, o)
	}
	return nil
}

// same reports whether two decoded copies of one object (same kind,
// namespace and name) are the same object, so that the second can be left
// out: the same file passed twice, or two captures that both hold the
// Nodes their pods run on. The decoded objects are compared, not the
// bytes (YAML and JSON, key order, "1" against 1000m all decode alike) and
// not uid and resourceVersion alone: a hand-edited copy of a capture keeps
// both, and picking one of two differing copies silently would plan from
// an object the user did not mean. Copies of one version that differ
// anyway (kubectl get's managedFields against rollplan snapshot's
// redaction) are reported, with their resourceVersions.
func same(a, b any) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// versions describes the resourceVersions of two differing copies, when
// both have one: ", resourceVersion 100 there, 120 here".
func versions(prev, cur any) string {
	p, ok1 := prev.(metav1.Object)
	c, ok2 := cur.(metav1.Object)
	if !ok1 || !ok2 || p.GetResourceVersion() == "" || c.GetResourceVersion() == "" {
		return ""
	}
	if p.GetResourceVersion() == c.GetResourceVersion() {
		return fmt.Sprintf(", same resourceVersion %s", c.GetResourceVersion())
	}
	return fmt.Sprintf(", resourceVersion %s there, %s here", p.GetResourceVersion(), c.GetResourceVersion())
}
