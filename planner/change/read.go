// Package change reads proposed workload manifests (rollplan plan
// --change FILE|DIR), gives them the API server's defaults (or asks a live
// API server for them, by a server-side dry-run apply) and puts them in a
// snapshot in place of the objects they change, so that the plan of that
// snapshot is the rollout the change would cause.
package change

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// The kinds a change may propose: the workloads rollplan plans.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
)

var workloadKinds = []string{Deployment, StatefulSet, DaemonSet}

// Object is one proposed workload.
type Object struct {
	Kind, Namespace, Name string
	// Where it was read: "change/web.yaml: document 2, items[0]".
	Where string
	// Raw is the manifest as JSON, as written (namespace set): what a
	// server-side apply sends.
	Raw []byte
	// Obj is the typed workload: *appsv1.Deployment, *appsv1.StatefulSet
	// or *appsv1.DaemonSet, as written until Default gives it the API
	// server's defaults.
	Obj metav1.Object
}

// ID is "Deployment default/web".
func (o *Object) ID() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Read reads change files and directories (every *.yaml, *.yml and *.json
// of a directory, recursively, in sorted order). A manifest without
// metadata.namespace takes namespace, as kubectl apply takes -n, else
// "default". Objects of other kinds are left out with a warning naming
// them: a change directory often holds a Service or a ConfigMap beside its
// workloads. A kind that is a slip for a workload's (Daemonset), or no
// kind of the apps group, is an error (snapshot.CheckKind). Reading no
// workload at all is an error, and so is one workload proposed twice.
func Read(paths []string, namespace string) ([]*Object, []string, error) {
	var files []string
	for _, p := range paths {
		more, err := expand(p)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, more...)
	}
	var objs []*Object
	var warnings []string
	seen := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--change %s: %w", f, err)
		}
		read, ws, err := Parse(f, data, namespace)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, ws...)
		for _, o := range read {
			if prev, dup := seen[o.ID()]; dup {
				return nil, nil, fmt.Errorf("%s: %s is proposed twice (first in %s): keep one manifest per workload", o.Where, o.ID(), prev)
			}
			seen[o.ID()] = o.Where
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, warnings, fmt.Errorf("--change %s: no Deployment, StatefulSet or DaemonSet (apps/v1) found: pass the manifests of the workloads to preview", strings.Join(paths, ", "))
	}
	return objs, warnings, nil
}

// expand lists a path's change files: the file itself, or a directory's
// *.yaml, *.yml and *.json files, sorted.
func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--change %s: no such file or directory: pass a manifest file or a directory of them", p)
		}
		return nil, fmt.Errorf("--change %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	out, err := snapshot.ManifestFiles(p)
	if err != nil {
		return nil, fmt.Errorf("--change %s: %w", p, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--change %s: the directory holds no .yaml, .yml or .json file", p)
	}
	return out, nil
}

// Parse reads the proposed workloads of one file: multi-document YAML or
// JSON, and v1 Lists (kubectl get -o yaml) whose items are read in order.
// name is used in messages. See Read for namespace and other kinds.
func Parse(name string, data []byte, namespace string) ([]*Object, []string, error) {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	p := &parser{namespace: namespace}
	err := snapshot.EachDocument(name, data, func(doc int, js []byte) error {
		return p.add(fmt.Sprintf("%s: document %d", name, doc), js, 0)
	})
	if err != nil {
		return nil, nil, err
	}
	return p.objs, p.warnings, nil
}

type parser struct {
	namespace string
	objs      []*Object
	warnings  []string
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

// maxDepth bounds Lists in Lists (fuzzing finds the stack's end otherwise).
const maxDepth = 8

func (p *parser) add(where string, js []byte, depth int) error {
	js = bytes.TrimSpace(js)
	if len(js) == 0 || js[0] != '{' {
		return fmt.Errorf("%s: want a Kubernetes object (apiVersion, kind, metadata)", where)
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %s", where, strings.TrimPrefix(err.Error(), "json: "))
	}
	if tm.Kind == "" {
		return fmt.Errorf("%s: object has no kind", where)
	}
	if strings.HasSuffix(tm.Kind, "List") && tm.APIVersion == "v1" {
		if depth >= maxDepth {
			return fmt.Errorf("%s: Lists nested more than %d deep", where, maxDepth)
		}
		for i, it := range tm.Items {
			if err := p.add(fmt.Sprintf("%s, items[%d]", where, i), it, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	ns := tm.Metadata.Namespace
	if ns == "" {
		ns = p.namespace
	}
	// A slip of the kind would drop the workload from the preview with a
	// mere warning.
	if err := snapshot.CheckKind(where, tm.APIVersion, tm.Kind, ns, tm.Metadata.Name, workloadKinds, "a kind --change previews (Deployment, StatefulSet, DaemonSet)"); err != nil {
		return err
	}
	id := tm.Kind
	if tm.Metadata.Name != "" {
		id += " " + tm.Metadata.Name
	}
	var obj metav1.Object
	switch {
	case tm.APIVersion != "apps/v1":
		p.warnings = append(p.warnings, fmt.Sprintf("%s: %s (%s) left out of the preview: --change previews apps/v1 Deployments, StatefulSets and DaemonSets", where, id, orNone(tm.APIVersion)))
		return nil
	case tm.Kind == Deployment:
		obj = &appsv1.Deployment{}
	case tm.Kind == StatefulSet:
		obj = &appsv1.StatefulSet{}
	case tm.Kind == DaemonSet:
		obj = &appsv1.DaemonSet{}
	default:
		p.warnings = append(p.warnings, fmt.Sprintf("%s: %s (%s) left out of the preview: --change previews apps/v1 Deployments, StatefulSets and DaemonSets", where, id, tm.APIVersion))
		return nil
	}
	if tm.Metadata.Name == "" {
		return fmt.Errorf("%s: %s has no metadata.name: name the workload whose change to preview", where, tm.Kind)
	}
	o := &Object{Kind: tm.Kind, Namespace: ns, Name: tm.Metadata.Name, Where: where, Obj: obj}
	// Strict, as kubectl apply's default field validation: a misspelt
	// field is an error, not a field silently dropped from the preview.
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return fmt.Errorf("%s: %s: cannot decode: %s", where, o.ID(), strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = strings.TrimPrefix(e.Error(), "json: ")
		}
		return fmt.Errorf("%s: %s: %s: fix the manifest (the API server rejects it too)", where, o.ID(), strings.Join(msgs, "; "))
	}
	obj.SetNamespace(ns)
	// The raw manifest with its namespace, for a server-side apply.
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return fmt.Errorf("%s: %s: %w", where, o.ID(), err)
	}
	meta, _ := raw["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		raw["metadata"] = meta
	}
	meta["namespace"] = ns
	if o.Raw, err = json.Marshal(raw); err != nil {
		return fmt.Errorf("%s: %s: %w", where, o.ID(), err)
	}
	p.objs = append(p.objs, o)
	return nil
}

func orNone(apiVersion string) string {
	if apiVersion == "" {
		return "no apiVersion"
	}
	return apiVersion
}
