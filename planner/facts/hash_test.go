package facts

import (
	"encoding/json"
	"hash/fnv"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/dump"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// Reference values: k8s-rollout-semantics.md §1.5.1 (computed on v1.36.3).
func TestComputeHashMatchesUpstream(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	nginx := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.25"}}},
	}
	cases := []struct {
		name  string
		tmpl  corev1.PodTemplateSpec
		count *int32
		want  string
	}{
		{"empty, nil count", corev1.PodTemplateSpec{}, nil, "85748b7f68"},
		{"empty, count 0", corev1.PodTemplateSpec{}, i32(0), "777dfcd544"},
		{"empty, count 1", corev1.PodTemplateSpec{}, i32(1), "b54bc767c"},
		{"nginx, nil count", nginx, nil, "6f5c8fdd6d"},
		{"nginx, count 0", nginx, i32(0), "8f5bb6bbd"},
		{"nginx, count 1", nginx, i32(1), "649d769545"},
		{"nginx, count 2", nginx, i32(2), "7b68fdc978"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ComputeHash(&c.tmpl, c.count, kubeversion.V1_36); got != c.want {
				t.Errorf("ComputeHash = %s, want %s", got, c.want)
			}
		})
	}
}

// oracleHashes: upstream controller.ComputeHash of oracleTemplates for
// collision counts nil, 0, 1 and 2, per Kubernetes minor. Computed by a
// throwaway program (not in the repository) that decodes each JSON with
// the k8s.io/api of the release, k8s.io/api v0.35.4 / v0.36.3 / v0.37.2
// (go-spew v1.1.2-0.20180830191138-d8f796af33cc, as in Kubernetes'
// go.mod), and hashes it as pkg/controller ComputeHash does:
// fnv.New32a over dump.ForHash(template) (k8s.io/apimachinery/pkg/util/dump
// for v0.35, k8s.io/utils/dump after), then the count as 8 bytes, encoded
// with rand.SafeEncodeString. The v1.36 values of empty and nginx are those
// of reference §1.5.1, nginx-defaulted is its SetObjectDefaults_Deployment
// row.
var oracleHashes = map[string]map[kubeversion.Version][4]string{
	"empty": {
		kubeversion.V1_35: {"7dbfdbdbc9", "6f5cddcfc5", "579566997d", "84cf974845"},
		kubeversion.V1_36: {"85748b7f68", "777dfcd544", "b54bc767c", "65cc779bc4"},
		kubeversion.V1_37: {"54f4c57dcb", "98789f664", "6554565b97", "7bcbcd84db"},
	},
	"nginx": {
		kubeversion.V1_35: {"5996d6fff9", "864955fb6c", "6b7d89c5f8", "54c5cf8cb5"},
		kubeversion.V1_36: {"6f5c8fdd6d", "8f5bb6bbd", "649d769545", "7b68fdc978"},
		kubeversion.V1_37: {"6f55975848", "6c45b6f5fb", "86bd6f5b6f", "597ffdbcbb"},
	},
	"nginx-defaulted": {
		kubeversion.V1_35: {"788454b977", "6f9bdb479c", "57f45fcf68", "5cf965cf6c"},
		kubeversion.V1_36: {"7cd5cff77d", "79d5b7ddf4", "d9777846c", "88d758468"},
		kubeversion.V1_37: {"6d9676f5c4", "86d9965bd6", "599c65bd5f", "55965fbd5b"},
	},
	"volumes-probes": {
		kubeversion.V1_35: {"7f7f57bcbc", "59b6999dc5", "86f4db4c78", "6c685fd745"},
		kubeversion.V1_36: {"55db4cfb4", "5db595d5bd", "786d5d4b45", "bffdc9c7d"},
		kubeversion.V1_37: {"69544f4886", "b66d98598", "65df95b9dc", "5cd88fb9d8"},
	},
	"volumes-probes-v037-fields": {
		kubeversion.V1_35: {"7f7f57bcbc", "59b6999dc5", "86f4db4c78", "6c685fd745"},
		kubeversion.V1_36: {"55db4cfb4", "5db595d5bd", "786d5d4b45", "bffdc9c7d"},
		kubeversion.V1_37: {"74cc746568", "6b567f4568", "85cf49699c", "5894c8cbf8"},
	},
	"volumes-probes-new-fields": {
		kubeversion.V1_35: {"7f7f57bcbc", "59b6999dc5", "86f4db4c78", "6c685fd745"},
		kubeversion.V1_36: {"5b84f8f6f4", "7bc85b5958", "f89d9bb95", "984d7bb8d"},
		kubeversion.V1_37: {"7cc86ccd8d", "57cc497b9b", "6f87c5b4df", "65985566b"},
	},
}

