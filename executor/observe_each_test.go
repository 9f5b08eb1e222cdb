package executor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Observe fails only on the target's own error: another workload the
// snapshot holds, invalid or not, has no say (apply, status, the gate).
func TestObserveKeepsOtherWorkloadsErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		target live.Target
		want   string // in the error; "" for facts
	}{
		{live.Target{Namespace: "default", Kind: capture.Deployment, Name: "api"}, ""},
		{live.Target{Namespace: "default", Kind: capture.StatefulSet, Name: "web"}, ""},
		{live.Target{Namespace: "default", Kind: capture.DaemonSet, Name: "agent"}, `DaemonSet default/agent: annotation rollplan.dev/managed="yes"`},
		{live.Target{Namespace: "default", Kind: capture.DaemonSet, Name: "nope"}, "not found"},
	}
	for _, c := range cases {
		t.Run(c.target.String(), func(t *testing.T) {
			snap, _, err := snapshot.LoadFiles([]string{"../testdata/scenarios/mixed-invalid-workload/snapshot.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := live.Observe(snap, c.target, now, facts.Options{})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Observe: %v", err)
			case c.want == "" && (r.Workload.Kind != c.target.Kind || r.Workload.Name != c.target.Name):
				t.Fatalf("facts of %s %s, want %s", r.Workload.Kind, r.Workload.Name, c.target)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			var we *facts.WorkloadError
			if c.target.Name == "agent" && !errors.As(err, &we) {
				t.Errorf("the target's own error is not a *facts.WorkloadError: %T", err)
			}
		})
	}
}
