package snapshot_test

import (
	"testing"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// KindSlip finds the kind a slip of case or of one letter was meant to
// be, and nothing for kinds that are merely different.
func TestKindSlip(t *testing.T) {
	known := []string{"Deployment", "StatefulSet", "DaemonSet", "Pod", "Node"}
	for _, c := range []struct{ kind, want string }{
		{"Daemonset", "DaemonSet"},
		{"daemonset", "DaemonSet"},
		{"DAEMONSET", "DaemonSet"},
		{"Statefulset", "StatefulSet"},
		{"StatefullSet", "StatefulSet"}, // a letter added
		{"Deploymet", "Deployment"},     // a letter left out
		{"Deploymnet", "Deployment"},    // two swapped
		{"Deploiment", "Deployment"},    // one changed
		{"Pods", "Pod"},
		{"DaemonSet", ""}, // itself
		{"Role", ""},      // two letters from Node: another kind
		{"Service", ""},
		{"ConfigMap", ""},
		{"", ""},
	} {
		if got := snapshot.KindSlip(c.kind, known); got != c.want {
			t.Errorf("KindSlip(%q) = %q, want %q", c.kind, got, c.want)
		}
	}
}
