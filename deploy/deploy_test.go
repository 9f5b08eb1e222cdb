package deploy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/internal/testobj"
)

// decodeAll decodes a rendered stream with client-go's strict decoder (not
// Render's own), so a document that is not a valid API object fails.
func decodeAll(t *testing.T, stream []byte) []runtime.Object {
	t.Helper()
	objs, err := testobj.DecodeStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kinds(objs []runtime.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, fmt.Sprintf("%T", o))
	}
	return ks
}

func find[T runtime.Object](t *testing.T, objs []runtime.Object) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T in the manifests", zero)
	return zero
}

// findNamed is the object of type T named name.
func findNamed[T runtime.Object](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok && o.(metav1.Object).GetName() == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T %s in the manifests", zero, name)
	return zero
}

// all is every object of type T.
func all[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// A fixed CA, certificate and key: Render only copies them.
var (
	testCA   = []byte("-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n")
	testCert = []byte("-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n")
	testKey  = []byte("-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n")
)

func TestRender(t *testing.T) {
	// Both components: the kustomize base, in kustomization.yaml's order.
	base := []string{"*v1.Namespace", "*v1.CustomResourceDefinition",
		"*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.Role", "*v1.RoleBinding", // gate-rbac.yaml
		"*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", // controller-rbac.yaml
		"*v1.Service", "*v1.Service", "*v1.Deployment", "*v1.Deployment", "*v1.PodDisruptionBudget", "*v1.PodDisruptionBudget",
		"*v1.ValidatingWebhookConfiguration"}
	withSecret := slices.Insert(slices.Clone(base), 1, "*v1.Secret")
	// The gate alone: what `rollplan gate manifests` printed before the
	// controller.
	gate := []string{"*v1.Namespace", "*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.Role", "*v1.RoleBinding", "*v1.Service", "*v1.Deployment", "*v1.PodDisruptionBudget", "*v1.ValidatingWebhookConfiguration"}
	gateWithSecret := slices.Insert(slices.Clone(gate), 1, "*v1.Secret")
	controller := []string{"*v1.Namespace", "*v1.CustomResourceDefinition", "*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.Service", "*v1.Deployment", "*v1.PodDisruptionBudget"}
	cases := []struct {
		name      string
		opts      Options
		namespace string
		image     string
		kinds     []string
	}{
		{"defaults", Options{}, DefaultNamespace, DefaultImage, base},
		{"CA only", Options{CABundle: testCA}, DefaultNamespace, DefaultImage, base},
		{"quick install", Options{CABundle: testCA, ServingCert: testCert, ServingKey: testKey}, DefaultNamespace, DefaultImage, withSecret},
		{"other namespace and image", Options{Namespace: "gate", Image: "registry.example/rollplan:v1.2.3", CABundle: testCA, ServingCert: testCert, ServingKey: testKey}, "gate", "registry.example/rollplan:v1.2.3", withSecret},
		{"kube-system", Options{Namespace: "kube-system"}, "kube-system", DefaultImage, base},
		{"gate only", Options{Components: []Component{Gate}, CABundle: testCA, ServingCert: testCert, ServingKey: testKey}, DefaultNamespace, DefaultImage, gateWithSecret},
		{"gate only, no certificate", Options{Components: []Component{Gate}}, DefaultNamespace, DefaultImage, gate},
		{"controller only", Options{Components: []Component{Controller}, Namespace: "rp", Image: "registry.example/rollplan:v2"}, "rp", "registry.example/rollplan:v2", controller},
		{"both named", Options{Components: []Component{Controller, Gate}}, DefaultNamespace, DefaultImage, base},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Render(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Render(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, again) {
				t.Error("two renders with the same options differ")
			}
			objs := decodeAll(t, out)
			if got := kinds(objs); !slices.Equal(got, c.kinds) {
				t.Fatalf("kinds\n got %v\nwant %v", got, c.kinds)
			}
			if c.namespace != DefaultNamespace && bytes.Contains(out, []byte(DefaultNamespace)) {
				t.Errorf("%s still appears in the manifests for namespace %s", DefaultNamespace, c.namespace)
			}

			// Namespace: every namespaced object, every reference.
			for _, o := range objs {
				m := o.(metav1.Object)
				switch o.(type) {
				case *corev1.Namespace:
					if m.GetName() != c.namespace {
						t.Errorf("Namespace %s, want %s", m.GetName(), c.namespace)
					}
				case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *admissionregistrationv1.ValidatingWebhookConfiguration, *apiextensionsv1.CustomResourceDefinition:
					if m.GetNamespace() != "" {
						t.Errorf("%T %s: cluster-scoped, namespace %q", o, m.GetName(), m.GetNamespace())
					}
				default:
					if m.GetNamespace() != c.namespace {
						t.Errorf("%T %s: namespace %q, want %q", o, m.GetName(), m.GetNamespace(), c.namespace)
					}
				}
			}
			// Each binding binds its component's ServiceAccount to its
			// component's role, both of the binding's name.
			type binding struct {
				name     string
				roleRef  rbacv1.RoleRef
				subjects []rbacv1.Subject
			}
			var bindings []binding
			for _, b := range all[*rbacv1.ClusterRoleBinding](objs) {
				bindings = append(bindings, binding{b.Name, b.RoleRef, b.Subjects})
			}
			for _, b := range all[*rbacv1.RoleBinding](objs) {
				bindings = append(bindings, binding{b.Name, b.RoleRef, b.Subjects})
			}
			for _, b := range bindings {
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: b.name, Namespace: c.namespace}}
				if !slices.Equal(b.subjects, want) || b.roleRef.Name != b.name {
					t.Errorf("binding %s: role %s, subjects %v, want %v", b.name, b.roleRef.Name, b.subjects, want)
				}
			}

			// The controller: image, replicas, leader election.
			if c.opts.renders(Controller) {
				d := findNamed[*appsv1.Deployment](t, objs, ControllerName)
				ctr := d.Spec.Template.Spec.Containers[0]
				if ctr.Image != c.image {
					t.Errorf("controller image %s, want %s", ctr.Image, c.image)
				}
				if want := []string{"controller", "--leader-elect=true", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080",
					"--analysis-config=" + AnalysisMountPath + "/" + AnalysisConfigKey}; !slices.Equal(ctr.Args, want) {
					t.Errorf("controller args %v, want %v", ctr.Args, want)
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
					t.Errorf("controller replicas %v, want 2", d.Spec.Replicas)
				}
			}
			if !c.opts.renders(Gate) {
				return
			}

			// Webhooks: service, CA bundle, namespaces skipped.
			vwc := find[*admissionregistrationv1.ValidatingWebhookConfiguration](t, objs)
			if names := []string{vwc.Webhooks[0].Name, vwc.Webhooks[1].Name}; len(vwc.Webhooks) != 2 || names[0] != "pods.gate.rollplan.dev" || names[1] != "workloads.gate.rollplan.dev" {
				t.Fatalf("webhooks %v", vwc.Webhooks)
			}
			for _, wh := range vwc.Webhooks {
				svc := wh.ClientConfig.Service
				if svc == nil || svc.Name != ServiceName || svc.Namespace != c.namespace || svc.Path == nil || *svc.Path != "/validate" || svc.Port == nil || *svc.Port != 443 {
					t.Errorf("%s: clientConfig.service %+v", wh.Name, svc)
				}
				if !bytes.Equal(wh.ClientConfig.CABundle, c.opts.CABundle) {
					t.Errorf("%s: caBundle %q, want %q", wh.Name, wh.ClientConfig.CABundle, c.opts.CABundle)
				}
				excluded := map[string]bool{}
				for _, e := range wh.NamespaceSelector.MatchExpressions {
					if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn {
						for _, v := range e.Values {
							excluded[v] = true
						}
					}
				}
				if !excluded["kube-system"] || !excluded[c.namespace] || len(wh.NamespaceSelector.MatchExpressions) != 1 {
					t.Errorf("%s: namespaceSelector %v, want it to exclude kube-system and %s", wh.Name, wh.NamespaceSelector, c.namespace)
				}
				if len(wh.AdmissionReviewVersions) != 1 || wh.AdmissionReviewVersions[0] != "v1" || wh.TimeoutSeconds == nil || *wh.TimeoutSeconds != 5 {
					t.Errorf("%s: admissionReviewVersions %v, timeoutSeconds %v", wh.Name, wh.AdmissionReviewVersions, wh.TimeoutSeconds)
				}
			}
			pods, workloads := vwc.Webhooks[0], vwc.Webhooks[1]
			if *pods.FailurePolicy != admissionregistrationv1.Fail || *pods.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
				t.Errorf("pods webhook: failurePolicy %s, sideEffects %s", *pods.FailurePolicy, *pods.SideEffects)
			}
			if *workloads.FailurePolicy != admissionregistrationv1.Ignore || *workloads.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("workloads webhook: failurePolicy %s, sideEffects %s", *workloads.FailurePolicy, *workloads.SideEffects)
			}

			// Deployment: image, flags, TLS volume, certificate checksum.
			d := findNamed[*appsv1.Deployment](t, objs, ServiceName)
			ctr := d.Spec.Template.Spec.Containers[0]
			if ctr.Image != c.image {
				t.Errorf("image %s, want %s", ctr.Image, c.image)
			}
			wantArgs := []string{"gate", "--tls-cert-file=/etc/rollplan/tls/tls.crt", "--tls-private-key-file=/etc/rollplan/tls/tls.key", "--bind-address=:8443", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080", "--enforcement=deny"}
			if !slices.Equal(ctr.Args, wantArgs) {
				t.Errorf("args %v, want %v", ctr.Args, wantArgs)
			}
			if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.SecretName != SecretName {
				t.Errorf("volumes %v, want the Secret %s", v, SecretName)
			}
			_, hasSum := d.Spec.Template.Annotations[CertChecksumAnnotation]
			if hasSum != (c.opts.ServingCert != nil) {
				t.Errorf("pod template annotation %s present %v, want %v", CertChecksumAnnotation, hasSum, c.opts.ServingCert != nil)
			}

			// Secret: only with a certificate, holding exactly it.
			for _, o := range objs {
				if s, ok := o.(*corev1.Secret); ok {
					if s.Name != SecretName || s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data["tls.crt"], testCert) || !bytes.Equal(s.Data["tls.key"], testKey) || !bytes.Equal(s.Data["ca.crt"], c.opts.CABundle) {
						t.Errorf("Secret %s type %s data %q", s.Name, s.Type, s.Data)
					}
				}
			}
		})
	}
}

