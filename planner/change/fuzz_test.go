package change

import (
	"strings"
	"testing"
)

// FuzzParse: whatever a change file holds, Parse returns objects or an
// error, never panics; every object it returns names its kind, namespace
// and name, carries its raw manifest, and takes the API server's defaults
// without error.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sts))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d"},"spec":{"template":{"spec":{"volumes":[{"name":"v"}],"containers":[{"name":"c","image":"x@sha256:` + strings.Repeat("a", 64) + `","livenessProbe":{"httpGet":{"port":80}},"resources":{"limits":{"cpu":"0.0001"}}}]}}}}`))
	f.Add([]byte("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {volumeClaimTemplates: [{metadata: {name: d}}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _, err := Parse("fuzz.yaml", data, "ns")
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Kind == "" || o.Namespace == "" || o.Name == "" || len(o.Raw) == 0 || o.Obj == nil {
				t.Fatalf("incomplete object %+v", o)
			}
			if err := Default(o, nil); err != nil {
				t.Fatalf("%s: Default: %v", o.ID(), err)
			}
		}
	})
}
