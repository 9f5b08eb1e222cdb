package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reservation is a disruption the gate admitted that its cache may not
// show yet: the pod still looks available until its deletion, eviction or
// restart reaches the informer. While reserved, the pod counts against
// its workload's budgets, so a second request racing for the same room
// (on this replica or another) is denied.
type Reservation struct {
	Pod string `json:"pod"`
	UID string `json:"uid"`
	// Images: for an update, the pod's new images (container → image):
	// a cache whose pod has them shows the update. A replica stops counting
	// a reservation its cache shows (see pending); it stays stored until
	// Until, for replicas whose caches lag.
	Images map[string]string `json:"images,omitempty"`
	// PDBs: the PodDisruptionBudgets selecting the pod, for the other
	// workloads a PDB spans (their reservations share a store: sharedPDB).
	PDBs []string `json:"pdbs,omitempty"`
	// Until: the reservation lapses then at the latest (RFC 3339).
	Until time.Time `json:"until"`
}

// Store keeps each workload's reservations where every gate replica sees
// them.
type Store interface {
	// Reserve reads the workload's reservations and calls decide with
	// them. When decide returns write, the list it returns replaces the
	// stored one, with optimistic concurrency: if another writer came
	// first, Reserve reads again and calls decide again.
	Reserve(ctx context.Context, workload string, decide func([]Reservation) (next []Reservation, write bool, err error)) error
}

// MemoryStore is a Store for one process (tests, benchmarks, a single
// replica).
type MemoryStore struct {
	mu sync.Mutex
	m  map[string][]Reservation
}

// Reserve implements Store.
func (s *MemoryStore) Reserve(_ context.Context, workload string, decide func([]Reservation) ([]Reservation, bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, write, err := decide(s.m[workload])
	if err != nil || !write {
		return err
	}
	if s.m == nil {
		s.m = map[string][]Reservation{}
	}
	s.m[workload] = next
	return nil
}

// ConfigMapStore keeps each workload's reservations in a ConfigMap of the
// gate's namespace (rollplan-budget-<hash>, key "reservations", JSON),
// written with its resourceVersion as precondition: of two replicas
// admitting the last unit of one budget, the second write conflicts, and
// that replica decides again on the new list. The same idea as
// OpenKruise's PodUnavailableBudget status, kept out of the workload's
// namespace so the gate needs no write access there.
type ConfigMapStore struct {
	Client    kubernetes.Interface
	Namespace string
}

// Labels of the reservation ConfigMaps.
const (
	LabelBudget = "rollplan.dev/budget"
	annWorkload = "rollplan.dev/workload"
	dataKey     = "reservations"
)

// configMapPrefix starts the name of every reservation ConfigMap.
const configMapPrefix = "rollplan-budget-"

// ConfigMapName is the reservation ConfigMap of a workload
// ("namespace/Kind/name").
func ConfigMapName(workload string) string {
	h := sha256.Sum256([]byte(workload))
	return configMapPrefix + hex.EncodeToString(h[:])[:16]
}

// maxConflicts bounds the retries of one Reserve: 50 replicas racing for
// one budget settle in fewer.
const maxConflicts = 64

// Reserve implements Store.
func (s *ConfigMapStore) Reserve(ctx context.Context, workload string, decide func([]Reservation) ([]Reservation, bool, error)) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	name := ConfigMapName(workload)
	for range maxConflicts {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read reservations of %s (configmap %s/%s): %w", workload, s.Namespace, name, err)
		}
		var cur []Reservation
		if exists && cm.Data[dataKey] != "" {
			if err := json.Unmarshal([]byte(cm.Data[dataKey]), &cur); err != nil {
				return fmt.Errorf("configmap %s/%s: data.%s: %w", s.Namespace, name, dataKey, err)
			}
		}
		next, write, err := decide(cur)
		if err != nil || !write {
			return err
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if !exists {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace,
				Labels:      map[string]string{LabelBudget: "true", "app.kubernetes.io/name": "rollplan-gate"},
				Annotations: map[string]string{annWorkload: workload}}}
		}
		cm.Data = map[string]string{dataKey: string(raw)}
		if exists {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{}) // cm.ResourceVersion: the precondition
		} else {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		}
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			continue // another replica wrote first: decide again on its list
		case exists && apierrors.IsNotFound(err):
			continue // pruned since read (its reservations had lapsed): create it again
		default:
			return fmt.Errorf("write reservations of %s (configmap %s/%s): %w", workload, s.Namespace, name, err)
		}
	}
	return fmt.Errorf("reservations of %s: %d conflicting writes in a row", workload, maxConflicts)
}

// workloadKey names a workload in a Store.
func workloadKey(namespace, kind, name string) string {
	return strings.Join([]string{namespace, kind, name}, "/")
}
