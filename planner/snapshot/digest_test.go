package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// wholeDigest is what Digest computed before it streamed: the sha256 of
// json.Marshal of the whole snapshot. Every plan's snapshotDigest depends
// on the two being equal.
func wholeDigest(t testing.TB, s *Snapshot) string {
	s.Sort()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestDigestIsTheJSONDigest(t *testing.T) {
	files, err := filepath.Glob("../../testdata/scenarios/*/snapshot.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	snaps := map[string]*Snapshot{"empty": {}}
	for _, f := range files {
		s, _, err := LoadFiles([]string{f})
		if err != nil {
			t.Fatal(err)
		}
		snaps[f] = s
	}
	// Every kind at once, and the capture time (omitted when zero).
	all := allScenarios(t, files)
	all.CapturedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	snaps["all, captured"] = all
	for name, s := range snaps {
		got, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if want := wholeDigest(t, s); got != want {
			t.Errorf("%s: digest %s, want %s (the sha256 of the snapshot's JSON)", name, got, want)
		}
	}
}

// allScenarios holds the objects of every scenario snapshot (names repeat
// across scenarios, which a digest does not mind).
func allScenarios(t testing.TB, files []string) *Snapshot {
	all := &Snapshot{}
	for _, f := range files {
		s, _, err := LoadFiles([]string{f})
		if err != nil {
			t.Fatal(err)
		}
		all.Deployments = append(all.Deployments, s.Deployments...)
		all.ReplicaSets = append(all.ReplicaSets, s.ReplicaSets...)
		all.StatefulSets = append(all.StatefulSets, s.StatefulSets...)
		all.DaemonSets = append(all.DaemonSets, s.DaemonSets...)
		all.ControllerRevisions = append(all.ControllerRevisions, s.ControllerRevisions...)
		all.Pods = append(all.Pods, s.Pods...)
		all.Nodes = append(all.Nodes, s.Nodes...)
		all.PDBs = append(all.PDBs, s.PDBs...)
	}
	return all
}