// The certificate checksum changes with the certificate, so that a new one
// rolls the gate out.
func TestRenderCertChecksum(t *testing.T) {
	sum := func(cert []byte) string {
		out, err := Render(Options{CABundle: testCA, ServingCert: cert, ServingKey: testKey})
		if err != nil {
			t.Fatal(err)
		}
		objs := decodeAll(t, out)
		if _, ok := findNamed[*appsv1.Deployment](t, objs, ControllerName).Spec.Template.Annotations[CertChecksumAnnotation]; ok {
			t.Errorf("the controller's pod template has %s: a new certificate would restart it for nothing", CertChecksumAnnotation)
		}
		return findNamed[*appsv1.Deployment](t, objs, ServiceName).Spec.Template.Annotations[CertChecksumAnnotation]
	}
	if a, b := sum(testCert), sum(append(slices.Clone(testCert), '\n')); a == b {
		t.Errorf("same checksum %s for two certificates", a)
	}
}

// The controller always passes --analysis-config and mounts the optional
// ConfigMap that holds it (an operator adds the ConfigMap, nothing else);
// Options.AnalysisConfig renders that ConfigMap and a checksum that rolls
// the controller when it changes (it reads the file at start).
func TestControllerAnalysisConfig(t *testing.T) {
	render := func(cfg []byte) []runtime.Object {
		t.Helper()
		out, err := Render(Options{AnalysisConfig: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return decodeAll(t, out)
	}
	objs := render(nil)
	if cms := all[*corev1.ConfigMap](objs); len(cms) != 0 {
		t.Errorf("ConfigMaps %v without an analysis config, want none", cms)
	}
	d := findNamed[*appsv1.Deployment](t, objs, ControllerName)
	spec := d.Spec.Template.Spec
	file := AnalysisMountPath + "/" + AnalysisConfigKey
	if !slices.Contains(spec.Containers[0].Args, "--analysis-config="+file) {
		t.Errorf("controller args %v: no --analysis-config=%s", spec.Containers[0].Args, file)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if cm := spec.Volumes[i].ConfigMap; cm != nil && cm.Name == AnalysisConfigMapName {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap.Optional == nil || !*vol.ConfigMap.Optional {
		t.Fatalf("controller volumes %+v: want ConfigMap %s, optional", spec.Volumes, AnalysisConfigMapName)
	}
	mounted := false
	for _, m := range spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == vol.Name && m.MountPath == AnalysisMountPath && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("controller mounts %+v: want %s read-only at %s", spec.Containers[0].VolumeMounts, vol.Name, AnalysisMountPath)
	}
	if gate := findNamed[*appsv1.Deployment](t, objs, ServiceName); slices.ContainsFunc(gate.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol.Name }) || slices.ContainsFunc(gate.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--analysis-config") }) {
		t.Errorf("the gate has the analysis config: volumes %v, args %v", gate.Spec.Template.Spec.Volumes, gate.Spec.Template.Spec.Containers[0].Args)
	}

	cfg := []byte("providers:\n  prometheus:\n    address: http://prometheus.monitoring:9090\n")
	objs = render(cfg)
	cms := all[*corev1.ConfigMap](objs)
	if len(cms) != 1 || cms[0].Name != AnalysisConfigMapName || cms[0].Namespace != DefaultNamespace || cms[0].Data[AnalysisConfigKey] != string(cfg) || len(cms[0].Data) != 1 {
		t.Fatalf("ConfigMaps %+v, want %s/%s with %s only", cms, DefaultNamespace, AnalysisConfigMapName, AnalysisConfigKey)
	}
	sum := findNamed[*appsv1.Deployment](t, objs, ControllerName).Spec.Template.Annotations[AnalysisChecksumAnnotation]
	other := findNamed[*appsv1.Deployment](t, render(append(slices.Clone(cfg), '\n')), ControllerName).Spec.Template.Annotations[AnalysisChecksumAnnotation]
	if sum == "" || sum == other {
		t.Errorf("%s %q and %q for two configs: want two checksums", AnalysisChecksumAnnotation, sum, other)
	}
}

func TestRenderErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"bad namespace", Options{Namespace: "Rollplan_System"}, "namespace"},
		{"certificate without key", Options{ServingCert: testCert}, "both or neither"},
		{"key without certificate", Options{ServingKey: testKey}, "both or neither"},
		{"policy file name not a ConfigMap key", Options{Policy: map[string][]byte{"sub/policy.rego": nil}}, `policy file name "sub/policy.rego"`},
		{"unknown component", Options{Components: []Component{"rollplan-web"}}, `component "rollplan-web"`},
		{"certificate without the gate", Options{Components: []Component{Controller}, CABundle: testCA}, "the gate, which is not rendered"},
		{"negative controller replicas", Options{ControllerReplicas: -1}, "controller replicas -1"},
		{"analysis config without the controller", Options{Components: []Component{Gate}, AnalysisConfig: []byte("providers: {}")}, "the controller, which is not rendered"},
	} {
		if _, err := Render(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// Every manifest in the directory is in kustomization.yaml (else Render and
// `kubectl apply -k` would silently leave it out), each has a header
// comment, and Render prints the objects of the base.
func TestKustomizationListsEveryManifest(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Resources []string `json:"resources"`
	}
	k, err := manifests.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(k, &listed); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("# ")) {
			t.Errorf("%s: no header comment", f)
		}
		if f != "kustomization.yaml" {
			want = append(want, f)
		}
	}
	got := slices.Sorted(slices.Values(listed.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want %v", got, want)
	}

	// `rollplan manifests` (Render with no options) prints the objects of
	// the files listed, in their order: no more, no fewer.
	var base []byte
	for _, f := range listed.Resources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base = append(append(base, "\n---\n"...), data...)
	}
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(objs []runtime.Object) []string {
		var out []string
		for _, o := range objs {
			m := o.(metav1.Object)
			out = append(out, fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName()))
		}
		return out
	}
	if k, r := ids(decodeAll(t, base)), ids(decodeAll(t, out)); !slices.Equal(k, r) {
		t.Errorf("the kustomize base has\n%v\nrollplan manifests prints\n%v", k, r)
	}
}

