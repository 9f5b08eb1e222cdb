package native

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/rollplan/rollplan/internal/parity"
	"github.com/rollplan/rollplan/internal/scenario"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/facts"
)

// TestParityScenarios: every rollout of every scenario, and its variants.
func TestParityScenarios(t *testing.T) {
	scenarios, err := scenario.All("../../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	rollouts, pods := 0, 0
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if len(sc.Rollouts) == 0 {
				t.Fatal("no rollouts")
			}
			for _, r := range sc.Rollouts {
				for i, v := range parity.Variants(r) {
					t.Run(fmt.Sprintf("%s/%s/v%d", r.Workload.Kind, r.Workload.Name, i), func(t *testing.T) {
						requireParity(t, v)
					})
					rollouts++
					pods += len(v.Pods)
				}
			}
		})
	}
	t.Logf("%d scenarios, %d rollouts (with variants), %d pods compared", len(scenarios), rollouts, pods)
}

// TestParitySynth: the benchmark snapshots, every rollout.
func TestParitySynth(t *testing.T) {
	for _, n := range []int{1000, 10000} {
		t.Run(fmt.Sprintf("pods=%d", n), func(t *testing.T) {
			rs, err := facts.Build(synth.Snapshot(n), facts.Options{Now: synth.Now})
			if err != nil {
				t.Fatal(err)
			}
			pods := 0
			for _, r := range rs {
				t.Run(r.Workload.Kind+"/"+r.Workload.Name, func(t *testing.T) { requireParity(t, r) })
				pods += len(r.Pods)
			}
			t.Logf("%d rollouts, %d pods compared", len(rs), pods)
		})
	}
}

// TestParityRandom compares the engines over generated facts that reach
// the corners real snapshots rarely do: unknown kinds and strategies, nil and
// percent values, 0 replicas, odd revisions and change lists, PDBs.
func TestParityRandom(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 100
	}
	rng := rand.New(rand.NewSource(20260301))
	pods := 0
	for i := 0; i < n; i++ {
		r := randomRollout(rng, i)
		t.Run(r.Workload.Name, func(t *testing.T) { requireParity(t, r) })
		pods += len(r.Pods)
	}
	t.Logf("%d random rollouts, %d pods compared", n, pods)
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.Intn(len(xs))] }

var (
	imageChange = facts.Change{Path: "spec.containers[app].image", Class: facts.ClassImage, InPlace: true}
	labelChange = facts.Change{Path: "metadata.labels", Class: facts.ClassLabels, InPlace: true}
	envChange   = facts.Change{Path: "spec.containers[app].env", Class: facts.ClassEnv, Detail: "env cannot change on a running container"}
	resChange   = facts.Change{Path: "spec.containers[app].resources", Class: facts.ClassResources, Detail: "QoS class changes"}
	emptyChange = facts.Change{Path: "", Class: facts.ClassOther, Detail: ""}
)

func randomChanges(rng *rand.Rand) []facts.Change {
	return pick(rng,
		nil,
		[]facts.Change{},
		[]facts.Change{imageChange},
		[]facts.Change{imageChange, labelChange},
		[]facts.Change{envChange},
		[]facts.Change{imageChange, envChange, resChange},
		[]facts.Change{emptyChange, envChange},
		[]facts.Change{resChange, labelChange},
	)
}

func randomIntOrPercent(rng *rand.Rand) any {
	return pick[any](rng, nil, nil, 0, 1, 2, 3, 12, "0%", "1%", "10%", "25%", "33%", "50%", "100%", "150%")
}

