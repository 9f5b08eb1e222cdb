package capture

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/snapshot"
)

var (
	created = metav1.NewTime(time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC))
	clock   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func meta(ns, name string, labels map[string]string, owner metav1.Object, ownerKind string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID("uid-" + ns + "-" + name), CreationTimestamp: created, ResourceVersion: "7"}
	if owner != nil {
		t := true
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: ownerKind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &t}}
	}
	return m
}

// The builders below give testobj's objects this fixture's metadata (meta).

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	return testobj.Deployment(ns, name).Meta(meta(ns, name, labels, nil, "")).Obj()
}

func replicaSet(d *appsv1.Deployment, name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: meta(d.Namespace, name, d.Spec.Selector.MatchLabels, d, "Deployment"),
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}

func statefulSet(ns, name string) *appsv1.StatefulSet {
	return testobj.StatefulSet(ns, name).Meta(meta(ns, name, nil, nil, "")).Obj()
}

func daemonSet(ns, name string) *appsv1.DaemonSet {
	return testobj.DaemonSet(ns, name).Meta(meta(ns, name, nil, nil, "")).Obj()
}

func revision(owner metav1.Object, kind, name string, labels map[string]string, data string) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{ObjectMeta: meta(owner.GetNamespace(), name, labels, owner, kind), Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(data)}}
}

func pod(ns, name, node string, labels map[string]string, owner metav1.Object, ownerKind string) *corev1.Pod {
	return testobj.Pod(ns, name).Meta(meta(ns, name, labels, owner, ownerKind)).Node(node).Obj()
}

func node(name string) *corev1.Node {
	return testobj.Node(name).Meta(meta("", name, map[string]string{"topology.kubernetes.io/zone": "zone-" + name}, nil, "")).Images("huge:1").Obj()
}

func pdb(ns, name string, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{ObjectMeta: meta(ns, name, nil, nil, ""),
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel, MaxUnavailable: &one}}
}