// The pods webhook's matchConditions, compiled and evaluated by the API
// server's own code (the CEL environment and variables it declares for
// webhook matchConditions), on the requests the webhook's rules match. An
// expression that does not compile, or errors (which failurePolicy Fail
// would turn into a refused request), fails the test.
func TestPodsWebhookMatchConditions(t *testing.T) {
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	vwc := find[*admissionregistrationv1.ValidatingWebhookConfiguration](t, decodeAll(t, out))
	envSet := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

	// Compiled as the API server does when the configuration is created
	// (the stricter NewExpressions environment), every webhook.
	compiler := cel.NewCompiler(envSet)
	for _, wh := range vwc.Webhooks {
		for _, mc := range wh.MatchConditions {
			mc := matchconditions.MatchCondition(mc)
			r := compiler.CompileCELExpression(&mc, cel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
			if r.Error != nil {
				t.Errorf("%s: matchCondition %s: %v", wh.Name, mc.Name, r.Error)
			}
		}
	}
	if len(vwc.Webhooks[0].MatchConditions) == 0 {
		t.Fatal("pods webhook has no matchConditions")
	}

	// As the API server's webhook accessor builds it (stored expressions).
	pods := vwc.Webhooks[0]
	var exprs []cel.ExpressionAccessor
	for _, mc := range pods.MatchConditions {
		exprs = append(exprs, &matchconditions.MatchCondition{Name: mc.Name, Expression: mc.Expression})
	}
	filter := cel.NewConditionCompiler(envSet).CompileCondition(exprs, cel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	matcher := matchconditions.NewMatcher(filter, pods.FailurePolicy, "webhook", "validate", pods.Name)

	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f", UID: "rs1", Controller: new(true)}}
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f-x", Namespace: "shop", UID: "p1", OwnerReferences: owner, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "app", Image: "app:1"},
				{Name: "proxy", Image: "proxy:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
			}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	eviction := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f-x", Namespace: "shop"},
	}
	now := metav1.Now()

	cases := []struct {
		name     string
		op       admission.Operation
		sub      string
		obj, old runtime.Object
		want     bool
	}{
		{"delete an owned pod", admission.Delete, "", nil, pod(nil), true},
		{"delete an unowned pod", admission.Delete, "", nil, pod(func(p *corev1.Pod) { p.OwnerReferences = nil }), false},
		{"delete a terminating pod", admission.Delete, "", nil, pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		{"delete a succeeded pod", admission.Delete, "", nil, pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"delete a failed pod", admission.Delete, "", nil, pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"delete a pending pod with no status phase", admission.Delete, "", nil, pod(func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }), true},
		{"evict a pod", admission.Create, "eviction", eviction, nil, true},
		{"update labels only", admission.Update, "", pod(func(p *corev1.Pod) { p.Labels["tier"] = "front" }), pod(nil), false},
		{"update the owner only", admission.Update, "", pod(func(p *corev1.Pod) { p.OwnerReferences = nil }), pod(nil), false},
		{"update a container image", admission.Update, "", pod(func(p *corev1.Pod) { p.Spec.Containers[1].Image = "proxy:2" }), pod(nil), true},
		{"update container resources", admission.Update, "", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}), pod(nil), true},
		{"update an init container image", admission.Update, "", pod(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:2"}} }), pod(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1"}} }), true},
		{"update with the same init containers", admission.Update, "", pod(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1"}} }), pod(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1"}} }), false},
		{"update through a subresource", admission.Update, "resize", pod(nil), pod(nil), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := corev1.SchemeGroupVersion.WithKind("Pod")
			if c.sub == "eviction" {
				kind = policyv1.SchemeGroupVersion.WithKind("Eviction")
			}
			attrs := admission.NewAttributesRecord(c.obj, c.old, kind, "shop", "web-5d4f-x", corev1.SchemeGroupVersion.WithResource("pods"), c.sub, c.op, nil, false, &user.DefaultInfo{Name: "system:serviceaccount:shop:deployer"})
			va := &admission.VersionedAttributes{Attributes: attrs, VersionedObject: admission.NewLazyObject(c.obj), VersionedOldObject: admission.NewLazyObject(c.old), VersionedKind: kind}
			r := matcher.Match(context.Background(), va, nil, nil)
			if r.Error != nil {
				t.Fatalf("matchConditions error (the request would be refused): %v", r.Error)
			}
			if r.Matches != c.want {
				t.Errorf("webhook called %v, want %v (condition false: %q)", r.Matches, c.want, r.FailedConditionName)
			}
		})
	}
}

