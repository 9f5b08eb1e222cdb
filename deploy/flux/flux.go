// Package flux holds rollplan's Flux health checks: rollplan-health.yaml,
// a Kustomization (kustomize.toolkit.fluxcd.io/v1) whose
// spec.healthCheckExprs users merge into theirs. deploy/health evaluates
// them with Flux's own code; docs/gitops.md says where they go.
package flux

import _ "embed"

// File names the Kustomization snippet in this directory.
const File = "rollplan-health.yaml"

// Kustomization is rollplan-health.yaml as shipped.
//
//go:embed rollplan-health.yaml
var Kustomization []byte
