package gate

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rollplan/rollplan/planner/facts"
)

// renamed is statefulSet(n) under another name ("db" → name everywhere:
// objects, labels, owner references), with the StatefulSet's annotations
// replaced by ann.
func renamed(t *testing.T, n int, name string, ann map[string]string) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, o := range statefulSet(n) {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		c := reflect.New(reflect.TypeOf(o).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), `db`, name)), c); err != nil {
			t.Fatal(err)
		}
		if set, ok := c.(*appsv1.StatefulSet); ok {
			set.Annotations = ann
		}
		out = append(out, c)
	}
	return out
}

// A workload whose facts fail takes no other workload's budgets down with
// it: its own disruptions get the error (fail-closed when it is managed,
// open when it is not), the others are judged by their budgets as if it
// were not there.
func TestOneWorkloadsFactsErrorStaysWithIt(t *testing.T) {
	objs := statefulSet(5)
	// cache: managed, with an invalid pod-update-policy.
	objs = append(objs, renamed(t, 3, "cache", map[string]string{facts.AnnManaged: "true", facts.AnnPodUpdatePolicy: "Sometimes"})...)
	// legacy: rollplan.dev/managed "yes" is not "true": not managed, so
	// its error fails open.
	objs = append(objs, renamed(t, 3, "legacy", map[string]string{facts.AnnManaged: "yes"})...)
	f := newFixture(t, Options{}, objs...)
	steps := []struct {
		pod      string
		decision string
		allowed  bool
		says     []string
	}{
		{"cache-0", Errored, false, []string{"StatefulSet shop/cache", `annotation rollplan.dev/pod-update-policy="Sometimes"`}},
		{"legacy-0", Errored, true, []string{"StatefulSet shop/legacy", `annotation rollplan.dev/managed="yes"`}},
		{"db-0", Allowed, true, nil},
		{"db-1", Allowed, true, nil},
		// db's budget (max-unavailable 2) holds, unchanged by the others.
		{"db-2", Denied, false, []string{"StatefulSet shop/db", "budget maxUnavailable allows 2"}},
		{"cache-1", Errored, false, []string{"StatefulSet shop/cache"}},
	}
	for _, s := range steps {
		resp, d, v := f.gate.Review(context.Background(), evict(s.pod, false))
		if resp.Allowed != s.allowed || d != s.decision {
			t.Errorf("eviction of %s: %s (allowed %t), want %s (allowed %t): %v", s.pod, d, resp.Allowed, s.decision, s.allowed, resp.Result)
			continue
		}
		msg := v.text() // what the gate logs, and a denial says
		for _, want := range s.says {
			if !strings.Contains(msg, want) {
				t.Errorf("eviction of %s: %q does not say %q", s.pod, msg, want)
			}
		}
	}
	if got := f.reserved(); strings.Join(got, ",") != "db-0,db-1" {
		t.Errorf("db reserved %v, want db-0,db-1", got)
	}
}
