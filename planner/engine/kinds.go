package engine

import (
	"path/filepath"
	"strings"
	"time"
)

// The engines rollplan ships, by the name Engine.Name returns and --engine
// and a test suite's spec.engine take. The registry that builds them is
// planner/engine/engines; the contract only names them, so that each
// engine's loader knows the other's files.
const (
	Rego   = "rego"   // Rego policies (.rego), OPA v1
	CEL    = "cel"    // CEL RolloutPolicy documents (.yaml, .yml, .json)
	Native = "native" // the default strategy in Go; it reads no policy
)

// Kinds are the engines in the order messages list them.
var Kinds = []string{Rego, CEL, Native}

// KindList names the engines for a message or a flag's help: "rego, cel or
// native".
func KindList() string {
	return strings.Join(Kinds[:len(Kinds)-1], ", ") + " or " + Kinds[len(Kinds)-1]
}

// extensions of each engine's policy files, lower case.
var extensions = map[string][]string{
	Rego: {".rego"},
	CEL:  {".yaml", ".yml", ".json"},
}

// FileKind is the engine a file is for by its extension (any case): Rego
// for .rego, CEL for .yaml, .yml and .json, "" for any other file. A test
// file (policy_test.rego) is its engine's too: a file named on its own is
// read whatever it is called.
func FileKind(path string) string {
	ext := strings.ToLower(filepath.Ext(path))
	for _, kind := range Kinds {
		for _, e := range extensions[kind] {
			if ext == e {
				return kind
			}
		}
	}
	return ""
}

// IsPolicyFile reports whether a file met in a policy directory is a
// policy of the engine kind: its extension is the engine's and it is not a
// test (*_test.rego, *_test.yaml: a test suite may sit beside the policy
// it tests). Loaders read exactly these files of a directory.
func IsPolicyFile(kind, path string) bool {
	if FileKind(path) != kind {
		return false
	}
	return !strings.HasSuffix(strings.TrimSuffix(path, filepath.Ext(path)), "_test")
}

// DefaultTimeout bounds the evaluation for one workload of an engine built
// with no timeout (zero or negative): what --policy-timeout defaults to.
// No engine evaluates without a bound: the admission gate must answer.
const DefaultTimeout = time.Minute

// EvalTimeout is the bound of one workload's evaluation for a timeout as
// given: d, or DefaultTimeout when d is zero or negative. Every engine reads
// its timeout through it, so that one value means one thing.
func EvalTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}
