package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/planner/live"
)

// gated declares the readiness gate on a pod, with its condition (status
// "" leaves it missing) and the Ready condition the kubelet would derive.
func gated(p *corev1.Pod, status corev1.ConditionStatus) *corev1.Pod {
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: live.ReadinessGate}}
	long := metav1.NewTime(now.Add(-time.Hour))
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: long})
	if status != "" {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: live.ReadinessGate, Status: status, LastTransitionTime: long})
	}
	if status != corev1.ConditionTrue {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	return p
}

// write is one pod write the executor sent, in order.
type write struct {
	pod, sub, body string
}

// podWrites are the pod patches among the writes w recorded, in order.
func podWrites(w *recordingWriter) []write {
	var out []write
	for _, c := range w.calls {
		if c.verb == "patchPod" {
			out = append(out, write{c.name, c.subresource, string(c.data)})
		}
	}
	return out
}

// kubelet plays the kubelet for the gate: a status write of the gate
// condition is stored with the Ready condition derived from ContainersReady
// and the gate, as the kubelet does.
func kubelet(cs *testClient) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		var body struct {
			Status struct {
				Conditions []corev1.PodCondition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, err
		}
		obj, err := cs.Tracker().Get(pods, ns, p.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		for _, c := range body.Status.Conditions {
			if cur := live.PodCondition(pod, c.Type); cur != nil {
				*cur = c
			} else {
				pod.Status.Conditions = append(pod.Status.Conditions, c)
			}
		}
		ready := corev1.ConditionFalse
		if c := live.PodCondition(pod, corev1.ContainersReady); c != nil && c.Status == corev1.ConditionTrue {
			if g := live.PodCondition(pod, live.ReadinessGate); g != nil && g.Status == corev1.ConditionTrue {
				ready = corev1.ConditionTrue
			}
		}
		live.PodCondition(pod, corev1.PodReady).Status = ready
		return true, pod, cs.Tracker().Update(pods, pod, ns)
	})
}

func gateStatus(t *testing.T, cs interface {
	Tracker() k8stesting.ObjectTracker
}, name string) corev1.ConditionStatus {
	t.Helper()
	obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if c := live.PodCondition(obj.(*corev1.Pod), live.ReadinessGate); c != nil {
		return c.Status
	}
	return ""
}

// TestGateFalseBeforePatch: a gated pod gets the gate condition False
// (pods/status) before its in-place image patch, and the patch carries the
// resourceVersion that write returned; a pod without the gate is patched
// with no status write.
func TestGateFalseBeforePatch(t *testing.T) {
	c := newCluster(2, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
	gated(c.pods[0], corev1.ConditionTrue)
	cs := c.client(&recorder{}, nil)
	kubelet(cs)
	var log bytes.Buffer
	e := newExec(t, cs, false, &log)
	rec := record(e, false)
	res, err := e.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); len(got) != 2 {
		t.Fatalf("actions %v\n%s", got, log.String())
	}
	var seq []string
	var gateWrite string
	for _, x := range podWrites(rec) {
		if x.pod == "web-0" {
			seq = append(seq, x.sub)
			if x.sub == "status" {
				gateWrite = x.body
			}
		}
	}
	if len(seq) != 2 || seq[0] != "status" || seq[1] != "" {
		t.Fatalf("writes of web-0 %q, want the status write then the patch", seq)
	}
	for _, x := range podWrites(rec) {
		if x.pod == "web-1" && x.sub == "status" {
			t.Errorf("status write of web-1, which has no gate: %s", x.body)
		}
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(gateWrite), &body); err != nil || body.Metadata.ResourceVersion != "7" ||
		len(body.Status.Conditions) != 1 || body.Status.Conditions[0].Type != live.ReadinessGate || body.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("gate write %s: %v", gateWrite, err)
	}
	if got := gateStatus(t, cs, "web-0"); got != corev1.ConditionFalse {
		t.Errorf("web-0 gate %q after the step, want False", got)
	}
	if got := gateStatus(t, cs, "web-1"); got != "" {
		t.Errorf("web-1 (no gate) got condition %q", got)
	}
	// While the update is in flight (the kubelet has not restarted the
	// container), the next step leaves the gate False.
	res, err = newExec(t, cs, false, &log).Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Actions {
		if a.Type == ActionReadinessGate {
			t.Errorf("gate written while the update is in flight: %+v", a)
		}
	}
}

