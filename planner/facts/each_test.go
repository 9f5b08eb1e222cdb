package facts

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// One workload's invalid objects fail that workload only: BuildEach returns
// the others' facts, exactly as they are without the invalid one, and the
// error naming the workload and the field; Build still fails as a whole.
func TestBuildEachKeepsOneWorkloadsError(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, scenario string
		// breakIt makes one workload invalid and returns its kind/namespace/name.
		breakIt func(*snapshot.Snapshot) string
		want    string // in the workload's error
	}{
		{"daemonset managed=yes", "stall-event-due-now", func(s *snapshot.Snapshot) string {
			ds := s.DaemonSets[0]
			ds.Annotations = map[string]string{AnnManaged: "yes"}
			return "DaemonSet/" + ds.Namespace + "/" + ds.Name
		}, `DaemonSet default/agent: annotation rollplan.dev/managed="yes": want "true" or "false"`},
		{"deployment pod-update-policy", "stall-event-due-now", func(s *snapshot.Snapshot) string {
			d := s.Deployments[0]
			d.Annotations[AnnPodUpdatePolicy] = "Sometimes"
			return "Deployment/" + d.Namespace + "/" + d.Name
		}, `Deployment default/api: annotation rollplan.dev/pod-update-policy="Sometimes"`},
		{"controllerrevision without data", "stall-event-due-now", func(s *snapshot.Snapshot) string {
			ds := s.DaemonSets[0]
			for _, cr := range s.ControllerRevisions {
				cr.Data.Raw = nil
			}
			return "DaemonSet/" + ds.Namespace + "/" + ds.Name
		}, "DaemonSet default/agent: ControllerRevision default/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			load := func() *snapshot.Snapshot {
				snap, _, err := snapshot.LoadFiles([]string{filepath.Join("../../testdata/scenarios", c.scenario, "snapshot.yaml")})
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
			valid, err := Build(load(), Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			snap := load()
			bad := c.breakIt(snap)
			if _, err := Build(snap, Options{Now: now}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: error %v, want one containing %q", err, c.want)
			}
			rs, failed, err := BuildEach(snap, Options{Now: now})
			if err != nil {
				t.Fatalf("BuildEach: %v", err)
			}
			if len(failed) != 1 || failed[0].Kind+"/"+failed[0].Namespace+"/"+failed[0].Name != bad || !strings.Contains(failed[0].Error(), c.want) {
				t.Fatalf("failed %v, want %s only, with %q", failed, bad, c.want)
			}
			if len(rs) != len(valid)-1 {
				t.Fatalf("%d rollouts, want %d", len(rs), len(valid)-1)
			}
			// The others' facts are exactly what they are without the error.
			for _, r := range rs {
				var same *Rollout
				for _, v := range valid {
					if v.Workload.Kind == r.Workload.Kind && v.Workload.Namespace == r.Workload.Namespace && v.Workload.Name == r.Workload.Name {
						same = v
					}
				}
				a, _ := json.Marshal(r)
				b, _ := json.Marshal(same)
				if string(a) != string(b) {
					t.Errorf("%s %s: facts differ from the valid snapshot's:\n%s\n%s", r.Workload.Kind, r.Workload.Name, a, b)
				}
			}
		})
	}
}

// An error no single workload owns still fails the whole call.
func TestBuildEachSnapshotError(t *testing.T) {
	snap, _, err := snapshot.LoadFiles([]string{"../../testdata/scenarios/stall-event-due-now/snapshot.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := BuildEach(snap, Options{Now: time.Now(), FeatureGates: map[string]bool{"NoSuchGate": true}}); err == nil {
		t.Fatal("BuildEach with an unknown feature gate: no error")
	}
}