// Least privilege: cluster-wide, the gate only reads; it writes nothing but
// its reservation ConfigMaps, in its own namespace (the Role). It emits no
// events, so it may not create any.
func TestRBACLeastPrivilege(t *testing.T) {
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	for _, rule := range findNamed[*rbacv1.ClusterRole](t, objs, ServiceName).Rules {
		for _, verb := range rule.Verbs {
			if !slices.Contains([]string{"get", "list", "watch"}, verb) {
				t.Errorf("ClusterRole grants %s on %v %v: the gate only reads cluster-wide", verb, rule.APIGroups, rule.Resources)
			}
		}
		if slices.Contains(rule.Resources, "events") || slices.Contains(rule.Resources, "secrets") {
			t.Errorf("ClusterRole grants %v on %v: the gate uses neither", rule.Verbs, rule.Resources)
		}
	}
	role := findNamed[*rbacv1.Role](t, objs, ServiceName)
	if role.Namespace != DefaultNamespace || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) {
		t.Errorf("Role %s/%s rules %+v: want ConfigMaps of the gate's namespace only", role.Namespace, role.Name, role.Rules)
	}
	// Reservations: get, create, update; the lapsed ones: list, delete.
	// Nothing else (no watch, no patch).
	if want := []string{"get", "list", "create", "update", "delete"}; len(role.Rules) > 0 && !slices.Equal(role.Rules[0].Verbs, want) {
		t.Errorf("Role %s/%s grants %v on ConfigMaps: the gate needs exactly %v", role.Namespace, role.Name, role.Rules[0].Verbs, want)
	}
}

