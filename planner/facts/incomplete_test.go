package facts

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// A workload whose status counts pods (or, for a Deployment, ReplicaSets)
// the snapshot does not hold was captured in part: its facts say so.
func TestIncompleteSnapshotWarnings(t *testing.T) {
	cases := []struct {
		name     string
		scenario string
		drop     func(*snapshot.Snapshot)
		want     string // "" for no warning of the kind
	}{
		{"deployment complete", "deploy-rolling-10-25pct", func(*snapshot.Snapshot) {}, ""},
		{"deployment without pods", "deploy-rolling-10-25pct", func(s *snapshot.Snapshot) { s.Pods = nil },
			"Deployment default/api: the snapshot holds none of its pods, yet its status.replicas is 10"},
		{"deployment without ReplicaSets", "deploy-rolling-10-25pct", func(s *snapshot.Snapshot) { s.ReplicaSets, s.Pods = nil, nil },
			"Deployment default/api: the snapshot holds none of its ReplicaSets, yet its status.replicas is 10"},
		{"statefulset without pods", "sts-partition-gate-off", func(s *snapshot.Snapshot) { s.Pods = nil },
			"StatefulSet default/web: the snapshot holds none of its pods, yet its status.replicas is"},
		{"daemonset without pods", "ds-maxunavailable-int", func(s *snapshot.Snapshot) { s.Pods = nil },
			"the snapshot holds none of its pods, yet its status.currentNumberScheduled + numberMisscheduled is"},
		{"statefulset complete", "sts-partition-gate-off", func(*snapshot.Snapshot) {}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap, _, err := snapshot.LoadFiles([]string{filepath.Join("../../testdata/scenarios", c.scenario, "snapshot.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			c.drop(snap)
			rs, err := Build(snap, Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for _, r := range rs {
				warnings = append(warnings, r.Warnings...)
			}
			all := strings.Join(warnings, "\n")
			switch {
			case c.want == "" && strings.Contains(all, "the snapshot holds none of its"):
				t.Errorf("unexpected warning:\n%s", all)
			case c.want != "" && !strings.Contains(all, c.want):
				t.Errorf("warnings lack %q:\n%s", c.want, all)
			}
		})
	}
}
