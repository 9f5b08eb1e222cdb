package rego

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rollplan/rollplan/internal/parity"
	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// vmPolicies reach the VM's corners: sets and objects keyed by every kind
// of value over every pod, scans in OPA's order, every and not, else chains,
// numbers that are not integers, builtins left to OPA, partial rules, and
// the errors (conflicts, type errors, undefined answers) that the VM leaves
// to the interpreter.
var vmPolicies = []struct {
	name, src string
	compiled  bool // the VM runs it (else: interpreted, with a note)
}{
	{"collections", `
by_index := {i: p.name | some i, p in input.pods}
names := {p.name | some p in input.pods}
pod_objs := {{"n": p.name, "z": p.zone} | some p in input.pods}
zones := {p.zone | some p in input.pods}
sorted_zones := sort([z | some z in zones])
zone_rank := {z: i | some i, z in sorted_zones}
first_keys := [k | some k, _ in by_index; k < 3]
label_pairs := {[k, v] | some p in input.pods; some k, v in p.labels}

order(pod) := [zone_rank[pod.zone], count(pod_objs), count(names), count(first_keys), count(label_pairs), pod.name]

halt := [sprintf("%d pods in zones %v", [count(names), sorted_zones])] if {
	count(names) > 7
} else := []

deny contains msg if {
	some z in zones
	z == "zone-z"
	msg := sprintf("zone %s", [z])
}
`, true},
	{"logic", `
import data.rollplan.defaults

scope(pod) := {"in": false, "reason": sprintf("held %s: %.2f restarts a third", [pod.name, pod.restarts / 3])} if {
	pod.restarts > 0
	not pod.ready
} else := {"in": true}

eligibility(pod) := {"action": "Recreate", "reasons": [r | some c in object.get(pod, "changes", []); not c.inPlace; r := c.path]} if {
	every c in pod.changes {
		is_string(c.path)
	}
	not pod.available
} else := defaults.eligibility(pod)

tier(pod) := "a" if {
	endswith(pod.name, "0")
} else := "b" if {
	startswith(pod.zone, "zone-a")
} else := "c"

order(pod) := array.concat([tier(pod), trim_suffix(pod.name, "-0")], defaults.order(pod))
`, true},
	{"numbers", `
order(pod) := [pod.ordinal / 2, pod.readySeconds * 1.5, 0 - pod.restarts, 2e3, 1.0, 10000000000000000000000, to_number("7"), pod.ordinal % 3, round(pod.ordinal / 4), max([pod.ordinal, 2]), pod.name]

budgets := [{"name": "half", "maxUnavailable": floor(input.workload.replicas / 2)}]
`, true},
	{"partial", `
import data.rollplan.defaults

labels_of[p.name] := object.get(p.labels, "app", "none") if some p in input.pods

held contains p.name if {
	some p in input.pods
	p.index % 2 == 1
}

scope(pod) := {"in": false, "reason": concat(" ", ["odd", labels_of[pod.name]])} if {
	pod.name in held
} else := defaults.scope(pod)

pacing := "rolling" if input.workload.kind == "StatefulSet"
else := "wave"
`, true},
	{"conflict", `
pacing := "wave" if input.workload.replicas > 0

pacing := "rolling" if input.workload.replicas > 2
`, true},
	{"type error", `
order(pod) := [pod.name + 1] if pod.index > 1 else := [pod.name]
`, true},
	{"undefined", `
order(pod) := [pod.nodeName]
`, true},
	{"bad answer", `
eligibility(pod) := {"action": "Sometimes"} if pod.index == 2 else := {"action": "Recreate"}
`, true},
	{"with", `
import data.rollplan.defaults

order(pod) := k if {
	k := defaults.order(pod) with input.workload.kind as "DaemonSet"
}
`, false},
	{"whole package", `
import data.rollplan.defaults

halt := ["no kind"] if {
	x := data.rollplan.defaults
	not x.kind
} else := []
`, false},
}

// TestVMParityPolicies compares the VM with the interpreter over the
// scenarios and random facts for each of vmPolicies.
func TestVMParityPolicies(t *testing.T) {
	scenarios, err := scenario.All("../../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var rollouts []*facts.Rollout
	for _, sc := range scenarios {
		rollouts = append(rollouts, sc.Rollouts...)
	}
	rng := rand.New(rand.NewSource(7))
	for range 80 {
		c := parity.Generate(rng)
		rs, err := facts.Build(c.Snap, c.FactsOptions())
		if err != nil {
			t.Fatal(err)
		}
		rollouts = append(rollouts, rs...)
	}
	rollouts = append(rollouts, stsRollout())
	for _, pc := range vmPolicies {
		t.Run(pc.name, func(t *testing.T) {
			b, err := parseBundle(userPolicy(pc.src), []string{"test"})
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(context.Background(), b, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if compiled := c.compiled != nil; compiled != pc.compiled {
				t.Fatalf("compiled %v, want %v (notes %q)", compiled, pc.compiled, c.Notes())
			}
			if !pc.compiled && len(c.Notes()) == 0 {
				t.Fatal("interpreted without a note")
			}
			i := *c
			i.interpret = true
			p := &pair{name: pc.name, compiled: c, interp: &i}
			for _, r := range rollouts {
				if c.compiled == nil {
					// Interpreted both ways: Decide alone.
					w, werr := p.interp.Decide(context.Background(), r)
					g, gerr := p.compiled.Decide(context.Background(), r)
					if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) || (werr == nil && len(w.Pods) != len(g.Pods)) {
						t.Fatalf("%s: differs: %v / %v", workloadID(r), werr, gerr)
					}
					continue
				}
				p.check(t, r)
			}
			t.Logf("%d rollouts: %d answered on the VM, %d fell back", len(rollouts), p.vmRuns, p.fallbacks)
		})
	}
}

// TestVMConcurrent: one engine deciding from several goroutines (as the
// gate does) shares its program and constants without a race (go test
// -race) and answers each as alone.
func TestVMConcurrent(t *testing.T) {
	rs, err := scenario.Rollouts("../../../testdata/scenarios", "sts-inplace-image-only", "ds-maxsurge", "deploy-rolling-10-25pct")
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range vmPolicies[:2] {
		b, err := parseBundle(userPolicy(pc.src), []string{"test"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(context.Background(), b, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]*engine.Decisions, len(rs))
		for i, r := range rs {
			if want[i], err = e.Decide(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*len(rs))
		for range 4 {
			wg.Go(func() {
				for i, r := range rs {
					got, err := e.Decide(context.Background(), r)
					if err != nil || !reflect.DeepEqual(got, want[i]) {
						errs <- fmt.Errorf("%s: %s: %v %+v", pc.name, workloadID(r), err, got)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