func decodeTemplate(t testing.TB, name, js string) *corev1.PodTemplateSpec {
	t.Helper()
	var tmpl corev1.PodTemplateSpec
	if err := json.Unmarshal([]byte(js), &tmpl); err != nil {
		t.Fatalf("template %s: %v", name, err)
	}
	return &tmpl
}

func oracleTemplate(t testing.TB, name string) *corev1.PodTemplateSpec {
	t.Helper()
	for _, o := range oracleTemplates {
		if o.name == name {
			return decodeTemplate(t, name, o.json)
		}
	}
	t.Fatalf("no oracle template %s", name)
	return nil
}

func TestComputeHashMatchesOracle(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	counts := [4]*int32{nil, i32(0), i32(1), i32(2)}
	if len(oracleHashes) != len(oracleTemplates) {
		t.Fatalf("%d templates, %d hash rows", len(oracleTemplates), len(oracleHashes))
	}
	for _, o := range oracleTemplates {
		tmpl := decodeTemplate(t, o.name, o.json)
		for _, v := range kubeversion.Supported {
			want, ok := oracleHashes[o.name][v]
			if !ok {
				t.Fatalf("%s: no %s hashes", o.name, v)
			}
			for i, count := range counts {
				if got := ComputeHash(tmpl, count, v); got != want[i] {
					t.Errorf("%s %s count %d: ComputeHash = %s, want %s", o.name, v, i-1, got, want[i])
				}
			}
		}
	}
}

// Each version's struct layout changes the hash of every template.
func TestComputeHashDiffersByVersion(t *testing.T) {
	for name, byVersion := range oracleHashes {
		if byVersion[kubeversion.V1_36][0] == byVersion[kubeversion.V1_37][0] {
			t.Errorf("%s: v1.36 and v1.37 hash alike", name)
		}
		if byVersion[kubeversion.V1_35][0] == byVersion[kubeversion.V1_36][0] {
			t.Errorf("%s: v1.35 and v1.36 hash alike", name)
		}
	}
	tmpl := oracleTemplate(t, "nginx")
	if got, want := ComputeHash(tmpl, nil, kubeversion.Version{}), ComputeHash(tmpl, nil, kubeversion.Newest); got != want {
		t.Errorf("zero version hashes %s, Newest %s", got, want)
	}
}

// Fields the older structs lack do not reach those versions' hashes: a
// template that sets them hashes as the template without them.
func TestComputeHashIgnoresNewerFields(t *testing.T) {
	cases := []struct {
		with, without string
		versions      []kubeversion.Version
	}{
		{"volumes-probes-v037-fields", "volumes-probes", []kubeversion.Version{kubeversion.V1_35, kubeversion.V1_36}},
		{"volumes-probes-new-fields", "volumes-probes", []kubeversion.Version{kubeversion.V1_35}},
	}
	for _, c := range cases {
		with, without := oracleTemplate(t, c.with), oracleTemplate(t, c.without)
		for _, v := range c.versions {
			if a, b := ComputeHash(with, nil, v), ComputeHash(without, nil, v); a != b {
				t.Errorf("%s: %s hashes %s, %s hashes %s", v, c.with, a, c.without, b)
			}
		}
		if a, b := ComputeHash(with, nil, kubeversion.V1_37), ComputeHash(without, nil, kubeversion.V1_37); a == b {
			t.Errorf("v1.37: %s and %s both hash %s", c.with, c.without, a)
		}
	}
	// Each new field on its own, on random templates.
	for i, tmpl := range randomTemplates(t, 60, 7) {
		for _, v := range []kubeversion.Version{kubeversion.V1_35, kubeversion.V1_36} {
			stripped := tmpl.DeepCopy()
			clearFields(reflect.ValueOf(stripped).Elem(), newerFields[v])
			if a, b := ComputeHash(tmpl, nil, v), ComputeHash(stripped, nil, v); a != b {
				t.Errorf("random template %d, %s: hashes %s, without the newer fields %s", i, v, a, b)
			}
		}
	}
}

