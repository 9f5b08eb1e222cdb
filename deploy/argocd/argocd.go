// Package argocd holds rollplan's Argo CD resource health customisations:
// the Lua scripts (rollout.lua for rollplan.dev/Rollout, workload.lua for
// managed StatefulSets, DaemonSets and Deployments) and argocd-cm.yaml,
// the argocd-cm patch that carries them, generated from the scripts
// (go test ./deploy/argocd -update). deploy/health runs them as Argo CD
// does; docs/gitops.md says where they go.
package argocd

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
)

// ConfigMapFile names the argocd-cm patch in this directory.
const ConfigMapFile = "argocd-cm.yaml"

var (
	//go:embed rollout.lua
	rolloutLua string
	//go:embed workload.lua
	workloadLua string
	// ConfigMap is argocd-cm.yaml as shipped.
	//
	//go:embed argocd-cm.yaml
	ConfigMap []byte
)

// Customization is one group/kind's health check as argocd-cm keys it.
type Customization struct {
	// Key: <group>_<kind>, as in resource.customizations.health.<Key>.
	Key string
	// Script: the Lua health script.
	Script string
	// OpenLibs: the script reads the rollout state annotation with Lua's
	// string library, which Argo CD opens for a custom script only under
	// resource.customizations.useOpenLibs.<Key>: "true".
	OpenLibs bool
}

// Customizations are the health checks rollplan ships, by key.
func Customizations() []Customization {
	return []Customization{
		{Key: "apps_DaemonSet", Script: workloadLua, OpenLibs: true},
		{Key: "apps_Deployment", Script: workloadLua, OpenLibs: true},
		{Key: "apps_StatefulSet", Script: workloadLua, OpenLibs: true},
		{Key: "rollplan.dev_Rollout", Script: rolloutLua},
	}
}

// HealthKey and OpenLibsKey are the argocd-cm keys of a customisation.
func HealthKey(key string) string   { return "resource.customizations.health." + key }
func OpenLibsKey(key string) string { return "resource.customizations.useOpenLibs." + key }

const header = `# Argo CD resource health for rollplan (docs/gitops.md), as a patch of the
# argocd-cm ConfigMap (Argo CD's namespace is argocd in its default install):
#   kubectl -n argocd patch configmap argocd-cm --patch-file deploy/argocd/argocd-cm.yaml
# or a patch in the kustomization that installs Argo CD.
#
# Generated from rollout.lua and workload.lua by
# go test ./deploy/argocd -update
# Do not edit: edit the .lua files.
#
# The workload scripts read rollplan's rollout state annotation with Lua's
# string library, which Argo CD opens for a custom health script only under
# resource.customizations.useOpenLibs.<group>_<kind>: "true".
`

// Render writes the argocd-cm patch for cs: every script as a literal
// block, keys in order.
func Render(cs []Customization) ([]byte, error) {
	data := map[string]string{}
	for _, c := range cs {
		if !strings.HasSuffix(c.Script, "\n") {
			return nil, fmt.Errorf("health script for %s: does not end in a newline", c.Key)
		}
		data[HealthKey(c.Key)] = c.Script
		if c.OpenLibs {
			data[OpenLibsKey(c.Key)] = "true"
		}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: argocd\n  labels:\n    app.kubernetes.io/part-of: argocd\ndata:\n")
	for _, k := range keys {
		v := data[k]
		if !strings.Contains(v, "\n") {
			fmt.Fprintf(&b, "  %s: %q\n", k, v)
			continue
		}
		fmt.Fprintf(&b, "  %s: |\n", k)
		for _, line := range strings.Split(strings.TrimSuffix(v, "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	return []byte(b.String()), nil
}