func matching(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

// cluster: namespaces prod (web, other, db, agent) and staging (web).
func cluster() []runtime.Object {
	web := deployment("prod", "web", map[string]string{"tier": "frontend"})
	web1, web2 := replicaSet(web, "web-1"), replicaSet(web, "web-2")
	other := deployment("prod", "other", nil)
	other1 := replicaSet(other, "other-1")
	// A ReplicaSet nobody controls, whose pod carries web's labels: not
	// web's, but counted by web's PDB.
	canary := &appsv1.ReplicaSet{ObjectMeta: meta("prod", "canary", nil, nil, "")}
	db := statefulSet("prod", "db")
	agent := daemonSet("prod", "agent")
	sweb := deployment("staging", "web", map[string]string{"tier": "frontend"})
	sweb1 := replicaSet(sweb, "web-1")
	webLabels, dbLabels := map[string]string{"app": "web"}, map[string]string{"app": "db"}
	return []runtime.Object{
		web, web1, web2, other, other1, canary, db, agent, sweb, sweb1,
		revision(db, "StatefulSet", "db-1", dbLabels, `{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"name":"app","image":"app:1"}]}}}}`),
		revision(agent, "DaemonSet", "agent-1", map[string]string{"app": "agent"}, `{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"name":"app","image":"app:1"}]}}}}`),
		// Owned by other StatefulSet db in staging: not prod's.
		revision(statefulSet("staging", "db"), "StatefulSet", "db-1", dbLabels, `{}`),
		pod("prod", "web-1-a", "n1", webLabels, web1, "ReplicaSet"),
		pod("prod", "web-2-b", "n2", webLabels, web2, "ReplicaSet"),
		pod("prod", "debug", "", webLabels, nil, ""), // orphan: web adopts it
		pod("prod", "canary-x", "n3", webLabels, canary, "ReplicaSet"),
		pod("prod", "other-1-a", "n3", map[string]string{"app": "other"}, other1, "ReplicaSet"),
		pod("prod", "db-0", "n2", dbLabels, db, "StatefulSet"),
		pod("prod", "agent-x", "n1", map[string]string{"app": "agent"}, agent, "DaemonSet"),
		pod("staging", "web-1-a", "n4", webLabels, sweb1, "ReplicaSet"),
		node("n1"), node("n2"), node("n3"), node("n4"), node("n5"),
		pdb("prod", "web-pdb", matching(webLabels)),
		pdb("prod", "db-pdb", matching(dbLabels)),
		pdb("prod", "nothing", nil),
		pdb("prod", "unused", matching(map[string]string{"app": "gone"})),
		pdb("staging", "web-pdb", matching(webLabels)),
	}
}

func ids(s *snapshot.Snapshot) []string {
	var out []string
	add := func(kind string, m metav1.Object) {
		id := kind + " " + m.GetName()
		if m.GetNamespace() != "" {
			id = kind + " " + m.GetNamespace() + "/" + m.GetName()
		}
		out = append(out, id)
	}
	for _, o := range s.Deployments {
		add("Deployment", o)
	}
	for _, o := range s.ReplicaSets {
		add("ReplicaSet", o)
	}
	for _, o := range s.StatefulSets {
		add("StatefulSet", o)
	}
	for _, o := range s.DaemonSets {
		add("DaemonSet", o)
	}
	for _, o := range s.ControllerRevisions {
		add("ControllerRevision", o)
	}
	for _, o := range s.Pods {
		add("Pod", o)
	}
	for _, o := range s.Nodes {
		add("Node", o)
	}
	for _, o := range s.PDBs {
		add("PodDisruptionBudget", o)
	}
	return out
}

func fixedClock() time.Time { return clock }

func TestCaptureSelection(t *testing.T) {
	web := []string{"Deployment prod/web", "ReplicaSet prod/web-1", "ReplicaSet prod/web-2"}
	webPods := []string{"Pod prod/canary-x", "Pod prod/debug", "Pod prod/web-1-a", "Pod prod/web-2-b"}
	cases := []struct {
		name string
		opts Options
		want []string
	}{
		{
			name: "deployment by name: its ReplicaSets, owned and orphaned pods, their nodes, the PDB and the other pods it selects",
			opts: Options{Namespace: "prod", Workloads: []Ref{{Deployment, "web"}}},
			want: join(web, webPods, []string{"Node n1", "Node n2", "Node n3", "PodDisruptionBudget prod/web-pdb"}),
		},
		{
			name: "the same workload twice is captured once",
			opts: Options{Namespace: "prod", Workloads: []Ref{{Deployment, "web"}, {Deployment, "web"}}},
			want: join(web, webPods, []string{"Node n1", "Node n2", "Node n3", "PodDisruptionBudget prod/web-pdb"}),
		},
		{
			name: "statefulset: its revisions, not another namespace's",
			opts: Options{Namespace: "prod", Workloads: []Ref{{StatefulSet, "db"}}},
			want: []string{"StatefulSet prod/db", "ControllerRevision prod/db-1", "Pod prod/db-0", "Node n2", "PodDisruptionBudget prod/db-pdb"},
		},
		{
			name: "daemonset: every node, pods or not",
			opts: Options{Namespace: "prod", Workloads: []Ref{{DaemonSet, "agent"}}},
			want: []string{"DaemonSet prod/agent", "ControllerRevision prod/agent-1", "Pod prod/agent-x", "Node n1", "Node n2", "Node n3", "Node n4", "Node n5"},
		},
		{
			name: "namespace: every workload of it, none of another",
			opts: Options{Namespace: "prod"},
			want: []string{
				"Deployment prod/other", "Deployment prod/web", "ReplicaSet prod/other-1", "ReplicaSet prod/web-1", "ReplicaSet prod/web-2",
				"StatefulSet prod/db", "DaemonSet prod/agent", "ControllerRevision prod/agent-1", "ControllerRevision prod/db-1",
				"Pod prod/agent-x", "Pod prod/canary-x", "Pod prod/db-0", "Pod prod/debug", "Pod prod/other-1-a", "Pod prod/web-1-a", "Pod prod/web-2-b",
				"Node n1", "Node n2", "Node n3", "Node n4", "Node n5", "PodDisruptionBudget prod/db-pdb", "PodDisruptionBudget prod/web-pdb",
			},
		},
		{
			name: "selector picks workloads",
			opts: Options{Namespace: "prod", Selector: "tier=frontend"},
			want: join(web, webPods, []string{"Node n1", "Node n2", "Node n3", "PodDisruptionBudget prod/web-pdb"}),
		},
		{
			name: "all namespaces with a selector",
			opts: Options{AllNamespaces: true, Namespace: "ignored", Selector: "tier=frontend"},
			want: join([]string{"Deployment prod/web", "Deployment staging/web"},
				[]string{"ReplicaSet prod/web-1", "ReplicaSet prod/web-2", "ReplicaSet staging/web-1"},
				webPods, []string{"Pod staging/web-1-a", "Node n1", "Node n2", "Node n3", "Node n4", "PodDisruptionBudget prod/web-pdb", "PodDisruptionBudget staging/web-pdb"}),
		},
	}
	// The API server and an informer cache of the same cluster capture the same.
	sources := map[string]func(t *testing.T) Source{
		"api": func(*testing.T) Source { return APISource{Client: fake.NewClientset(cluster()...)} },
		"informers": func(t *testing.T) Source {
			f := informers.NewSharedInformerFactory(fake.NewClientset(cluster()...), 0)
			src := NewListerSource(f, f)
			f.Start(t.Context().Done())
			for typ, ok := range f.WaitForCacheSync(t.Context().Done()) {
				if !ok {
					t.Fatalf("cache of %v did not sync", typ)
				}
			}
			return src
		},
	}
	for source, newSource := range sources {
		for _, c := range cases {
			t.Run(source+"/"+c.name, func(t *testing.T) {
				c.opts.Now = fixedClock
				s, warnings, err := CaptureFrom(context.Background(), newSource(t), c.opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(warnings) > 0 {
					t.Errorf("warnings: %q", warnings)
				}
				if got := ids(s); !reflect.DeepEqual(got, c.want) {
					t.Errorf("captured\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
				}
				if !s.CapturedAt.Equal(clock) {
					t.Errorf("CapturedAt %v, want %v", s.CapturedAt, clock)
				}
			})
		}
	}
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	// Within a kind the snapshot is sorted by namespace and name.
	order := map[string]int{"Deployment": 0, "ReplicaSet": 1, "StatefulSet": 2, "DaemonSet": 3, "ControllerRevision": 4, "Pod": 5, "Node": 6, "PodDisruptionBudget": 7}
	sort.SliceStable(out, func(i, j int) bool {
		ki, _, _ := strings.Cut(out[i], " ")
		kj, _, _ := strings.Cut(out[j], " ")
		if order[ki] != order[kj] {
			return order[ki] < order[kj]
		}
		return out[i] < out[j]
	})
	return out
}

func TestCaptureErrors(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"deployment not found", Options{Namespace: "prod", Workloads: []Ref{{Deployment, "nope"}}}, `deployment "nope" not found in namespace "prod"`},
		{"statefulset in the wrong namespace", Options{Namespace: "staging", Workloads: []Ref{{StatefulSet, "db"}}}, `statefulset "db" not found in namespace "staging"`},
		{"empty namespace", Options{Namespace: "empty"}, `no Deployment, StatefulSet or DaemonSet found in namespace "empty"`},
		{"selector matches nothing", Options{AllNamespaces: true, Selector: "tier=none"}, `no Deployment, StatefulSet or DaemonSet found in any namespace matching selector "tier=none"`},
		{"names across namespaces", Options{AllNamespaces: true, Workloads: []Ref{{Deployment, "web"}}}, "drop --all-namespaces"},
		{"names and a selector", Options{Namespace: "prod", Selector: "a=b", Workloads: []Ref{{Deployment, "web"}}}, "cannot be combined"},
		{"bad selector", Options{Namespace: "prod", Selector: "a in (b"}, `--selector "a in (b"`},
		{"no namespace", Options{}, "no namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Capture(context.Background(), fake.NewClientset(cluster()...), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	good := map[string]Ref{
		"deployment/web": {Deployment, "web"}, "deploy/web": {Deployment, "web"}, "Deployments.apps/web": {Deployment, "web"},
		"sts/db": {StatefulSet, "db"}, "statefulset/db": {StatefulSet, "db"}, "ds/agent": {DaemonSet, "agent"}, "daemonsets/agent": {DaemonSet, "agent"},
	}
	for in, want := range good {
		if got, err := ParseRef(in); err != nil || got != want {
			t.Errorf("ParseRef(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"web", "deploy/", "job/x", "deploy/ns/web", "/web"} {
		if _, err := ParseRef(in); err == nil {
			t.Errorf("ParseRef(%q): want an error", in)
		}
	}
}

// Credentials that may not list Nodes still capture, with a warning.
func TestCaptureNodesForbidden(t *testing.T) {
	cs := fake.NewClientset(cluster()...)
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", fmt.Errorf("namespaced role"))
	})
	s, warnings, err := Capture(context.Background(), cs, Options{Namespace: "prod", Workloads: []Ref{{DaemonSet, "agent"}}, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 0 || len(warnings) != 1 || !strings.Contains(warnings[0], "nodes not captured") {
		t.Errorf("nodes %d, warnings %q", len(s.Nodes), warnings)
	}
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", fmt.Errorf("no"))
	})
	if _, _, err := Capture(context.Background(), cs, Options{Namespace: "prod", Workloads: []Ref{{DaemonSet, "agent"}}}); err == nil || !strings.Contains(err.Error(), `list pods in namespace "prod"`) {
		t.Errorf("a pod list that fails: %v", err)
	}
}

// Lists are read page by page.
func TestCapturePages(t *testing.T) {
	cs := fake.NewClientset(cluster()...)
	calls := 0
	cs.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		opts := a.(k8stesting.ListActionImpl).ListOptions
		if opts.Limit != pageSize {
			t.Errorf("limit %d, want %d", opts.Limit, pageSize)
		}
		if opts.Continue == "" {
			return true, &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: "page2"}, Items: []corev1.Node{*node("n1")}}, nil
		}
		return true, &corev1.NodeList{Items: []corev1.Node{*node("n2")}}, nil
	})
	s, _, err := Capture(context.Background(), cs, Options{Namespace: "prod", Workloads: []Ref{{DaemonSet, "agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(s.Nodes) != 2 {
		t.Errorf("%d calls, %d nodes; want 2, 2", calls, len(s.Nodes))
	}
}

func TestCaptureTime(t *testing.T) {
	objs := cluster()
	later := metav1.NewTime(clock.Add(90 * time.Second))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == "prod" && p.Name == "web-1-a" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: later}}
		}
	}
	cases := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"the clock, to the second", clock.Add(10*time.Minute + 300*time.Millisecond), clock.Add(10 * time.Minute)},
		{"never before a time the objects record", clock, later.Time},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, err := Capture(context.Background(), fake.NewClientset(objs...), Options{Namespace: "prod", Now: func() time.Time { return c.now }})
			if err != nil {
				t.Fatal(err)
			}
			if !s.CapturedAt.Equal(c.want) {
				t.Fatalf("CapturedAt %v, want %v", s.CapturedAt, c.want)
			}
			data, err := Marshal(s, FormatYAML)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(snapshot.AnnCapturedAt+": \""+c.want.Format(time.RFC3339)+"\"")) {
				t.Errorf("no %s annotation in\n%.300s", snapshot.AnnCapturedAt, data)
			}
			back, _, err := snapshot.Decode("captured.yaml", data)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Latest().Equal(c.want) {
				t.Errorf("decoded snapshot time %v, want %v", back.Latest(), c.want)
			}
		})
	}
}

