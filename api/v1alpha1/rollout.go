// Package v1alpha1 holds rollplan's API types served by the cluster: the
// Rollout, rollplan's record of one managed workload's rollout
// (rollouts.rollplan.dev, deploy/rollout-crd.yaml).
//
// Why an object of its own rather than the workload's annotation alone:
// kubectl wait, kstatus (Flux, kpt), Argo CD and Prometheus exporters read
// conditions and typed status fields, with printer columns and a schema;
// none of them parses a JSON string in an annotation. A Rollout is owned by
// its workload (garbage-collected with it) and written only by rollplan's
// controller, spec and status alike, under one field manager.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Resource of the Rollout.
const (
	Group    = "rollplan.dev"
	Version  = "v1alpha1"
	Kind     = "Rollout"
	Resource = "rollouts"
)

// GroupVersionResource is the Rollout's resource, for dynamic clients.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Condition types, in kstatus's "abnormal-true" form: Reconciling and
// Stalled are True only while something is going on or wrong, so kstatus
// (sigs.k8s.io/cli-utils) reads InProgress, Failed and Current from them;
// Ready is the positive condition kubectl wait --for=condition=Ready
// waits on.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionAnalysisPassed carries the verdict of the rollout's
	// analysis gate (present only while the revision has one): True once
	// the gate passed (or a person promoted it), False when it failed,
	// was inconclusive or rolled the rollout back, Unknown while the wave
	// is updated, soaks or is measured. Its reason is RolloutAnalysis.State.
	ConditionAnalysisPassed = "AnalysisPassed"
)

// Rollout is one managed workload's rollout as rollplan drives it.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RolloutSpec   `json:"spec"`
	Status RolloutStatus `json:"status,omitempty"`
}

// RolloutSpec names the workload. It does not change over the Rollout's
// life, so metadata.generation stays 1 and status.observedGeneration
// follows it as kstatus expects; the workload's own generation is
// status.workloadGeneration.
type RolloutSpec struct {
	WorkloadRef WorkloadRef `json:"workloadRef"`
}

// WorkloadRef is the workload in the Rollout's namespace.
type WorkloadRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// RolloutStatus is the rollout as the controller last recorded it.
type RolloutStatus struct {
	// ObservedGeneration: the Rollout's metadata.generation this status
	// was written for (kstatus compares the two).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// WorkloadGeneration: the workload's metadata.generation this status
	// describes; a status for an older generation than the workload's
	// says nothing yet of its newest change.
	WorkloadGeneration int64 `json:"workloadGeneration,omitempty"`
	// Phase: InProgress, Complete, Halted, Paused or Waiting (as the
	// rollout-state annotation).
	Phase string `json:"phase,omitempty"`
	// Revision: the update revision the rollout rolls to.
	Revision string `json:"revision,omitempty"`
	// Wave of Waves: the wave going on (1-based; 0 before the first
	// action) of the rollout's own plan.
	Wave  int32 `json:"wave,omitempty"`
	Waves int32 `json:"waves,omitempty"`
	// Replicas (not held), updated, available and in flight.
	Replicas          int32 `json:"replicas"`
	UpdatedReplicas   int32 `json:"updatedReplicas"`
	AvailableReplicas int32 `json:"availableReplicas"`
	InFlightReplicas  int32 `json:"inFlightReplicas"`
	// Driver: who drives the rollout (the holder of its driver Lease).
	Driver string `json:"driver,omitempty"`
	// Policy: the named policy that plans it ("" the default).
	Policy string `json:"policy,omitempty"`
	// PlanDigest: sha256 of the plan the last step carried out (as
	// rollplan plan -o json prints a workload's plan).
	PlanDigest string `json:"planDigest,omitempty"`
	// Message: why it is halted, stalled or waiting, or what it waits for.
	Message string `json:"message,omitempty"`
	// Reasons: every halt reason.
	Reasons []string `json:"reasons,omitempty"`
	// Analysis: where the analysis gate of the rollout stands (absent: no
	// gate for this revision).
	Analysis   *RolloutAnalysis   `json:"analysis,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RolloutAnalysis is the rollout's analysis gate: the wave it holds, the
// try, the policy's verdict and the measurements' values in one line.
type RolloutAnalysis struct {
	// Wave: the gated wave (1-based).
	Wave int32 `json:"wave"`
	// Attempt: the try the verdict is for.
	Attempt int32 `json:"attempt,omitempty"`
	// State: WaveInProgress, Soaking, Measuring, Passed, Failed, Inconclusive,
	// Halted, Promoted, Aborted or RolledBack.
	State string `json:"state"`
	// Verdict: the policy's last verdict: pass, fail or inconclusive.
	Verdict string `json:"verdict,omitempty"`
	// Message: the verdict's message, each query and its values.
	Message string `json:"message,omitempty"`
}
