// Package deploy holds rollplan's in-cluster manifests, the gate's and the
// controller's (this directory is also a kustomize base), and renders them
// for one install: namespace, image, the webhook's CA bundle and,
// optionally, the TLS Secret, the policy ConfigMap and the controller's
// analysis config ConfigMap.
package deploy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var manifests embed.FS

const (
	// DefaultNamespace is the namespace the manifests are written for.
	DefaultNamespace = "rollplan-system"
	// DefaultImage is the image of the gate and the controller in the
	// manifests (the kustomize image name is "rollplan").
	DefaultImage = "rollplan:latest"
	// ServiceName names the gate's Service; the serving certificate must
	// be valid for it (see certs.Generate).
	ServiceName = "rollplan-gate"
	// SecretName names the kubernetes.io/tls Secret the gate mounts.
	SecretName = "rollplan-gate-tls"
	// CertChecksumAnnotation, on the gate's pod template, changes with the
	// serving certificate so that a new one rolls the gate out.
	CertChecksumAnnotation = "rollplan.dev/serving-cert-sha256"
	// PolicyConfigMapName names the ConfigMap holding the policy files
	// (Options.Policy), mounted at PolicyMountPath by the gate and the
	// controller alike: one policy, so that the controller plans with the
	// budgets the gate enforces.
	PolicyConfigMapName = "rollplan-policy"
	// PolicyMountPath is where the gate and controller containers see the
	// policy files.
	PolicyMountPath = "/etc/rollplan/policy"
	// AnalysisConfigMapName names the optional ConfigMap of the
	// controller's --analysis-config (Options.AnalysisConfig), key
	// AnalysisConfigKey, mounted at AnalysisMountPath. The manifests always
	// mount it and pass the flag: an operator adds the ConfigMap, nothing
	// else.
	AnalysisConfigMapName = "rollplan-analysis"
	// AnalysisMountPath is where the controller sees the ConfigMap.
	AnalysisMountPath = "/etc/rollplan/analysis"
	// AnalysisConfigKey is the ConfigMap's key the controller reads.
	AnalysisConfigKey = "analysis.yaml"
	// AnalysisChecksumAnnotation, on the controller's pod template, changes
	// with Options.AnalysisConfig: the controller reads the file at start,
	// so a new one rolls it out.
	AnalysisChecksumAnnotation = "rollplan.dev/analysis-config-sha256"
	// ControllerName names the controller's Deployment, ServiceAccount,
	// ClusterRole and Service.
	ControllerName = "rollplan-controller"

	imageName = "rollplan"
	// gateContainer and controllerContainer name the containers that run
	// rollplan gate and rollplan controller.
	gateContainer       = "gate"
	controllerContainer = "controller"
	// nameLabel says, on every object, which component it belongs to
	// (Component), or "rollplan" for the objects both share.
	nameLabel = "app.kubernetes.io/name"
	// namespaceLabel is the label the webhooks' namespaceSelectors exclude
	// namespaces by (set by the API server on every namespace).
	namespaceLabel = "kubernetes.io/metadata.name"
)

// builtinNamespaces are the namespaces every cluster has, with pods that
// are not rollplan's.
var builtinNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// podSecurityLabelPrefix starts the Pod Security admission labels the
// namespace carries.
const podSecurityLabelPrefix = "pod-security.kubernetes.io/"

// Component is a part of rollplan that runs in the cluster. Its objects
// carry the label app.kubernetes.io/name with its value.
type Component string

const (
	// Gate is `rollplan gate` and its webhook configuration.
	Gate Component = "rollplan-gate"
	// Controller is `rollplan controller`.
	Controller Component = ControllerName
)