// The same cluster gives the same bytes, whatever order the API returns.
func TestMarshalDeterministic(t *testing.T) {
	for _, format := range []string{FormatYAML, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			var first []byte
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < 4; i++ {
				objs := cluster()
				rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
				s, _, err := Capture(context.Background(), fake.NewClientset(objs...), Options{AllNamespaces: true, Now: fixedClock})
				if err != nil {
					t.Fatal(err)
				}
				// A snapshot in any order marshals the same.
				rng.Shuffle(len(s.Pods), func(i, j int) { s.Pods[i], s.Pods[j] = s.Pods[j], s.Pods[i] })
				data, err := Marshal(s, format)
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = data
					continue
				}
				if !bytes.Equal(first, data) {
					t.Fatalf("capture %d differs from the first:\n%s\n---\n%s", i, first, data)
				}
			}
			back, warnings, err := snapshot.Decode("captured."+format, first)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("decode: %v %q", err, warnings)
			}
			if got := len(ids(back)); got != 27 {
				t.Errorf("decoded %d objects, want 27", got)
			}
		})
	}
}

func TestMarshalItems(t *testing.T) {
	d := deployment("prod", "web", nil)
	d.Annotations = map[string]string{LastAppliedAnnotation: `{"secret":"x"}`, "keep": "me"}
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	n := node("n1")
	n.Annotations = map[string]string{LastAppliedAnnotation: "{}"}
	s := &snapshot.Snapshot{Deployments: []*appsv1.Deployment{d}, Nodes: []*corev1.Node{n}, CapturedAt: clock}
	data, err := Marshal(s, FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n", "\n- apiVersion: v1\n  kind: Node\n", "kind: List\n", "keep: me", "resourceVersion: \"7\"", "uid: uid-prod-web", "creationTimestamp: \"2026-02-01T09:00:00Z\""} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, gone := range []string{"managedFields", "last-applied", "huge:1", "annotations: {}"} {
		if strings.Contains(text, gone) {
			t.Errorf("output holds %q:\n%s", gone, text)
		}
	}
	if d.Kind != "" || d.ManagedFields == nil || len(n.Status.Images) == 0 {
		t.Error("Marshal modified its input")
	}
	if _, err := Marshal(s, "table"); err == nil {
		t.Error("format table: want an error")
	}
}

