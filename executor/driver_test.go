package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rollplan/rollplan/planner/live"
)

// leaderLease is a leader-election Lease held by id, renewed at renew.
func leaderLease(ns, name, id string, renew time.Time, secs int32) *coordinationv1.Lease {
	t := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, RenewTime: &t, LeaseDurationSeconds: &secs}}
}

func TestDriverLease(t *testing.T) {
	ctx := context.Background()
	target := live.Target{Namespace: "prod", Kind: "StatefulSet", Name: "web"}
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	person := Driver{Identity: "apply alice@laptop (pid 1)"}
	other := Driver{Identity: "apply bob@desk (pid 2)"}
	ctrlA := Driver{Identity: "controller a", Liveness: "rollplan-system/rollplan-controller"}
	ctrlB := Driver{Identity: "controller b", Liveness: "rollplan-system/rollplan-controller"}

	tests := []struct {
		name string
		// first takes the Lease at t0; second tries at t0+after, with the
		// leader Lease (if any) held by leader.
		first, second Driver
		after         time.Duration
		leader        string
		wantHeld      bool
	}{
		{name: "a person holds it against another", first: person, second: other, after: 5 * time.Second, wantHeld: true},
		{name: "a person's hold lapses after the lease duration", first: person, second: other, after: DriverLeaseDuration},
		{name: "the same driver takes it again", first: person, second: person, after: time.Second},
		{name: "the leading controller holds it against a person, however old", first: ctrlA, second: person, after: time.Hour, leader: "a", wantHeld: true},
		{name: "a controller that no longer leads holds nothing", first: ctrlA, second: person, after: time.Second, leader: "b"},
		{name: "the new leader takes the old leader's workloads at once", first: ctrlA, second: ctrlB, after: time.Second, leader: "b"},
		{name: "a controller does not take a person's live hold", first: person, second: ctrlA, after: time.Second, leader: "a", wantHeld: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			now := t0
			clock := func() time.Time { return now }
			if tc.leader != "" {
				// Renewed just now at every check: the leader is alive.
				if _, err := c.CoordinationV1().Leases("rollplan-system").Create(ctx, leaderLease("rollplan-system", "rollplan-controller", tc.leader, t0.Add(tc.after), 15), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := AcquireDriver(ctx, c, target, "uid-1", tc.first, clock); err != nil {
				t.Fatalf("first acquire: %v", err)
			}
			now = t0.Add(tc.after)
			l, err := AcquireDriver(ctx, c, target, "uid-1", tc.second, clock)
			var held *HeldError
			if got := errors.As(err, &held); got != tc.wantHeld {
				t.Fatalf("second acquire: held = %v (err %v), want %v", got, err, tc.wantHeld)
			}
			lease, gerr := c.CoordinationV1().Leases("prod").Get(ctx, "rollplan-statefulset-web", metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			holder := *lease.Spec.HolderIdentity
			if tc.wantHeld {
				if holder != tc.first.Identity {
					t.Errorf("holder %q, want the first driver %q", holder, tc.first.Identity)
				}
				if !strings.Contains(held.Error(), tc.first.Identity) || !strings.Contains(held.Error(), "prod/rollplan-statefulset-web") {
					t.Errorf("the refusal should name the holder and the Lease: %v", held)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if holder != tc.second.Identity || l.Identity() != tc.second.Identity {
				t.Errorf("holder %q, want %q", holder, tc.second.Identity)
			}
			if got := lease.Annotations[AnnLivenessLease]; got != tc.second.Liveness {
				t.Errorf("liveness annotation %q, want %q", got, tc.second.Liveness)
			}
			if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != "uid-1" {
				t.Errorf("the Lease should be owned by the workload: %v", lease.OwnerReferences)
			}
			wantTransitions := int32(1)
			if tc.first.Identity == tc.second.Identity {
				wantTransitions = 0
			}
			if got := lease.Spec.LeaseTransitions; (got == nil && wantTransitions != 0) || (got != nil && *got != wantTransitions) {
				t.Errorf("leaseTransitions %v, want %d", got, wantTransitions)
			}
		})
	}
}

func TestDriverLeaseRenewAndRelease(t *testing.T) {
	ctx := context.Background()
	target := live.Target{Namespace: "prod", Kind: "DaemonSet", Name: "agent"}
	c := fake.NewClientset()
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	alice := Driver{Identity: "apply alice"}
	l, err := AcquireDriver(ctx, c, target, "", alice, clock)
	if err != nil {
		t.Fatal(err)
	}
	// Renewed just before it would lapse, it holds past the first duration.
	now = now.Add(DriverLeaseDuration - time.Second)
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(DriverLeaseDuration - time.Second)
	if _, err := AcquireDriver(ctx, c, target, "", Driver{Identity: "apply bob"}, clock); err == nil {
		t.Fatal("bob took a Lease alice renewed")
	}
	h, err := ReadDriver(ctx, c, target, clock)
	if err != nil || h == nil || !h.Live || h.Identity != "apply alice" {
		t.Fatalf("ReadDriver = %+v, %v; want alice, live", h, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h, _ = ReadDriver(ctx, c, target, clock)
	if h == nil || h.Identity != "" || h.Live {
		t.Fatalf("after release: %+v, want nobody", h)
	}
	bob, err := AcquireDriver(ctx, c, target, "", Driver{Identity: "apply bob"}, clock)
	if err != nil {
		t.Fatalf("bob after alice released: %v", err)
	}
	// Alice's renewal now fails: she lost it to bob and must stop.
	if err := l.Renew(ctx); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "apply bob") {
		t.Fatalf("alice's renewal after bob took it: %v, want ErrLeaseLost naming bob", err)
	}
	// Alice's late release leaves bob's hold alone.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := ReadDriver(ctx, c, target, clock); h.Identity != bob.Identity() {
		t.Fatalf("alice's stale release cleared bob's hold: %+v", h)
	}
}

func TestDriverLeaseName(t *testing.T) {
	short := DriverLeaseName(live.Target{Kind: "Deployment", Name: "api"})
	if short != "rollplan-deployment-api" {
		t.Errorf("name %q", short)
	}
	long := DriverLeaseName(live.Target{Kind: "StatefulSet", Name: strings.Repeat("a", 250)})
	if len(long) > 253 || long == DriverLeaseName(live.Target{Kind: "StatefulSet", Name: strings.Repeat("a", 251)}) {
		t.Errorf("long names must fit 253 characters and stay distinct: %d", len(long))
	}
}