// Build names the ReplicaSet and ControllerRevision the planned-for
// version's controllers will create; a DaemonSet revision of that name
// with another template is a collision, hashed again with count 1.
func TestBuildNamesRevisionsPerVersion(t *testing.T) {
	tmpl := *oracleTemplate(t, "nginx")
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}
	owner := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	for _, v := range kubeversion.Supported {
		want := oracleHashes["nginx"][v] // nil, 0, 1, 2
		t.Run(v.String(), func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "d"},
				Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}
			fresh := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fresh", UID: "f"},
				Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent", UID: "a"},
				Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
			old := ds.DeepCopy()
			old.Spec.Template.Spec.Containers[0].Image = "nginx:1.24"
			patch, err := templatePatch(old)
			if err != nil {
				t.Fatal(err)
			}
			colliding := &appsv1.ControllerRevision{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent-" + want[0], OwnerReferences: owner("DaemonSet", "agent", "a"),
					Labels: map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: want[0]}},
				Data: runtime.RawExtension{Raw: patch}, Revision: 1,
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent-x", OwnerReferences: owner("DaemonSet", "agent", "a"),
					Labels: map[string]string{"app": "nginx", appsv1.DefaultDaemonSetUniqueLabelKey: want[0]}},
				Spec: corev1.PodSpec{NodeName: "n1", Containers: old.Spec.Template.Spec.Containers},
			}
			snap := &snapshot.Snapshot{Deployments: []*appsv1.Deployment{d}, DaemonSets: []*appsv1.DaemonSet{ds, fresh},
				ControllerRevisions: []*appsv1.ControllerRevision{colliding}, Pods: []*corev1.Pod{pod}}
			rs, err := Build(snap, Options{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), KubernetesVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*Rollout{}
			for _, r := range rs {
				got[r.Workload.Name] = r
			}
			for name, rev := range map[string]string{"web": "web-" + want[0], "fresh": "fresh-" + want[0], "agent": "agent-" + want[2]} {
				if r := got[name]; r == nil || r.Workload.UpdateRevision != rev {
					t.Errorf("%s: update revision %v, want %s", name, r, rev)
				}
			}
			if r := got["agent"]; r != nil && (len(r.Pods) != 1 || r.Pods[0].Updated || r.Pods[0].Revision != colliding.Name) {
				t.Errorf("agent pods %+v: want agent-x on revision %s, not updated", r.Pods, colliding.Name)
			}
		})
	}
}

func BenchmarkComputeHash(b *testing.B) {
	tmpl := oracleTemplate(b, "volumes-probes-new-fields")
	count := int32(1)
	for _, v := range []kubeversion.Version{kubeversion.V1_36, kubeversion.V1_37} {
		b.Run(v.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ComputeHash(tmpl, &count, v)
			}
		})
	}
	b.Run("dump.ForHash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := fnv.New32a()
			h.Write([]byte(dump.ForHash(*tmpl)))
		}
	})
}

