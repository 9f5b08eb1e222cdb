package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollplan/rollplan/planner/live"
)

func guaranteed(cpu, mem string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// resizeCluster: one pod at oldRev with 100m/128Mi (Guaranteed); the
// template now asks for 200m/256Mi (still Guaranteed) and image newImage.
func resizeCluster(newImage string) *cluster {
	c := newCluster(1, appsv1.OnDeleteStatefulSetStrategyType, true, newImage, "a")
	oldT, newT := template("example.com/app:v1", "a"), template(newImage, "a")
	oldT.Spec.Containers[0].Resources = guaranteed("100m", "128Mi")
	newT.Spec.Containers[0].Resources = guaranteed("200m", "256Mi")
	c.set.Spec.Template = newT
	c.revs = []*appsv1.ControllerRevision{revision(oldRev, oldT, 1, c.set), revision(newRev, newT, 2, c.set)}
	for _, p := range c.pods {
		p.Spec.Containers[0].Resources = guaranteed("100m", "128Mi")
		r := guaranteed("100m", "128Mi")
		p.Status.ContainerStatuses[0].Resources = &r
	}
	return c
}

// resizeAnswer answers a pods/resize patch as the API server would: the
// pod, resized, at a new resourceVersion. Other writes go to the writer.
type resizeAnswer struct {
	writer
	pod *corev1.Pod
}

func (r resizeAnswer) patchPod(ctx context.Context, pod *corev1.Pod, pt types.PatchType, data []byte, sub ...string) (*corev1.Pod, error) {
	if len(sub) == 1 && sub[0] == "resize" {
		p := r.pod.DeepCopy()
		p.Spec.Containers[0].Resources = guaranteed("200m", "256Mi")
		p.ResourceVersion = "8"
		return p, nil
	}
	return r.writer.patchPod(ctx, pod, pt, data, sub...)
}

// An in-place update with a cpu/memory change: first a pods/resize patch of
// the containers' resources with the resourceVersion precondition, then the
// main patch (image when it changed, revision label, the record listing the
// resized container); dryRun=All on both in a dry run.
func TestInPlaceResize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image string
		dry   bool
	}{
		{"image and resources", "example.com/app:v2", false},
		{"resources only", "example.com/app:v1", false},
		{"dry run", "example.com/app:v2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := resizeCluster(tc.image)
			cs := c.client(&recorder{}, nil)
			var log bytes.Buffer
			x := newExec(t, cs, tc.dry, &log)
			through := x.writer
			x.writer = resizeAnswer{writer: x.writer, pod: c.pods[0]}
			w := record(x, false)
			res, err := x.Step(context.Background())
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			want := "web-0:InPlaceUpdate:done"
			if tc.dry {
				want = "web-0:InPlaceUpdate:would"
			}
			if got := outcomes(res); len(got) != 1 || got[0] != want {
				t.Fatalf("actions %v, want [%s]\n%s", got, want, log.String())
			}
			sent := w.calls
			if len(sent) != 2 || sent[0].verb != "patchPod" || sent[0].subresource != "resize" || sent[1].verb != "patchPod" || sent[1].subresource != "" {
				t.Fatalf("writes %+v: want pods/resize, then the pod", sent)
			}
			var rz struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Spec struct {
					Containers []struct {
						Name      string                      `json:"name"`
						Resources corev1.ResourceRequirements `json:"resources"`
						Image     string                      `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(sent[0].data, &rz); err != nil {
				t.Fatal(err)
			}
			if rz.Metadata.ResourceVersion != "7" || len(rz.Spec.Containers) != 1 || rz.Spec.Containers[0].Name != "app" || rz.Spec.Containers[0].Image != "" ||
				!equalResources(rz.Spec.Containers[0].Resources, guaranteed("200m", "256Mi")) {
				t.Errorf("resize patch %s", sent[0].data)
			}
			var main struct {
				Metadata struct {
					ResourceVersion string            `json:"resourceVersion"`
					Labels          map[string]string `json:"labels"`
					Annotations     map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec *struct {
					Containers []map[string]any `json:"containers"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(sent[1].data, &main); err != nil {
				t.Fatal(err)
			}
			wantRV := "8" // the resize's
			if tc.dry {
				wantRV = "7"
			}
			if main.Metadata.ResourceVersion != wantRV || main.Metadata.Labels[appsv1.ControllerRevisionHashLabelKey] != newRev {
				t.Errorf("main patch %s: want resourceVersion %s", sent[1].data, wantRV)
			}
			imageChanged := tc.image != "example.com/app:v1"
			if (main.Spec != nil) != imageChanged || strings.Contains(string(sent[1].data), "resources") {
				t.Errorf("main patch %s: want the image only when it changed, never resources", sent[1].data)
			}
			var rec live.InPlaceRecord
			if err := json.Unmarshal([]byte(main.Metadata.Annotations[live.AnnInPlaceUpdate]), &rec); err != nil || !slices.Equal(rec.Resized, []string{"app"}) {
				t.Errorf("in-place record %q: %v", main.Metadata.Annotations[live.AnnInPlaceUpdate], err)
			}
			// TestClientWriter: a dry-run writer's requests carry dryRun=All.
			if cw, ok := sends(through); !ok || cw.dryRun != tc.dry {
				t.Errorf("dry run %v: writer %+v", tc.dry, through)
			}
		})
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	for _, rn := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !live.SameQuantity(a.Requests, b.Requests, rn) || !live.SameQuantity(a.Limits, b.Limits, rn) {
			return false
		}
	}
	return true
}

