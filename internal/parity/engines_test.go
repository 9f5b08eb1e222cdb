package parity

import (
	"context"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/cel"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/plan"
)

// engines lists the engines whose plans must agree, the first being the
// reference the others are compared with. Add an engine by appending its
// constructor here (e.g. cel.New(...)).
func engines(t testing.TB) []engine.Engine {
	t.Helper()
	b, err := rego.LoadBundle(nil)
	if err != nil {
		t.Fatalf("load the default policy bundle: %v", err)
	}
	re, err := rego.New(context.Background(), b, time.Minute)
	if err != nil {
		t.Fatalf("compile the default policy bundle: %v", err)
	}
	ce, err := cel.New(nil, cel.Options{})
	if err != nil {
		t.Fatalf("compile the CEL default strategy: %v", err)
	}
	return []engine.Engine{re, ce, native.New()}
}

// upstreamOptions are the default estimates with the model of the
// workloads' own controllers that every caller plans with.
var upstreamOptions = func() plan.Options {
	o := plan.DefaultOptions
	o.Upstream = native.New()
	return o
}()