func TestRedaction(t *testing.T) {
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	secretRef := corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}}
	sts := statefulSet("prod", "db")
	sts.Spec.Template.Spec.Containers[0].Env = append(env("PASSWORD", "hunter2", "MODE", "fast", "EMPTY", ""), secretRef)
	sts.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1", Env: env("PASSWORD", "hunter2")}}
	p := pod("prod", "db-0", "n1", nil, sts, "StatefulSet")
	p.Spec.Containers[0].Env = env("PASSWORD", "hunter2", "MODE", "slow")
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Env: env("DEBUG_KEY", "s3cr3t-debug")}}}
	cr := revision(sts, "StatefulSet", "db-1", nil,
		`{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"name":"app","image":"app:1","env":[{"name":"PASSWORD","value":"hunter2"},{"name":"MODE","value":"fast"}],"resources":{"limits":{"cpu":12345678901234567890}}}],"initContainers":[{"name":"init","env":[{"name":"X","value":"<&>"}]}]}}}}`)
	d := deployment("prod", "web", nil)
	d.Spec.Template.Spec.Containers[0].Env = env("API_KEY", "sk-live-123")
	rs := replicaSet(d, "web-1")
	rs.Spec.Template.Spec.Containers[0].Env = env("API_KEY", "sk-live-123")
	ds := daemonSet("prod", "agent")
	ds.Spec.Template.Spec.Containers[0].Env = env("API_KEY", "sk-live-456")
	s := &snapshot.Snapshot{StatefulSets: []*appsv1.StatefulSet{sts}, Pods: []*corev1.Pod{p}, ControllerRevisions: []*appsv1.ControllerRevision{cr},
		Deployments: []*appsv1.Deployment{d}, ReplicaSets: []*appsv1.ReplicaSet{rs}, DaemonSets: []*appsv1.DaemonSet{ds}, CapturedAt: clock}

	for _, format := range []string{FormatYAML, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			data, err := Marshal(s, format)
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{"hunter2", "sk-live-123", "sk-live-456", "fast", "slow", "s3cr3t-debug", "<&>"} {
				if bytes.Contains(data, []byte(secret)) {
					t.Errorf("output holds the value %q", secret)
				}
			}
			back, _, err := snapshot.Decode("captured", data)
			if err != nil {
				t.Fatal(err)
			}
			envOf := func(cs []corev1.Container) map[string]corev1.EnvVar {
				m := map[string]corev1.EnvVar{}
				for _, c := range cs {
					for _, e := range c.Env {
						m[c.Name+"."+e.Name] = e
					}
				}
				return m
			}
			tmpl := envOf(back.StatefulSets[0].Spec.Template.Spec.Containers)
			init := envOf(back.StatefulSets[0].Spec.Template.Spec.InitContainers)
			podEnv := envOf(back.Pods[0].Spec.Containers)
			cases := []struct {
				name string
				got  string
				want string
			}{
				{"template value", tmpl["app.PASSWORD"].Value, Redact("hunter2")},
				{"init container value", init["init.PASSWORD"].Value, Redact("hunter2")},
				{"equal values stay equal across objects", podEnv["app.PASSWORD"].Value, tmpl["app.PASSWORD"].Value},
				{"empty stays empty", tmpl["app.EMPTY"].Value, ""},
				{"ephemeral container", back.Pods[0].Spec.EphemeralContainers[0].Env[0].Value, Redact("s3cr3t-debug")},
				{"deployment and its ReplicaSet agree", back.Deployments[0].Spec.Template.Spec.Containers[0].Env[0].Value, back.ReplicaSets[0].Spec.Template.Spec.Containers[0].Env[0].Value},
			}
			for _, c := range cases {
				if c.got != c.want {
					t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
				}
			}
			if podEnv["app.MODE"].Value == tmpl["app.MODE"].Value {
				t.Error("different values became equal")
			}
			if back.DaemonSets[0].Spec.Template.Spec.Containers[0].Env[0].Value == back.Deployments[0].Spec.Template.Spec.Containers[0].Env[0].Value {
				t.Error("different values across objects became equal")
			}
			if !strings.HasPrefix(tmpl["app.MODE"].Value, RedactedPrefix) || len(tmpl["app.MODE"].Value) != len(RedactedPrefix)+12 {
				t.Errorf("redacted form %q", tmpl["app.MODE"].Value)
			}
			ref := tmpl["app.TOKEN"]
			if ref.Value != "" || ref.ValueFrom == nil || ref.ValueFrom.SecretKeyRef == nil || ref.ValueFrom.SecretKeyRef.Name != "creds" {
				t.Errorf("valueFrom not kept: %+v", ref)
			}
			// The revision's template is redacted as the workload's is, so
			// the planner sees the same change (MODE) and no other.
			raw := string(back.ControllerRevisions[0].Data.Raw)
			for _, want := range []string{Redact("hunter2"), Redact("fast"), Redact("<&>"), "12345678901234567890", `"$patch":"replace"`} {
				if !strings.Contains(raw, want) {
					t.Errorf("revision data lacks %q: %s", want, raw)
				}
			}
		})
	}
	if sts.Spec.Template.Spec.Containers[0].Env[0].Value != "hunter2" || !strings.Contains(string(cr.Data.Raw), "hunter2") {
		t.Error("Marshal modified its input")
	}
}