// A refused resize (a conflict) skips the pod before the main patch.
func TestInPlaceResizeConflict(t *testing.T) {
	c := resizeCluster("example.com/app:v2")
	var log bytes.Buffer
	x := newExec(t, c.client(&recorder{}, nil), false, &log)
	w := record(x, false)
	w.fail = func(c writeCall) error {
		if c.subresource == "resize" {
			return conflict()
		}
		return nil
	}
	res, err := x.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, c := range w.calls {
		if c.verb == "patchPod" {
			subs = append(subs, c.subresource)
		}
	}
	if got := outcomes(res); len(got) != 1 || got[0] != "web-0:InPlaceUpdate:skipped" {
		t.Errorf("actions %v", got)
	}
	if !slices.Equal(subs, []string{"resize"}) {
		t.Errorf("patches %q: want only the resize", subs)
	}
}

// Completion of a resize: the container status reports the spec's cpu and
// memory.
func TestInFlightResize(t *testing.T) {
	at := now.Add(-10 * time.Second)
	mk := func(status *corev1.ResourceRequirements, conds ...corev1.PodCondition) *corev1.Pod {
		p := pod("web-0", "example.com/app:v1", newRev, true)
		raw, _ := json.Marshal(live.InPlaceRecord{Revision: newRev, At: at.Format(time.RFC3339), ImageIDs: map[string]string{}, Resized: []string{"app"}})
		p.Annotations = map[string]string{live.AnnInPlaceUpdate: string(raw)}
		p.Spec.Containers[0].Resources = guaranteed("200m", "256Mi")
		p.Status.ContainerStatuses[0].Resources = status
		p.Status.Conditions = append(p.Status.Conditions, conds...)
		return p
	}
	old, done := guaranteed("100m", "128Mi"), guaranteed("0.2", "256Mi")
	if busy, why := live.InFlight(mk(&old), 0, now); !busy || !strings.Contains(why, "not been resized") {
		t.Errorf("old resources: InFlight %v %q", busy, why)
	}
	if busy, why := live.InFlight(mk(nil), 0, now); !busy {
		t.Errorf("no status resources: InFlight %v %q", busy, why)
	}
	pending := corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Infeasible", Message: "not enough cpu"}
	if busy, why := live.InFlight(mk(&old, pending), 0, now); !busy || !strings.Contains(why, "Infeasible: not enough cpu") {
		t.Errorf("pending: InFlight %v %q", busy, why)
	}
	if busy, why := live.InFlight(mk(&done), 0, now); busy {
		t.Errorf("resized: InFlight %v %q", busy, why)
	}
}

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web-0", errors.New("the object has been modified"))
}
