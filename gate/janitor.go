package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Pruner is a Store that can drop what it keeps for workloads whose every
// reservation has lapsed: nothing else deletes a workload's store, so
// without it they pile up as workloads come and go.
type Pruner interface {
	// Prune deletes the stores with no reservation live at now and says
	// how many it deleted.
	Prune(ctx context.Context, now time.Time) (int, error)
}

// pruneGrace: how long past its last expiry a store is kept.
const pruneGrace = time.Minute

// PruneEvery runs p.Prune every interval until ctx ends, logging one line
// per run. Every replica runs it: the deletes are conditional, so replicas
// racing for one store cannot lose each other's reservations.
func PruneEvery(ctx context.Context, p Pruner, every time.Duration, log *slog.Logger) {
	// Jitter: replicas started together do not all list at once.
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		// A minute's grace: another replica's clock wrote the expiries,
		// and a store deleted a little early would lose a reservation.
		n, err := p.Prune(ctx, time.Now().Add(-pruneGrace))
		if err != nil {
			log.Warn("reservation gc", "deleted", n, "error", err)
			return
		}
		log.Info("reservation gc", "deleted", n)
	}, every, 0.1, true)
}

// lapsed says whether no reservation of rs is live at now (as pending
// counts them).
func lapsed(rs []Reservation, now time.Time) bool {
	for _, r := range rs {
		if r.Until.After(now) {
			return false
		}
	}
	return true
}

// Prune implements Pruner.
func (s *MemoryStore) Prune(_ context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for w, rs := range s.m {
		if lapsed(rs, now) {
			delete(s.m, w)
			n++
		}
	}
	return n, nil
}

// Prune implements Pruner: it deletes the reservation ConfigMaps whose
// every reservation has lapsed, each on condition that its resourceVersion
// is still the one listed. A replica that reserved in between changed it,
// so that delete conflicts and its reservation stays; a replica whose
// update finds the ConfigMap deleted creates it again (see Reserve).
func (s *ConfigMapStore) Prune(ctx context.Context, now time.Time) (int, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	// Reserve has set this label since the store's first version, so the
	// selector misses no store; the name prefix keeps a foreign ConfigMap
	// that copied the label out of reach.
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: LabelBudget + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list reservation configmaps of %s: %w", s.Namespace, err)
	}
	n := 0
	var errs []error
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, configMapPrefix) {
			continue
		}
		var rs []Reservation
		if raw := cm.Data[dataKey]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &rs); err != nil {
				// Not ours to judge: Reserve reports it on its next write.
				errs = append(errs, fmt.Errorf("configmap %s/%s: data.%s: %w", s.Namespace, cm.Name, dataKey, err))
				continue
			}
		}
		if !lapsed(rs, now) {
			continue
		}
		rv := cm.ResourceVersion
		err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil:
			n++
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Written since the list, or deleted by another replica.
		default:
			errs = append(errs, fmt.Errorf("delete configmap %s/%s: %w", s.Namespace, cm.Name, err))
		}
	}
	return n, errors.Join(errs...)
}
