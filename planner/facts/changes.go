package facts

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Labels that carry the revision itself; a difference there is not a change.
var revisionLabels = map[string]bool{
	"pod-template-hash":        true,
	"controller-revision-hash": true,
	"pod-template-generation":  true,
}

// Annotations the API refuses to change on a running pod (§5.1).
// annRestartedAt is the template annotation kubectl rollout restart sets.
const annRestartedAt = "kubectl.kubernetes.io/restartedAt"

func immutableAnnotation(k string) bool {
	return k == "kubernetes.io/config.mirror" || strings.HasPrefix(k, "container.apparmor.security.beta.kubernetes.io/")
}

// Diff lists the template fields that differ between from (the pod's
// revision) and to (the update revision), each with its class and whether a
// running pod may take it.
func Diff(from, to *corev1.PodTemplateSpec) []Change {
	var out []Change
	out = append(out, diffStringMap("metadata.labels", ClassLabels, from.Labels, to.Labels, func(k string) bool { return revisionLabels[k] })...)
	out = append(out, diffStringMap("metadata.annotations", ClassAnnotations, from.Annotations, to.Annotations, func(string) bool { return false })...)
	for i := range out {
		key := strings.TrimSuffix(strings.TrimPrefix(out[i].Path, "metadata.annotations["), "]")
		switch {
		case out[i].Class != ClassAnnotations:
		case immutableAnnotation(key):
			out[i].InPlace = false
			out[i].Detail = "this annotation is immutable on a running pod"
		case key == annRestartedAt:
			// Patching it onto a running pod would restart nothing.
			out[i].InPlace = false
			out[i].Detail = "kubectl rollout restart asks for new pods"
		}
	}
	fm, tm := toMap(from.ObjectMeta), toMap(to.ObjectMeta)
	for _, k := range []string{"labels", "annotations", "creationTimestamp"} {
		delete(fm, k)
		delete(tm, k)
	}
	for _, k := range unionKeys(fm, tm) {
		if !reflect.DeepEqual(fm[k], tm[k]) {
			out = append(out, Change{Path: "metadata." + k, Class: ClassOther, Detail: "pod metadata." + k + " cannot change in place"})
		}
	}
	qosChanged := podQOS(&from.Spec) != podQOS(&to.Spec)
	out = append(out, diffContainers("spec.containers", ClassImage, from.Spec.Containers, to.Spec.Containers, qosChanged)...)
	out = append(out, diffContainers("spec.initContainers", ClassInitImage, from.Spec.InitContainers, to.Spec.InitContainers, qosChanged)...)
	fs, ts := toMap(from.Spec), toMap(to.Spec)
	for _, k := range []string{"containers", "initContainers"} {
		delete(fs, k)
		delete(ts, k)
	}
	for _, k := range unionKeys(fs, ts) {
		if !reflect.DeepEqual(fs[k], ts[k]) {
			out = append(out, Change{Path: "spec." + k, Class: ClassOther, Detail: "spec." + k + " cannot change on a running pod"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diffStringMap(prefix, class string, a, b map[string]string, ignore func(string) bool) []Change {
	var out []Change
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		if ignore(k) {
			continue
		}
		av, aok := a[k]
		bv, bok := b[k]
		if aok != bok || av != bv {
			out = append(out, Change{Path: fmt.Sprintf("%s[%s]", prefix, k), Class: class, InPlace: true})
		}
	}
	return out
}

func diffContainers(prefix, imageClass string, from, to []corev1.Container, qosChanged bool) []Change {
	var out []Change
	if len(from) != len(to) {
		return []Change{{Path: prefix, Class: ClassOther, Detail: "containers added or removed"}}
	}
	for i := range from {
		if from[i].Name != to[i].Name {
			return []Change{{Path: prefix, Class: ClassOther, Detail: "containers renamed or reordered"}}
		}
	}
	for i := range from {
		f, t := &from[i], &to[i]
		base := fmt.Sprintf("%s[%s]", prefix, f.Name)
		if f.Image != t.Image {
			c := Change{Path: base + ".image", Class: imageClass, InPlace: strings.TrimSpace(t.Image) != "" && t.Image == strings.TrimSpace(t.Image)}
			if !c.InPlace {
				c.Detail = "the new image is empty or has surrounding spaces"
			}
			out = append(out, c)
		}
		if !equality.Semantic.DeepEqual(f.Env, t.Env) || !equality.Semantic.DeepEqual(f.EnvFrom, t.EnvFrom) {
			out = append(out, Change{Path: base + ".env", Class: ClassEnv, Detail: "env cannot change on a running container"})
		}
		if !reflect.DeepEqual(f.Command, t.Command) {
			out = append(out, Change{Path: base + ".command", Class: ClassCommand, Detail: "command cannot change on a running container"})
		}
		if !reflect.DeepEqual(f.Args, t.Args) {
			out = append(out, Change{Path: base + ".args", Class: ClassArgs, Detail: "args cannot change on a running container"})
		}
		if !equality.Semantic.DeepEqual(f.Resources, t.Resources) {
			c := Change{Path: base + ".resources", Class: ClassResources}
			c.InPlace, c.Detail = resizable(&f.Resources, &t.Resources, qosChanged)
			out = append(out, c)
		}
		fm, tm := toMap(*f), toMap(*t)
		for _, k := range []string{"name", "image", "env", "envFrom", "command", "args", "resources"} {
			delete(fm, k)
			delete(tm, k)
		}
		for _, k := range unionKeys(fm, tm) {
			if !reflect.DeepEqual(fm[k], tm[k]) {
				out = append(out, Change{Path: base + "." + k, Class: ClassOther, Detail: k + " cannot change on a running container"})
			}
		}
	}
	return out
}

// resizable applies the pods/resize rules of §5.2 that a template diff can
// see: only cpu and memory change, nothing is removed, the QoS class stays.
func resizable(from, to *corev1.ResourceRequirements, qosChanged bool) (bool, string) {
	if len(from.Claims) != len(to.Claims) || !equality.Semantic.DeepEqual(from.Claims, to.Claims) {
		return false, "resource claims cannot be resized"
	}
	for _, pair := range [][2]corev1.ResourceList{{from.Requests, to.Requests}, {from.Limits, to.Limits}} {
		// Sorted names: the first offending resource names the reason, and
		// the plan must be byte-identical across runs.
		for _, name := range sortedNames(pair[0]) {
			q := pair[0][name]
			nq, ok := pair[1][name]
			if !ok {
				return false, fmt.Sprintf("%s removed: requests and limits cannot be removed by a resize", name)
			}
			if q.Cmp(nq) != 0 && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return false, fmt.Sprintf("%s changed: only cpu and memory are resizable", name)
			}
		}
		for _, name := range sortedNames(pair[1]) {
			if _, ok := pair[0][name]; !ok && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return false, fmt.Sprintf("%s added: only cpu and memory are resizable", name)
			}
		}
	}
	if qosChanged {
		return false, "the pod's QoS class would change"
	}
	return true, ""
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// podQOS is the QoS class of a pod spec (upstream qos.GetPodQOS, for the
// container-level resources a template carries).
func podQOS(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				if !q.IsZero() {
					addQuantity(requests, name, q)
				}
			}
		}
		seen := 0
		for name, q := range c.Resources.Limits {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				if !q.IsZero() {
					addQuantity(limits, name, q)
					seen++
				}
			}
		}
		if seen < 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(limits) == 2 {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func addQuantity(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; ok {
		cur.Add(q)
		l[name] = cur
		return
	}
	l[name] = q.DeepCopy()
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
