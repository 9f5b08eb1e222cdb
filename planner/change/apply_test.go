package change

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

func defaulted(t *testing.T, manifest string) *Object {
	t.Helper()
	o := parseOne(t, manifest)
	if err := Default(o, nil); err != nil {
		t.Fatal(err)
	}
	return o
}

const dsManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, labels: {team: infra}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: "agent:IMAGE"}]}
`

// From files, a change keeps what the stored object has beyond the spec
// (uid, status, labels it does not name), advances the generation and
// the DaemonSet's template generation, and says what it did.
func TestApplyFromFiles(t *testing.T) {
	cur := defaulted(t, strings.Replace(dsManifest, "IMAGE", "1", 1)).Obj.(*appsv1.DaemonSet)
	cur.UID, cur.Generation = "u-1", 3
	cur.Labels["owner"] = "ops"
	cur.Annotations = map[string]string{annTemplateGeneration: "2"}
	cur.Status.ObservedGeneration, cur.Status.NumberReady = 3, 5
	snap := &snapshot.Snapshot{DaemonSets: []*appsv1.DaemonSet{cur}}

	same := defaulted(t, strings.Replace(dsManifest, "IMAGE", "1", 1))
	if oc := Apply(snap, []*Object{same}, FromFiles, nil); oc[0].Status != Unchanged || snap.DaemonSets[0].Generation != 3 {
		t.Fatalf("same spec: %s, generation %d; want unchanged, 3", oc[0].Status, snap.DaemonSets[0].Generation)
	}
	next := defaulted(t, strings.Replace(dsManifest, "IMAGE", "2", 1))
	oc := Apply(snap, []*Object{next}, FromFiles, nil)
	got := snap.DaemonSets[0]
	if oc[0].Status != Replaced || !oc[0].TemplateChanged || oc[0].From.Spec.Containers[0].Image != "agent:1" || oc[0].To.Spec.Containers[0].Image != "agent:2" {
		t.Errorf("outcome %+v, want replaced with the template agent:1 -> agent:2", oc[0])
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"image", got.Spec.Template.Spec.Containers[0].Image, "agent:2"},
		{"uid", string(got.UID), "u-1"},
		{"generation", got.Generation, int64(4)},
		{"template generation", got.Annotations[annTemplateGeneration], "3"},
		{"status kept", got.Status.NumberReady, int32(5)},
		{"observedGeneration behind", got.Status.ObservedGeneration, int64(3)},
		{"label kept", got.Labels["owner"], "ops"},
		{"label set", got.Labels["team"], "infra"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// A spec change that leaves the template alone replaces no pod.
	scaled := defaulted(t, strings.Replace(strings.Replace(dsManifest, "IMAGE", "2", 1), "spec:\n  selector", "spec:\n  minReadySeconds: 5\n  selector", 1))
	if oc := Apply(snap, []*Object{scaled}, FromFiles, nil); oc[0].Status != Replaced || oc[0].TemplateChanged || !strings.Contains(oc[0].Note(), "no pod is replaced") {
		t.Errorf("minReadySeconds only: %+v %q", oc[0], oc[0].Note())
	}
	// Not in the snapshot: new, and the snapshot is left alone.
	other := defaulted(t, strings.Replace(strings.Replace(dsManifest, "IMAGE", "2", 1), "name: agent,", "name: other,", 1))
	if oc := Apply(snap, []*Object{other}, FromFiles, nil); oc[0].Status != New || len(snap.DaemonSets) != 1 || !strings.Contains(oc[0].Note(), "DaemonSet default/other (m.yaml: document 1) is not in the snapshot") {
		t.Errorf("new workload: %+v %q, %d DaemonSets", oc[0], oc[0].Note(), len(snap.DaemonSets))
	}
}

// From the server, the dry-run's object replaces the stored one whole.
func TestApplyFromServer(t *testing.T) {
	cur := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default", Generation: 1}}
	snap := &snapshot.Snapshot{Deployments: []*appsv1.Deployment{cur}}
	served := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default", Generation: 2, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager}}}}
	served.Spec.Replicas = new(int32)
	oc := Apply(snap, []*Object{{Kind: Deployment, Namespace: "default", Name: "api", Obj: served}}, FromServer, nil)
	if oc[0].Status != Replaced || snap.Deployments[0] != served {
		t.Errorf("outcome %+v; the snapshot holds %p, want the server's object %p", oc[0], snap.Deployments[0], served)
	}
}

// With MaxUnavailableStatefulSet off the API server drops a new
// maxUnavailable (dropStatefulSetDisabledFields), not one already stored.
func TestApplyDropsDisabledMaxUnavailable(t *testing.T) {
	manifest := "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {replicas: 2, updateStrategy: {rollingUpdate: {maxUnavailable: 2}}}\n"
	for _, tc := range []struct {
		name   string
		stored *intstr.IntOrString
		gate   bool
		want   bool
	}{
		{"gate off, not stored", nil, false, false},
		{"gate off, stored", &intstr.IntOrString{IntVal: 1}, false, true},
		{"gate on", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := defaulted(t, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n").Obj.(*appsv1.StatefulSet)
			cur.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = tc.stored
			snap := &snapshot.Snapshot{StatefulSets: []*appsv1.StatefulSet{cur}}
			Apply(snap, []*Object{defaulted(t, manifest)}, FromFiles, map[string]bool{"MaxUnavailableStatefulSet": tc.gate})
			if got := snap.StatefulSets[0].Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil; got != tc.want {
				t.Errorf("maxUnavailable kept: %v, want %v", got, tc.want)
			}
		})
	}
}

// Captures of two namespaces share their Nodes: Merge keeps one copy.
func TestMerge(t *testing.T) {
	a := &snapshot.Snapshot{StatefulSets: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "a"}}}}
	b := &snapshot.Snapshot{StatefulSets: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "b"}}}}
	Merge(a, b)
	if len(a.StatefulSets) != 2 || a.StatefulSets[1].Namespace != "b" {
		t.Errorf("merged %d StatefulSets, want a/s and b/s", len(a.StatefulSets))
	}
}

// Against a snapshot whose env values rollplan snapshot redacted, the
// proposed values are redacted alike: an unchanged value is no change.
func TestApplyRedactsLikeTheSnapshot(t *testing.T) {
	withEnv := func(image, value string) *Object {
		m := strings.Replace(strings.Replace(dsManifest, "IMAGE", image, 1), `image: "agent:`+image+`"}`, `image: "agent:`+image+`", env: [{name: MODE, value: `+value+`}]}`, 1)
		return defaulted(t, m)
	}
	cur := withEnv("1", capture.Redact("blue")).Obj.(*appsv1.DaemonSet)
	snap := &snapshot.Snapshot{DaemonSets: []*appsv1.DaemonSet{cur}}
	oc := Apply(snap, []*Object{withEnv("2", "blue")}, FromFiles, nil)
	if !oc[0].Redacted || !strings.Contains(oc[0].Note(), "the new revision's name is not the one the controller will give") {
		t.Errorf("outcome %+v, note %q: want it redacted and saying so", oc[0], oc[0].Note())
	}
	if got := snap.DaemonSets[0].Spec.Template.Spec.Containers[0].Env[0].Value; got != capture.Redact("blue") {
		t.Errorf("env value %q, want the snapshot's redaction of blue", got)
	}
	if d := facts.Diff(oc[0].From, oc[0].To); len(d) != 1 || d[0].Path != "spec.containers[a].image" {
		t.Errorf("template changes %+v, want the image alone", d)
	}
	// A snapshot without redacted values keeps the proposed ones.
	plain := withEnv("1", "green").Obj.(*appsv1.DaemonSet)
	snap = &snapshot.Snapshot{DaemonSets: []*appsv1.DaemonSet{plain}}
	if oc := Apply(snap, []*Object{withEnv("2", "blue")}, FromFiles, nil); oc[0].Redacted || snap.DaemonSets[0].Spec.Template.Spec.Containers[0].Env[0].Value != "blue" {
		t.Errorf("unredacted snapshot: %+v, env %q", oc[0], snap.DaemonSets[0].Spec.Template.Spec.Containers[0].Env[0].Value)
	}
}
