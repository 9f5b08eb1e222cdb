package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rollplan/rollplan/planner/change"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/test/harness"
)

// defaultingCases: manifests as people write them, each field a defaulter
// touches somewhere: probes of every handler, ports, env fieldRefs,
// resources to round, init containers (a sidecar among them), every
// volume source with a default, volume claim templates, each kind's
// strategy written or not.
var defaultingCases = map[string]string{
	"deployment-full": `apiVersion: apps/v1
kind: Deployment
metadata: {name: full, labels: {app: full}}
spec:
  selector: {matchLabels: {app: full}}
  template:
    metadata: {labels: {app: full}, annotations: {a: b}}
    spec:
      serviceAccount: default
      initContainers:
      - {name: init, image: busybox, command: [sh, -c, "true"]}
      - name: sidecar
        image: "example.com/proxy:latest"
        restartPolicy: Always
        startupProbe: {tcpSocket: {port: 15000}}
      containers:
      - name: app
        image: "example.com/app:v1"
        ports: [{containerPort: 8080, name: http}, {containerPort: 8443, protocol: UDP}]
        env:
        - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
        resources: {requests: {cpu: "0.25", memory: "0.5Gi"}, limits: {cpu: "0.5001", memory: 1Gi}}
        livenessProbe: {httpGet: {port: http}}
        readinessProbe: {grpc: {port: 9090}, periodSeconds: 3}
        startupProbe: {exec: {command: ["true"]}, failureThreshold: 30}
        lifecycle: {preStop: {httpGet: {port: 8080, path: /quit}}, postStart: {exec: {command: ["true"]}}}
      - {name: digest, image: "example.com/tool@sha256:0123456789012345678901234567890123456789012345678901234567890123"}
      volumes:
      - {name: scratch}
      - {name: mem, emptyDir: {medium: Memory, sizeLimit: 64Mi}}
      - {name: conf, configMap: {name: c, items: [{key: k, path: p}]}}
      - {name: sec, secret: {secretName: s, optional: true}}
      - {name: host, hostPath: {path: /var/log}}
      - {name: info, downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}}
      - name: token
        projected:
          sources:
          - serviceAccountToken: {path: token, audience: api}
          - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
          - configMap: {name: c}
      - name: eph
        ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}
      - {name: iscsi, iscsi: {targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage", lun: 0}}
`,
	"deployment-recreate": `apiVersion: apps/v1
kind: Deployment
metadata: {name: recreate}
spec:
  replicas: 3
  strategy: {type: Recreate}
  selector: {matchLabels: {app: recreate}}
  template:
    metadata: {labels: {app: recreate}}
    spec:
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      containers: [{name: app, image: "example.com/app", ports: [{containerPort: 80}]}]
`,
	"statefulset-claims": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: "1.5Gi"}}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 10
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
      containers:
      - name: db
        image: "example.com/db:16"
        volumeMounts: [{name: data, mountPath: /data}]
        readinessProbe: {tcpSocket: {port: 5432}, initialDelaySeconds: 5}
        resources: {requests: {cpu: 100m, memory: 256Mi}}
`,
	"statefulset-rollingupdate-explicit": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  podManagementPolicy: Parallel
  updateStrategy: {type: RollingUpdate}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "example.com/web:1"}]}
`,
	"statefulset-partition": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: part}
spec:
  updateStrategy: {rollingUpdate: {partition: 2}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  selector: {matchLabels: {app: part}}
  template:
    metadata: {labels: {app: part}}
    spec: {containers: [{name: c, image: "example.com/c:1"}]}
`,
	"daemonset-default": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {no-such-node: "true"}
      tolerations: [{operator: Exists}]
      containers:
      - name: agent
        image: "example.com/agent:2"
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
        livenessProbe: {httpGet: {port: 9100, scheme: HTTPS}}
      volumes: [{name: root, hostPath: {path: /, type: Directory}}]
`,
	"daemonset-surge": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: surge}
spec:
  updateStrategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: surge}}
  template:
    metadata: {labels: {app: surge}}
    spec:
      nodeSelector: {no-such-node: "true"}
      containers: [{name: c, image: "example.com/c:1", resources: {limits: {cpu: 1500m, memory: "1e9"}}}]
