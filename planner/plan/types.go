// Package plan packs policy decisions into waves and simulates the rollout
// forward. Its output, the Plan, is an API (rollplan.dev/v1alpha1): fields
// are added, never renamed, because users script against `plan -o json`.
package plan

// APIVersion and Kind of the plan document.
const (
	APIVersion = "rollplan.dev/v1alpha1"
	Kind       = "Plan"
)

// Action types.
const (
	ActionInPlace  = "InPlaceUpdate"
	ActionRecreate = "Recreate"
	ActionScaleRS  = "ScaleReplicaSet"
	// ActionDelete removes a pod and creates none in its place: a DaemonSet
	// pod on a node that should no longer run it, an old DaemonSet pod whose
	// replacement at the update revision already runs on its node (surge),
	// or a StatefulSet pod beyond the replicas.
	ActionDelete = "Delete"
	// Node preparation (a DaemonSet whose policy answers node_preparation
	// cordon or drain), in the wave of the node's pod action: CordonNode
	// before it, DrainNode (drain) between, UncordonNode once the pod is
	// available again. They name the node, never a pod.
	ActionCordonNode   = "CordonNode"
	ActionDrainNode    = "DrainNode"
	ActionUncordonNode = "UncordonNode"
)

// Plan is the output of `rollplan plan`.
type Plan struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   Metadata       `json:"metadata"`
	Workloads  []WorkloadPlan `json:"workloads"`
}

// Metadata identifies what the plan was computed from.
type Metadata struct {
	SnapshotDigest string `json:"snapshotDigest"`
	PolicyDigest   string `json:"policyDigest"`
	Engine         string `json:"engine"`
	// Now is the snapshot time the plan was computed at.
	Now string `json:"now"`
	// KubernetesVersion is the version whose controllers the plan
	// predicts ("v1.37", or "v1.35.2" when the patch is known), and
	// FeatureGates the gates it planned with (the version's defaults, by
	// patch where upstream changed one inside the minor, with
	// --feature-gates applied). PatchRules says which patch-release rules
	// set those defaults (kubeversion.PatchRules).
	KubernetesVersion string          `json:"kubernetesVersion,omitempty"`
	FeatureGates      map[string]bool `json:"featureGates,omitempty"`
	PatchRules        []string        `json:"patchRules,omitempty"`
	// Warnings about the input as a whole (skipped kinds).
	Warnings []string `json:"warnings,omitempty"`
}

