package cel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Variables that read only now, params and other such variables are
// computed once per snapshot time and shared by every workload; any that
// read the workload (even through another variable, or a comprehension
// variable that shadows an input) are not; and the answers are those of
// computing each per workload.
func TestNowOnlyVariables(t *testing.T) {
	ps := policy(t, `  params: {limit: 2}
  variables:
  - name: hour
    expression: timestamp(now).getHours()
  - name: late
    expression: variables.hour >= 18 || params.limit > 5
  - name: size
    expression: workload.replicas
  - name: mixed
    expression: variables.late && variables.size > 2
  - name: shadow
    expression: "[1, 2].exists(pods, pods > 1) && variables.late"
  halt:
  - name: after-hours
    expression: variables.late
    messageExpression: "'after hours, ' + string(variables.hour) + 'h, ' + workload.name"
  - name: big
    expression: variables.mixed && variables.shadow
    messageExpression: "'big ' + workload.name"
`)
	e, err := New(ps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := e.policies[len(e.policies)-1]
	want := map[string]bool{"hour": true, "late": true, "size": false, "mixed": false, "shadow": false}
	for name, nowOnly := range want {
		if got := c.vars[c.varIndex[name]].nowOnly; got != nowOnly {
			t.Errorf("variable %s: now-only %v, want %v", name, got, nowOnly)
		}
	}
	for _, tc := range []struct {
		now, name string
		halts     []string
	}{
		{"2026-03-01T19:00:00Z", "db", []string{"after hours, 19h, db", "big db"}},
		{"2026-03-01T19:00:00Z", "web", []string{"after hours, 19h, web", "big web"}},
		{"2026-03-01T09:00:00Z", "db", nil},
		{"2026-03-01T19:30:00Z", "api", []string{"after hours, 19h, api", "big api"}},
	} {
		r := rollout()
		r.Now, r.Workload.Name = tc.now, tc.name
		r.Pods[2].Restarts = 0 // no crash-loop halt of the default strategy
		d, err := e.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(d.Halt, "; ") != strings.Join(tc.halts, "; ") {
			t.Errorf("%s at %s: halts %q, want %q", tc.name, tc.now, d.Halt, tc.halts)
		}
	}
	// Workloads are decided in parallel (plan.Build): they share the
	// cache (go test -race checks it).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := rollout()
			r.Now, r.Workload.Name = "2026-03-01T20:00:00Z", fmt.Sprintf("w%d", i)
			r.Pods[2].Restarts = 0
			d, err := e.Decide(context.Background(), r)
			if err != nil {
				t.Errorf("in parallel, %s: %v", r.Workload.Name, err)
				return
			}
			if len(d.Halt) != 2 || d.Halt[0] != "after hours, 20h, "+r.Workload.Name {
				t.Errorf("in parallel, %s: halts %q", r.Workload.Name, d.Halt)
			}
		})
	}
	wg.Wait()
	// One entry per distinct now, holding the now-only variables alone.
	c.globals.mu.Lock()
	defer c.globals.mu.Unlock()
	if len(c.globals.m) != 4 {
		t.Errorf("%d snapshot times cached, want 4", len(c.globals.m))
	}
	for now, vs := range c.globals.m {
		for name, nowOnly := range want {
			if cached := vs[c.varIndex[name]] != nil; cached && !nowOnly {
				t.Errorf("at %s: variable %s, which reads the workload, was cached", now, name)
			}
		}
	}
}
