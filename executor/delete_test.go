package executor

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/live"
)

// DeleteMethod DeletePlain: a Recreate is a plain delete with the pod's UID
// as precondition (dryRun=All in a dry run), never an eviction.
func TestDeleteMethodPlain(t *testing.T) {
	for _, dry := range []bool{false, true} {
		c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
		rec := &recorder{}
		cs := c.client(rec, nil)
		var deleted []string
		cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			d := a.(k8stesting.DeleteActionImpl)
			uid := d.DeleteOptions.Preconditions
			if uid == nil || uid.UID == nil || string(*uid.UID) != d.Name+"-uid" {
				t.Errorf("delete %s: preconditions %+v, want the pod's UID", d.Name, uid)
			}
			if got := len(d.DeleteOptions.DryRun) > 0; got != dry {
				t.Errorf("delete %s: dry run %v, options %+v", d.Name, dry, d.DeleteOptions)
			}
			deleted = append(deleted, d.Name)
			if dry {
				return true, nil, nil
			}
			return false, nil, nil
		})
		var log bytes.Buffer
		x, err := New(cs, Options{
			Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
			Engine: native.New(), DryRun: dry, DeleteMethod: DeletePlain, Now: func() time.Time { return now },
			Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := x.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		outcome := "done"
		if dry {
			outcome = "would"
		}
		if got, want := outcomes(res), []string{"web-3:Recreate:" + outcome, "web-2:Recreate:" + outcome}; !slices.Equal(got, want) {
			t.Errorf("dry run %v: actions %v, want %v", dry, got, want)
		}
		if !slices.Equal(deleted, []string{"web-3", "web-2"}) || len(rec.evictions) != 0 {
			t.Errorf("dry run %v: deleted %v, evicted %v", dry, deleted, rec.evictions)
		}
	}
	if _, err := New(nil, Options{Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}, Engine: native.New(), DeleteMethod: "drain"}); err == nil {
		t.Error("DeleteMethod drain accepted")
	}
}