// Options configure Render. The zero value renders the manifests as they
// are in this directory (the kustomize base), without CA bundle or Secret.
type Options struct {
	// Components to render, with the objects they share (the namespace,
	// the policy ConfigMap); all if empty.
	Components []Component
	// Namespace the gate and the controller run in; DefaultNamespace if
	// empty. The Namespace object enforces the restricted Pod Security
	// profile, unless it is one of the cluster's own (kube-system,
	// default, ...): its other pods may not meet it.
	Namespace string
	// Image of the gate and controller containers; DefaultImage if empty.
	Image string
	// CABundle is the PEM CA the API server verifies the gate's serving
	// certificate with; left out of the webhooks if empty.
	CABundle []byte
	// ServingCert and ServingKey (PEM), if set, are rendered as the
	// Secret SecretName; set both or neither.
	ServingCert, ServingKey []byte
	// Policy, if set, is the policy of the gate and the controller: file
	// name (a ConfigMap key) → content. It is rendered as the ConfigMap
	// PolicyConfigMapName, mounted at PolicyMountPath, and each gets one
	// --policy per file. They name the files, not the directory: the
	// kubelet's mount holds every file twice (the key, a symlink, and the
	// real file under a hidden ..TIMESTAMP directory), and a policy loader
	// walking the directory would read each policy twice. Through the
	// symlinks both still see an edited ConfigMap and reload it.
	Policy map[string][]byte
	// Engine, if set, is the --engine of the gate and the controller.
	Engine string
	// ControllerReplicas, if > 0, replaces the controller Deployment's 2
	// replicas (leader election elects one to drive).
	ControllerReplicas int32
	// ControllerDryRun gives the controller --dry-run: it plans and
	// reports every action and writes nothing.
	ControllerDryRun bool
	// AnalysisConfig, if set, is the controller's --analysis-config file
	// (analysis.Config YAML), rendered as the ConfigMap
	// AnalysisConfigMapName.
	AnalysisConfig []byte
}

// renders says whether o renders component c.
func (o Options) renders(c Component) bool {
	return len(o.Components) == 0 || slices.Contains(o.Components, c)
}

// Render returns the manifests as one multi-document YAML stream, in the
// order of kustomization.yaml (the Secret, if any, right after the
// Namespace), adjusted to o. The same o gives the same bytes.
func Render(o Options) ([]byte, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if (len(o.ServingCert) == 0) != (len(o.ServingKey) == 0) {
		return nil, errors.New("serving certificate and key: set both or neither")
	}
	for _, c := range o.Components {
		if c != Gate && c != Controller {
			return nil, fmt.Errorf("component %q: want %s or %s", c, Gate, Controller)
		}
	}
	if !o.renders(Gate) && (len(o.ServingCert) > 0 || len(o.CABundle) > 0) {
		return nil, errors.New("a CA bundle or serving certificate is for the gate, which is not rendered")
	}
	if o.ControllerReplicas < 0 {
		return nil, fmt.Errorf("controller replicas %d: want at least 1 (or 0 for the manifests' 2)", o.ControllerReplicas)
	}
	if len(o.AnalysisConfig) > 0 && !o.renders(Controller) {
		return nil, errors.New("an analysis config is for the controller, which is not rendered")
	}
	for k := range o.Policy {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			return nil, fmt.Errorf("policy file name %q: %s", k, strings.Join(errs, "; "))
		}
	}

	objs, err := load()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, obj := range objs {
		c, err := componentOf(obj)
		if err != nil {
			return nil, err
		}
		if c != "" && !o.renders(c) {
			continue
		}
		if err := customize(obj, o); err != nil {
			return nil, err
		}
		if err := writeDoc(&out, obj); err != nil {
			return nil, err
		}
		if _, ok := obj.(*corev1.Namespace); ok && len(o.ServingCert) > 0 && o.renders(Gate) {
			if err := writeDoc(&out, tlsSecret(o)); err != nil {
				return nil, err
			}
		}
		if _, ok := obj.(*corev1.Namespace); ok && len(o.Policy) > 0 {
			if err := writeDoc(&out, policyConfigMap(o)); err != nil {
				return nil, err
			}
		}
		if _, ok := obj.(*corev1.Namespace); ok && len(o.AnalysisConfig) > 0 {
			if err := writeDoc(&out, analysisConfigMap(o)); err != nil {
				return nil, err
			}
		}
	}
	return out.Bytes(), nil
}

