package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rollplan/rollplan/deploy"
	"github.com/rollplan/rollplan/internal/testobj"
)

func runGateManifests(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return runManifests(t, newGateManifestsCommand(), args...)
}

// runManifests runs cmd, `rollplan manifests` or `rollplan gate manifests`.
func runManifests(t *testing.T, cmd *cobra.Command, args ...string) ([]byte, error) {
	t.Helper()
	// As under the root command, which silences both.
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return out.Bytes(), err
}

func decodeManifests(t *testing.T, stream []byte) []runtime.Object {
	t.Helper()
	objs, err := testobj.DecodeStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// manifestsCommands: `rollplan manifests` (everything) and `rollplan gate
// manifests` (the gate's part), by the Deployments each prints.
var manifestsCommands = []struct {
	name        string
	new         func() *cobra.Command
	deployments []string
}{
	{"manifests", newManifestsCommand, []string{deploy.ServiceName, deploy.ControllerName}},
	{"gate manifests", newGateManifestsCommand, []string{deploy.ServiceName}},
}

func TestGateManifests(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	defer func(f func() time.Time) { manifestsNow = f }(manifestsNow)
	manifestsNow = func() time.Time { return now }

	for _, mc := range manifestsCommands {
		for _, c := range []struct {
			name      string
			args      []string
			namespace string
			image     string
			validFor  time.Duration
		}{
			{"defaults", nil, "rollplan-system", "rollplan:latest", 365 * 24 * time.Hour},
			{"other namespace", []string{"--namespace", "gate", "--image", "registry.example/rollplan:v1", "--valid-for", "720h"}, "gate", "registry.example/rollplan:v1", 720 * time.Hour},
		} {
			t.Run(mc.name+"/"+c.name, func(t *testing.T) {
				out, err := runManifests(t, mc.new(), c.args...)
				if err != nil {
					t.Fatal(err)
				}
				checkManifests(t, out, mc.deployments, c.namespace, c.image, c.validFor, now)
			})
		}
	}
}

// checkManifests checks a printed install: the Deployments named, every
// object in namespace, the serving certificate valid for the gate's
// Service as the API server calls it.
func checkManifests(t *testing.T, out []byte, deployments []string, namespace, image string, validFor time.Duration, now time.Time) {
	t.Helper()
	objs := decodeManifests(t, out)
	var names []string
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			names = append(names, d.Name)
			if img := d.Spec.Template.Spec.Containers[0].Image; img != image {
				t.Errorf("Deployment %s image %s, want %s", d.Name, img, image)
			}
		}
	}
	if !slices.Equal(names, deployments) {
		t.Errorf("Deployments %v, want %v", names, deployments)
	}
	if namespace != "rollplan-system" && bytes.Contains(out, []byte("rollplan-system")) {
		t.Errorf("rollplan-system still appears with --namespace %s", namespace)
	}

	var (
		secret *corev1.Secret
		vwc    *admissionregistrationv1.ValidatingWebhookConfiguration
	)
	for _, o := range objs {
		m := o.(metav1.Object)
		switch o := o.(type) {
		case *corev1.Namespace:
			if o.Name != namespace {
				t.Errorf("Namespace %s, want %s", o.Name, namespace)
			}
		case *corev1.Secret:
			secret = o
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			vwc = o
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *apiextensionsv1.CustomResourceDefinition:
		default:
			if m.GetNamespace() != namespace {
				t.Errorf("%T %s: namespace %q, want %q", o, m.GetName(), m.GetNamespace(), namespace)
			}
		}
		if rb, ok := o.(*rbacv1.ClusterRoleBinding); ok && rb.Subjects[0].Namespace != namespace {
			t.Errorf("ClusterRoleBinding subject %v", rb.Subjects[0])
		}
		if rb, ok := o.(*rbacv1.RoleBinding); ok && rb.Subjects[0].Namespace != namespace {
			t.Errorf("RoleBinding subject %v", rb.Subjects[0])
		}
	}
	if secret == nil || vwc == nil {
		t.Fatalf("want a Secret and a ValidatingWebhookConfiguration, got %d objects", len(objs))
	}
	if secret.Namespace != namespace || secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret %s/%s type %s", secret.Namespace, secret.Name, secret.Type)
	}
	if _, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
		t.Errorf("Secret's key pair: %v", err)
	}

	// The API server calls rollplan-gate.NAMESPACE.svc and trusts
	// the caBundle: the Secret's certificate must verify so.
	for _, wh := range vwc.Webhooks {
		svc := wh.ClientConfig.Service
		if svc.Namespace != namespace {
			t.Errorf("%s: service namespace %s", wh.Name, svc.Namespace)
		}
		if !strings.Contains(strings.Join(wh.NamespaceSelector.MatchExpressions[0].Values, ","), namespace) {
			t.Errorf("%s: namespaceSelector %v does not exclude %s", wh.Name, wh.NamespaceSelector, namespace)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(wh.ClientConfig.CABundle) {
			t.Fatalf("%s: caBundle is not PEM: %q", wh.Name, wh.ClientConfig.CABundle)
		}
		leaf, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(leaf.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		host := svc.Name + "." + svc.Namespace + ".svc"
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("%s: serving certificate does not verify for %s against the caBundle: %v", wh.Name, host, err)
		}
		if !cert.NotAfter.Equal(now.Add(validFor)) {
			t.Errorf("certificate expires %s, want %s", cert.NotAfter, now.Add(validFor))
		}
	}
	if !strings.Contains(string(out), "image: "+image+"\n") {
		t.Errorf("image %s not in the manifests", image)
	}
}

