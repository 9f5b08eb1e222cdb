// Package policies holds rollplan's Rego policies.
//
// Defaults is the default strategy, the library package rollplan.defaults
// (defaults.rego): every decision point of the policy contract
// (docs/policy-contract.md) answered with upstream Kubernetes v1.36
// semantics. The Rego engine always loads it, so that entry policies
// (package rollplan.strategy) can import data.rollplan.defaults and so that
// every rule an entry policy leaves out falls back to it.
//
// Examples holds the example entry policies, one directory each under
// examples/ (policy.rego, policy_test.rego, README.md). Each declares
// package rollplan.strategy, so load at most one of them at a time, and
// skip the *_test.rego files when loading a policy.
package policies

import (
	"embed"
)

// Defaults is the source of defaults.rego (package rollplan.defaults).
//
//go:embed defaults.rego
var Defaults string

// Examples holds examples/<name>/{policy.rego,policy_test.rego,README.md}.
//
//go:embed examples
var Examples embed.FS

// CELDefaults is the default strategy as a CEL RolloutPolicy
// (cel/defaults.yaml); the CEL engine always evaluates it.
//
//go:embed cel/defaults.yaml
var CELDefaults string