// load decodes every manifest listed in kustomization.yaml, in order, into
// its typed API object. Decoding is strict, so a misspelt field in a
// manifest fails here (and in the tests) rather than in a cluster.
func load() ([]any, error) {
	k, err := manifests.ReadFile("kustomization.yaml")
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(k, &kustomization); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	var objs []any
	for _, file := range kustomization.Resources {
		data, err := manifests.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("kustomization.yaml lists %s: %w", file, err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for n := 1; ; n++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
			}
			obj, err := decode(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, n, err)
			}
			if obj != nil {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// componentOf is the component obj belongs to by its label
// app.kubernetes.io/name, "" for the objects all share (label "rollplan").
func componentOf(obj any) (Component, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%T is not an API object", obj)
	}
	switch v := m.GetLabels()[nameLabel]; Component(v) {
	case Gate, Controller:
		return Component(v), nil
	case "rollplan":
		return "", nil
	default:
		return "", fmt.Errorf("%T %s: label %s=%q names no component (want %s, %s or rollplan)", obj, m.GetName(), nameLabel, v, Gate, Controller)
	}
}

// decode returns the typed object of one YAML document, nil for a document
// with only comments.
func decode(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" && tm.Kind == "" && len(bytes.TrimSpace(stripComments(doc))) == 0 {
		return nil, nil
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Namespace":
		obj = &corev1.Namespace{}
	case "v1/ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "rbac.authorization.k8s.io/v1/Role":
		obj = &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		obj = &rbacv1.RoleBinding{}
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration":
		obj = &admissionregistrationv1.ValidatingWebhookConfiguration{}
	case "apiextensions.k8s.io/v1/CustomResourceDefinition":
		obj = &apiextensionsv1.CustomResourceDefinition{}
	default:
		return nil, fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			b.Write(line)
		}
	}
	return b.Bytes()
}

// customize moves obj to o.Namespace, sets the image and, on the webhooks,
// the CA bundle.
func customize(obj any, o Options) error {
	subjects := func(ss []rbacv1.Subject) {
		for i := range ss {
			if ss[i].Kind == rbacv1.ServiceAccountKind {
				ss[i].Namespace = o.Namespace
			}
		}
	}
	switch obj := obj.(type) {
	case *corev1.Namespace:
		obj.Name = o.Namespace
		// Enforcing the restricted profile on a namespace rollplan does
		// not own would refuse its other pods that do not meet it.
		if builtinNamespaces[o.Namespace] {
			for k := range obj.Labels {
				if strings.HasPrefix(k, podSecurityLabelPrefix) {
					delete(obj.Labels, k)
				}
			}
		}
	case *corev1.ServiceAccount:
		obj.Namespace = o.Namespace
	case *corev1.Service:
		obj.Namespace = o.Namespace
	case *rbacv1.ClusterRole:
	case *apiextensionsv1.CustomResourceDefinition:
	case *rbacv1.ClusterRoleBinding:
		subjects(obj.Subjects)
	case *rbacv1.Role:
		obj.Namespace = o.Namespace
	case *rbacv1.RoleBinding:
		obj.Namespace = o.Namespace
		subjects(obj.Subjects)
	case *appsv1.Deployment:
		obj.Namespace = o.Namespace
		spec := &obj.Spec.Template.Spec
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				if isRollplanImage(cs[i].Image) {
					cs[i].Image = o.Image
				}
			}
		}
		switch obj.Name {
		case ServiceName:
			if len(o.ServingCert) > 0 {
				sum := sha256.Sum256(o.ServingCert)
				metav1.SetMetaDataAnnotation(&obj.Spec.Template.ObjectMeta, CertChecksumAnnotation, hex.EncodeToString(sum[:]))
			}
			return podPolicy(obj, gateContainer, o)
		case ControllerName:
			if o.ControllerReplicas > 0 {
				replicas := o.ControllerReplicas
				obj.Spec.Replicas = &replicas
			}
			if len(o.AnalysisConfig) > 0 {
				sum := sha256.Sum256(o.AnalysisConfig)
				metav1.SetMetaDataAnnotation(&obj.Spec.Template.ObjectMeta, AnalysisChecksumAnnotation, hex.EncodeToString(sum[:]))
			}
			if o.ControllerDryRun {
				c, err := container(obj, controllerContainer)
				if err != nil {
					return err
				}
				c.Args = append(c.Args, "--dry-run")
			}
			return podPolicy(obj, controllerContainer, o)
		default:
			return fmt.Errorf("deployment %s: neither the gate's (%s) nor the controller's (%s)", obj.Name, ServiceName, ControllerName)
		}
	case *policyv1.PodDisruptionBudget:
		obj.Namespace = o.Namespace
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range obj.Webhooks {
			wh := &obj.Webhooks[i]
			if wh.ClientConfig.Service == nil {
				return fmt.Errorf("webhook %s: no clientConfig.service", wh.Name)
			}
			wh.ClientConfig.Service.Namespace = o.Namespace
			if len(o.CABundle) > 0 {
				wh.ClientConfig.CABundle = o.CABundle
			}
			if err := excludeNamespace(wh, o.Namespace); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("no namespace rule for %T", obj)
	}
	return nil
}

