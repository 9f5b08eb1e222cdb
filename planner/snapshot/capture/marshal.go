package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// Output formats of Marshal.
const (
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// LastAppliedAnnotation is dropped from every object: it repeats the whole
// object as applied, env values included.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// RedactedPrefix starts every redacted env value.
const RedactedPrefix = "redacted-sha256:"

// Redact is the redacted form of an env value: RedactedPrefix and the first
// 12 hex digits of its sha256. Equal values stay equal and different values
// stay different, so the planner still sees which env changed; the empty
// value stays empty.
func Redact(v string) string {
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return RedactedPrefix + hex.EncodeToString(sum[:])[:12]
}

// Marshal writes the snapshot as one kind: List (apiVersion v1), format
// yaml or json: items in kind order (Deployment, ReplicaSet, StatefulSet,
// DaemonSet, ControllerRevision, Pod, Node, PodDisruptionBudget), then by
// namespace and name, each with apiVersion and kind; managedFields, the
// last-applied-configuration annotation and Node
// status.images left out; env values of every container of every pod
// template, ControllerRevision and pod redacted (valueFrom references
// kept). The capture time is the List's snapshot.AnnCapturedAt annotation.
// The same snapshot gives the same bytes; the snapshot is not modified.
func Marshal(s *snapshot.Snapshot, format string) ([]byte, error) {
	if format != FormatYAML && format != FormatJSON {
		return nil, fmt.Errorf("output format %q: want yaml or json", format)
	}
	out := list{APIVersion: "v1", Kind: "List", Items: []any{}}
	if !s.CapturedAt.IsZero() {
		out.Metadata.Annotations = map[string]string{snapshot.AnnCapturedAt: s.CapturedAt.UTC().Format(time.RFC3339)}
	}
	if s.KubernetesVersion != "" {
		if out.Metadata.Annotations == nil {
			out.Metadata.Annotations = map[string]string{}
		}
		out.Metadata.Annotations[snapshot.AnnKubernetesVersion] = s.KubernetesVersion
	}
	apps, core, policy := appsv1.SchemeGroupVersion, corev1.SchemeGroupVersion, policyv1.SchemeGroupVersion
	for _, o := range sorted(s.Deployments, func(o *appsv1.Deployment) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, apps, "Deployment")
		clean(&o.ObjectMeta)
		redactPodSpec(&o.Spec.Template.Spec)
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.ReplicaSets, func(o *appsv1.ReplicaSet) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, apps, "ReplicaSet")
		clean(&o.ObjectMeta)
		redactPodSpec(&o.Spec.Template.Spec)
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.StatefulSets, func(o *appsv1.StatefulSet) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, apps, "StatefulSet")
		clean(&o.ObjectMeta)
		redactPodSpec(&o.Spec.Template.Spec)
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.DaemonSets, func(o *appsv1.DaemonSet) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, apps, "DaemonSet")
		clean(&o.ObjectMeta)
		redactPodSpec(&o.Spec.Template.Spec)
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.ControllerRevisions, func(o *appsv1.ControllerRevision) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, apps, "ControllerRevision")
		clean(&o.ObjectMeta)
		raw, err := redactRevision(o.Data.Raw)
		if err != nil {
			return nil, fmt.Errorf("ControllerRevision %s/%s: data: %w", o.Namespace, o.Name, err)
		}
		o.Data.Raw, o.Data.Object = raw, nil
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.Pods, func(o *corev1.Pod) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, core, "Pod")
		clean(&o.ObjectMeta)
		redactPodSpec(&o.Spec)
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.Nodes, func(o *corev1.Node) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, core, "Node")
		clean(&o.ObjectMeta)
		o.Status.Images = nil // every image on the node: long, and no rollout reads it
		out.Items = append(out.Items, o)
	}
	for _, o := range sorted(s.PDBs, func(o *policyv1.PodDisruptionBudget) metav1.Object { return o }) {
		o = o.DeepCopy()
		setType(&o.TypeMeta, policy, "PodDisruptionBudget")
		clean(&o.ObjectMeta)
		out.Items = append(out.Items, o)
	}
	if format == FormatYAML {
		b, err := yaml.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode snapshot: %w", err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

type list struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Items []any `json:"items"`
}

// sorted returns the objects ordered by namespace and name, leaving xs as it is.
func sorted[T any](xs []T, meta func(T) metav1.Object) []T {
	out := append([]T(nil), xs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := meta(out[i]), meta(out[j])
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	return out
}

// setType fills the TypeMeta that typed objects read through client-go lack.
func setType(t *metav1.TypeMeta, gv schema.GroupVersion, kind string) {
	t.APIVersion, t.Kind = gv.String(), kind
}

// clean strips the metadata no plan reads; resourceVersion, uid,
// generation, creationTimestamp, ownerReferences, labels and the other
// annotations stay.
func clean(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[LastAppliedAnnotation]; ok {
		delete(m.Annotations, LastAppliedAnnotation)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
	}
}

func redactPodSpec(s *corev1.PodSpec) {
	for i := range s.InitContainers {
		redactEnv(s.InitContainers[i].Env)
	}
	for i := range s.Containers {
		redactEnv(s.Containers[i].Env)
	}
	for i := range s.EphemeralContainers {
		redactEnv(s.EphemeralContainers[i].Env)
	}
}

func redactEnv(env []corev1.EnvVar) {
	for i := range env {
		env[i].Value = Redact(env[i].Value)
	}
}

// redactRevision redacts the env values of the pod template a
// ControllerRevision records ({"spec":{"template":{...}}}, as the
// StatefulSet and DaemonSet controllers write it). Data without env values
// is returned as it is; numbers keep their digits.
func redactRevision(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	spec := dig(doc, "spec", "template", "spec")
	changed := false
	for _, key := range []string{"initContainers", "containers", "ephemeralContainers"} {
		cs, _ := spec[key].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			env, _ := cm["env"].([]any)
			for _, e := range env {
				em, _ := e.(map[string]any)
				if v, ok := em["value"].(string); ok && v != "" {
					em["value"], changed = Redact(v), true
				}
			}
		}
	}
	if !changed {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// dig walks nested JSON objects; nil when a key is missing.
func dig(v any, keys ...string) map[string]any {
	m, _ := v.(map[string]any)
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}
