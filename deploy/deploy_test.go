package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// decodeAll decodes a rendered stream with client-go's strict decoder (not
// Render's own), so a document that is not a valid API object fails.
func decodeAll(t *testing.T, stream []byte) []runtime.Object {
	t.Helper()
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("document %d: %v\n%s", len(objs)+1, err, doc)
		}
		objs = append(objs, obj)
	}
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

// A fixed CA, certificate and key: Render only copies them.
var (
	testCA   = []byte("-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n")
	testCert = []byte("-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n")
	testKey  = []byte("-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n")
)

func TestRender(t *testing.T) {
	base := []string{"*v1.Namespace", "*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.Role", "*v1.RoleBinding", "*v1.Service", "*v1.Deployment", "*v1.PodDisruptionBudget", "*v1.ValidatingWebhookConfiguration"}
	withSecret := slices.Insert(slices.Clone(base), 1, "*v1.Secret")
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
				case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *admissionregistrationv1.ValidatingWebhookConfiguration:
					if m.GetNamespace() != "" {
						t.Errorf("%T %s: cluster-scoped, namespace %q", o, m.GetName(), m.GetNamespace())
					}
				default:
					if m.GetNamespace() != c.namespace {
						t.Errorf("%T %s: namespace %q, want %q", o, m.GetName(), m.GetNamespace(), c.namespace)
					}
				}
			}
			for _, subjects := range [][]rbacv1.Subject{find[*rbacv1.ClusterRoleBinding](t, objs).Subjects, find[*rbacv1.RoleBinding](t, objs).Subjects} {
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rollplan-gate", Namespace: c.namespace}}
				if !slices.Equal(subjects, want) {
					t.Errorf("subjects %v, want %v", subjects, want)
				}
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
			d := find[*appsv1.Deployment](t, objs)
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
		return find[*appsv1.Deployment](t, decodeAll(t, out)).Spec.Template.Annotations[CertChecksumAnnotation]
	}
	if a, b := sum(testCert), sum(append(slices.Clone(testCert), '\n')); a == b {
		t.Errorf("same checksum %s for two certificates", a)
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
	} {
		if _, err := Render(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// Every manifest in the directory is in kustomization.yaml (else Render and
// `kubectl apply -k` would silently leave it out), and each has a header
// comment.
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
	for _, rule := range find[*rbacv1.ClusterRole](t, objs).Rules {
		for _, verb := range rule.Verbs {
			if !slices.Contains([]string{"get", "list", "watch"}, verb) {
				t.Errorf("ClusterRole grants %s on %v %v: the gate only reads cluster-wide", verb, rule.APIGroups, rule.Resources)
			}
		}
		if slices.Contains(rule.Resources, "events") || slices.Contains(rule.Resources, "secrets") {
			t.Errorf("ClusterRole grants %v on %v: the gate uses neither", rule.Verbs, rule.Resources)
		}
	}
	role := find[*rbacv1.Role](t, objs)
	if role.Namespace != DefaultNamespace || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) {
		t.Errorf("Role %s/%s rules %+v: want ConfigMaps of the gate's namespace only", role.Namespace, role.Name, role.Rules)
	}
	// Reservations: get, create, update; the lapsed ones: list, delete.
	// Nothing else (no watch, no patch).
	if want := []string{"get", "list", "create", "update", "delete"}; len(role.Rules) > 0 && !slices.Equal(role.Rules[0].Verbs, want) {
		t.Errorf("Role %s/%s grants %v on ConfigMaps: the gate needs exactly %v", role.Namespace, role.Name, role.Rules[0].Verbs, want)
	}
}
