package fidelity

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/plan"
)

// An Op is one change a step makes, in a form both the plan and the
// recorded watch events reduce to:
//
//	scale <replicaset> <from>-><to>     a ReplicaSet's spec.replicas (net over the step)
//	remove <pod>                        a pod a scale-down deleted
//	recreate <pod>                      a StatefulSet pod deleted and made again
//	delete <pod>                        a pod deleted and not replaced
//	recreate node=<node>                a DaemonSet pod replaced on a node
//	surge node=<node>                   a DaemonSet's new pod created beside the old one
//
// DaemonSet pods are named by node: pod names are random, and upstream
// picks among equally ranked nodes at random, which Compare allows for.
type Op string

// Step is one comparison.
type Step struct {
	Index    int
	Expected []Op // from the plan
	Observed []Op // from the watch events
	// Candidates: where upstream chooses among equals at random (DaemonSet
	// nodes; pods of one ReplicaSet that its ranking cannot tell apart),
	// the subject of an op (a node=<node> or a pod) → its class of equals.
	Candidates map[string]string
	// Planned: every op of the plan, in any wave.
	Planned []Op
	Events  []string // the recorded events, for the report
}

// horizon: waves that start later wait for a pod to become available,
// which the kubelet does not allow during a step. Plans are computed with
// --recreate-duration far beyond it.
const (
	horizon          = 12 * time.Hour
	recreateEstimate = "24h"
)

// ExpectedOps reduces the plan of one workload to the ops of its next step:
// every action of the waves that start before the horizon. Scale actions
// of one ReplicaSet are folded into one net change. surged: DaemonSet nodes
// that already hold a new pod beside the old one, where what remains of a
// surge action is deleting the old pod.
func ExpectedOps(wp *plan.WorkloadPlan, podNode map[string]string, surged map[string]bool) ([]Op, error) {
	return opsUntil(wp, podNode, surged, horizon)
}

// PlannedOps: the ops of the whole plan, every wave.
func PlannedOps(wp *plan.WorkloadPlan, podNode map[string]string, surged map[string]bool) ([]Op, error) {
	return opsUntil(wp, podNode, surged, time.Duration(math.MaxInt64))
}

// missingDaemonPod matches the plan's note on a node that should run a
// daemon pod and has none (planner/plan podsim_setup.go).
var missingDaemonPod = regexp.MustCompile(`^node (\S+) should run a pod and has none: the DaemonSet controller creates it`)

// missingReplicas matches the plan's note on a Parallel StatefulSet's
// replicas without a pod (planner/plan podsim_setup.go).
var missingReplicas = regexp.MustCompile(`^replica\(s\) (.+) have no pod: the StatefulSet controller creates them first, all at once \(Parallel\)`)