// oracleTemplates: pod templates as the apiserver hands them to a
// controller, in JSON so that each k8s.io/api version decodes them with
// its own structs (and drops the fields it lacks). The oracle program of
// oracleHashes holds the same list.
var oracleTemplates = []struct{ name, json string }{
	{"empty", `{}`},
	{"nginx", `{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.25"}]}}`},
	{"nginx-defaulted", `{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.25","imagePullPolicy":"IfNotPresent","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}`},
	{"volumes-probes", `{
 "metadata": {"labels": {"app": "web", "tier": "frontend"}, "annotations": {"z": "last", "b": "x", "example.com/cfg": "v2"}},
 "spec": {
  "volumes": [
   {"name": "cm", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p", "mode": 256}], "defaultMode": 420, "optional": true}},
   {"name": "sec", "secret": {"secretName": "s", "items": [{"key": "k", "path": "p"}], "defaultMode": 256}},
   {"name": "dapi", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}}, {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}], "defaultMode": 420}},
   {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
   {"name": "proj", "projected": {"defaultMode": 420, "sources": [
     {"configMap": {"name": "c2", "items": [{"key": "a", "path": "a"}]}},
     {"secret": {"name": "s2"}},
     {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
     {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token"}},
     {"clusterTrustBundle": {"signerName": "example.com/signer", "path": "ca.pem"}},
     {"podCertificate": {"signerName": "example.com/pc", "keyType": "ED25519", "credentialBundlePath": "creds.pem", "userAnnotations": {"b": "2", "a": "1"}}}
   ]}}
  ],
  "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"], "restartPolicy": "Always",
    "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}}}],
  "containers": [{"name": "app", "image": "registry.example.com/app:v2",
    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi", "ephemeral-storage": "1Gi"}},
    "volumeMounts": [{"name": "cm", "mountPath": "/etc/cfg", "readOnly": true}, {"name": "scratch", "mountPath": "/scratch"}],
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP", "httpHeaders": [{"name": "X", "value": "y"}]}, "initialDelaySeconds": 5, "periodSeconds": 10},
    "readinessProbe": {"grpc": {"port": 9090, "service": "ready"}},
    "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30},
    "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": 8080}}}}],
  "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
  "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
  "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
  "terminationGracePeriodSeconds": 30
 }
}`},
	// volumes-probes with every field k8s.io/api v0.37 added set: v0.36
	// and v0.35 structs drop them, so for v1.36 and v1.35 it hashes as
	// volumes-probes does.
	{"volumes-probes-v037-fields", `{
 "metadata": {"labels": {"app": "web", "tier": "frontend"}, "annotations": {"z": "last", "b": "x", "example.com/cfg": "v2"}},
 "spec": {
  "volumes": [
   {"name": "cm", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p", "mode": 256, "user": 1000}], "defaultMode": 420, "defaultUser": 1000, "optional": true}},
   {"name": "sec", "secret": {"secretName": "s", "items": [{"key": "k", "path": "p"}], "defaultMode": 256, "defaultUser": 2000}},
   {"name": "dapi", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}, "user": 3000}, {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}], "defaultMode": 420, "defaultUser": 3000}},
   {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi", "mode": 448}},
   {"name": "proj", "projected": {"defaultMode": 420, "defaultUser": 4000, "sources": [
     {"configMap": {"name": "c2", "items": [{"key": "a", "path": "a", "user": 5}]}},
     {"secret": {"name": "s2"}},
     {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "user": 6}]}},
     {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token", "user": 7}},
     {"clusterTrustBundle": {"signerName": "example.com/signer", "path": "ca.pem", "user": 8}},
     {"podCertificate": {"signerName": "example.com/pc", "keyType": "ED25519", "credentialBundlePath": "creds.pem", "userAnnotations": {"b": "2", "a": "1"}, "user": 9}}
   ]}}
  ],
  "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"], "restartPolicy": "Always",
    "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}}}],
  "containers": [{"name": "app", "image": "registry.example.com/app:v2",
    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi", "ephemeral-storage": "1Gi"}},
    "volumeMounts": [{"name": "cm", "mountPath": "/etc/cfg", "readOnly": true}, {"name": "scratch", "mountPath": "/scratch", "bindMountOptions": ["nosuid", "nodev"]}],
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP", "httpHeaders": [{"name": "X", "value": "y"}], "protocol": "HTTP2"}, "initialDelaySeconds": 5, "periodSeconds": 10},
    "readinessProbe": {"grpc": {"port": 9090, "service": "ready", "mode": "TLS"}},
    "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30},
    "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": 8080, "protocol": "HTTP1"}}}}],
  "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
  "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
  "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
  "terminationGracePeriodSeconds": 30,
  "evictionResponders": [{"name": "acme.io/drain", "priority": 10}]
 }
}`},
	// volumes-probes with the v0.37 fields and v0.36
	// PodSpec.SchedulingGroup set: for v1.35 it hashes as volumes-probes does.
	{"volumes-probes-new-fields", `{
 "metadata": {"labels": {"app": "web", "tier": "frontend"}, "annotations": {"z": "last", "b": "x", "example.com/cfg": "v2"}},
 "spec": {
  "volumes": [
   {"name": "cm", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p", "mode": 256, "user": 1000}], "defaultMode": 420, "defaultUser": 1000, "optional": true}},
   {"name": "sec", "secret": {"secretName": "s", "items": [{"key": "k", "path": "p"}], "defaultMode": 256, "defaultUser": 2000}},
   {"name": "dapi", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}, "user": 3000}, {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}], "defaultMode": 420, "defaultUser": 3000}},
   {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi", "mode": 448}},
   {"name": "proj", "projected": {"defaultMode": 420, "defaultUser": 4000, "sources": [
     {"configMap": {"name": "c2", "items": [{"key": "a", "path": "a", "user": 5}]}},
     {"secret": {"name": "s2"}},
     {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "user": 6}]}},
     {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token", "user": 7}},
     {"clusterTrustBundle": {"signerName": "example.com/signer", "path": "ca.pem", "user": 8}},
     {"podCertificate": {"signerName": "example.com/pc", "keyType": "ED25519", "credentialBundlePath": "creds.pem", "userAnnotations": {"b": "2", "a": "1"}, "user": 9}}
   ]}}
  ],
  "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"], "restartPolicy": "Always",
    "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}}}],
  "containers": [{"name": "app", "image": "registry.example.com/app:v2",
    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi", "ephemeral-storage": "1Gi"}},
    "volumeMounts": [{"name": "cm", "mountPath": "/etc/cfg", "readOnly": true}, {"name": "scratch", "mountPath": "/scratch", "bindMountOptions": ["nosuid", "nodev"]}],
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP", "httpHeaders": [{"name": "X", "value": "y"}], "protocol": "HTTP2"}, "initialDelaySeconds": 5, "periodSeconds": 10},
    "readinessProbe": {"grpc": {"port": 9090, "service": "ready", "mode": "TLS"}},
    "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30},
    "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": 8080, "protocol": "HTTP1"}}}}],
  "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
  "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
  "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
  "terminationGracePeriodSeconds": 30,
  "schedulingGroup": {"podGroupName": "g1"},
  "evictionResponders": [{"name": "acme.io/drain", "priority": 10}]
 }
}`},
}
