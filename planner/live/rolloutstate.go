package live

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
)

// RolloutState is the controller's record of a managed rollout, kept in
// the annotation facts.AnnRolloutState of the workload: the controller
// writes it, `rollplan status` reads it.
//
// The annotation on a managed workload is where the controller keeps the rollout's state for people and scripts:
//
//	kubectl get sts web -o jsonpath='{.metadata.annotations.rollplan\.dev/rollout-state}'
//
// It is written by server-side apply under FieldManager, which owns that
// one annotation and nothing else, so a GitOps tool that owns the spec
// (applying with its own field manager, or with kubectl's three-way merge)
// never sees a difference to undo and never removes it. Being on the
// workload, it survives the controller's replicas: a new leader reads the
// halt a previous one recorded. `rollplan resume` removes it, which ends
// a halt.
//
// RolloutStateFieldManager is the server-side apply field manager it is
// written under.
const RolloutStateFieldManager = "rollplan-controller"

// Values of RolloutState.Phase.
const (
	RolloutInProgress = "InProgress"
	RolloutComplete   = "Complete"
	RolloutHalted     = "Halted"
	RolloutPaused     = "Paused"
	// RolloutWaiting: someone else drives the rollout (a person's apply), or
	// the controller cannot drive it (a policy it does not know, a
	// strategy it does not drive); Message says which.
	RolloutWaiting = "Waiting"
)

// RolloutState is the rollout's state as the controller last saw it (the value of
// facts.AnnRolloutState, JSON). Fields are added, never renamed.
type RolloutState struct {
	Phase string `json:"phase"`
	// Revision: the update revision the rollout rolls to.
	Revision string `json:"revision,omitempty"`
	// Generation: the workload's metadata.generation the state is for; a
	// halt holds while it is unchanged.
	Generation int64 `json:"generation,omitempty"`
	// Wave i of Waves: the wave the rollout is in (1-based; 0 before the
	// first action), of how many in all.
	Wave  int `json:"wave,omitempty"`
	Waves int `json:"waves,omitempty"`
	// Pods: desired (not held), updated, available, in flight.
	Desired   int `json:"desired"`
	Updated   int `json:"updated"`
	Available int `json:"available"`
	InFlight  int `json:"inFlight"`
	// Driver: who drives the rollout (the holder of its driver Lease).
	Driver string `json:"driver,omitempty"`
	// Message: why it is halted or waiting, or what it waits for.
	Message string `json:"message,omitempty"`
	// NotDriven: the executor does not drive the workload as it is (a
	// RollingUpdate StatefulSet or DaemonSet annotated managed: its own
	// controller rolls it); Message says why. It holds until the
	// generation changes.
	NotDriven bool `json:"notDriven,omitempty"`
	// Reasons: every halt reason.
	Reasons []string `json:"reasons,omitempty"`
	// Policy: the named policy that plans it ("" the default).
	Policy string `json:"policy,omitempty"`
	// Stalled: in progress, but its pods do not move and the plan says
	// they cannot within its budgets (rollplan status's Stalled); Message
	// says what holds it.
	Stalled bool `json:"stalled,omitempty"`
	// PlanDigest: sha256 of the plan the last step carried out.
	PlanDigest string `json:"planDigest,omitempty"`
	// Analysis: the analysis gate the rollout waits at or passed last
	// (nil: none recorded for this revision).
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
}

// RolloutAnalysis is where a rollout's analysis gate stands, as the
// Rollout's status and its AnalysisPassed condition carry it.
type RolloutAnalysis struct {
	// Wave: the gated wave (1-based, of this revision's rollout).
	Wave int `json:"wave"`
	// Attempt: the try the verdict is for.
	Attempt int `json:"attempt,omitempty"`
	// State: plan.AnalysisState.State: WaveInProgress, Soaking,
	// Measuring, Passed, Failed, Inconclusive, Halted, Promoted, Aborted
	// or RolledBack.
	State string `json:"state"`
	// Verdict: the policy's last verdict (pass, fail, inconclusive).
	Verdict string `json:"verdict,omitempty"`
	// Message: the gate in one line: the verdict's message, naming each
	// query and value.
	Message string `json:"message,omitempty"`
}

// Summary is the state in one line, for logs and `rollplan status`.
func (s RolloutState) Summary() string {
	var b strings.Builder
	b.WriteString(s.Phase)
	if s.Waves > 0 && s.Phase == RolloutInProgress {
		fmt.Fprintf(&b, ": wave %d of %d", s.Wave, s.Waves)
	}
	fmt.Fprintf(&b, "; %d/%d pods updated, %d available, %d in flight", s.Updated, s.Desired, s.Available, s.InFlight)
	if s.Revision != "" {
		fmt.Fprintf(&b, "; revision %s", s.Revision)
	}
	if s.Driver != "" {
		fmt.Fprintf(&b, "; driven by %s", s.Driver)
	}
	if s.Message != "" {
		fmt.Fprintf(&b, "; %s", s.Message)
	}
	return b.String()
}

// ParseRolloutState reads the annotation's value; "" is no state.
func ParseRolloutState(v string) (*RolloutState, error) {
	if v == "" {
		return nil, nil
	}
	var s RolloutState
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", facts.AnnRolloutState, err)
	}
	return &s, nil
}

// Encode is the annotation's value.
func (s RolloutState) Encode() string {
	b, _ := json.Marshal(s) // plain fields: cannot fail
	return string(b)
}
