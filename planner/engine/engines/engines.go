// Package engines is the registry of the policy engines rollplan ships
// (rego, cel, native): it builds one by name over policy paths and says
// which engine policy paths are for. The contract the engines implement is
// planner/engine; this package imports the implementations so that the
// contract need not, and so that every command and the policy tests build
// their engines one way.
package engines

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/cel"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
)

// Options tune an engine as it is built.
type Options struct {
	// Timeout bounds the evaluation for one workload; zero or negative:
	// engine.DefaultTimeout (a minute, the --policy-timeout default). The
	// native engine, which runs no policy, has none.
	Timeout time.Duration
}

// opener builds the engine of one kind over policy paths (none: the
// default strategy alone).
type opener func(ctx context.Context, paths []string, o Options) (engine.Engine, error)

// registry: one entry per name of engine.Kinds.
var registry = map[string]opener{
	engine.Rego: func(ctx context.Context, paths []string, o Options) (engine.Engine, error) {
		return rego.Load(ctx, paths, o.Timeout)
	},
	engine.CEL: func(_ context.Context, paths []string, o Options) (engine.Engine, error) {
		ps, err := cel.Load(paths)
		if err != nil {
			return nil, err
		}
		return cel.New(ps, cel.Options{Timeout: o.Timeout})
	},
	engine.Native: func(_ context.Context, paths []string, _ Options) (engine.Engine, error) {
		if len(paths) > 0 {
			return nil, fmt.Errorf("engine native is the built-in default strategy and takes no policy (got %s)", strings.Join(paths, ", "))
		}
		return native.New(), nil
	},
}

// Known reports whether kind names an engine.
func Known(kind string) bool {
	_, ok := registry[kind]
	return ok
}

// Open builds the engine of kind over policy paths (files or directories;
// none: the default strategy). Loading and compiling errors name the file.
func Open(ctx context.Context, kind string, paths []string, o Options) (engine.Engine, error) {
	open, ok := registry[kind]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q: want %s", kind, engine.KindList())
	}
	return open(ctx, paths, o)
}

// Upstream is the model of what a workload's own controller does, which
// the plan compares a policy's answers with for a workload rollplan does
// not drive (plan.Options.Upstream): the default strategy in Go.
func Upstream() engine.Engine { return native.New() }

// Path is a policy path and the engines its files are for.
type Path struct {
	Path string
	// Dir: the path is a directory.
	Dir bool
	// Kinds: the engines it holds policies of. A file is its extension's
	// (engine.FileKind); a directory holds those of the policy files under
	// it (engine.IsPolicyFile), which may be both Rego and CEL (the shipped
	// examples are: each engine then reads its own files). A path that is
	// not there is a file, by its extension.
	Kinds map[string]bool
}

// Only reports whether the path holds policies of kind and of no other
// engine.
func (p Path) Only(kind string) bool { return p.Kinds[kind] && len(p.Kinds) == 1 }

// Classify says which engines path holds policies of.
func Classify(path string) Path {
	p := Path{Path: path, Kinds: map[string]bool{}}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		if k := engine.FileKind(path); k != "" {
			p.Kinds[k] = true
		}
		return p
	}
	p.Dir = true
	_ = filepath.WalkDir(path, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if k := engine.FileKind(f); k != "" && engine.IsPolicyFile(k, f) {
			p.Kinds[k] = true
		}
		if len(p.Kinds) == 2 {
			return filepath.SkipAll
		}
		return nil
	})
	return p
}

// MixedError: policy paths for different engines, with no engine named.
type MixedError struct {
	// Rego and CEL: the first path of each engine's alone.
	Rego, CEL string
}

func (e *MixedError) Error() string {
	return fmt.Sprintf("policy paths mix Rego (%s) and CEL (%s) policies: keep one engine's files", e.Rego, e.CEL)
}

// Infer is the engine for policy paths when none is named: CEL when a
// path holds CEL policies alone (a .yaml, .yml or .json file, a directory
// of them without .rego files) and none Rego alone; else Rego, which is
// also the default strategy's engine without paths. Paths of which one
// holds Rego alone and another CEL alone are a *MixedError.
func Infer(paths []string) (string, error) {
	var regoOnly, celOnly string
	for _, path := range paths {
		p := Classify(path)
		switch {
		case p.Only(engine.Rego) && regoOnly == "":
			regoOnly = path
		case p.Only(engine.CEL) && celOnly == "":
			celOnly = path
		}
	}
	switch {
	case regoOnly != "" && celOnly != "":
		return "", &MixedError{Rego: regoOnly, CEL: celOnly}
	case celOnly != "":
		return engine.CEL, nil
	}
	return engine.Rego, nil
}
