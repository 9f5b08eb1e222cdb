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
	"time"

	"encoding/json"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// LoadFiles reads files and directories (recursively: *.yaml, *.yml,
// *.json) into a snapshot. It returns one warning per kind it skipped.
func LoadFiles(paths []string) (*Snapshot, []string, error) {
	l := &loader{snap: &Snapshot{}, skipped: map[string]int{}, names: map[string]string{}}
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, fmt.Errorf("read snapshot file: %w", err)
			}
			if err := l.add(f, data); err != nil {
				return nil, nil, err
			}
		}
	}
	l.snap.Sort()
	return l.snap, l.warnings(), nil
}

// Decode reads one file's content (used by fuzzing and by callers that
// already hold the bytes); name is used in error messages.
func Decode(name string, data []byte) (*Snapshot, []string, error) {
	l := &loader{snap: &Snapshot{}, skipped: map[string]int{}, names: map[string]string{}}
	if err := l.add(name, data); err != nil {
		return nil, nil, err
	}
	l.snap.Sort()
	return l.snap, l.warnings(), nil
}

func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("snapshot path %s: %w", p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
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
	if err != nil {
		return nil, fmt.Errorf("walk snapshot directory %s: %w", p, err)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("snapshot directory %s holds no .yaml, .yml or .json file", p)
	}
	return out, nil
}

type loader struct {
	snap    *Snapshot
	skipped map[string]int
	// names: "Kind ns/name" → "file document N", to report duplicates.
	names map[string]string
}

func (l *loader) warnings() []string {
	kinds := make([]string, 0, len(l.skipped))
	for k := range l.skipped {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("skipped %d object(s) of kind %s: rollplan reads Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision, Pod, Node and PodDisruptionBudget", l.skipped[k], k))
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
	return EachDocument(file, data, func(doc int, js []byte) error {
		return l.addJSON(fmt.Sprintf("%s: document %d", file, doc), js)
	})
}

// EachDocument calls fn with each document of a multi-document YAML or JSON
// file, converted to JSON, numbered from 1; empty and comment-only
// documents are skipped. Duplicate keys are an error (strict YAML). Snapshot
// files, CEL policies and policy tests all read their files through it, so
// that "file: document N" means the same everywhere.
func EachDocument(file string, data []byte, fn func(doc int, js []byte) error) error {
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
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return fmt.Errorf("%s: document %d: not valid YAML or JSON: %s", file, doc, strings.Join(strings.Fields(err.Error()), " "))
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		if err := fn(doc, js); err != nil {
			return err
		}
	}
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

func (l *loader) addJSON(where string, js []byte) error {
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
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
	group := tm.APIVersion
	if i := strings.Index(group, "/"); i >= 0 {
		group = group[:i]
	} else {
		group = ""
	}
	id := fmt.Sprintf("%s %s", tm.Kind, tm.Metadata.Name)
	if tm.Metadata.Namespace != "" {
		id = fmt.Sprintf("%s %s/%s", tm.Kind, tm.Metadata.Namespace, tm.Metadata.Name)
	}
	decode := func(into any) error {
		if tm.Metadata.Name == "" {
			return fmt.Errorf("%s: %s has no metadata.name", where, tm.Kind)
		}
		if err := strictUnmarshal(js, into); err != nil {
			return fmt.Errorf("%s: %s: %w", where, id, err)
		}
		if prev, dup := l.names[id]; dup {
			return fmt.Errorf("%s: %s is defined twice (first in %s)", where, id, prev)
		}
		l.names[id] = where
		return nil
	}
	switch {
	case tm.Kind == "Deployment" && group == "apps":
		o := &appsv1.Deployment{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.Deployments = append(l.snap.Deployments, o)
	case tm.Kind == "ReplicaSet" && group == "apps":
		o := &appsv1.ReplicaSet{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.ReplicaSets = append(l.snap.ReplicaSets, o)
	case tm.Kind == "StatefulSet" && group == "apps":
		o := &appsv1.StatefulSet{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.StatefulSets = append(l.snap.StatefulSets, o)
	case tm.Kind == "DaemonSet" && group == "apps":
		o := &appsv1.DaemonSet{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.DaemonSets = append(l.snap.DaemonSets, o)
	case tm.Kind == "ControllerRevision" && group == "apps":
		o := &appsv1.ControllerRevision{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.ControllerRevisions = append(l.snap.ControllerRevisions, o)
	case tm.Kind == "Pod" && group == "":
		o := &corev1.Pod{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.Pods = append(l.snap.Pods, o)
	case tm.Kind == "Node" && group == "":
		o := &corev1.Node{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.Nodes = append(l.snap.Nodes, o)
	case tm.Kind == "PodDisruptionBudget" && group == "policy":
		o := &policyv1.PodDisruptionBudget{}
		if err := decode(o); err != nil {
			return err
		}
		l.snap.PDBs = append(l.snap.PDBs, o)
	default:
		l.skipped[tm.APIVersion+" "+tm.Kind]++
	}
	return nil
}
