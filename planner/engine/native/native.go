// Package native is the default strategy (policies/defaults.rego, package
// rollplan.defaults) written in plain Go.
//
// It is the parity oracle of the policy engines and their performance floor:
// for any facts, Decide returns Decisions that are reflect.DeepEqual to what
// the Rego engine returns with the default policy and no entry policy,
// including the Go types of order keys (int64 and string, as rego's
// decodeOrder makes them), the empty-but-non-nil Budgets, Halt and Deny that
// its JSON decoding leaves, and zero-valued entries for updated pods. Each
// function names the Rego rule it mirrors; where the Rego engine behaves
// oddly, the oddity is mirrored and commented, never fixed here.
//
// Cost: the per-pod work allocates only what the Decisions hold (one block of
// order keys per workload, the boxed uid/node/name strings, held reasons);
// workload values are computed once and eligibility once per revision and
// change list.
package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// Version names the revision of the default strategy this package
// implements. Bump it whenever an answer changes (normally together with
// policies/defaults.rego): Digest is derived from it.
const Version = "rollplan.dev/native-defaults/v2"

// digest is "sha256:" + hex(sha256(Version)), the same form as a Rego
// bundle digest.
var digest = func() string {
	h := sha256.Sum256([]byte(Version))
	return "sha256:" + hex.EncodeToString(h[:])
}()

// Engine answers every decision point with the default strategy. It holds no
// mutable state and is safe for concurrent use.
type Engine struct{}

var _ engine.Engine = (*Engine)(nil)

// New returns the native engine.
func New() *Engine { return &Engine{} }

// Name implements engine.Engine.
func (*Engine) Name() string { return engine.Native }

// Digest implements engine.Engine: sha256 of Version, so that a plan says
// which revision of the native default strategy answered it.
func (*Engine) Digest() string { return digest }

// BudgetsIgnoreClock implements engine.ClockFree: the default strategy's
// budgets count pods and read the workload's spec and PDBs, never a clock
// fact.
func (*Engine) BudgetsIgnoreClock() bool { return true }

// Kinds of the contract (rule known_kinds).
const (
	kindDeployment  = "Deployment"
	kindDaemonSet   = "DaemonSet"
	kindStatefulSet = "StatefulSet"
)

// workload holds the workload-level values the per-pod rules read, computed
// once per Decide.
type workload struct {
	r    *facts.Rollout
	id   string // for errors: "Kind namespace/name", as the Rego engine says it
	kind string
	// managed, inPlaceRequested, inPlaceOnly: rules of the same names.
	managed, inPlaceRequested, inPlaceOnly bool
	// partition: rule partition (facts always send a number).
	partition int
}

func newWorkload(r *facts.Rollout) *workload {
	w := &r.Workload
	managed := w.Managed
	return &workload{
		r:                r,
		id:               fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name),
		kind:             w.Kind,
		managed:          managed,
		inPlaceRequested: managed && (w.PodUpdatePolicy == "InPlaceIfPossible" || w.PodUpdatePolicy == "InPlaceOnly"),
		inPlaceOnly:      managed && w.PodUpdatePolicy == "InPlaceOnly",
		partition:        w.Strategy.Partition,
	}
}

// Decide implements engine.Engine.
func (e *Engine) Decide(ctx context.Context, r *facts.Rollout) (*engine.Decisions, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("native default strategy for %s %s/%s: %w", r.Workload.Kind, r.Workload.Namespace, r.Workload.Name, err)
	}
	w := newWorkload(r)
	revs := newRevisions(w)
	d := &engine.Decisions{Pods: make([]engine.PodDecision, len(r.Pods)), Upstream: engine.ControllerPoints}
	if err := w.decidePods(ctx, revs, d.Pods); err != nil {
		return nil, err
	}
	var err error
	if d.Budgets, err = w.budgets(); err != nil {
		return nil, err
	}
	d.Pacing = w.pacing()
	// rule node_preparation: the default strategy prepares no node.
	d.NodePreparation = engine.NodePrepNone
	// rule analysis: the default strategy declares none, so no wave waits
	// and no verdict is asked for (Analysis and Verdict stay nil).
	d.Halt = w.halt(revs)
	// rule deny is [] and the Rego engine decodes it to an empty, non-nil slice.
	d.Deny = []string{}
	return d, nil
}

// decidePods answers scope, eligibility and order for every pod that is not
// updated, as the resolver's pods comprehension does; entries of updated pods
// stay zero-valued, as rego's decode leaves them.
func (w *workload) decidePods(ctx context.Context, revs *revisions, out []engine.PodDecision) error {
	pods := w.r.Pods
	keyLen, orderOf := w.orderFunc()
	pending := 0
	for i := range pods {
		if !pods[i].Updated {
			pending++
		}
	}
	// One block holds every pod's key; each pod's Order is a full slice of
	// it (len == cap), so an append by a caller cannot spill into the next.
	keys := make([]any, pending*keyLen)
	for i := range pods {
		p := &pods[i]
		if p.Updated {
			continue
		}
		rs := revs.of(p)
		if i&0x3fff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("native default strategy for %s: %w", w.id, err)
			}
		}
		pd := &out[i]
		pd.InScope, pd.HeldReason = w.scope(p)
		a, err := revs.eligibility(rs, p)
		if err != nil {
			return err
		}
		pd.Action, pd.Reasons = a.action, a.reasons
		k := keys[:keyLen:keyLen]
		keys = keys[keyLen:]
		orderOf(p, k)
		pd.Order = k
	}
	return nil
}

