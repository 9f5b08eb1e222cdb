package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/gate/certs"
	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/engine/rego"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
	"github.com/rollplan/rollplan/test/kubelet"
)

// decodeStream decodes a multi-document YAML stream into typed objects,
// strictly.
func decodeStream(t *testing.T, stream []byte) []runtime.Object {
	t.Helper()
	objs, err := testobj.DecodeStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// objectIDs names each object KIND NAMESPACE/NAME, sorted.
func objectIDs(objs []runtime.Object) []string {
	var ids []string
	for _, o := range objs {
		m := o.(metav1.Object)
		ids = append(ids, fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName()))
	}
	slices.Sort(ids)
	return ids
}

// kubectlStdin runs the control plane's kubectl with stream on stdin.
func kubectlStdin(t *testing.T, stream []byte, args ...string) (string, error) {
	t.Helper()
	cp := harness.Cluster(t)
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stream)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// namespaceDoc is the Namespace document of a rendered stream.
func namespaceDoc(t *testing.T, stream []byte) []byte {
	t.Helper()
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		if strings.Contains(doc, "\nkind: Namespace\n") {
			return []byte(doc)
		}
	}
	t.Fatal("no Namespace in the manifests")
	return nil
}

// TestManifestsApply: what `rollplan manifests` and `rollplan gate
// manifests` print, and the kustomize base deploy/, are accepted by the
// API server as they stand (server-side dry run: the fail-closed webhook
// must not stand in front of the other tests' pods). The namespace is
// applied for real, so its Pod Security labels are in force: the API
// server's Pod Security admission warns about any Deployment whose pods
// the restricted profile would refuse, and there must be no such warning.
func TestManifestsApply(t *testing.T) {
	harness.Cluster(t)
	ca, cert, key, err := certs.Generate(deploy.ServiceName, deploy.DefaultNamespace, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	everything, err := deploy.Render(deploy.Options{CABundle: ca, ServingCert: cert, ServingKey: key})
	if err != nil {
		t.Fatal(err)
	}
	// The namespace first, for real: a dry run creates nothing for the
	// rest to land in.
	if out, err := kubectlStdin(t, namespaceDoc(t, everything), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the namespace: %v\n%s", err, out)
	}
	ns, err := harness.Cluster(t).Client.CoreV1().Namespaces().Get(context.Background(), deploy.DefaultNamespace, metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s: %v, labels %v: want the restricted profile enforced", deploy.DefaultNamespace, err, ns.Labels)
	}

	gateOnly, err := deploy.Render(deploy.Options{Components: []deploy.Component{deploy.Gate}, CABundle: ca, ServingCert: cert, ServingKey: key})
	if err != nil {
		t.Fatal(err)
	}
	gateObjects := []string{"deployment.apps/rollplan-gate", "service/rollplan-gate", "poddisruptionbudget.policy/rollplan-gate",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/rollplan-gate", "secret/rollplan-gate-tls",
		"clusterrole.rbac.authorization.k8s.io/rollplan-gate", "clusterrolebinding.rbac.authorization.k8s.io/rollplan-gate",
		"role.rbac.authorization.k8s.io/rollplan-gate", "rolebinding.rbac.authorization.k8s.io/rollplan-gate", "serviceaccount/rollplan-gate"}
	controllerObjects := []string{"deployment.apps/rollplan-controller", "service/rollplan-controller", "poddisruptionbudget.policy/rollplan-controller",
		"clusterrole.rbac.authorization.k8s.io/rollplan-controller", "clusterrolebinding.rbac.authorization.k8s.io/rollplan-controller",
		"serviceaccount/rollplan-controller"}

	kustomized, err := exec.Command(filepath.Join(harness.Cluster(t).BinDir, "kubectl"), "kustomize", "../../deploy").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/: %v\n%s", err, kustomized)
	}
	base, err := deploy.Render(deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k, r := objectIDs(decodeStream(t, kustomized)), objectIDs(decodeStream(t, base)); !slices.Equal(k, r) {
		t.Errorf("kustomize build deploy/ has\n%v\nrollplan manifests prints\n%v", k, r)
	}

	for _, c := range []struct {
		name   string
		stream []byte
		want   []string
	}{
		{"rollplan manifests", everything, slices.Concat(gateObjects, controllerObjects)},
		{"rollplan gate manifests", gateOnly, gateObjects},
		{"kubectl apply -k deploy/", kustomized, slices.Concat(slices.DeleteFunc(slices.Clone(gateObjects), func(s string) bool { return s == "secret/rollplan-gate-tls" }), controllerObjects)},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := kubectlStdin(t, c.stream, "apply", "--dry-run=server", "-f", "-")
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
			}
			for _, want := range c.want {
				if !strings.Contains(out, want+" ") {
					t.Errorf("kubectl apply did not report %s:\n%s", want, out)
				}
			}
			if strings.Contains(out, "PodSecurity") {
				t.Errorf("kubectl apply: Pod Security warnings:\n%s", out)
			}
		})
	}

	// The check above can fail: a controller pod that may run as root
	// draws the warning.
	var root appsv1.Deployment
	for _, o := range decodeStream(t, base) {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == deploy.ControllerName {
			root = *d
		}
	}
	root.Spec.Template.Spec.SecurityContext = nil
	doc, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlStdin(t, doc, "apply", "--dry-run=server", "-f", "-"); err != nil || !strings.Contains(out, `would violate PodSecurity "restricted:latest"`) {
		t.Errorf("a controller Deployment without its pod securityContext: %v, no Pod Security warning:\n%s", err, out)
	}
}

