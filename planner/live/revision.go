package live

import (
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// AnnRevisionHistory is the ReplicaSet annotation that keeps the templates
// an in-place update replaced: a JSON list of RevisionRecord, oldest first,
// at most the Deployment's revisionHistoryLimit entries. Upstream keeps a
// Deployment's history as old ReplicaSets; a ReplicaSet updated in place
// has no older ReplicaSet to keep its previous template.
const AnnRevisionHistory = "rollplan.dev/revision-history"

// Upstream's ReplicaSet annotations and pod label, which the executor writes too.
const (
	AnnRevision    = "deployment.kubernetes.io/revision"
	AnnChangeCause = "kubernetes.io/change-cause"
	LabelPodHash   = appsv1.DefaultDeploymentUniqueLabelKey // pod-template-hash
)

// RevisionRecord is one entry of AnnRevisionHistory.
type RevisionRecord struct {
	Revision    int64                  `json:"revision"`
	ChangeCause string                 `json:"changeCause,omitempty"`
	Replaced    string                 `json:"replaced"` // RFC 3339: when the in-place update replaced it
	Template    corev1.PodTemplateSpec `json:"template"`
}

// RevisionHistory decodes a ReplicaSet's AnnRevisionHistory (nil when it
// has none).
func RevisionHistory(rs *appsv1.ReplicaSet) ([]RevisionRecord, error) {
	raw, ok := rs.Annotations[AnnRevisionHistory]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []RevisionRecord
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("ReplicaSet %s/%s: annotation %s: %w", rs.Namespace, rs.Name, AnnRevisionHistory, err)
	}
	return out, nil
}

// Revision is a ReplicaSet's deployment.kubernetes.io/revision (0 when
// missing or not a number).
func Revision(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[AnnRevision], 10, 64)
	return n
}

// StripHash is a template without the pod-template-hash label: what a
// Deployment's template is compared with.
func StripHash(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := t.DeepCopy()
	delete(c.Labels, LabelPodHash)
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}

// SameTemplate: the templates are equal but for pod-template-hash (upstream
// EqualIgnoreHash).
func SameTemplate(a, b *corev1.PodTemplateSpec) bool {
	return equality.Semantic.DeepEqual(StripHash(a), StripHash(b))
}