// The controller's ClusterRole grants what the executor and the driver
// Leases call (executor/writer.go, executor/events.go, the informers of
// planner/snapshot/capture, the Leases of one driver per workload) and
// nothing more: resource by resource, exactly these verbs.
func TestControllerRBAC(t *testing.T) {
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	read := []string{"get", "list", "watch"}
	want := map[string][]string{
		"/pods":                        {"delete", "get", "list", "patch", "watch"},
		"/pods/status":                 {"patch"},
		"/pods/resize":                 {"patch"},
		"/pods/eviction":               {"create"},
		"/nodes":                       {"get", "list", "patch", "watch"},
		"/nodes/status":                {"patch"},
		"apps/deployments":             {"get", "list", "patch", "watch"},
		"apps/statefulsets":            {"get", "list", "patch", "watch"},
		"apps/statefulsets/status":     {"patch"},
		"apps/daemonsets":              {"get", "list", "patch", "watch"},
		"apps/replicasets":             {"delete", "get", "list", "update", "watch"},
		"apps/controllerrevisions":     read,
		"policy/poddisruptionbudgets":  read,
		"events.k8s.io/events":         {"create", "patch"},
		"coordination.k8s.io/leases":   {"create", "get", "update"},
		"rollplan.dev/rollouts":        {"create", "delete", "get", "patch"},
		"rollplan.dev/rollouts/status": {"patch"},
	}
	got := map[string][]string{}
	role := findNamed[*rbacv1.ClusterRole](t, objs, ControllerName)
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: the controller names no objects and no URLs", rule)
		}
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				got[g+"/"+r] = append(got[g+"/"+r], rule.Verbs...)
			}
		}
	}
	for k, verbs := range got {
		got[k] = slices.Compact(slices.Sorted(slices.Values(verbs)))
	}
	for k, verbs := range want {
		if !slices.Equal(got[k], verbs) {
			t.Errorf("ClusterRole %s grants %v on %s, want exactly %v", role.Name, got[k], k, verbs)
		}
	}
	for k, verbs := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("ClusterRole %s grants %v on %s: the controller does not call it", role.Name, verbs, k)
		}
	}
	// The controller has no namespaced Role: the leader-election Lease is
	// in the ClusterRole's leases.
	for _, r := range all[*rbacv1.Role](objs) {
		if r.Name == ControllerName {
			t.Errorf("Role %s/%s: the controller's permissions are all in its ClusterRole", r.Namespace, r.Name)
		}
	}
}