func opsUntil(wp *plan.WorkloadPlan, podNode map[string]string, surged map[string]bool, limit time.Duration) ([]Op, error) {
	type scale struct{ from, to int }
	scales := map[string]*scale{}
	var ops []Op
	for _, w := range wp.Waves {
		start, err := time.ParseDuration(w.Start)
		if err != nil {
			return nil, fmt.Errorf("wave %d: start %q: %w", w.Index, w.Start, err)
		}
		if start >= limit {
			break
		}
		for _, a := range w.Actions {
			switch a.Type {
			case plan.ActionScaleRS:
				if a.From == nil || a.To == nil {
					return nil, fmt.Errorf("wave %d: ScaleReplicaSet %s without from/to", w.Index, a.ReplicaSet)
				}
				if s, ok := scales[a.ReplicaSet]; ok {
					s.to = *a.To
				} else {
					scales[a.ReplicaSet] = &scale{*a.From, *a.To}
				}
				for _, p := range a.Pods {
					ops = append(ops, Op("remove "+p))
				}
			case plan.ActionRecreate, plan.ActionDelete:
				verb := "recreate"
				if a.Type == plan.ActionDelete {
					verb = "delete"
				}
				if a.Surge {
					verb = "surge"
				}
				if wp.Kind == "DaemonSet" {
					node := a.Node
					if node == "" {
						node = podNode[a.Pod]
					}
					if a.Surge && surged[node] {
						verb = "delete"
					}
					ops = append(ops, Op(verb+" node="+node))
				} else {
					ops = append(ops, Op(verb+" "+a.Pod))
				}
			default:
				return nil, fmt.Errorf("wave %d: action %s on %s: the native controllers have no such action", w.Index, a.Type, a.Pod)
			}
		}
	}
	if wp.Kind == "DaemonSet" {
		// A node that should run a pod and has none (its old pod went
		// after the last step settled, before this one froze the
		// controllers): the plan counts the pod the DaemonSet controller
		// creates there against the budget and says so in a note; the
		// controller creates it at once, whatever the budget.
		for _, n := range wp.Notes {
			if m := missingDaemonPod.FindStringSubmatch(n); m != nil {
				ops = append(ops, Op("surge node="+m[1]))
			}
		}
	}
	if wp.Kind == "StatefulSet" {
		// Replicas without a pod (theirs went after the last step
		// settled): a Parallel StatefulSet's controller creates them all
		// at once, which the plan says in a note, with no wave. (An
		// OrderedReady one creates the first once its predecessors are
		// Ready: not expected here.)
		for _, n := range wp.Notes {
			if m := missingReplicas.FindStringSubmatch(n); m != nil && !strings.Contains(m[1], "…") {
				for _, name := range strings.Split(m[1], ", ") {
					ops = append(ops, Op("create "+name))
				}
			}
		}
	}
	for name, s := range scales {
		if s.from != s.to {
			ops = append(ops, Op(fmt.Sprintf("scale %s %d->%d", name, s.from, s.to)))
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	return ops, nil
}

// Compare says whether the controllers did what the plan said, and if not,
// how they differ. Where upstream picks among equals at random, an observed
// op on a subject the plan did not pick is accepted when the plan has an op
// of the same verb on an unobserved subject of the same class: counts and
// candidate sets must agree. exact reports whether that was needed.
func Compare(s Step) (ok, exact bool, diff string) {
	missing, extra := setDiff(s.Expected, s.Observed)
	exact = len(missing) == 0 && len(extra) == 0
	if len(s.Candidates) > 0 {
		missing, extra = matchRandom(missing, extra, s.Candidates)
		missing, extra = dropUnwantedNodeDeletes(missing, extra, s.Candidates, s.Planned)
	}
	if len(missing) == 0 && len(extra) == 0 {
		return true, exact, ""
	}
	var b strings.Builder
	for _, op := range missing {
		fmt.Fprintf(&b, "  planned, not done: %s\n", op)
	}
	for _, op := range extra {
		fmt.Fprintf(&b, "  done, not planned: %s\n", op)
	}
	return false, false, b.String()
}

func setDiff(want, got []Op) (missing, extra []Op) {
	count := map[Op]int{}
	for _, op := range want {
		count[op]++
	}
	for _, op := range got {
		count[op]--
	}
	for op, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, op)
		}
		for ; n < 0; n++ {
			extra = append(extra, op)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	return missing, extra
}

// dropUnwantedNodeDeletes accepts deletions of DaemonSet pods on nodes that
// should no longer run one (a NoSchedule taint the pod does not tolerate)
// done in another step than planned. Upstream counts such a node's old pod
// among the update candidates it shuffles, and once deleted the node drops
// out of the count, so its budget is free again in the same sync: when the
// shuffle picks it early, upstream does one more op in that step than the
// plan, whose order is by node name (docs/fidelity.md).
func dropUnwantedNodeDeletes(missing, extra []Op, candidates map[string]string, planned []Op) ([]Op, []Op) {
	inPlan := map[Op]bool{}
	for _, op := range planned {
		inPlan[op] = true
	}
	keep := func(ops []Op) []Op {
		var out []Op
		for _, op := range ops {
			verb, subject, _ := strings.Cut(string(op), " ")
			if verb == "delete" && strings.HasPrefix(subject, "node=") && inPlan[op] && candidates[subject] != "" {
				continue
			}
			out = append(out, op)
		}
		return out
	}
	return keep(missing), keep(extra)
}

// matchRandom pairs each extra op with a missing op of the same verb
// whose subject is in the same class of equals.
func matchRandom(missing, extra []Op, candidates map[string]string) ([]Op, []Op) {
	var keptExtra []Op
	for _, e := range extra {
		verb, subject, _ := strings.Cut(string(e), " ")
		class, ok := candidates[subject]
		matched := -1
		for i, m := range missing {
			mv, ms, _ := strings.Cut(string(m), " ")
			if ok && mv == verb && candidates[ms] == class {
				matched = i
				break
			}
		}
		if matched < 0 {
			keptExtra = append(keptExtra, e)
			continue
		}
		missing = append(missing[:matched:matched], missing[matched+1:]...)
	}
	return missing, keptExtra
}