// asController is a client that acts as the controller's ServiceAccount,
// with the RBAC of `rollplan manifests` applied (for real: RBAC objects
// only, no pods) and in force.
func asController(t *testing.T) kubernetes.Interface {
	t.Helper()
	cp := harness.Cluster(t)
	ctx := context.Background()
	out, err := deploy.Render(deploy.Options{Components: []deploy.Component{deploy.Controller}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deploy.DefaultNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range decodeStream(t, out) {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cp.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cp.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				var cur *rbacv1.ClusterRole
				if cur, err = cp.Client.RbacV1().ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
					cur.Rules = o.Rules
					_, err = cp.Client.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
				}
			}
		default:
			continue
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + deploy.DefaultNamespace + ":" + deploy.ControllerName}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer sees new RBAC objects through its informers.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the controller's ServiceAccount may not list pods: %v", err)
	}
	return client
}

// runAs runs the executor on the workload with client's credentials and
// Events recorded through them, as the controller does.
func (e *env) runAs(client kubernetes.Interface, kind, name string, policies []string) (*executor.Summary, string) {
	e.t.Helper()
	var log harness.SyncBuffer
	eng, err := rego.Load(e.ctx, policies, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	rec, err := executor.StartEvents(client)
	if err != nil {
		e.t.Fatal(err)
	}
	opts := executor.Options{
		Target: live.Target{Namespace: e.ns, Kind: kind, Name: name},
		Engine: eng, Poll: 200 * time.Millisecond, MaxPoll: time.Second, PlanOptions: upstreamOptions(), Events: rec,
		Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if opts.Reader, err = live.NewInformerReader(e.ctx, client, e.ns, nil); err != nil {
		e.t.Fatal(err)
	}
	x, err := executor.New(client, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	sum, err := x.Run(ctx, false)
	rec.Shutdown(10 * time.Second)
	if err != nil {
		e.t.Fatalf("%s %s as the controller: %v\n%s", kind, name, err, log.String())
	}
	if strings.Contains(strings.ToLower(log.String()), "forbidden") {
		e.t.Errorf("%s %s as the controller: a request was forbidden:\n%s", kind, name, log.String())
	}
	return sum, log.String()
}

// TestControllerRBAC: the controller's ClusterRole, as `rollplan
// manifests` prints it, is enough for every write the executor makes: a
// StatefulSet updated and resized in place, a Deployment held and updated
// in place within its ReplicaSet, a DaemonSet whose nodes are cordoned,
// drained (evictions, node conditions) and uncordoned; with Events. Each
// runs as the controller's ServiceAccount (impersonated), and no request
// is forbidden. (Its Leases are the controller's own and tested with it.)
func TestControllerRBAC(t *testing.T) {
	e := newEnv(t, 3)
	client := asController(t)

	// StatefulSet in place with a resize.
	{
		const name, replicas = "rbac-sts", 3
		set := statefulSet(e.ns, name, replicas, "1")
		set.Spec.Template.Spec.Containers[0].Resources = guaranteedResources("100m", "128Mi")
		if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, set, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitSettled(name, replicas)
		e.setTemplate(name, func(s *corev1.PodSpec) {
			s.Containers[0].Image = "example.com/app:v2"
			s.Containers[0].Resources = guaranteedResources("200m", "256Mi")
		})
		sum, _ := e.runAs(client, "StatefulSet", name, nil)
		if sum.Actions["InPlaceUpdate"] != replicas {
			t.Errorf("actions %v, want %d InPlaceUpdate", sum.Actions, replicas)
		}
		e.waitSettled(name, replicas)
		events, err := e.client.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range events.Items {
			if ev.ReportingController == executor.ReportingController && ev.Regarding.Name == name {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no Event of %s recorded as the controller", executor.ReportingController)
		}
	}

	// Deployment in place.
	{
		const name = "rbac-deploy"
		d := managedDeployment(e.ns, name, 3, "1")
		if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitDeployment(name, "rolled out", func(dep *appsv1.Deployment) bool {
			return dep.Status.AvailableReplicas == 3 && dep.Status.UpdatedReplicas == 3
		})
		e.runAs(client, "Deployment", name, nil) // holds it: spec.paused
		if !e.deployment(name).Spec.Paused {
			t.Fatal("the controller's identity did not hold the Deployment (spec.paused)")
		}
		e.setDeploymentTemplate(name, func(s *corev1.PodSpec) { s.Containers[0].Image = "example.com/app:v2" })
		sum, _ := e.runAs(client, "Deployment", name, nil)
		if sum.Actions["InPlaceUpdate"] != 3 {
			t.Errorf("actions %v, want 3 InPlaceUpdate", sum.Actions)
		}
	}

	// DaemonSet with node preparation.
	{
		const name, nodes = "rbac-agent", 3
		ds := daemonSet(e.ns, name, "example.com/agent:v1")
		ds.Labels = map[string]string{"node-preparation": "drain"}
		if _, err := e.client.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitDaemonSet(name, nodes, false)
		e.kubelet.SetImage("example.com/agent:v2", kubelet.Behavior{StartDelay: 100 * time.Millisecond, ReadyDelay: 300 * time.Millisecond})
		e.setDaemonSetTemplate(name, func(s *corev1.PodSpec) {
			s.Containers[0].Env[0].Value = "b"
			s.Containers[0].Image = "example.com/agent:v2"
		})
		sum, log := e.runAs(client, "DaemonSet", name, []string{cordonNodesPolicy})
		if sum.Actions["Recreate"] != nodes || sum.Actions["CordonNode"] != nodes || sum.Actions["UncordonNode"] != nodes || sum.Actions["DrainNode"] == 0 {
			t.Errorf("actions %v, want %d Recreate, CordonNode and UncordonNode, some DrainNode", sum.Actions, nodes)
		}
		if strings.Contains(log, "not written") || strings.Contains(log, "not removed") {
			t.Errorf("node conditions not written as the controller:\n%s", log)
		}
		e.waitDaemonSet(name, nodes, true)
	}
}