// Every role of every component: no wildcard, nothing that grants more
// permissions (escalate, bind, impersonate), no Secrets; and each
// Deployment runs as its own ServiceAccount, bound to its own roles only.
func TestRBACPerComponent(t *testing.T) {
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	check := func(kind, name string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
				if slices.Contains(list, "*") {
					t.Errorf("%s %s: rule %+v has a wildcard", kind, name, rule)
				}
			}
			for _, v := range []string{"escalate", "bind", "impersonate", "deletecollection"} {
				if slices.Contains(rule.Verbs, v) {
					t.Errorf("%s %s: rule %+v grants %s", kind, name, rule, v)
				}
			}
			if slices.Contains(rule.Resources, "secrets") {
				t.Errorf("%s %s: rule %+v grants Secrets: the serving certificate reaches the gate as a volume", kind, name, rule)
			}
		}
	}
	for _, r := range all[*rbacv1.ClusterRole](objs) {
		check("ClusterRole", r.Name, r.Rules)
	}
	for _, r := range all[*rbacv1.Role](objs) {
		check("Role", r.Name, r.Rules)
	}
	accounts := map[string]bool{}
	for _, sa := range all[*corev1.ServiceAccount](objs) {
		accounts[sa.Name] = true
	}
	for _, d := range all[*appsv1.Deployment](objs) {
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != d.Name || !accounts[sa] {
			t.Errorf("Deployment %s runs as ServiceAccount %q, want its own, %s, in the manifests", d.Name, sa, d.Name)
		}
	}
	if len(accounts) != 2 {
		t.Errorf("ServiceAccounts %v, want one per component", accounts)
	}
}

