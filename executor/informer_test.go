package executor

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// TestInformerReader: the cache reads what the API server reads, says when
// something changed, and a step planned from it acts as one planned from a
// fresh list.
func TestInformerReader(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "v2", "a")
	cs := c.client(&recorder{}, nil)
	clock := func() time.Time { return now }
	r, err := live.NewInformerReader(t.Context(), cs, ns, clock)
	if err != nil {
		t.Fatal(err)
	}
	target := live.Target{Namespace: ns, Kind: capture.StatefulSet, Name: "web"}
	cached, err := r.Read(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := live.CaptureReader{Client: cs, Now: clock}.Read(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := capture.Marshal(cached, "yaml")
	b, _ := capture.Marshal(fresh, "yaml")
	if !bytes.Equal(a, b) {
		t.Fatalf("cache and API server differ:\n%s\n---\n%s", a, b)
	}
	select { // the initial list's adds
	case <-r.Changes():
	default:
	}

	p := c.pods[0].DeepCopy()
	p.Labels["touched"] = "yes"
	if _, err := cs.CoreV1().Pods(ns).Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported after a pod update")
	}
	snap, err := r.Read(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range snap.Pods {
		if sp.Name == p.Name && sp.Labels["touched"] != "yes" {
			t.Errorf("cache still has pod %s without the update", p.Name)
		}
	}

	var log bytes.Buffer
	x, err := New(cs, Options{Target: target, Engine: native.New(), Now: clock, Reader: r,
		Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cs.install(x)
	step, err := x.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// max-unavailable 2: two pods patched in place, planned from the cache.
	if got := step.Acted(); got != 2 {
		t.Errorf("acted %d times, want 2: %v\n%s", got, outcomes(step), log.String())
	}
}

// TestStaleCacheDoesNotSpendTwice: a cache that has not seen the previous
// step's patches plans them again; the check against the API server before
// each write skips them, and spends no budget on other pods.
func TestStaleCacheDoesNotSpendTwice(t *testing.T) {
	c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "v2", "a")
	rec := &recorder{}
	cs := c.client(rec, nil)
	clock := func() time.Time { return now }
	target := live.Target{Namespace: ns, Kind: capture.StatefulSet, Name: "web"}
	stale, err := live.CaptureReader{Client: cs, Now: clock}.Read(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	x, err := New(cs, Options{Target: target, Engine: native.New(), Now: clock, Reader: frozenReader{stale},
		Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cs.install(x)
	for i := range 3 {
		if _, err := x.Step(t.Context()); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if len(rec.patches) != 2 {
		t.Errorf("patched %v over three steps from a frozen cache, want the budget's 2 pods once\n%s", rec.patches, log.String())
	}
}

// frozenReader returns the same snapshot forever: a cache that never
// catches up.
type frozenReader struct{ snap *snapshot.Snapshot }

func (f frozenReader) Read(context.Context, live.Target) (*snapshot.Snapshot, error) {
	cp := *f.snap
	cp.Pods = slices.Clone(f.snap.Pods) // the executor replaces pods it normalises
	return &cp, nil
}
