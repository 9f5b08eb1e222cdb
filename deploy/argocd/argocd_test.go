package argocd

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite "+ConfigMapFile+" from the .lua files")

// TestConfigMap: argocd-cm.yaml is what Render makes of the scripts, and
// reads back, as a ConfigMap, to each script byte for byte with its
// useOpenLibs key.
func TestConfigMap(t *testing.T) {
	want, err := Render(Customizations())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(ConfigMapFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(ConfigMap, want) {
		t.Fatalf("%s is not generated from the .lua files: run go test ./deploy/argocd -update", ConfigMapFile)
	}
	var cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict(ConfigMap, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata["name"] != "argocd-cm" {
		t.Errorf("%s: %s %s %v, want the v1 ConfigMap argocd-cm", ConfigMapFile, cm.APIVersion, cm.Kind, cm.Metadata["name"])
	}
	keys := 0
	for _, c := range Customizations() {
		if got := cm.Data[HealthKey(c.Key)]; got != c.Script {
			t.Errorf("%s: %s differs from its script", ConfigMapFile, HealthKey(c.Key))
		}
		keys++
		if v, ok := cm.Data[OpenLibsKey(c.Key)]; ok != c.OpenLibs || (ok && v != "true") {
			t.Errorf("%s: %s = %q (set %v), want set %v to \"true\"", ConfigMapFile, OpenLibsKey(c.Key), v, ok, c.OpenLibs)
		}
		if c.OpenLibs {
			keys++
		}
	}
	if len(cm.Data) != keys {
		t.Errorf("%s: %d keys, want %d", ConfigMapFile, len(cm.Data), keys)
	}
}
