package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/live"
)

// One driver per workload. Exactly one actor carries out a workload's
// rollout at a time: a person's `rollplan apply` or the controller's
// leader. They meet in a Lease (coordination.k8s.io/v1) of the workload's
// namespace, named by DriverLeaseName, written with its resourceVersion as
// precondition, so two actors never both win it.
//
//   - A person's apply holds it like any lease: holderIdentity, renewTime
//     refreshed every third of leaseDurationSeconds; it is free once
//     renewTime+leaseDurationSeconds has passed (apply killed) or apply
//     released it.
//   - The controller does not renew one Lease per workload (100 rollouts
//     would cost 20 writes a second): its hold names, in the annotation
//     AnnLivenessLease, the Lease that proves the replica alive (the
//     leader-election Lease), and is valid exactly while that Lease is
//     held by the same identity and not expired. A new leader therefore
//     takes the workloads of the one it replaced as soon as it leads.
//
// Expiry compares renewTime with this machine's clock, as kubectl's lease
// readers do: clocks that disagree by more than a lease duration make a
// dead driver look alive (the waiter waits longer) or a live one dead.
const (
	// AnnLivenessLease, on a driver Lease the controller holds: the
	// NAMESPACE/NAME of the Lease whose holder must be the same identity
	// for the hold to be valid.
	AnnLivenessLease = "rollplan.dev/liveness-lease"
	// DriverLeaseDuration: how long a person's hold lasts without renewal.
	DriverLeaseDuration = 15 * time.Second

	// Driver identities start with what drives: a person or the controller.
	DriverApply      = "apply"
	DriverController = "controller"

	labelManagedBy = "app.kubernetes.io/managed-by"
	labelKind      = "rollplan.dev/workload-kind"
	labelName      = "rollplan.dev/workload-name"
)

// DriverLeaseName is the name of the workload's driver Lease:
// rollplan-KIND-NAME (kind in lower case), shortened with a hash when that
// would pass the 253 characters a name may have.
func DriverLeaseName(t live.Target) string {
	n := "rollplan-" + strings.ToLower(t.Kind) + "-" + t.Name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:240] + "-" + hex.EncodeToString(sum[:])[:12]
}

// Driver is who asks to drive a workload.
type Driver struct {
	// Identity names the holder for people reading the Lease: "apply
	// alice@laptop (pid 4711)", "controller rollplan-controller-7c9-x2".
	// It starts with DriverApply or DriverController.
	Identity string
	// Liveness: for the controller, the NAMESPACE/NAME of its
	// leader-election Lease (see AnnLivenessLease); empty for a person,
	// whose hold is renewed (DriverLease.Renew).
	Liveness string
}

// Holder is who holds a driver Lease, as read.
type Holder struct {
	// Identity: spec.holderIdentity; "" when nobody holds it.
	Identity string `json:"identity,omitempty"`
	// Controller: the holder is the rollplan controller (its hold follows
	// Liveness).
	Controller bool   `json:"controller,omitempty"`
	Liveness   string `json:"liveness,omitempty"`
	// Live: the hold is valid now; a dead holder's Lease is free to take.
	Live bool `json:"live"`
	// Lease: NAMESPACE/NAME of the driver Lease.
	Lease string `json:"lease"`
	// Since: acquireTime (RFC 3339), when known.
	Since string `json:"since,omitempty"`
}

// HeldError: another live driver holds the workload.
type HeldError struct {
	Target live.Target
	Holder Holder
}

func (h *HeldError) Error() string {
	ref := targetRef(h.Target)
	who := h.Holder.Identity
	if h.Holder.Controller {
		return fmt.Sprintf("%s is driven by the rollplan controller (%s, Lease %s): it carries out the rollout itself; watch it with `rollplan status %s --watch`, pause it with `rollplan pause %s`, or wait for it to finish with --wait-for-lease",
			h.Target, who, h.Holder.Lease, ref, ref)
	}
	return fmt.Sprintf("%s is driven by %s (Lease %s, since %s): let that run finish or stop it, or wait for it with --wait-for-lease",
		h.Target, who, h.Holder.Lease, h.Holder.Since)
}