// Every pod template meets the restricted Pod Security profile, as the
// API server's own Pod Security admission checks it (at the latest
// version), and more: a read-only root filesystem, resource requests, a
// memory limit that GOMEMLIMIT follows. The namespace enforces the
// profile, except a namespace of the cluster's own.
func TestPodSecurityRestricted(t *testing.T) {
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"defaults", Options{}},
		{"quick install with policy", Options{CABundle: testCA, ServingCert: testCert, ServingKey: testKey, Policy: map[string][]byte{"p.rego": []byte("package rollplan.strategy\n")}, Engine: "rego", ControllerDryRun: true, ControllerReplicas: 3}},
		{"kube-system", Options{Namespace: "kube-system"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := Render(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeAll(t, out)
			ns := find[*corev1.Namespace](t, objs)
			enforce, hasPSA := ns.Labels["pod-security.kubernetes.io/enforce"], false
			for k := range ns.Labels {
				hasPSA = hasPSA || strings.HasPrefix(k, "pod-security.kubernetes.io/")
			}
			if c.opts.Namespace == "kube-system" {
				if hasPSA {
					t.Errorf("Namespace kube-system labels %v: rollplan must not enforce a profile on the cluster's own namespace", ns.Labels)
				}
			} else if enforce != "restricted" || ns.Labels["pod-security.kubernetes.io/enforce-version"] != "latest" {
				t.Errorf("Namespace %s labels %v, want pod-security.kubernetes.io/enforce=restricted at the latest version", ns.Name, ns.Labels)
			}

			deployments := all[*appsv1.Deployment](objs)
			if len(deployments) != 2 {
				t.Fatalf("%d Deployments, want the gate's and the controller's", len(deployments))
			}
			for _, d := range deployments {
				tmpl := d.Spec.Template
				for _, r := range evaluator.EvaluatePod(restricted, &tmpl.ObjectMeta, &tmpl.Spec) {
					if !r.Allowed {
						t.Errorf("Deployment %s: restricted Pod Security: %s: %s", d.Name, r.ForbiddenReason, r.ForbiddenDetail)
					}
				}
				for _, ctr := range slices.Concat(tmpl.Spec.InitContainers, tmpl.Spec.Containers) {
					sc := ctr.SecurityContext
					if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
						t.Errorf("Deployment %s container %s: root filesystem not read-only", d.Name, ctr.Name)
					}
					if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
						t.Errorf("Deployment %s container %s: securityContext %+v, want no privilege escalation and every capability dropped", d.Name, ctr.Name, sc)
					}
					req, lim := ctr.Resources.Requests, ctr.Resources.Limits
					if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
						t.Errorf("Deployment %s container %s: resources %+v, want cpu and memory requests and a memory limit", d.Name, ctr.Name, ctr.Resources)
					}
					var gomemlimit *corev1.EnvVar
					for i := range ctr.Env {
						if ctr.Env[i].Name == "GOMEMLIMIT" {
							gomemlimit = &ctr.Env[i]
						}
					}
					if gomemlimit == nil || gomemlimit.ValueFrom == nil || gomemlimit.ValueFrom.ResourceFieldRef == nil ||
						gomemlimit.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || gomemlimit.ValueFrom.ResourceFieldRef.ContainerName != "" {
						t.Errorf("Deployment %s container %s: GOMEMLIMIT %+v, want it from this container's limits.memory", d.Name, ctr.Name, gomemlimit)
					}
				}
			}
		})
	}
}

