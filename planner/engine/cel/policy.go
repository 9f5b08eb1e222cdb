// Package cel is the CEL policy engine: RolloutPolicy documents (shaped like
// ValidatingAdmissionPolicy) compiled once with cel-go and evaluated per pod
// with one reused activation over typed facts.
package cel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// APIVersion and Kind of a policy document.
const (
	APIVersion = "rollplan.dev/v1alpha1"
	Kind       = "RolloutPolicy"
)

// RolloutPolicy is one policy document.
type RolloutPolicy struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       Spec              `json:"spec"`

	// File the policy was read from, for messages.
	File string `json:"-"`
}

// Spec holds one expression (or list) per decision point; every point is
// optional. See docs/policy-contract.md (CEL). Fields tagged cel:"expr" hold
// CEL expressions: Parse says how to quote a value YAML read as a number.
type Spec struct {
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	// Params are available to every expression as `params`.
	Params    map[string]any `json:"params,omitempty"`
	Variables []Variable     `json:"variables,omitempty"`

	Scope       *Scope       `json:"scope,omitempty"`
	Eligibility *Eligibility `json:"eligibility,omitempty"`
	Order       []OrderKeys  `json:"order,omitempty"`
	Budgets     []BudgetSpec `json:"budgets,omitempty"`
	Pacing      *Expression  `json:"pacing,omitempty"`
	// NodePreparation (string): "none", "cordon" or "drain"; what is done
	// to a node before its daemon pod is updated.
	NodePreparation *Expression `json:"nodePreparation,omitempty"`
	// Analysis: what each wave waits for, and the verdict over its
	// measurements (analysis.go).
	Analysis *AnalysisSpec `json:"analysis,omitempty"`
	Halt     []MessageRule `json:"halt,omitempty"`
	Deny     []MessageRule `json:"deny,omitempty"`
}

