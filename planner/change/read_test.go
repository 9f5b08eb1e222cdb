package change

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

const sts = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app:1}]}
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, data, namespace string
		ids                   []string // "Kind ns/name" of the objects read, in order
		warnings              []string // substrings, one per warning
		err                   string
	}{
		{name: "one object, -n", data: sts, namespace: "prod", ids: []string{"StatefulSet prod/web"}},
		{name: "no namespace: default", data: sts, ids: []string{"StatefulSet default/web"}},
		{name: "multi-document with another kind",
			data:     "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n" + strings.Replace(sts, "{name: web}", "{name: web, namespace: a}", 1) + "---\n# only a comment\n",
			ids:      []string{"StatefulSet a/web"},
			warnings: []string{"x.yaml: document 1: Service web (v1) left out of the preview"}},
		{name: "v1 List, nested",
			data: `{"apiVersion":"v1","kind":"List","items":[
			  {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}},
			  {"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent","namespace":"sys"}}]},
			  {"apiVersion":"extensions/v1beta1","kind":"DaemonSet","metadata":{"name":"old"}}]}`,
			ids:      []string{"Deployment default/api", "DaemonSet sys/agent"},
			warnings: []string{"x.yaml: document 1, items[2]: DaemonSet old (extensions/v1beta1) left out"}},
		// A slip of the kind is an error, not a warning: the workload
		// would silently drop out of the preview.
		{name: "a kind in the wrong case beside a workload", data: "apiVersion: apps/v1\nkind: Daemonset\nmetadata: {name: agent}\n---\n" + sts, namespace: "prod",
			err: `x.yaml: document 1: Daemonset prod/agent: field kind: apps/v1 has no kind "Daemonset": did you mean DaemonSet? (kinds are case-sensitive)`},
		{name: "a kind one letter off in another group", data: "apiVersion: v1\nkind: Deploymnet\nmetadata: {name: api}\n",
			err: `x.yaml: document 1: Deploymnet default/api: field kind: "Deploymnet" is not a kind --change previews (Deployment, StatefulSet, DaemonSet): did you mean Deployment?`},
		{name: "apps kinds that are not workloads are left out",
			data:     "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n---\n" + sts,
			ids:      []string{"StatefulSet default/web"},
			warnings: []string{"x.yaml: document 1: ReplicaSet rs (apps/v1) left out of the preview"}},
		{name: "no name", data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {}\n", err: "x.yaml: document 1: Deployment has no metadata.name"},
		{name: "unknown field", data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replica: 2}\n", err: `Deployment default/a: unknown field "spec.replica"`},
		{name: "wrong type", data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: two}\n", err: "x.yaml: document 1: Deployment default/a: cannot decode"},
		{name: "not an object", data: "- a\n- b\n", err: "x.yaml: document 1: want a Kubernetes object"},
		{name: "no kind", data: "apiVersion: apps/v1\nmetadata: {name: a}\n", err: "object has no kind"},
		{name: "not YAML", data: "a: [\n", err: "x.yaml: document 1: not valid YAML or JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, warnings, err := Parse("x.yaml", []byte(tc.data), tc.namespace)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, o := range objs {
				ids = append(ids, o.ID())
				if o.Obj.GetNamespace() != o.Namespace || o.Obj.GetName() != o.Name {
					t.Errorf("%s: typed object is %s/%s", o.ID(), o.Obj.GetNamespace(), o.Obj.GetName())
				}
				if !strings.Contains(string(o.Raw), `"namespace":"`+o.Namespace+`"`) {
					t.Errorf("%s: raw manifest %s lacks its namespace", o.ID(), o.Raw)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("read %v, want %v", ids, tc.ids)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q, want %q", warnings[i], w)
				}
			}
		})
	}
}

// A directory is read in sorted order, recursively, .yaml/.yml/.json
// only; a workload proposed twice and a change of no workload are errors.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yml", strings.Replace(sts, "name: web", "name: b", 1))
	write("a/z.json", `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"z"}}`)
	write("notes.txt", "not read")
	objs, _, err := Read([]string{dir}, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].ID() != "DaemonSet ns/z" || objs[1].ID() != "StatefulSet ns/b" {
		t.Fatalf("read %v, want DaemonSet ns/z then StatefulSet ns/b", objs)
	}
	if _, ok := objs[0].Obj.(*appsv1.DaemonSet); !ok {
		t.Errorf("DaemonSet decoded as %T", objs[0].Obj)
	}
	write("c.yaml", strings.Replace(sts, "name: web", "name: b", 1))
	if _, _, err := Read([]string{dir}, "ns"); err == nil || !strings.Contains(err.Error(), "StatefulSet ns/b is proposed twice (first in "+filepath.Join(dir, "b.yml")) {
		t.Errorf("duplicate: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "svc.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := Read([]string{other}, ""); err == nil || !strings.Contains(err.Error(), "no Deployment, StatefulSet or DaemonSet") || len(warnings) != 1 {
		t.Errorf("no workload: %v, warnings %q", err, warnings)
	}
	if _, _, err := Read([]string{t.TempDir()}, ""); err == nil || !strings.Contains(err.Error(), "holds no .yaml, .yml or .json file") {
		t.Errorf("empty directory: %v", err)
	}
}
