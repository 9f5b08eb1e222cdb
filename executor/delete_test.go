package executor

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/live"
)

// DeleteMethod DeletePlain: a Recreate is a plain delete with the pod's UID
// as precondition (dryRun=All in a dry run), never an eviction.
func TestDeleteMethodPlain(t *testing.T) {
	for _, dry := range []bool{false, true} {
		c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
		cs := c.client(&recorder{}, nil)
		var log bytes.Buffer
		x, err := New(cs, Options{
			Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"},
			Engine: native.New(), DryRun: dry, DeleteMethod: DeletePlain, Now: func() time.Time { return now },
			Log: slog.New(slog.NewTextHandler(&log, nil)), Poll: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if cw, ok := x.writer.(clientWriter); !ok || cw.dryRun != dry {
			t.Errorf("dry run %v: writer %+v", dry, x.writer) // TestClientWriter: its requests carry dryRun=All then
		}
		cs.install(x)
		w := record(x, dry) // the server stores nothing in a dry run
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
		var deleted, evicted []string
		for _, c := range w.calls {
			switch c.verb {
			case "deletePod":
				// TestClientWriter: the pod's UID is the delete's precondition.
				if string(c.uid) != c.name+"-uid" {
					t.Errorf("delete %s: UID %q, want the pod's", c.name, c.uid)
				}
				deleted = append(deleted, c.name)
			case "evictPod":
				evicted = append(evicted, c.name)
			}
		}
		if !slices.Equal(deleted, []string{"web-3", "web-2"}) || len(evicted) != 0 {
			t.Errorf("dry run %v: deleted %v, evicted %v", dry, deleted, evicted)
		}
	}
	if _, err := New(nil, Options{Target: live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}, Engine: native.New(), DeleteMethod: "drain"}); err == nil {
		t.Error("DeleteMethod drain accepted")
	}
}