func TestGateManifestsBadFlags(t *testing.T) {
	for _, c := range []struct {
		cmd  func() *cobra.Command
		args []string
	}{
		{newGateManifestsCommand, []string{"--namespace", "Not_A_Namespace"}},
		{newGateManifestsCommand, []string{"--valid-for", "0s"}},
		{newGateManifestsCommand, []string{"--image", ""}},
		{newGateManifestsCommand, []string{"extra"}},
		{newManifestsCommand, []string{"--namespace", "Not_A_Namespace"}},
		{newManifestsCommand, []string{"--controller-replicas", "0"}},
		{newManifestsCommand, []string{"--controller-replicas", "-1"}},
		{newManifestsCommand, []string{"extra"}},
	} {
		out, err := runManifests(t, c.cmd(), c.args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: error %v, want a usage error", c.args, err)
		}
		if len(out) > 0 {
			t.Errorf("%v: printed %d bytes on error", c.args, len(out))
		}
	}
	// The gate's part has no controller.
	if out, line, code := execute(t, "gate", "manifests", "--controller-replicas", "3"); code != exitUsage || out != "" || !strings.Contains(line, "unknown flag: --controller-replicas") {
		t.Errorf("gate manifests --controller-replicas: exit %d, %q, %d bytes printed; want a usage error", code, line, len(out))
	}
}

// The controller's flags reach its Deployment, and only it.
func TestManifestsController(t *testing.T) {
	out, err := runManifests(t, newManifestsCommand(), "--controller-replicas", "3", "--controller-dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "# rollplan manifests (rollplan ") {
		t.Errorf("header %q", strings.SplitN(string(out), "\n", 2)[0])
	}
	for _, o := range decodeManifests(t, out) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		switch d.Name {
		case deploy.ControllerName:
			if *d.Spec.Replicas != 3 || !slices.Contains(args, "--dry-run") || !slices.Contains(args, "--leader-elect=true") {
				t.Errorf("controller: replicas %d, args %v; want 3, --dry-run and leader election", *d.Spec.Replicas, args)
			}
		case deploy.ServiceName:
			if *d.Spec.Replicas != 2 || slices.Contains(args, "--dry-run") {
				t.Errorf("gate: replicas %d, args %v; the controller's flags reached it", *d.Spec.Replicas, args)
			}
		}
	}
}

