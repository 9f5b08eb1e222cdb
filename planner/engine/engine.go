// Package engine defines the decision points of the policy contract and the
// interface every policy engine (rego, cel, native) implements.
//
// The planner is the runtime; an engine only answers. Per pod it answers
// scope, eligibility and order; per workload it answers budgets, pacing,
// node preparation, analysis (what each wave waits for, and the verdict
// over a wave's measurements), halt and deny. Engines must be deterministic and must not touch a cluster.
package engine

import (
	"context"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
)

// Engine evaluates the decision points for one workload rollout. The planner
// calls Decide for several workloads at once: implementations must be safe
// for concurrent use.
type Engine interface {
	// Name is rego, cel or native.
	Name() string
	// Digest identifies the compiled policy bundle (sha256:...).
	Digest() string
	// Decide answers every decision point for the rollout. It is called once
	// per workload with all its pods; the result's Pods align with r.Pods.
	Decide(ctx context.Context, r *facts.Rollout) (*Decisions, error)
}

// BudgetDecider is an Engine that can answer the budgets decision point
// alone, faster than Decide: the admission gate needs nothing else to
// judge a disruption. Its answer must equal Decide's Budgets.
type BudgetDecider interface {
	DecideBudgets(ctx context.Context, r *facts.Rollout) ([]Budget, error)
}

// Budgets answers the budgets of a rollout: through DecideBudgets when the
// engine has it, else through Decide.
func Budgets(ctx context.Context, e Engine, r *facts.Rollout) ([]Budget, error) {
	if b, ok := e.(BudgetDecider); ok {
		return b.DecideBudgets(ctx, r)
	}
	d, err := e.Decide(ctx, r)
	if err != nil {
		return nil, err
	}
	return d.Budgets, nil
}

// ClockFacts are the facts that change as time passes with nothing else
// changing: the counters of seconds and their buckets, and the snapshot
// time. (Pod availability also changes with time, at minReadySeconds.)
var ClockFacts = map[string]bool{
	"readySeconds": true, "unavailableSeconds": true, "readyBucket": true, "createdBucket": true, "now": true,
}

// ClockFree is an Engine that can tell whether its budgets read any of the
// ClockFacts. If not, the budgets of a workload whose pods are all
// available and none being updated in place cannot change until an
// object changes: the admission gate then keeps them without rebuilding
// them as time passes.
type ClockFree interface {
	BudgetsIgnoreClock() bool
}

// BudgetsIgnoreClock: e is a ClockFree engine whose budgets read no clock fact.
func BudgetsIgnoreClock(e Engine) bool {
	c, ok := e.(ClockFree)
	return ok && c.BudgetsIgnoreClock()
}

// Actions an eligibility decision may return.
const (
	InPlace  = "InPlace"
	Recreate = "Recreate"
)

// Pacing values.
const (
	PacingWave    = "wave"    // the next wave waits for the whole previous wave
	PacingRolling = "rolling" // a freed slot is refilled at once
)

// Node preparation values: what is done to a node before its daemon pod is
// updated (DaemonSets rollplan drives only; see docs/policy-contract.md).
const (
	NodePrepNone   = "none"   // nothing
	NodePrepCordon = "cordon" // cordon before, uncordon once the pod is available
	NodePrepDrain  = "drain"  // cordon, evict the node's other pods, uncordon after
)

// ValidNodePreparation reports whether v is a node preparation value.
func ValidNodePreparation(v string) bool {
	return v == NodePrepNone || v == NodePrepCordon || v == NodePrepDrain
}

// Point is a decision point of the policy contract, as a bit of a set.
type Point uint8

// The points whose answers a workload's own controller makes for itself
// when rollplan does not drive it (see Decisions.Upstream).
const (
	PointScope Point = 1 << iota
	PointEligibility
	PointOrder
	PointPacing
	PointBudgets

	ControllerPoints = PointScope | PointEligibility | PointOrder | PointPacing | PointBudgets
)

// Decisions holds every answer for one workload.
type Decisions struct {
	// Pods align with Rollout.Pods. Entries of updated pods are not read.
	Pods []PodDecision
	// Upstream: the points answered by the default strategy as rollplan
	// ships it (which reproduces upstream), not by a policy of the user's,
	// so the planner need not derive upstream's answers again for a
	// workload its controller drives. Zero when the engine cannot tell.
	Upstream Point
	// Budgets must all hold at every instant of the rollout.
	Budgets []Budget
	// Pacing: wave or rolling.
	Pacing string
	// NodePreparation: none, cordon or drain (NodePrep*). Only a DaemonSet
	// rollplan drives honours it; the planner warns for any other workload.
	NodePreparation string
	// Analysis: what each wave waits for before the next (soak,
	// measurements); nil when the policy declares none (engine.Declared).
	Analysis *Analysis
	// Verdict: the policy's verdict over the results of the wave the facts'
	// analysis judges; nil when none is judged (wave 0) or Analysis is nil.
	Verdict *Verdict
	// Halt: reasons the rollout must not continue; empty to proceed.
	Halt []string
	// Deny: guard-rail messages against the workload's current spec (the gate
	// refuses such an update); empty to allow.
	Deny []string
}

// PodDecision answers the per-pod points.
type PodDecision struct {
	// Scope: InScope false holds the pod out of this rollout, with HeldReason.
	InScope    bool
	HeldReason string
	// Eligibility: InPlace or Recreate, with the reasons (blocking field
	// paths for Recreate).
	Action  string
	Reasons []string
	// Order: the sort key; pods are updated in ascending key order
	// (element by element; numbers < strings < booleans never mix in one position).
	Order []any
}

// GroupKey is the group a pod belongs to under a budget's GroupBy: its zone,
// its node, or the value of label <key> for "label:<key>" ("" without
// GroupBy). The planner, the gate and the invariant checks share it.
func GroupKey(p *facts.Pod, by string) string {
	switch {
	case by == "zone":
		return p.Zone
	case by == "node":
		return p.Node
	case strings.HasPrefix(by, "label:"):
		return p.Labels[strings.TrimPrefix(by, "label:")]
	}
	return ""
}

// Budget is one unavailability (or surge) budget.
type Budget struct {
	Name string `json:"name"`
	// MaxUnavailable: at most this many pods unavailable at once (per group
	// when GroupBy is set). nil: not an unavailability budget.
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
	// MaxSurge: at most this many extra pods at once.
	MaxSurge *int `json:"maxSurge,omitempty"`
	// GroupBy: a pod fact (zone, node) or "label:<key>"; the budget then
	// applies per group.
	GroupBy string `json:"groupBy,omitempty"`
	// MaxGroups: at most this many groups with pods in flight at once.
	MaxGroups *int `json:"maxGroups,omitempty"`
	// PDB: the budget counts only pods this PodDisruptionBudget selects, plus
	// its unavailable pods elsewhere.
	PDB string `json:"pdb,omitempty"`
	// Advisory budgets do not pace the rollout; the plan warns where a wave
	// would break them (upstream controllers ignore PDBs).
	Advisory bool   `json:"advisory,omitempty"`
	Source   string `json:"source,omitempty"`
}
