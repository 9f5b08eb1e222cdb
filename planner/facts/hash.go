package facts

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

// ComputeHash reproduces upstream controller.ComputeHash as the
// controllers of Kubernetes v (zero: kubeversion.Newest) compute it: FNV-1a
// over the spew dump of the template with v's k8s.io/api structs
// (templatedump.go), then the collision count as 8 bytes, encoded with
// SafeEncodeString. Used for ReplicaSet and DaemonSet revision names.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32, v kubeversion.Version) string {
	d := newDumper(v)
	d.format(reflect.ValueOf(template).Elem())
	h := fnv.New32a()
	h.Write(d.buf)
	d.release()
	if collisionCount != nil {
		var b [8]byte
		binary.LittleEndian.PutUint32(b[:], uint32(*collisionCount))
		h.Write(b[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// statefulSetRevisionName reproduces the StatefulSet controller's next
// revision name: FNV-1 over the revision patch and the decimal collision
// count (always passed, 0 when nil), as <set>-<hash>.
func statefulSetRevisionName(set *appsv1.StatefulSet) (string, error) {
	patch, err := templatePatch(set)
	if err != nil {
		return "", err
	}
	var count int32
	if set.Status.CollisionCount != nil {
		count = *set.Status.CollisionCount
	}
	h := fnv.New32()
	h.Write(patch)
	h.Write([]byte(strconv.FormatInt(int64(count), 10)))
	name := set.Name
	if len(name) > 223 {
		name = name[:223]
	}
	return name + "-" + rand.SafeEncodeString(fmt.Sprint(h.Sum32())), nil
}

// templatePatch is upstream getPatch: {"spec":{"template":{...,"$patch":"replace"}}}.
func templatePatch(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if tmpl == nil {
		tmpl = map[string]any{}
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// revisionTemplate decodes the pod template a ControllerRevision records.
func revisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	raw := cr.Data.Raw
	if len(raw) == 0 {
		return nil, fmt.Errorf("ControllerRevision %s/%s: data is empty", cr.Namespace, cr.Name)
	}
	var doc struct {
		Spec struct {
			Template json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s: data: %w", cr.Namespace, cr.Name, err)
	}
	if len(doc.Spec.Template) == 0 {
		return nil, fmt.Errorf("ControllerRevision %s/%s: data.spec.template is missing", cr.Namespace, cr.Name)
	}
	var m map[string]any
	if err := json.Unmarshal(doc.Spec.Template, &m); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s: data.spec.template: %w", cr.Namespace, cr.Name, err)
	}
	delete(m, "$patch")
	b, _ := json.Marshal(m)
	t := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s: data.spec.template: %w", cr.Namespace, cr.Name, err)
	}
	return t, nil
}
