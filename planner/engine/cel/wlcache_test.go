package cel

import (
	"reflect"
	"testing"

	"github.com/rollplan/rollplan/planner/facts"
)

// The budget cache keys on the %#v of the inputs a policy reads, which
// prints a nested pointer as its address: an address reused by other
// content after a collection would then be a false hit. Every type the key
// may print must hold its content by value (now, a time.Time, prints as
// time.Date(...) through its GoString).
func TestBudgetCacheKeyTypesHoldNoPointers(t *testing.T) {
	var walk func(path string, ty reflect.Type, seen map[reflect.Type]bool)
	walk = func(path string, ty reflect.Type, seen map[reflect.Type]bool) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Pointer, reflect.UnsafePointer, reflect.Func, reflect.Chan:
			t.Errorf("%s is a %s: the budget cache key would print its address", path, ty.Kind())
		case reflect.Slice, reflect.Array:
			walk(path+"[]", ty.Elem(), seen)
		case reflect.Map:
			walk(path+"[key]", ty.Key(), seen)
			walk(path+"[]", ty.Elem(), seen)
		case reflect.Struct:
			for f := range ty.Fields() {
				walk(path+"."+f.Name, f.Type, seen)
			}
		}
	}
	for name, ty := range map[string]reflect.Type{
		"workload":     reflect.TypeFor[Workload](),
		"pdbs":         reflect.TypeFor[[]facts.PDB](),
		"revisions":    reflect.TypeFor[[]facts.Revision](),
		"nodes":        reflect.TypeFor[[]facts.Node](),
		"replicaSets":  reflect.TypeFor[[]facts.ReplicaSet](),
		"featureGates": reflect.TypeFor[map[string]bool](),
	} {
		walk(name, ty, map[reflect.Type]bool{})
	}
}