// TestGateSync: the conditions a step sets True, and those it leaves.
func TestGateSync(t *testing.T) {
	at := now.Add(-20 * time.Second)
	updatedInPlace := func(p *corev1.Pod) {
		raw, _ := json.Marshal(live.InPlaceRecord{Revision: newRev, At: at.Format(time.RFC3339), ImageIDs: map[string]string{"app": "id-example.com/app:v1"}})
		p.Annotations = map[string]string{live.AnnInPlaceUpdate: string(raw)}
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = newRev
		p.Spec.Containers[0].Image = "example.com/app:v2"
	}
	restarted := func(p *corev1.Pod, started time.Time, ready bool) {
		cs := &p.Status.ContainerStatuses[0]
		cs.Image, cs.ImageID, cs.Ready = "example.com/app:v2", "id-example.com/app:v2", ready
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		c := live.PodCondition(p, corev1.ContainersReady)
		c.LastTransitionTime = metav1.NewTime(started)
		if !ready {
			c.Status = corev1.ConditionFalse
		}
	}
	tests := []struct {
		name   string
		pod    func() *corev1.Pod
		minRdy int32
		want   corev1.ConditionStatus // after the step
	}{
		{"new pod: condition missing", func() *corev1.Pod { return gated(pod("web-0", "example.com/app:v2", newRev, false), "") }, 0, corev1.ConditionTrue},
		{"False, never patched (executor died before the patch)", func() *corev1.Pod {
			return gated(pod("web-0", "example.com/app:v1", oldRev, true), corev1.ConditionFalse)
		}, 0, corev1.ConditionTrue},
		{"False, patched, not restarted yet", func() *corev1.Pod {
			p := gated(pod("web-0", "example.com/app:v1", oldRev, true), corev1.ConditionFalse)
			updatedInPlace(p)
			return p
		}, 0, corev1.ConditionFalse},
		{"False, restarted, containers not Ready", func() *corev1.Pod {
			p := gated(pod("web-0", "example.com/app:v1", oldRev, true), corev1.ConditionFalse)
			updatedInPlace(p)
			restarted(p, now.Add(-5*time.Second), false)
			return p
		}, 0, corev1.ConditionFalse},
		{"False, containers Ready less than minReadySeconds", func() *corev1.Pod {
			p := gated(pod("web-0", "example.com/app:v1", oldRev, true), corev1.ConditionFalse)
			updatedInPlace(p)
			restarted(p, now.Add(-5*time.Second), true)
			return p
		}, 10, corev1.ConditionFalse},
		{"False, complete: containers Ready for minReadySeconds (Ready itself False)", func() *corev1.Pod {
			p := gated(pod("web-0", "example.com/app:v1", oldRev, true), corev1.ConditionFalse)
			updatedInPlace(p)
			restarted(p, now.Add(-15*time.Second), true)
			return p
		}, 10, corev1.ConditionTrue},
		{"True stays True", func() *corev1.Pod {
			return gated(pod("web-0", "example.com/app:v2", newRev, true), corev1.ConditionTrue)
		}, 0, corev1.ConditionTrue},
		{"no gate declared: untouched", func() *corev1.Pod { return pod("web-0", "example.com/app:v2", newRev, true) }, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(1, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
			c.set.Spec.MinReadySeconds = tt.minRdy
			c.pods[0] = tt.pod()
			cs := c.client(&recorder{}, nil)
			kubelet(cs)
			var log bytes.Buffer
			e := newExec(t, cs, false, &log)
			rec := record(e, false)
			if _, err := e.Step(context.Background()); err != nil && !isHalt(err) {
				t.Fatal(err)
			}
			// The first write of the gate, if any: a pod set True may be
			// planned and set False again in the same step (the update
			// proceeds), so the writes tell, not the final state.
			var got corev1.ConditionStatus
			for _, x := range podWrites(rec) {
				if x.sub == "status" {
					var body struct {
						Status struct {
							Conditions []corev1.PodCondition `json:"conditions"`
						} `json:"status"`
					}
					if err := json.Unmarshal([]byte(x.body), &body); err != nil {
						t.Fatal(err)
					}
					got = body.Status.Conditions[0].Status
					break
				}
			}
			want := tt.want
			if c := live.PodCondition(c.pods[0], live.ReadinessGate); c != nil && c.Status == want {
				want = "" // nothing to write
			}
			if got != want {
				t.Errorf("first gate write %q, want %q; writes %v\n%s", got, want, podWrites(rec), log.String())
			}
		})
	}
}

func isHalt(err error) bool {
	_, ok := err.(*HaltedError)
	return ok
}

// TestGateDryRun: with DryRun the gate writes carry dryRun=All and change
// nothing.
func TestGateDryRun(t *testing.T) {
	c := newCluster(1, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v2", "a")
	gated(c.pods[0], corev1.ConditionTrue)
	cs := c.client(&recorder{}, nil)
	var log bytes.Buffer
	x := newExec(t, cs, true, &log)
	w := record(x, true) // the server would answer; nothing is stored
	if _, err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	var patches int
	for _, c := range w.calls {
		if c.verb == "patchPod" {
			patches++
		}
	}
	// TestClientWriter: a dry-run writer's requests carry dryRun=All.
	if cw, ok := sends(w.next); patches != 2 || !ok || !cw.dryRun {
		t.Errorf("writes %+v through %+v, want two pod patches with dryRun=All", w.calls, w.next)
	}
	if got := gateStatus(t, cs, "web-0"); got != corev1.ConditionTrue {
		t.Errorf("gate %q after a dry run, want True", got)
	}
}