`,
}

// TestChangeDefaultsMatchServer: every manifest of defaultingCases, sent
// through the real API server's server-side dry-run apply, comes back as
// change.Default makes it locally, whole (server-set metadata aside: uid,
// resourceVersion, creationTimestamp, generation, managedFields, and the
// DaemonSet template generation the registry sets on create).
func TestChangeDefaultsMatchServer(t *testing.T) {
	e := newEnv(t, 1)
	v, err := kubeversion.Parse(harness.Version)
	if err != nil {
		t.Fatal(err)
	}
	gates := kubeversion.Gates(v)
	for name, manifest := range defaultingCases {
		t.Run(name, func(t *testing.T) {
			local, _, err := change.Parse(name+".yaml", []byte(manifest), e.ns)
			if err != nil {
				t.Fatal(err)
			}
			server, _, err := change.Parse(name+".yaml", []byte(manifest), e.ns)
			if err != nil {
				t.Fatal(err)
			}
			if err := change.Default(local[0], gates); err != nil {
				t.Fatal(err)
			}
			if err := change.DryRun(e.ctx, e.client, server); err != nil {
				t.Fatal(err)
			}
			want, got := comparable(t, server[0].Obj), comparable(t, local[0].Obj)
			if want != got {
				t.Errorf("local defaulting differs from the API server's (%s):\n%s", harness.Version, lineDiff(want, got))
			}
		})
	}
	// The objects were never stored.
	list, err := e.client.AppsV1().Deployments(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("dry-run stored %d Deployments (%v)", len(list.Items), err)
	}
}

// comparable is the object as indented JSON without what the server sets
// beyond defaulting.
func comparable(t *testing.T, obj metav1.Object) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	meta, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
		delete(meta, k)
	}
	if ann, ok := meta["annotations"].(map[string]any); ok {
		delete(ann, "deprecated.daemonset.template.generation")
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  server: " + a + "\n  local:  " + c + "\n")
			if b.Len() > 4000 {
				break
			}
		}
	}
	return b.String()
}

// The workloads of TestChangePreviewRevision, as applied first and as a
// pull request changes them (IMAGE and EXTRA are replaced).
const previewManifests = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: "example.com/web:IMAGE"
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {port: 8080}}
        resources: {requests: {cpu: "0.1", memory: 64Mi}}EXTRA
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {"e2e.rollplan.dev/env": NAMESPACE}
      containers:
      - name: agent
        image: "example.com/agent:IMAGE"
        livenessProbe: {tcpSocket: {port: 9100}}EXTRA
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 4
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      volumes: [{name: conf, configMap: {name: api}}]
      containers:
      - name: api
        image: "example.com/api:IMAGE"
        volumeMounts: [{name: conf, mountPath: /etc/api}]EXTRA
`