// MatchConstraints select the workloads a policy answers for; empty lists
// match everything.
type MatchConstraints struct {
	Kinds         []string              `json:"kinds,omitempty"`
	Namespaces    []string              `json:"namespaces,omitempty"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Variable is a named expression, read as `variables.<name>`. Variables
// that read `pod` are evaluated per pod, on first use; the others once per
// workload.
type Variable struct {
	Name       string `json:"name"`
	Expression string `json:"expression" cel:"expr"`
}

// Scope: expression (bool) true keeps the pod in this rollout;
// messageExpression (string) says why a pod is held.
type Scope struct {
	Expression        string `json:"expression" cel:"expr"`
	MessageExpression string `json:"messageExpression" cel:"expr"`
}

// Eligibility: expression (bool) true asks for an in-place update;
// reasonsExpression (list of strings) explains the answer.
type Eligibility struct {
	Expression        string `json:"expression" cel:"expr"`
	ReasonsExpression string `json:"reasonsExpression,omitempty" cel:"expr"`
}

// OrderKeys is one variant of the sort key: the first variant whose `when`
// holds (no `when`: always) gives the keys. A key that evaluates to a list
// is spliced in (so `defaults.order` composes).
type OrderKeys struct {
	When string   `json:"when,omitempty" cel:"expr"`
	Keys []string `json:"keys" cel:"expr"`
}

// BudgetSpec is one budget, or one per element of forEach (bound as `item`).
// Name is a literal; every other field is an expression.
type BudgetSpec struct {
	Name           string `json:"name,omitempty"`
	NameExpression string `json:"nameExpression,omitempty" cel:"expr"`
	ForEach        string `json:"forEach,omitempty" cel:"expr"`
	When           string `json:"when,omitempty" cel:"expr"`
	MaxUnavailable string `json:"maxUnavailable,omitempty" cel:"expr"`
	MaxSurge       string `json:"maxSurge,omitempty" cel:"expr"`
	GroupBy        string `json:"groupBy,omitempty" cel:"expr"`
	MaxGroups      string `json:"maxGroups,omitempty" cel:"expr"`
	PDB            string `json:"pdb,omitempty" cel:"expr"`
	Advisory       string `json:"advisory,omitempty" cel:"expr"`
	Source         string `json:"source,omitempty" cel:"expr"`
}

// Expression is a single expression.
type Expression struct {
	Expression string `json:"expression" cel:"expr"`
}

// MessageRule: when expression (bool) holds, messageExpression (string) is
// reported. A halt rule that reads `pod` is evaluated for every pod.
type MessageRule struct {
	Name              string `json:"name,omitempty"`
	Expression        string `json:"expression" cel:"expr"`
	MessageExpression string `json:"messageExpression" cel:"expr"`
}

// Load reads RolloutPolicy documents from files and directories (recursive;
// *.yaml, *.yml, *.json). Documents of other kinds in those files are an
// error: a policy path holds policies only. Policies are returned sorted by
// name; two with one name are an error.
func Load(paths []string) ([]*RolloutPolicy, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
		if !st.IsDir() {
			if engine.FileKind(p) == engine.Rego {
				return nil, fmt.Errorf("policy %s is a Rego file, not a CEL policy (RolloutPolicy YAML): Rego policies run on the rego engine", p)
			}
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && engine.IsPolicyFile(engine.CEL, path) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p, err)
		}
	}
	if len(paths) > 0 && len(files) == 0 {
		return nil, fmt.Errorf("policy %s: no CEL policy files (.yaml, .yml, .json) found", strings.Join(paths, ", "))
	}
	sort.Strings(files)
	var out []*RolloutPolicy
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", f, err)
		}
		ps, err := Parse(f, b)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	for i := 1; i < len(out); i++ {
		if out[i].Metadata.Name == out[i-1].Metadata.Name {
			return nil, fmt.Errorf("policy %s: RolloutPolicy %q is also defined in %s", out[i].File, out[i].Metadata.Name, out[i-1].File)
		}
	}
	return out, nil
}

// Parse decodes the RolloutPolicy documents of one file strictly. Errors
// name the file, the policy (or the document before its name is known) and
// the field path; an unknown field lists the valid ones.
func Parse(file string, data []byte) ([]*RolloutPolicy, error) {
	var out []*RolloutPolicy
	err := snapshot.EachDocument("policy "+file, data, func(doc int, js []byte) error {
		where := fmt.Sprintf("policy %s: document %d", file, doc)
		var generic any
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		if err := dec.Decode(&generic); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		m, ok := generic.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want a RolloutPolicy (apiVersion, kind, metadata, spec), got %s", where, valueKind(generic))
		}
		// The kind first: fields of another kind are not typos.
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		if kind != Kind || apiVersion != APIVersion {
			return fmt.Errorf("%s: want apiVersion %s, kind %s; got apiVersion %q, kind %q", where, APIVersion, Kind, apiVersion, kind)
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			if name, ok := md["name"].(string); ok && name != "" {
				where = (&RolloutPolicy{File: file, Metadata: metav1.ObjectMeta{Name: name}}).where()
			}
		}
		if path, msg := checkFields(m, reflect.TypeFor[RolloutPolicy](), ""); msg != "" {
			if path == "" {
				return fmt.Errorf("%s: %s", where, msg)
			}
			return fmt.Errorf("%s: %s: %s", where, path, msg)
		}
		var p RolloutPolicy
		dec = json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		dec.UseNumber() // params keep integers as integers
		if err := dec.Decode(&p); err != nil {
			// checkFields accepts only what decodes; this is a safety net.
			return fmt.Errorf("%s: %w", where, err)
		}
		if p.Metadata.Name == "" {
			return fmt.Errorf("%s: metadata.name is required", where)
		}
		p.File = file
		p.Spec.Params = normalizeNumbers(p.Spec.Params).(map[string]any)
		out = append(out, &p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("policy %s: no RolloutPolicy document", file)
	}
	return out, nil
}

// normalizeNumbers turns json.Number into int64 (integral) or float64, the
// types CEL knows.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case nil:
		return map[string]any{}
	case map[string]any:
		for k, e := range x {
			if e == nil {
				x[k] = nil
				continue
			}
			x[k] = normalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			if e != nil {
				x[i] = normalizeNumbers(e)
			}
		}
		return x
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