// The controller's Deployment: replicas spread over zones, leader
// election with the pod's identity, probes and metrics where its flags
// serve them; and the options that change it.
func TestControllerDeployment(t *testing.T) {
	out, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	for _, d := range all[*appsv1.Deployment](objs) {
		zone := false
		for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
			if tsc.TopologyKey == "topology.kubernetes.io/zone" && tsc.MaxSkew == 1 && tsc.LabelSelector != nil &&
				labels.SelectorFromSet(tsc.LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
				zone = true
			}
		}
		if !zone {
			t.Errorf("Deployment %s: no topologySpreadConstraint over topology.kubernetes.io/zone selecting its pods: %+v", d.Name, d.Spec.Template.Spec.TopologySpreadConstraints)
		}
		// The gate keeps one replica (the pods webhook fails closed); the
		// controller loses one at a time, and a drain is never stuck on a
		// single replica.
		pdb := findNamed[*policyv1.PodDisruptionBudget](t, objs, d.Name)
		budget, want := pdb.Spec.MinAvailable, "minAvailable"
		if d.Name == ControllerName {
			budget, want = pdb.Spec.MaxUnavailable, "maxUnavailable"
		}
		if budget == nil || budget.IntValue() != 1 || !slices.Equal(slices.Sorted(maps.Keys(pdb.Spec.Selector.MatchLabels)), slices.Sorted(maps.Keys(d.Spec.Selector.MatchLabels))) ||
			(pdb.Spec.MinAvailable != nil) == (pdb.Spec.MaxUnavailable != nil) {
			t.Errorf("PodDisruptionBudget %s: %+v, want %s 1 (only) over the Deployment's pods", pdb.Name, pdb.Spec, want)
		}
		svc := findNamed[*corev1.Service](t, objs, d.Name)
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s selects %v, not the Deployment's pods", svc.Name, svc.Spec.Selector)
		}
	}

	d := findNamed[*appsv1.Deployment](t, objs, ControllerName)
	ctr := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAMESPACE"] != "metadata.namespace" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("controller env %v: want POD_NAMESPACE and POD_NAME from the downward API (the leader election's namespace and identity)", ctr.Env)
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if !slices.Contains(ctr.Args, fmt.Sprintf("--health-probe-bind-address=:%d", ports["health"])) || ports["health"] != 8081 ||
		!slices.Contains(ctr.Args, fmt.Sprintf("--metrics-bind-address=:%d", ports["metrics"])) || ports["metrics"] != 8080 {
		t.Errorf("controller args %v, ports %v: want health on 8081 and metrics on 8080, served where the flags say", ctr.Args, ports)
	}
	for probe, path := range map[*corev1.Probe]string{ctr.LivenessProbe: "/healthz", ctr.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("controller probe %+v, want GET %s on the health port", probe, path)
		}
	}
	svc := findNamed[*corev1.Service](t, objs, ControllerName)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("Service %s ports %+v, want the metrics port only", svc.Name, svc.Spec.Ports)
	}

	// Replicas, dry run, policy: the controller and the gate mount one
	// ConfigMap and name its files.
	out, err = Render(Options{ControllerReplicas: 3, ControllerDryRun: true, Engine: "cel",
		Policy: map[string][]byte{"b.yaml": []byte("b"), "a.yaml": []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	objs = decodeAll(t, out)
	cms := all[*corev1.ConfigMap](objs)
	if len(cms) != 1 || cms[0].Name != PolicyConfigMapName || !slices.Equal(slices.Sorted(maps.Keys(cms[0].Data)), []string{"a.yaml", "b.yaml"}) {
		t.Fatalf("ConfigMaps %+v, want one %s with both files", cms, PolicyConfigMapName)
	}
	d = findNamed[*appsv1.Deployment](t, objs, ControllerName)
	if *d.Spec.Replicas != 3 {
		t.Errorf("controller replicas %d, want 3", *d.Spec.Replicas)
	}
	if want := []string{"controller", "--leader-elect=true", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080",
		"--analysis-config=" + AnalysisMountPath + "/" + AnalysisConfigKey, "--dry-run",
		"--engine=cel", "--policy=" + PolicyMountPath + "/a.yaml", "--policy=" + PolicyMountPath + "/b.yaml"}; !slices.Equal(d.Spec.Template.Spec.Containers[0].Args, want) {
		t.Errorf("controller args %v, want %v", d.Spec.Template.Spec.Containers[0].Args, want)
	}
	gate := findNamed[*appsv1.Deployment](t, objs, ServiceName)
	if slices.Contains(gate.Spec.Template.Spec.Containers[0].Args, "--dry-run") || *gate.Spec.Replicas != 2 {
		t.Errorf("the controller's options reached the gate: args %v, replicas %d", gate.Spec.Template.Spec.Containers[0].Args, *gate.Spec.Replicas)
	}
	for _, d := range []*appsv1.Deployment{d, gate} {
		spec := d.Spec.Template.Spec
		ctr := spec.Containers[0]
		if !slices.Contains(ctr.Args, "--policy="+PolicyMountPath+"/a.yaml") {
			t.Errorf("Deployment %s args %v: no --policy for a.yaml", d.Name, ctr.Args)
		}
		v := spec.Volumes[len(spec.Volumes)-1]
		m := ctr.VolumeMounts[len(ctr.VolumeMounts)-1]
		if v.ConfigMap == nil || v.ConfigMap.Name != PolicyConfigMapName || m.Name != v.Name || m.MountPath != PolicyMountPath || !m.ReadOnly {
			t.Errorf("Deployment %s: volume %+v mounted %+v, want %s read-only at %s", d.Name, v, m, PolicyConfigMapName, PolicyMountPath)
		}
	}
}