// TestChangePreviewRevision previews a change with plan --change, from
// files against a snapshot of the cluster and live through a server-side
// dry-run, then applies the change for real: the revision each controller
// creates (the StatefulSet's and DaemonSet's ControllerRevision, the
// Deployment's new ReplicaSet and its pod-template-hash) is the plan's
// toRevision. A manifest the API server refuses fails the live preview,
// naming the object and the server's message.
func TestChangePreviewRevision(t *testing.T) {
	e := newEnv(t, 2)
	dir := t.TempDir()
	manifest := func(image, extra string) string {
		s := strings.ReplaceAll(previewManifests, "IMAGE", image)
		s = strings.ReplaceAll(s, "EXTRA", extra)
		return strings.ReplaceAll(s, "NAMESPACE", e.ns)
	}
	base, proposed := filepath.Join(dir, "base.yaml"), filepath.Join(dir, "change")
	if err := os.WriteFile(base, []byte(manifest("v1", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(proposed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proposed, "workloads.yaml"), []byte(manifest("v2", "\n        env: [{name: MODE, value: blue}]")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.kubectl("apply", "--server-side", "-f", base)
	e.waitWorkloads("rolled out at v1")

	snap := filepath.Join(dir, "snap.yaml")
	e.cli(0, "snapshot", "--output-file", snap)
	fromFiles := e.planRevisions(e.planCLI(0, "plan", "-f", snap, "--change", proposed, "-n", e.ns, "-o", "json"))
	live := e.planRevisions(e.cli(0, "plan", "--change", proposed, "-o", "json"))
	t.Logf("toRevision from files %v, live %v", fromFiles, live)
	for _, id := range []string{"StatefulSet/web", "DaemonSet/agent", "Deployment/api"} {
		if fromFiles[id] == "" || fromFiles[id] != live[id] {
			t.Errorf("%s: toRevision %q from files, %q live: want one name", id, fromFiles[id], live[id])
		}
	}
	// The live preview changed nothing.
	if img := e.deployment("api").Spec.Template.Spec.Containers[0].Image; img != "example.com/api:v1" {
		t.Fatalf("the live preview changed the Deployment's image to %s", img)
	}

	e.kubectl("apply", "--server-side", "-f", proposed)
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		set, err := e.client.AppsV1().StatefulSets(e.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || set.Status.ObservedGeneration != set.Generation {
			return false, nil
		}
		revs, err := e.client.AppsV1().ControllerRevisions(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return len(revs.Items) >= 4 && len(rss.Items) >= 2, nil
	})
	if err != nil {
		t.Fatalf("the controllers did not create the new revisions: %v", err)
	}
	set, err := e.client.AppsV1().StatefulSets(e.ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if set.Status.UpdateRevision != live["StatefulSet/web"] {
		t.Errorf("StatefulSet web: the controller's update revision is %s, the plan said %s", set.Status.UpdateRevision, live["StatefulSet/web"])
	}
	revs, _ := e.client.AppsV1().ControllerRevisions(e.ns).List(e.ctx, metav1.ListOptions{})
	names := map[string]bool{}
	for _, r := range revs.Items {
		names[r.Name] = true
	}
	for _, id := range []string{"StatefulSet/web", "DaemonSet/agent"} {
		if !names[live[id]] {
			t.Errorf("%s: no ControllerRevision %s; the controllers created %v", id, live[id], names)
		}
	}
	rss, _ := e.client.AppsV1().ReplicaSets(e.ns).List(e.ctx, metav1.ListOptions{})
	found := false
	for _, rs := range rss.Items {
		if rs.Name == live["Deployment/api"] {
			found = true
			if hash := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; "api-"+hash != rs.Name {
				t.Errorf("ReplicaSet %s has pod-template-hash %s", rs.Name, hash)
			}
		}
	}
	if !found {
		t.Errorf("Deployment api: no ReplicaSet %s among %d", live["Deployment/api"], len(rss.Items))
	}

	// Refused by validation: the selector does not match the template.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(manifest("v3", ""), "matchLabels: {app: api}", "matchLabels: {app: other}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.cli(1, "plan", "--change", bad)
	if !strings.Contains(out, "Deployment "+e.ns+"/api") || !strings.Contains(out, "the API server refused the change") || !strings.Contains(out, "selector") {
		t.Errorf("a refused dry-run should name the object and the server's message:\n%s", out)
	}
}

// planCLI runs rollplan without the cluster's flags (plan -f reads files).
func (e *env) planCLI(want int, args ...string) string {
	e.t.Helper()
	cmd := exec.CommandContext(e.ctx, harness.RollplanBinary(e.t), args...)
	out, err := cmd.Output()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
		out = append(out, x.Stderr...)
	} else if err != nil {
		e.t.Fatalf("rollplan %s: %v", strings.Join(args, " "), err)
	}
	if code != want {
		e.t.Fatalf("rollplan %s: exit code %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return string(out)
}

// planRevisions reads the toRevision of each workload of a JSON plan, by
// KIND/NAME. The output may end with stderr lines (warnings): the JSON
// document is read from its first "{".
func (e *env) planRevisions(out string) map[string]string {
	e.t.Helper()
	var p plan.Plan
	dec := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):]))
	if err := dec.Decode(&p); err != nil {
		e.t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	revs := map[string]string{}
	for _, wp := range p.Workloads {
		if wp.Error != "" {
			e.t.Fatalf("%s %s not planned: %s", wp.Kind, wp.Name, wp.Error)
		}
		revs[wp.Kind+"/"+wp.Name] = wp.ToRevision
	}
	return revs
}

// waitWorkloads waits until the three workloads of previewManifests run
// their template everywhere and are available.
func (e *env) waitWorkloads(what string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		apps := e.client.AppsV1()
		set, err := apps.StatefulSets(e.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || set.Status.ObservedGeneration != set.Generation || set.Status.AvailableReplicas != 3 || set.Status.UpdatedReplicas != 3 {
			return false, nil
		}
		ds, err := apps.DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil || ds.Status.ObservedGeneration != ds.Generation || ds.Status.DesiredNumberScheduled != 2 || ds.Status.NumberAvailable != 2 || ds.Status.UpdatedNumberScheduled != 2 {
			return false, nil
		}
		d, err := apps.Deployments(e.ns).Get(ctx, "api", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 4 && d.Status.UpdatedReplicas == 4, nil
	})
	if err != nil {
		e.t.Fatalf("workloads not %s: %v", what, err)
	}
}