// DriverLease is a driver Lease this process holds.
type DriverLease struct {
	client kubernetes.Interface
	target live.Target
	driver Driver
	now    func() time.Time
	lease  *coordinationv1.Lease
}

// ReadDriver reads who drives the workload; nil when no Lease exists.
func ReadDriver(ctx context.Context, c kubernetes.Interface, t live.Target, now func() time.Time) (*Holder, error) {
	l, err := c.CoordinationV1().Leases(t.Namespace).Get(ctx, DriverLeaseName(t), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read driver Lease %s: %w", t, DriverLeaseName(t), err)
	}
	h, err := holderOf(ctx, c, l, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return &h, nil
}

// holderOf reads who holds l and whether the hold is valid now.
func holderOf(ctx context.Context, c kubernetes.Interface, l *coordinationv1.Lease, now func() time.Time) (Holder, error) {
	h := Holder{Lease: l.Namespace + "/" + l.Name}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return h, nil
	}
	h.Identity = *l.Spec.HolderIdentity
	if l.Spec.AcquireTime != nil {
		h.Since = l.Spec.AcquireTime.UTC().Format(time.RFC3339)
	}
	if ref := l.Annotations[AnnLivenessLease]; ref != "" {
		h.Controller, h.Liveness = true, ref
		live, err := leaseHeldBy(ctx, c, ref, identityOf(h.Identity), now)
		if err != nil {
			return h, err
		}
		h.Live = live
		return h, nil
	}
	h.Live = !expired(l, now())
	return h, nil
}

// identityOf is the leader-election identity in a controller's holder
// identity ("controller ID" → "ID").
func identityOf(holder string) string {
	return strings.TrimPrefix(holder, DriverController+" ")
}

// leaseHeldBy: the Lease ref (NAMESPACE/NAME) is held by identity and not
// expired.
func leaseHeldBy(ctx context.Context, c kubernetes.Interface, ref, identity string, now func() time.Time) (bool, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return false, fmt.Errorf("annotation %s %q: want NAMESPACE/NAME", AnnLivenessLease, ref)
	}
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read liveness Lease %s: %w", ref, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity {
		return false, nil
	}
	return !expired(l, now()), nil
}

func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return !now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// AcquireDriver takes the workload's driver Lease for d, creating it when
// missing (owned by the workload, so it goes with it: ownerUID), and
// returns a *HeldError when another live driver holds it. Taking it from
// oneself (a controller that restarted under the same identity, a retry)
// is allowed.
func AcquireDriver(ctx context.Context, c kubernetes.Interface, t live.Target, ownerUID types.UID, d Driver, now func() time.Time) (*DriverLease, error) {
	if now == nil {
		now = time.Now
	}
	leases := c.CoordinationV1().Leases(t.Namespace)
	name := DriverLeaseName(t)
	for attempt := 0; ; attempt++ {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return nil, fmt.Errorf("%s: read driver Lease %s: %w", t, name, err)
		}
		if create {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace,
				Labels: map[string]string{labelManagedBy: "rollplan", labelKind: strings.ToLower(t.Kind)}}}
			if len(t.Name) <= 63 { // a label value's limit; longer names go without
				l.Labels[labelName] = t.Name
			}
			if ownerUID != "" {
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: t.Kind, Name: t.Name, UID: ownerUID}}
			}
		} else {
			h, err := holderOf(ctx, c, l, now)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t, err)
			}
			if h.Live && h.Identity != d.Identity {
				return nil, &HeldError{Target: t, Holder: h}
			}
		}
		l = l.DeepCopy()
		stamp := metav1.NewMicroTime(now())
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != d.Identity {
			l.Spec.AcquireTime = &stamp
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				transitions := int32(0)
				if l.Spec.LeaseTransitions != nil {
					transitions = *l.Spec.LeaseTransitions
				}
				transitions++
				l.Spec.LeaseTransitions = &transitions
			}
		}
		id, secs := d.Identity, int32(DriverLeaseDuration/time.Second)
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &id, &stamp, &secs
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		if d.Liveness != "" {
			l.Annotations[AnnLivenessLease] = d.Liveness
		} else {
			delete(l.Annotations, AnnLivenessLease)
		}
		var got *coordinationv1.Lease
		if create {
			got, err = leases.Create(ctx, l, metav1.CreateOptions{FieldManager: fieldManager})
		} else {
			got, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 3 {
			continue // someone wrote it since the read: read again, it may be theirs now
		}
		if err != nil {
			return nil, fmt.Errorf("%s: take driver Lease %s: %w", t, name, err)
		}
		return &DriverLease{client: c, target: t, driver: d, now: now, lease: got}, nil
	}
}