// randomRollout generates one workload's facts.
func randomRollout(rng *rand.Rand, seq int) *facts.Rollout {
	kind := pick(rng, "Deployment", "Deployment", "DaemonSet", "StatefulSet", "StatefulSet", "CronJob")
	r := &facts.Rollout{
		SchemaVersion: facts.SchemaVersion,
		Now:           "2026-03-01T12:00:00Z",
		FeatureGates:  pick(rng, nil, map[string]bool{}, map[string]bool{"MaxUnavailableStatefulSet": false}, map[string]bool{"MaxUnavailableStatefulSet": true}),
		Workload: facts.Workload{
			Kind:      kind,
			Namespace: "ns",
			Name:      fmt.Sprintf("w%04d", seq),
			Replicas:  pick(rng, 0, 1, 2, 3, 4, 5, 10, 20, 150001),
			Strategy: facts.Strategy{
				Type:                 pick(rng, "RollingUpdate", "RollingUpdate", "RollingUpdate", "Recreate", "OnDelete", "Other"),
				MaxSurge:             randomIntOrPercent(rng),
				MaxUnavailable:       randomIntOrPercent(rng),
				MaxSurgeSource:       pick(rng, "", "spec.x.maxSurge", "annotation rollplan.dev/max-surge"),
				MaxUnavailableSource: pick(rng, "", "spec.x.maxUnavailable", "annotation rollplan.dev/max-unavailable"),
				Partition:            pick(rng, 0, 0, 1, 3, 7),
			},
			PodManagementPolicy:     pick(rng, "", "OrderedReady", "Parallel"),
			ProgressDeadlineSeconds: pick(rng, 0, 60, 600),
			Managed:                 rng.Intn(2) == 0,
			PodUpdatePolicy:         pick(rng, "Recreate", "InPlaceIfPossible", "InPlaceOnly", ""),
			CurrentRevision:         "rev-a",
			UpdateRevision:          "rev-new",
		},
		Revisions: []facts.Revision{},
	}
	revChanges := map[string][]facts.Change{}
	for _, rev := range []string{"rev-a", "rev-b", "rev-c"} {
		revChanges[rev] = randomChanges(rng)
		if rng.Intn(2) == 0 {
			// Listed revisions usually carry their pods' changes, not always.
			cs := revChanges[rev]
			if rng.Intn(4) == 0 {
				cs = randomChanges(rng)
			}
			r.Revisions = append(r.Revisions, facts.Revision{Name: rev, Changes: cs})
		}
	}
	if rng.Intn(10) == 0 {
		r.Revisions = nil
	}
	nPods := rng.Intn(25)
	for i := 0; i < nPods; i++ {
		updated := rng.Intn(4) == 0
		rev := pick(rng, "rev-a", "rev-a", "rev-b", "rev-c", "rev-x", "")
		changes := revChanges[rev]
		if rev == "rev-x" || rev == "" || rng.Intn(8) == 0 {
			changes = randomChanges(rng) // a pod's own changes
		}
		if updated {
			rev, changes = pick(rng, "rev-new", "rev-new", "rev-a"), nil
		}
		ready := rng.Intn(5) != 0
		available := ready && rng.Intn(4) != 0
		ordinal := pick(rng, -1, i, i+10)
		p := facts.Pod{
			Name:               fmt.Sprintf("w%04d-%03d", seq, i),
			UID:                pick(rng, fmt.Sprintf("uid-%d", rng.Intn(1000)), ""),
			Revision:           rev,
			Updated:            updated,
			Ordinal:            ordinal,
			Index:              ordinal - pick(rng, 0, 0, 10),
			Node:               pick(rng, "", "n1", "n2", "n3"),
			Zone:               pick(rng, "", "z1"),
			Phase:              pick(rng, "Running", "Running", "Pending", "Unknown", "Failed", "Succeeded", ""),
			Scheduled:          rng.Intn(6) != 0,
			Ready:              ready,
			ReadySeconds:       int64(rng.Intn(5000)) - 1,
			Available:          available,
			UnavailableSeconds: int64(pick(rng, 0, 0, 59, 60, 61, 600, 601, 5000)),
			Terminating:        rng.Intn(8) == 0,
			Restarts:           pick(rng, 0, 0, 1, 2, 3, 4, 9001),
			SidecarRestarts:    pick(rng, 0, 0, 1, 5),
			Owner:              "owner",
			Labels:             map[string]string{},
			DeletionCost:       pick(rng, 0, 0, -5, 100, -2000, 1<<31-1, -1<<31),
			Colocated:          pick(rng, 1, 1, 2, 3, 2000),
			ReadyBucket:        pick(rng, -2, -1, 35, 41, 47, 51),
			CreatedBucket:      pick(rng, -2, -1, 40, 44, 51),
			Changes:            changes,
			PDBs:               []string{},
		}
		if p.Changes == nil && rng.Intn(2) == 0 {
			p.Changes = []facts.Change{}
		}
		r.Pods = append(r.Pods, p)
	}
	for i := rng.Intn(3); i > 0; i-- {
		r.PDBs = append(r.PDBs, facts.PDB{
			Name:           fmt.Sprintf("pdb-%d", i),
			MaxUnavailable: pick(rng, 0, 1, 2, 5),
			ExpectedPods:   10,
			Source:         pick(rng, "", "spec.maxUnavailable=1", "spec.minAvailable=90% of 10, up"),
		})
	}
	return r
}
