package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
			cm = newReservationConfigMap(s.Namespace, name, workload)
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
			return fmt.Errorf("write reservations of %s (configmap %s/%s): %w", workload, s.Namespace, name, storeHint(s.Namespace, err))
		}
	}
	return fmt.Errorf("reservations of %s: %d conflicting writes in a row", workload, maxConflicts)
}

// newReservationConfigMap is a reservation ConfigMap without data.
func newReservationConfigMap(namespace, name, workload string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels:      map[string]string{LabelBudget: "true", "app.kubernetes.io/name": "rollplan-gate"},
		Annotations: map[string]string{annWorkload: workload}}}
}

// Check says whether the store is usable: the gate's namespace exists and
// is not being deleted, and the gate may list the reservation ConfigMaps
// there and create one. It costs two requests: a list of at most one
// reservation ConfigMap (Prune's request; in a namespace that does not
// exist a list answers an empty list, so it proves read access only), and
// a dry-run create of one (Reserve's first write: the API server runs
// authorization and admission, the namespace lifecycle and quotas
// included, and stores nothing), which fails when Reserve would.
// Admission webhooks that match ConfigMaps see that dry run too.
func (s *ConfigMapStore) Check(ctx context.Context) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	if _, err := cms.List(ctx, metav1.ListOptions{LabelSelector: LabelBudget + "=true", Limit: 1}); err != nil {
		return fmt.Errorf("list reservation configmaps in namespace %s: %w", s.Namespace, storeHint(s.Namespace, err))
	}
	cm := newReservationConfigMap(s.Namespace, "", "readiness check")
	cm.GenerateName = configMapPrefix + "check-"
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return storeHint(s.Namespace, err)
		}
		return fmt.Errorf("create a reservation configmap in namespace %s (dry run): %w", s.Namespace, storeHint(s.Namespace, err))
	}
	return nil
}

// storeHint says what to do about an error of the API server on the
// store's namespace; other errors are returned as they are.
func storeHint(namespace string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		// Only the namespace can be missing for a create or a list.
		return hinted{fmt.Sprintf("namespace %s not found: create it (kubectl create namespace %s) or run the gate with -n NAMESPACE", namespace, namespace), err}
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return hinted{fmt.Sprintf("namespace %s is being deleted: create it again once it is gone, or run the gate with -n NAMESPACE", namespace), err}
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the gate needs get, list, create, update and delete on configmaps in namespace %s (the Role rollplan-gate of 'rollplan gate manifests')", err, namespace)
	}
	return err
}

// hinted is an error of the API server said in other words; errors.As
// still finds the API status (transient reads it).
type hinted struct {
	msg string
	err error
}

func (h hinted) Error() string { return h.msg }
func (h hinted) Unwrap() error { return h.err }

// ReadinessCheck is Check as a readiness check (Readiness.Add). An error
// the API server may not repeat (no answer, a timeout, throttling, a
// server error) fails it only when no check succeeded for grace: the
// replicas share the API server, so they would all leave the Service on
// the same hiccup, and the webhook, which fails closed, would then refuse
// every pod deletion of the cluster. An answer that will not change by
// itself (namespace missing, forbidden) fails it at once.
func (s *ConfigMapStore) ReadinessCheck(grace time.Duration) func(context.Context) error {
	var (
		mu     sync.Mutex
		lastOK time.Time
	)
	return func(ctx context.Context) error {
		err := s.Check(ctx)
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		switch {
		case err == nil:
			lastOK = now
			return nil
		case transient(err) && !lastOK.IsZero() && now.Sub(lastOK) < grace:
			return nil
		}
		return err
	}
}

// transient: the API server did not answer, or answered an error it may
// not repeat.
func transient(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	code := st.Status().Code
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}

// workloadKey names a workload in a Store.
func workloadKey(namespace, kind, name string) string {
	return strings.Join([]string{namespace, kind, name}, "/")
}