// ErrLeaseLost: the driver Lease was taken by someone else (or deleted)
// while this process held it; it must stop writing to the workload.
var ErrLeaseLost = errors.New("driver Lease lost")

// Renew refreshes renewTime, keeping a person's hold alive. It reads the
// Lease first and writes with that read's resourceVersion: a Lease someone
// else took (or deleted) is lost, never overwritten.
func (d *DriverLease) Renew(ctx context.Context) error {
	l, err := d.current(ctx)
	if err != nil {
		return err
	}
	stamp := metav1.NewMicroTime(d.now())
	l.Spec.RenewTime = &stamp
	got, err := d.client.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: fieldManager})
	if apierrors.IsConflict(err) {
		return d.Renew(ctx) // written since the read: read again, it may be lost now
	}
	if err != nil {
		return fmt.Errorf("%s: renew driver Lease %s: %w", d.target, l.Name, err)
	}
	d.lease = got
	return nil
}

// current reads the Lease, and ErrLeaseLost when this driver no longer
// holds it.
func (d *DriverLease) current(ctx context.Context) (*coordinationv1.Lease, error) {
	cur, err := d.client.CoordinationV1().Leases(d.lease.Namespace).Get(ctx, d.lease.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: %w: Lease %s/%s was deleted", d.target, ErrLeaseLost, d.lease.Namespace, d.lease.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read driver Lease %s: %w", d.target, d.lease.Name, err)
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != d.driver.Identity {
		holder := "nobody"
		if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity != "" {
			holder = *cur.Spec.HolderIdentity
		}
		return nil, fmt.Errorf("%s: %w: Lease %s/%s is held by %s", d.target, ErrLeaseLost, cur.Namespace, cur.Name, holder)
	}
	return cur.DeepCopy(), nil
}

// KeepRenewed renews every third of DriverLeaseDuration until ctx ends,
// and calls lost (once) when the hold is gone; a failed renewal is retried
// until the hold would have expired.
func (d *DriverLease) KeepRenewed(ctx context.Context, lost func(error)) {
	every := DriverLeaseDuration / 3
	t := time.NewTicker(every / 3)
	defer t.Stop()
	last := d.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.now().Sub(last) < every {
			continue
		}
		err := d.Renew(ctx)
		switch {
		case err == nil:
			last = d.now()
		case errors.Is(err, ErrLeaseLost) || d.now().Sub(last) >= DriverLeaseDuration:
			if ctx.Err() == nil {
				lost(err)
			}
			return
		}
	}
}

// Release gives the Lease up (holderIdentity cleared), unless someone else
// holds it by now.
func (d *DriverLease) Release(ctx context.Context) error {
	l, err := d.current(ctx)
	if errors.Is(err, ErrLeaseLost) {
		return nil // taken over or gone: nothing of ours to give up
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, AnnLivenessLease)
	_, err = d.client.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: fieldManager})
	if apierrors.IsConflict(err) {
		return d.Release(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s: release driver Lease %s: %w", d.target, l.Name, err)
	}
	return nil
}

// Identity is the identity the Lease was taken for.
func (d *DriverLease) Identity() string { return d.driver.Identity }