// scope mirrors rule scope: StatefulSet pods below the partition are held.
func (w *workload) scope(p *facts.Pod) (bool, string) {
	if w.kind != kindStatefulSet || p.Index >= w.partition {
		return true, ""
	}
	return false, "ordinal " + strconv.Itoa(p.Ordinal) + " below partition " + strconv.Itoa(w.partition)
}

// pacing mirrors rule pacing.
func (w *workload) pacing() string {
	if w.kind == kindStatefulSet && w.r.Workload.PodManagementPolicy == "OrderedReady" {
		return engine.PacingWave
	}
	return engine.PacingRolling
}

// ---------------------------------------------------------------------------
// order

// Order keys are int64 or string, the types rego's decodeOrder gives every
// number that fits an int64 and every string. Boxing an int64 outside 0..255
// allocates; small values, negative ones included (-colocated, -restarts,
// -ordinal), come from this read-only table instead.
const boxMin, boxMax = -1024, 1024

var boxed = func() (t [boxMax - boxMin]any) {
	for i := range t {
		t[i] = int64(i + boxMin)
	}
	return t
}()

func num(x int) any {
	if x >= boxMin && x < boxMax {
		return boxed[x-boxMin]
	}
	return int64(x)
}

// neg is the key `0 - x`. Only -MinInt64 leaves int64: Rego computes it
// exactly and decodeOrder then falls back to float64.
func neg(x int) any {
	if int64(x) == math.MinInt64 {
		return -float64(x)
	}
	return num(-x)
}

// b2i is to_number(bool).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// orderFunc mirrors rule order: the key length and a function filling a
// pod's key, chosen once per workload.
func (w *workload) orderFunc() (int, func(p *facts.Pod, k []any)) {
	switch {
	case w.kind == kindDeployment:
		// upstream's ActivePodsWithRanks: readiness, not availability.
		return 10, func(p *facts.Pod, k []any) {
			ready := b2i(p.Ready)
			k[0] = num(b2i(p.Scheduled))
			k[1] = num(facts.PhaseOrdinal(p.Phase))
			k[2] = num(ready)
			k[3] = num(p.DeletionCost)
			k[4] = neg(p.Colocated)
			k[5] = num(p.ReadyBucket * ready)
			k[6] = neg(p.Restarts)
			k[7] = neg(p.SidecarRestarts)
			k[8] = num(p.CreatedBucket)
			k[9] = p.UID
		}
	case w.kind == kindStatefulSet && !w.managed:
		// The controller goes strictly by ordinal, highest first.
		return 1, func(p *facts.Pod, k []any) { k[0] = neg(p.Ordinal) }
	case w.kind == kindStatefulSet:
		return 2, func(p *facts.Pod, k []any) {
			k[0] = num(b2i(p.Available))
			k[1] = neg(p.Ordinal)
		}
	case w.kind == kindDaemonSet:
		return 3, func(p *facts.Pod, k []any) {
			k[0] = num(b2i(p.Available))
			k[1] = p.Node
			k[2] = p.Name
		}
	default:
		// Kinds the contract does not know are ordered by name.
		return 2, func(p *facts.Pod, k []any) {
			k[0] = num(b2i(p.Available))
			k[1] = p.Name
		}
	}
}

// ---------------------------------------------------------------------------
// halt

// crashLoopRestarts mirrors rule crash_loop_restarts.
const crashLoopRestarts = 3

// halt mirrors rule halt: sort(updated_pod_halts | in_place_only_halts),
// a set, so sorted and without duplicates. The Rego engine decodes an empty
// answer to an empty, non-nil slice.
func (w *workload) halt(revs *revisions) []string {
	out := []string{}
	deadline := w.r.Workload.ProgressDeadlineSeconds
	for i := range w.r.Pods {
		p := &w.r.Pods[i]
		if p.Updated {
			// updated_pod_halts and updated_pod_halt("deadline" | "crash-loop", p).
			if p.Available && p.Restarts < crashLoopRestarts {
				continue
			}
			if !p.Available && !p.Terminating && p.UnavailableSeconds > int64(deadline) {
				out = append(out, "pod "+p.Name+" at the update revision has not been available for "+
					strconv.FormatInt(p.UnavailableSeconds, 10)+"s (progress deadline "+strconv.Itoa(deadline)+"s)")
			}
			if p.Restarts >= crashLoopRestarts {
				out = append(out, "pod "+p.Name+" is crash-looping since the update ("+strconv.Itoa(p.Restarts)+" restarts)")
			}
			continue
		}
		// in_place_only_halts: the paths of the pod's changes that cannot go in place.
		if w.inPlaceOnly {
			if blocking, ok := revs.blocking(p); ok {
				out = append(out, "InPlaceOnly: pod "+p.Name+" cannot be updated in place: "+blocking)
			}
		}
	}
	if len(out) > 1 {
		sort.Strings(out)
		out = compact(out)
	}
	return out
}

// compact drops adjacent duplicates of a sorted slice.
func compact(s []string) []string {
	j := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[j-1] {
			s[j] = s[i]
			j++
		}
	}
	return s[:j]
}

// blockingPaths is concat(", ", blocking) with blocking = [c.path | some c
// in changes; not c.inPlace]; ok reports blocking[0], a non-empty list (an
// empty path still counts).
func blockingPaths(changes []facts.Change) (paths string, ok bool) {
	var sb strings.Builder
	for _, c := range changes {
		if c.InPlace {
			continue
		}
		if ok {
			sb.WriteString(", ")
		}
		sb.WriteString(c.Path)
		ok = true
	}
	return sb.String(), ok
}
