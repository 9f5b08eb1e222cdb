package rego

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine"
)

// FuzzPolicy loads, compiles and evaluates mutated entry policies (package
// rollplan.strategy) over the rollouts of a few golden scenarios. Whatever
// the policy computes, the engine must answer with decisions or with an
// error naming the policy file, never panic on an answer of the wrong shape;
// and the VM must answer as the interpreter does.
//
//	go test ./planner/engine/rego -run '^$' -fuzz FuzzPolicy -fuzztime 5m -fuzzminimizetime 0
func FuzzPolicy(f *testing.F) {
	seeds, _ := filepath.Glob("../../../policies/examples/*/policy.rego")
	if len(seeds) == 0 {
		f.Fatal("no example policies under ../../../policies/examples")
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("package rollplan.strategy\n\norder(pod) := {\"not\": \"a list\"}\n")
	f.Add("package rollplan.strategy\n\nbudgets := [{\"name\": \"x\", \"maxUnavailable\": -1}]\n")
	f.Add("package rollplan.strategy\n\nscope(pod) := {\"in\": \"yes\"}\n")
	for _, p := range vmPolicies {
		f.Add("package rollplan.strategy\n\n" + p.src)
	}
	rollouts, err := scenario.Rollouts("../../../testdata/scenarios", "sts-inplace-image-only", "ds-maxsurge", "deploy-rolling-10-25pct", "example-leader-last")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		b, err := parseBundle(map[string]string{"fuzz.rego": src}, []string{"fuzz.rego"})
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.rego") {
				t.Fatalf("load error does not name the policy file: %v", err)
			}
			return
		}
		e, err := New(context.Background(), b, 2*time.Second)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.rego") {
				t.Fatalf("compile error does not name the policy file: %v", err)
			}
			return
		}
		interp := *e
		interp.interpret = true
		for _, r := range rollouts {
			d, err := e.Decide(context.Background(), r)
			if err == nil && len(d.Pods) != len(r.Pods) {
				t.Fatalf("%d decisions for %d pods", len(d.Pods), len(r.Pods))
			}
			if err != nil && err.Error() == "" {
				t.Fatal("empty error")
			}
			if e.compiled == nil {
				continue // interpreted both ways
			}
			want, werr := interp.Decide(context.Background(), r)
			var te *engine.TimeoutError
			if errors.As(err, &te) || errors.As(werr, &te) {
				continue
			}
			if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(d, want) {
				t.Fatalf("%s: compiled %v %+v, interpreted %v %+v", workloadID(r), err, d, werr, want)
			}
		}
	})
}
