package policytest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollplan/rollplan/internal/fieldcheck"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/request"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// LoadFile reads the RolloutPolicyTest documents of a YAML file; documents
// of other kinds are ignored. Errors name the file, the document, the test
// and the field.
func LoadFile(path string) ([]*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, data)
}

// Decode reads the RolloutPolicyTest documents of one file's content; name
// is used in messages and relative paths are resolved against its directory.
func Decode(name string, data []byte) ([]*Suite, error) {
	var out []*Suite
	err := snapshot.EachDocument(name, data, func(doc int, js []byte) error {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(js, &tm) != nil || tm.Kind != Kind {
			return nil
		}
		s, err := decodeSuite(name, doc, js)
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func decodeSuite(file string, doc int, js []byte) (*Suite, error) {
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
	}
	// fail names the file, the document or the test, and the field (relative
	// to the test when it is in one).
	fail := func(path, msg string) error {
		if i, ok := testIndex(path); ok {
			rel := strings.TrimPrefix(strings.TrimPrefix(path, fmt.Sprintf("spec.tests[%d]", i)), ".")
			if rel == "" {
				return fmt.Errorf("%s: test %s: %s", file, testLabel(generic, i), msg)
			}
			return fmt.Errorf("%s: test %s: field %s: %s", file, testLabel(generic, i), rel, msg)
		}
		return fmt.Errorf("%s: document %d: field %s: %s", file, doc, path, msg)
	}
	if path, msg := check(generic, reflect.TypeFor[Suite](), ""); msg != "" {
		return nil, fail(path, msg)
	}
	s := &Suite{File: file, Doc: doc}
	if err := json.Unmarshal(js, s); err != nil {
		// check accepts only what decodes; this is a safety net.
		return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
	}
	if path, msg := s.validate(); msg != "" {
		return nil, fail(path, msg)
	}
	return s, nil
}

// testIndex finds N in a path starting spec.tests[N].
func testIndex(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "spec.tests[")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil
}

func testLabel(generic any, i int) string {
	name := ""
	if m, ok := generic.(map[string]any); ok {
		if spec, ok := m["spec"].(map[string]any); ok {
			if tests, ok := spec["tests"].([]any); ok && i < len(tests) {
				if t, ok := tests[i].(map[string]any); ok {
					name, _ = t["name"].(string)
				}
			}
		}
	}
	if name == "" {
		return fmt.Sprintf("spec.tests[%d]", i)
	}
	return fmt.Sprintf("%q (spec.tests[%d])", name, i)
}

var (
	pathsType = reflect.TypeFor[Paths]()
)

// check walks a decoded JSON value along a Go type and reports the first
// field that is unknown or of the wrong type, with its path
// (spec.tests[0].expect.decisions[Kind/ns/name].pods[web-0].scope):
// fieldcheck.Check, with Paths (a path or a list of paths) judged here.
func check(v any, t reflect.Type, path string) (string, string) {
	return fieldcheck.Check(v, t, path, func(v any, t reflect.Type, _ *reflect.StructField, path string) (string, string, bool) {
		if t != pathsType || v == nil {
			return "", "", false
		}
		switch x := v.(type) {
		case string:
			return "", "", true
		case []any:
			for i, e := range x {
				if _, ok := e.(string); !ok {
					return fmt.Sprintf("%s[%d]", path, i), "want a path (a string), got " + fieldcheck.Kind(e), true
				}
			}
			return "", "", true
		}
		return path, "want a path or a list of paths, got " + fieldcheck.Kind(v), true
	})
}

// validate checks what the types cannot say; it returns the field and the message.
func (s *Suite) validate() (string, string) {
	if s.APIVersion != APIVersion {
		return "apiVersion", fmt.Sprintf("%q: want %s", s.APIVersion, APIVersion)
	}
	if s.Metadata.Name == "" {
		return "metadata.name", "missing: name the suite"
	}
	if s.Spec.Engine != "" && !engines.Known(s.Spec.Engine) {
		return "spec.engine", fmt.Sprintf("%q: want %s", s.Spec.Engine, engine.KindList())
	}
	for i, p := range s.Spec.Policy {
		if p == "" {
			return fmt.Sprintf("spec.policy[%d]", i), "empty path"
		}
	}
	if len(s.Spec.Tests) == 0 {
		return "spec.tests", "no tests"
	}
	seen := map[string]int{}
	for i := range s.Spec.Tests {
		t := &s.Spec.Tests[i]
		at := func(f string) string { return fmt.Sprintf("spec.tests[%d].%s", i, f) }
		if t.Name == "" {
			return at("name"), "missing: name the test"
		}
		if j, dup := seen[t.Name]; dup {
			return at("name"), fmt.Sprintf("%q is also the name of spec.tests[%d]", t.Name, j)
		}
		seen[t.Name] = i
		switch {
		case len(t.Snapshot) == 0 && len(t.Objects) == 0:
			return at("snapshot"), "missing: give snapshot (paths) or objects (inline)"
		case len(t.Snapshot) > 0 && len(t.Objects) > 0:
			return at("objects"), "give snapshot or objects, not both"
		}
		if t.Now != "" {
			if _, err := time.Parse(time.RFC3339, t.Now); err != nil {
				return at("now"), fmt.Sprintf("%q: want an RFC 3339 time such as 2026-03-01T12:00:00Z", t.Now)
			}
		}
		if t.Workload != "" {
			if _, _, _, err := ParseWorkload(t.Workload); err != nil {
				return at("workload"), err.Error()
			}
		}
		if len(t.AnalysisResults) > 0 {
			doc := facts.AnalysisResults{APIVersion: facts.ResultsAPIVersion, Kind: facts.ResultsKind, Workloads: t.AnalysisResults}
			if err := doc.Check(at("analysisResults")); err != nil {
				return at("analysisResults"), strings.TrimPrefix(err.Error(), at("analysisResults")+": ")
			}
		}
		if t.Expect.Decisions == nil && t.Expect.Plan == nil {
			return at("expect"), "missing: expect decisions, a plan or both"
		}
		for _, key := range slices.Sorted(maps.Keys(t.Expect.Decisions)) {
			wd := t.Expect.Decisions[key]
			if _, ns, _, err := ParseWorkload(key); err != nil || ns == "" {
				return at("expect.decisions[" + key + "]"), fmt.Sprintf("key %q: want KIND/NAMESPACE/NAME, e.g. StatefulSet/default/web", key)
			}
			for _, pod := range slices.Sorted(maps.Keys(wd.Pods)) {
				pd := wd.Pods[pod]
				pf := at("expect.decisions[" + key + "].pods[" + pod + "]")
				switch pd.Scope {
				case "", ScopeIn, ScopeHeld:
				default:
					return pf + ".scope", fmt.Sprintf("%q: want in or held", pd.Scope)
				}
				switch pd.Action {
				case "", "InPlace", "Recreate":
				default:
					return pf + ".action", fmt.Sprintf("%q: want InPlace or Recreate", pd.Action)
				}
				if pd.Scope == ScopeIn && pd.HeldReason != nil {
					return pf + ".heldReason", "a pod in scope has no held reason"
				}
			}
			for _, wave := range slices.Sorted(maps.Keys(wd.Gates)) {
				gf := at("expect.decisions[" + key + "].gates[" + wave + "]")
				if n, err := strconv.Atoi(wave); err != nil || n < 1 {
					return gf, fmt.Sprintf("key %q: want a wave number (1, 2, ...)", wave)
				}
				switch wd.Gates[wave].Status {
				case "", plan.GatePending, plan.GatePassed, plan.GateFailed, plan.GateInconclusive:
				default:
					return gf + ".status", fmt.Sprintf("%q: want pending, passed, failed or inconclusive", wd.Gates[wave].Status)
				}
			}
		}
		if p := t.Expect.Plan; p != nil {
			var ws any
			if len(p.Workloads) == 0 || json.Unmarshal(p.Workloads, &ws) != nil || ws == nil {
				return at("expect.plan.workloads"), "missing: the workloads of the plan, as `rollplan plan -o yaml` prints them"
			}
			if path, msg := check(ws, reflect.TypeFor[[]plan.WorkloadPlan](), at("expect.plan.workloads")); msg != "" {
				return path, msg
			}
		}
	}
	return "", ""
}

// ParseWorkload reads KIND/NAME or KIND/NAMESPACE/NAME; KIND may be
// abbreviated as --workload accepts it (deploy, sts, ds).
func ParseWorkload(s string) (kind, ns, name string, err error) {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 2:
		kind, name = parts[0], parts[1]
	case 3:
		kind, ns, name = parts[0], parts[1], parts[2]
	default:
		return "", "", "", fmt.Errorf("%q: want KIND/NAME or KIND/NAMESPACE/NAME", s)
	}
	if kind = request.Kind(kind); kind == "" {
		return "", "", "", fmt.Errorf("%q: kind must be Deployment, StatefulSet or DaemonSet", s)
	}
	if name == "" || (len(parts) == 3 && ns == "") {
		return "", "", "", fmt.Errorf("%q: empty namespace or name", s)
	}
	return kind, ns, name, nil
}
