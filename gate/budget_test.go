package gate

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rollplan/rollplan/planner/facts"
)

// A native Parallel StatefulSet with MaxUnavailableStatefulSet off: its
// controller replaces the highest out-of-date ordinal whenever no replica
// above it is unavailable, whatever the pods below (§4.5), and the planner
// plans it so. The gate counts its budget (one pod at a time) the same way:
// an unready pod below does not stall the rollout, one above does.
func TestNativeParallelStatefulSetCountsAbove(t *testing.T) {
	native := func(unready ...string) []runtime.Object {
		return edit(statefulSet(4, unready...), nil, func(o runtime.Object) {
			if set, ok := o.(*appsv1.StatefulSet); ok {
				delete(set.Annotations, facts.AnnManaged)
				delete(set.Annotations, facts.AnnMaxUnavailable)
				delete(set.Annotations, facts.AnnPodUpdatePolicy)
				set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
			}
		})
	}
	cases := []struct {
		name    string
		objs    []runtime.Object
		pod     string
		allowed bool
		want    string
	}{
		{"unready pod below", native("db-1"), "db-3", true, ""},
		{"unready pod above", native("db-3"), "db-2", false, "budget maxUnavailable allows 1 pod unavailable, this would make 2 (already unavailable: db-3)"},
		{"the unready pod itself", native("db-1"), "db-1", true, ""},
		{"every pod available", native(), "db-0", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, c.objs...)
			resp, _ := f.review(evict(c.pod, true))
			if resp.Allowed != c.allowed {
				t.Fatalf("eviction of %s: allowed %v, want %v: %v", c.pod, resp.Allowed, c.allowed, resp.Result)
			}
			if c.want != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, c.want)) {
				t.Errorf("message %v, want %q", resp.Result, c.want)
			}
		})
	}
}