// WorkloadPlan is the rollout of one workload.
type WorkloadPlan struct {
	Kind         string `json:"kind"`
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	FromRevision string `json:"fromRevision"`
	ToRevision   string `json:"toRevision"`
	// OtherRevisions: revisions other than fromRevision and toRevision
	// that pods to update run, with how many: the broken revision a
	// rollback leaves behind, a Deployment's older ReplicaSets. Omitted
	// when every pod to update runs fromRevision.
	OtherRevisions  map[string]int `json:"otherRevisions,omitempty"`
	PodUpdatePolicy string         `json:"podUpdatePolicy"`
	Managed         bool           `json:"managed"`
	Pacing          string         `json:"pacing"`
	// Budgets: resolved numbers, what is in use at snapshot time, and what binds.
	Budgets []Budget `json:"budgets"`
	Waves   []Wave   `json:"waves"`
	Held    []Held   `json:"held"`
	// Blocked: pods to update that the plan places in no wave, and why
	// (the rollout is halted or stalls, or nothing drives it); see Summary.
	// Omitted when empty, as summary's deleted, terminating and blocked
	// are when 0: a plan that places every pod reads as it did before
	// they were added, and policy tests expecting one still pass.
	Blocked []Held `json:"blocked,omitempty"`
	// Halted: stop reasons; when the policy's halt rule sets them, no wave
	// is planned; when a wave's analysis does (failed with onFail halt, or
	// inconclusive past maxInconclusive), the waves up to it are kept.
	Halted []string `json:"halted"`
	// Rollback: a wave's analysis failed with onFail rollback: the waves
	// up to it are kept, and the rollout then rolls back.
	Rollback *Rollback `json:"rollback,omitempty"`
	// Denied: the policy's guard rails refuse the workload's current spec
	// (the gate would deny the update that produced it).
	Denied []string `json:"denied,omitempty"`
	// Notes explain why nothing (or something unusual) is planned.
	Notes    []string `json:"notes,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Summary  Summary  `json:"summary"`
	// EstimatedDuration of the whole rollout, from the per-action estimates.
	EstimatedDuration string `json:"estimatedDuration"`
	// Stalled: the rollout cannot start or finish within its budgets: the
	// simulated rollout stops with pods left to update and nothing in
	// flight to make room (the note "the rollout stalls after ..." words
	// it). Absent when the rollout completes, or is halted.
	Stalled *Stall `json:"stalled,omitempty"`
	// Error: why the workload could not be planned (its own objects are
	// invalid: an annotation, a strategy field). Only the workload's kind,
	// namespace and name are set beside it; the other workloads of the
	// snapshot are planned as if it were not there.
	Error string `json:"error,omitempty"`
}

// Stall is where a simulated rollout stops.
type Stall struct {
	// After: when nothing moves any more, as an offset from the beginning
	// of the rollout ("0s": it cannot start).
	After string `json:"after"`
	// Reason: what holds it (a budget, an OrderedReady StatefulSet's
	// unavailable replica, pods that never become available).
	Reason string `json:"reason"`
}

// Budget is a resolved budget.
type Budget struct {
	Name string `json:"name"`
	// Limit is the budget's number: pods unavailable at once, surge pods at
	// once (Type surge), or groups in flight (Type groups).
	Limit int    `json:"limit"`
	Type  string `json:"type"` // unavailable | surge | groups
	// InUse at snapshot time.
	InUse    int    `json:"inUse"`
	GroupBy  string `json:"groupBy,omitempty"`
	PDB      string `json:"pdb,omitempty"`
	Advisory bool   `json:"advisory,omitempty"`
	Source   string `json:"source"`
}

// Wave is a step in time: everything that can happen at once, before
// something has to become available.
type Wave struct {
	Index int `json:"index"`
	// Start: when the wave starts, as an offset from the beginning of the rollout.
	Start   string   `json:"start"`
	Actions []Action `json:"actions"`
	// Budgets: per budget of the workload (the names and order of
	// WorkloadPlan.Budgets), the most of it in use while the wave runs:
	// once every action of the wave has started, before any of them is
	// available again.
	Budgets []WaveBudget `json:"budgets"`
	// Binding: what kept the next pods out of this wave (the budget that
	// was full, or what else held them), and what this wave waited for
	// to start. Omitted for a first wave that every pod fits in.
	Binding *Binding `json:"binding,omitempty"`
	// Gate: what the next wave waits for once this wave's pods are
	// available (the policy's analysis: soak, measurements, verdict).
	// Omitted when the policy declares no analysis, and on the last wave.
	Gate *Gate `json:"gate,omitempty"`
}

// WaveBudget is one budget's use while a wave runs.
type WaveBudget struct {
	Name string `json:"name"`
	// Limit: the budget's number, as WorkloadPlan.Budgets has it.
	Limit int `json:"limit"`
	// InUse: the most of the budget in use while the wave runs (pods
	// unavailable, surge pods, or groups in flight; a budget per group
	// counts its fullest group). Above Limit only for an advisory budget,
	// or where the controller goes past it whatever the budget (an
	// unavailable old pod it replaces, say).
	InUse int `json:"inUse"`
	// Uncounted: the plan cannot count this budget wave by wave (a
	// Deployment's budget per group: the scheduler places the new pods);
	// InUse is then 0.
	Uncounted bool `json:"uncounted,omitempty"`
}

// Binding says what held a wave: why the next pods are not in it, and
// what it waited for to start.
type Binding struct {
	// Budget: the name of the budget that was full when the wave was
	// packed and kept the next pod out of it; "" when something other
	// than a budget held the pods (Reason says what) or nothing did.
	Budget string `json:"budget,omitempty"`
	// Reason: a sentence saying what held the next pods out of this wave,
	// with the budget's numbers; "" when nothing did (the last wave).
	Reason string `json:"reason,omitempty"`
	// WaitsFor: what of the earlier waves had to become available (or be
	// gone) for this wave to start: pod names, a DaemonSet node's pod as
	// node/NAME, a Deployment's new pods by ReplicaSet and wave. Empty
	// for the first wave.
	WaitsFor []string `json:"waitsFor,omitempty"`
}

// Action is one change. Each updated pod appears in exactly one action;
// node actions (CordonNode, DrainNode, UncordonNode) name a node only.
type Action struct {
	Type string `json:"type"`
	Pod  string `json:"pod,omitempty"`
	Node string `json:"node,omitempty"`
	// Surge: the new pod is created first; the old one is removed once the
	// new one is available.
	Surge bool `json:"surge,omitempty"`
	// ReplicaSet scaling (Deployments): from → to replicas, and the pods a
	// scale-down removes, in upstream deletion order. DrainNode: the pods
	// the snapshot shows it evicts, as namespace/name.
	ReplicaSet string   `json:"replicaSet,omitempty"`
	From       *int     `json:"from,omitempty"`
	To         *int     `json:"to,omitempty"`
	Pods       []string `json:"pods,omitempty"`
	Reasons    []string `json:"reasons"`
}

// Held is a pod kept out of the rollout, or (WorkloadPlan.Blocked) one
// the rollout cannot reach.
type Held struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Summary counts what the rollout does with the workload's pods. Each pod
// of the workload (facts, not pods the simulation makes up) is counted in
// exactly one of updated, held and toUpdate, and each pod to update in
// exactly one of the five counts after it:
//
//	pods     == updated + held + toUpdate
//	toUpdate == inPlace + recreate + deleted + terminating + blocked
//
// internal/parity checks both over every random rollout it plans. deleted,
// terminating and blocked are left out of the document when 0.
type Summary struct {
	// Pods: the workload's pods in the snapshot.
	Pods int `json:"pods"`
	// Updated: pods at the update revision already.
	Updated int `json:"updated"`
	// ToUpdate: pods not at the update revision and in the rollout's
	// scope; a halted or stalled rollout counts them too.
	ToUpdate int `json:"toUpdate"`
	// InPlace, Recreate: pods to update that an InPlaceUpdate or a
	// Recreate action names, or (Recreate) that a Deployment's
	// ReplicaSet scale-down removes.
	InPlace  int `json:"inPlace"`
	Recreate int `json:"recreate"`
	// Deleted: pods to update removed and not replaced: by a Delete
	// action (a DaemonSet pod on a node that should no longer run it, or
	// beside its replacement; a StatefulSet pod beyond the replicas), or
	// by the ReplicaSet controller before the rollout, outside the plan's
	// actions (an old ReplicaSet holding more pods than its replicas; a
	// note names them).
	Deleted int `json:"deleted,omitempty"`
	// Terminating: pods to update already terminating: no action of their
	// own (a note says what replaces them).
	Terminating int `json:"terminating,omitempty"`
	// Blocked: pods to update in no wave: the rollout is halted or stalls,
	// or nothing drives it (WorkloadPlan.Blocked names each, with why).
	Blocked int `json:"blocked,omitempty"`
	// Held: pods kept out of the rollout (WorkloadPlan.Held).
	Held  int `json:"held"`
	Waves int `json:"waves"`
}
