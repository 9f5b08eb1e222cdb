// Package policytest runs rollplan's policy test suites: the Rego tests of a
// policy (files ending in _test.rego, run through OPA's tester) and
// RolloutPolicyTest YAML suites, which plan a snapshot with a policy and
// compare the decisions or the plan with what the suite expects.
//
// A RolloutPolicyTest suite works for any engine: the runner builds
// engines through the engine registry (planner/engine/engines) and plans
// through a planning request (planner/request, plan.Run), as `rollplan
// plan` does, so that a test sees exactly the facts and the plan that
// `rollplan plan` computes.
//
// The YAML schema (apiVersion rollplan.dev/v1alpha1, kind RolloutPolicyTest):
//
//	apiVersion: rollplan.dev/v1alpha1
//	kind: RolloutPolicyTest
//	metadata:
//	  name: one-zone-at-a-time
//	spec:
//	  policy: .            # path or list of paths, relative to this file; empty: the default strategy
//	  engine: rego         # rego | cel | native; default inferred from policy (engines.Infer)
//	  tests:
//	    - name: zones roll one at a time
//	      snapshot: ../../testdata/snap.yaml   # path(s) relative to this file, or objects: [...]
//	      now: "2026-03-01T12:00:00Z"          # default: the latest time in the snapshot
//	      kubernetesVersion: v1.36                  # default: the snapshot's recorded version, else the newest
//	      featureGates: {MaxUnavailableStatefulSet: true}
//	      workload: DaemonSet/default/agent    # plan only this workload (like --workload)
//	      analysisResults:                     # recorded results, as plan --analysis-results reads them
//	        StatefulSet/default/web:
//	        - wave: 1
//	          measurements: {error-rate: [{value: 0.002, taken: "2026-03-01T12:05:00Z"}]}
//	      expect:
//	        decisions:
//	          DaemonSet/default/agent:
//	            pods:
//	              agent-ncvbn: {scope: in, action: Recreate, order: [1, zone-a, worker-1, agent-ncvbn]}
//	            pacing: rolling
//	            analysis: {soak: 2m, onFail: rollback, measurements: [error-rate]}
//	            gates: {"1": {status: passed}}
//	            halt: []
//	        plan:
//	          workloads: [...]                 # as `rollplan plan -o yaml` prints them
//
// Every field under expect is optional and only the fields given are
// compared, except plan.workloads, which must equal the plan's workloads
// exactly (but for a wave's budgets and binding, compared only when the
// expected wave has budgets: suites written before the plan carried them
// still pass). Name suite files *_test.yaml: policy loaders (the CEL engine's)
// skip them, so a suite can sit next to the policy it tests.
package policytest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// APIVersion and Kind of a test suite document.
const (
	APIVersion = "rollplan.dev/v1alpha1"
	Kind       = "RolloutPolicyTest"
)