// isRollplanImage: image is the kustomize image "rollplan", any tag or
// digest.
func isRollplanImage(image string) bool {
	return image == imageName || strings.HasPrefix(image, imageName+":") || strings.HasPrefix(image, imageName+"@")
}

// excludeNamespace makes the webhook's namespaceSelector exclude ns in
// place of DefaultNamespace, keeping the other exclusions (kube-system).
func excludeNamespace(wh *admissionregistrationv1.ValidatingWebhook, ns string) error {
	if wh.NamespaceSelector != nil {
		for i := range wh.NamespaceSelector.MatchExpressions {
			e := &wh.NamespaceSelector.MatchExpressions[i]
			if e.Key != namespaceLabel || e.Operator != metav1.LabelSelectorOpNotIn {
				continue
			}
			values := []string{}
			for _, v := range e.Values {
				if v == DefaultNamespace {
					v = ns
				}
				if !contains(values, v) {
					values = append(values, v)
				}
			}
			e.Values = values
			return nil
		}
	}
	return fmt.Errorf("webhook %s: no namespaceSelector %s NotIn to exclude the gate's namespace", wh.Name, namespaceLabel)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// container is the container of d named name.
func container(d *appsv1.Deployment, name string) (*corev1.Container, error) {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i], nil
		}
	}
	return nil, fmt.Errorf("deployment %s: no container %q", d.Name, name)
}

// podPolicy gives d's container name --engine, and --policy with the
// volume of the policy ConfigMap.
func podPolicy(d *appsv1.Deployment, name string, o Options) error {
	if o.Engine == "" && len(o.Policy) == 0 {
		return nil
	}
	c, err := container(d, name)
	if err != nil {
		return fmt.Errorf("give the policy to %s: %w", name, err)
	}
	if o.Engine != "" {
		c.Args = append(c.Args, "--engine="+o.Engine)
	}
	if len(o.Policy) == 0 {
		return nil
	}
	keys := make([]string, 0, len(o.Policy))
	for k := range o.Policy {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Args = append(c.Args, "--policy="+PolicyMountPath+"/"+k)
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "policy", MountPath: PolicyMountPath, ReadOnly: true})
	spec := &d.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "policy", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: PolicyConfigMapName}},
	}})
	return nil
}

func policyConfigMap(o Options) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      PolicyConfigMapName,
			Namespace: o.Namespace,
			Labels:    map[string]string{nameLabel: "rollplan"},
		},
		Data: map[string]string{},
	}
	for k, v := range o.Policy {
		cm.Data[k] = string(v)
	}
	return cm
}

func analysisConfigMap(o Options) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      AnalysisConfigMapName,
			Namespace: o.Namespace,
			Labels:    map[string]string{nameLabel: string(Controller)},
		},
		Data: map[string]string{AnalysisConfigKey: string(o.AnalysisConfig)},
	}
}

func tlsSecret(o Options) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      SecretName,
			Namespace: o.Namespace,
			Labels:    map[string]string{nameLabel: string(Gate)},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       o.ServingCert,
			corev1.TLSPrivateKeyKey: o.ServingKey,
		},
	}
	// ca.crt, as cert-manager writes it, so either Secret serves the same.
	if len(o.CABundle) > 0 {
		s.Data["ca.crt"] = o.CABundle
	}
	return s
}

// writeDoc appends obj as one YAML document. Marshalling goes through a
// map, so keys come out sorted (deterministic) and the status and empty
// spec the typed objects always carry (a manifest sets neither) are
// dropped.
func writeDoc(w *bytes.Buffer, obj any) error {
	j, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	y, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	w.WriteString("---\n")
	w.Write(y)
	return nil
}