// mountConfigMap lays out a ConfigMap's data as the kubelet mounts it: the
// files in a hidden ..TIMESTAMP directory, ..data a symlink to it, and one
// symlink per key through ..data. Called again, it swaps in new data as
// the kubelet does when the ConfigMap changes.
func mountConfigMap(t *testing.T, dir, version string, data map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_03_01_12_00_00."+version)
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, k)); err != nil {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// manifests --policy (and gate manifests --policy) puts the files the
// engine loads into one ConfigMap that the gate and the controller mount,
// and passes them as their --policy: mounted as the kubelet mounts it, each
// compiles them and sees an update.
func TestGateManifestsPolicy(t *testing.T) {
	src := t.TempDir()
	leader, err := os.ReadFile("policies/examples/leader-last/policy.rego")
	if err != nil {
		t.Fatal(err)
	}
	celLeader, err := os.ReadFile("policies/examples/leader-last/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"policy.rego":      string(leader),
		"policy_test.rego": "package rollplan.strategy_test\n",
		"README.md":        "# not a policy\n",
		"policy.yaml":      string(celLeader),
		"sub/extra.rego":   "package rollplan.strategy\n\npacing := \"wave\"\n",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, mc := range manifestsCommands {
		for _, c := range []struct {
			name   string
			args   []string
			engine string
			keys   []string
		}{
			{"rego directory", []string{"--policy", src}, "rego", []string{"policy.rego", "sub_extra.rego"}},
			{"cel file", []string{"--policy", filepath.Join(src, "policy.yaml")}, "cel", []string{"policy.yaml"}},
			{"cel directory", []string{"--policy", src, "--engine", "cel"}, "cel", []string{"policy.yaml"}},
		} {
			t.Run(mc.name+"/"+c.name, func(t *testing.T) {
				out, err := runManifests(t, mc.new(), c.args...)
				if err != nil {
					t.Fatal(err)
				}
				var (
					cms  []*corev1.ConfigMap
					deps []*appsv1.Deployment
				)
				for _, o := range decodeManifests(t, out) {
					switch o := o.(type) {
					case *corev1.ConfigMap:
						cms = append(cms, o)
					case *appsv1.Deployment:
						deps = append(deps, o)
					}
				}
				if len(cms) != 1 || len(deps) != len(mc.deployments) {
					t.Fatalf("want one ConfigMap and the Deployments %v:\n%s", mc.deployments, out)
				}
				cm := cms[0]
				if cm.Name != deploy.PolicyConfigMapName || cm.Namespace != deploy.DefaultNamespace {
					t.Errorf("ConfigMap %s/%s", cm.Namespace, cm.Name)
				}
				if got := slices.Sorted(maps.Keys(cm.Data)); !slices.Equal(got, c.keys) {
					t.Errorf("ConfigMap keys %v, want %v", got, c.keys)
				}
				// The gate and the controller load the same policy.
				for _, dep := range deps {
					checkMountedPolicy(t, dep, cm, c.engine, len(c.keys))
				}
			})
		}
	}

	t.Run("errors", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.rego")
		if err := os.WriteFile(bad, []byte("package rollplan.strategy\n\norder(pod) := [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runGateManifests(t, "--policy", bad)
		if err == nil || !strings.Contains(err.Error(), bad) || exitCode(err) != exitError || len(out) > 0 {
			t.Errorf("a policy that does not compile: %v (exit %d), %d bytes printed", err, exitCode(err), len(out))
		}
		_, err = runGateManifests(t, "--policy", src, "--engine", "native")
		if exitCode(err) != exitUsage {
			t.Errorf("--engine native with --policy: %v, want a usage error", err)
		}
	})
}

// checkMountedPolicy: dep's container gets --engine and one --policy per
// ConfigMap key, mounts the ConfigMap, and, mounted as the kubelet mounts
// it, compiles it and sees an update.
func checkMountedPolicy(t *testing.T, dep *appsv1.Deployment, cm *corev1.ConfigMap, engine string, files int) {
	t.Helper()
	spec := dep.Spec.Template.Spec
	ctr := spec.Containers[0]
	var policies []string
	for _, a := range ctr.Args {
		if p, ok := strings.CutPrefix(a, "--policy="); ok {
			policies = append(policies, p)
		}
	}
	if !slices.Contains(ctr.Args, "--engine="+engine) || len(policies) != files {
		t.Errorf("Deployment %s args %v: want --engine=%s and one --policy per file", dep.Name, ctr.Args, engine)
	}
	if v := spec.Volumes; len(v) == 0 || v[len(v)-1].ConfigMap == nil || v[len(v)-1].ConfigMap.Name != cm.Name {
		t.Errorf("Deployment %s volumes %+v: want the policy ConfigMap", dep.Name, spec.Volumes)
	}
	if m := ctr.VolumeMounts[len(ctr.VolumeMounts)-1]; m.MountPath != deploy.PolicyMountPath || !m.ReadOnly {
		t.Errorf("Deployment %s mount %+v", dep.Name, m)
	}

	// Mount it as the kubelet does; the container's flags must load it.
	mnt := t.TempDir()
	mountConfigMap(t, mnt, "1", cm.Data)
	var paths []string
	for _, p := range policies {
		paths = append(paths, filepath.Join(mnt, strings.TrimPrefix(p, deploy.PolicyMountPath+"/")))
	}
	if _, err := newEngine(context.Background(), engine, paths, time.Minute); err != nil {
		t.Fatalf("Deployment %s cannot load its mounted policy: %v", dep.Name, err)
	}
	d1, err := policyFilesDigest(paths)
	if err != nil {
		t.Fatal(err)
	}
	// The directory too, as a hand-made --policy=DIR would name it.
	dd1, err := policyFilesDigest([]string{mnt})
	if err != nil {
		t.Fatalf("digest of the mount directory: %v", err)
	}
	edited := map[string]string{}
	for k, v := range cm.Data {
		edited[k] = v + "\n# edited\n"
	}
	mountConfigMap(t, mnt, "2", edited)
	if d2, err := policyFilesDigest(paths); err != nil || d2 == d1 {
		t.Errorf("an edited ConfigMap does not change the digest the gate reloads on: %v", err)
	}
	if dd2, err := policyFilesDigest([]string{mnt}); err != nil || dd2 == dd1 {
		t.Errorf("an edited ConfigMap does not change the digest of its directory: %v", err)
	}
}

// manifests --analysis-config writes the file into the controller's
// optional ConfigMap (the flag and the mount are always there); a file
// that is not an analysis config is refused before anything is printed.
func TestManifestsAnalysisConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "analysis.yaml")
	content := "providers:\n  prometheus:\n    address: http://prometheus.monitoring:9090\n    bearerTokenFile: /var/run/secrets/prometheus/token\n"
	if err := os.WriteFile(cfg, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runManifests(t, newManifestsCommand(), "--analysis-config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cms []*corev1.ConfigMap
	var ctrl *appsv1.Deployment
	for _, o := range decodeManifests(t, out) {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			cms = append(cms, o)
		case *appsv1.Deployment:
			if o.Name == deploy.ControllerName {
				ctrl = o
			}
		}
	}
	if len(cms) != 1 || cms[0].Name != deploy.AnalysisConfigMapName || cms[0].Data[deploy.AnalysisConfigKey] != content {
		t.Fatalf("ConfigMaps %+v, want %s holding the file as %s", cms, deploy.AnalysisConfigMapName, deploy.AnalysisConfigKey)
	}
	if ctrl == nil || !slices.Contains(ctrl.Spec.Template.Spec.Containers[0].Args, "--analysis-config="+deploy.AnalysisMountPath+"/"+deploy.AnalysisConfigKey) ||
		ctrl.Spec.Template.Annotations[deploy.AnalysisChecksumAnnotation] == "" {
		t.Errorf("controller Deployment %+v: want --analysis-config on the mounted file and %s", ctrl, deploy.AnalysisChecksumAnnotation)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers:\n  prometheus:\n    adress: http://x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runManifests(t, newManifestsCommand(), "--analysis-config", bad); err == nil || !strings.Contains(err.Error(), "--analysis-config "+bad) || !strings.Contains(err.Error(), "adress") {
		t.Errorf("a misspelt analysis config: %v, want an error naming the file and the field\n%s", err, out)
	}
	if _, err := runManifests(t, newManifestsCommand(), "--analysis-config", filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "--analysis-config") {
		t.Errorf("a missing analysis config: %v, want an error (the manifests are written for a file that exists)", err)
	}
}