// Suite is one RolloutPolicyTest document.
type Suite struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`

	// File the suite was read from and its document number (from 1).
	File string `json:"-"`
	Doc  int    `json:"-"`
}

// Metadata names the suite.
type Metadata struct {
	Name string `json:"name"`
}

// Spec is the policy under test and the test cases.
type Spec struct {
	// Policy: the policy files or directories, relative to the suite's file
	// (a Rego directory or .rego file, or a CEL RolloutPolicy YAML file).
	// Empty: the default strategy.
	Policy Paths `json:"policy,omitempty"`
	// Engine: rego, cel or native; empty to infer it from Policy.
	Engine string `json:"engine,omitempty"`
	Tests  []Test `json:"tests"`
}

// Test is one test case: a snapshot, the planning options and what to expect.
type Test struct {
	Name string `json:"name"`
	// Snapshot: files or directories of Kubernetes objects, relative to the
	// suite's file (as `rollplan plan -f` reads them). Exclusive with Objects.
	Snapshot Paths `json:"snapshot,omitempty"`
	// Objects: the snapshot inline, a list of Kubernetes objects.
	Objects []json.RawMessage `json:"objects,omitempty"`
	// Now: the snapshot time (RFC 3339); default the latest time in the
	// snapshot, as for `rollplan plan`.
	Now string `json:"now,omitempty"`
	// KubernetesVersion as --kubernetes-version sets it: the version
	// whose controllers the default strategy predicts; default the
	// version the snapshot records, else the newest rollplan knows.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// FeatureGates as --feature-gates sets them: overrides of the
	// version's defaults.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// Workload: plan only this workload, KIND/NAME or KIND/NAMESPACE/NAME
	// (as --workload).
	Workload string `json:"workload,omitempty"`
	// AnalysisResults: recorded measurement results by workload
	// (KIND/NAMESPACE/NAME) and wave, as the workloads of a
	// `plan --analysis-results` file: the gates they exist for show the
	// policy's verdict (expect decisions[...].gates), without a Prometheus.
	AnalysisResults map[string][]facts.WaveResults `json:"analysisResults,omitempty"`
	Expect          Expect                         `json:"expect"`
}

// Expect is what a test checks. At least one of Decisions and Plan is set.
type Expect struct {
	// Decisions by workload, keyed KIND/NAMESPACE/NAME.
	Decisions map[string]WorkloadDecisions `json:"decisions,omitempty"`
	// Plan: the plan's workloads, compared exactly.
	Plan *PlanExpect `json:"plan,omitempty"`
}

// WorkloadDecisions are the expected decisions for one workload. Nil fields
// are not compared; an empty list is compared (it expects none).
type WorkloadDecisions struct {
	// Pods by pod name; only pods listed are compared.
	Pods    map[string]PodDecision `json:"pods,omitempty"`
	Budgets *[]engine.Budget       `json:"budgets,omitempty"`
	Pacing  string                 `json:"pacing,omitempty"`
	// NodePreparation: none, cordon or drain.
	NodePreparation string    `json:"nodePreparation,omitempty"`
	Halt            *[]string `json:"halt,omitempty"`
	Deny            *[]string `json:"deny,omitempty"`
	// Analysis: the analysis declared (only the fields given are compared;
	// measurements by name, in order). Gates: by wave number ("1"), the
	// gate after that wave as the plan shows it (status, message).
	Analysis *AnalysisExpect       `json:"analysis,omitempty"`
	Gates    map[string]GateExpect `json:"gates,omitempty"`
}

// AnalysisExpect is the expected analysis declaration; declared false
// expects none.
type AnalysisExpect struct {
	Declared        *bool    `json:"declared,omitempty"`
	Soak            string   `json:"soak,omitempty"`
	OnFail          string   `json:"onFail,omitempty"`
	MaxInconclusive *int     `json:"maxInconclusive,omitempty"`
	Measurements    []string `json:"measurements,omitempty"`
}

// GateExpect is the expected gate after one wave: status pending, passed,
// failed or inconclusive, and the message when given.
type GateExpect struct {
	Status  string  `json:"status,omitempty"`
	Message *string `json:"message,omitempty"`
}

// PodDecision is the expected decision for one pod; only the fields given
// are compared. Decisions are compared as the plan uses them (after Go
// overrides an InPlace answer the API would refuse, as `explain` shows).
type PodDecision struct {
	// Scope: in or held.
	Scope      string    `json:"scope,omitempty"`
	HeldReason *string   `json:"heldReason,omitempty"`
	Action     string    `json:"action,omitempty"` // InPlace | Recreate
	Reasons    *[]string `json:"reasons,omitempty"`
	// Order: the sort key, compared as JSON values (1 equals 1.0).
	Order *[]any `json:"order,omitempty"`
}

// PlanExpect holds the expected workloads of the plan.
type PlanExpect struct {
	// Workloads: the workloads list of `rollplan plan -o yaml`.
	Workloads json.RawMessage `json:"workloads"`
}

// Scope values of PodDecision.
const (
	ScopeIn   = "in"
	ScopeHeld = "held"
)

// Paths is a list of paths that YAML may also give as one string.
type Paths []string

// UnmarshalJSON implements json.Unmarshaler.
func (p *Paths) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*p = Paths{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a path or a list of paths")
	}
	*p = many
	return nil
}

// Status of a test result.
type Status int

// Statuses.
const (
	Pass Status = iota
	Fail
	Error // the test could not run
	Skip  // Rego todo_ tests
)

func (s Status) String() string {
	switch s {
	case Pass:
		return "PASS"
	case Fail:
		return "FAIL"
	case Error:
		return "ERROR"
	case Skip:
		return "SKIP"
	}
	return "UNKNOWN"
}

// Result is the outcome of one test.
type Result struct {
	// File holds the test (a _test.rego or YAML file; for a Rego suite that
	// does not compile, its directory).
	File string
	// Line orders results within File: the Rego rule's row, or the YAML test's index.
	Line int
	// Class: the Rego package (data.x.y) or the suite's metadata.name.
	Class string
	// Name: the Rego rule or the YAML test's name.
	Name string
	// ID is the name printed in PASS/FAIL lines: data.pkg.test_x, or
	// suite/test for YAML.
	ID     string
	Status Status
	// Location: where the test is (file:row for Rego, file and test for YAML).
	Location string
	// Detail: the diff or the error, several lines.
	Detail   string
	Duration time.Duration
}
