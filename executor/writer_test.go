package executor

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rollplan/rollplan/planner/live"
)

// writeCall is one write a recordingWriter saw.
type writeCall struct {
	verb, name, subresource string
	uid                     types.UID // the object's: the precondition of a delete or an eviction
	data                    []byte    // a patch's body
}

// recordingWriter is the executor's writer in unit tests: it records every
// write and hands it to next (a clientWriter over the fake clientset, so
// the next read sees it), unless drop says the server stores nothing (as
// in a dry run) or fail stages a refusal.
type recordingWriter struct {
	next  writer
	drop  bool
	fail  func(writeCall) error
	calls []writeCall
}

// record notes c and says whether to pass it on, or the staged error.
func (r *recordingWriter) record(c writeCall) (bool, error) {
	r.calls = append(r.calls, c)
	if r.fail != nil {
		if err := r.fail(c); err != nil {
			return false, err
		}
	}
	return !r.drop, nil
}

func (r *recordingWriter) patchPod(ctx context.Context, pod *corev1.Pod, pt types.PatchType, data []byte, sub ...string) (*corev1.Pod, error) {
	if pass, err := r.record(writeCall{verb: "patchPod", name: pod.Name, subresource: strings.Join(sub, "/"), uid: pod.UID, data: data}); !pass {
		return pod, err
	}
	return r.next.patchPod(ctx, pod, pt, data, sub...)
}

func (r *recordingWriter) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if pass, err := r.record(writeCall{verb: "deletePod", name: pod.Name, uid: pod.UID}); !pass {
		return err
	}
	return r.next.deletePod(ctx, pod)
}

func (r *recordingWriter) evictPod(ctx context.Context, pod *corev1.Pod) error {
	if pass, err := r.record(writeCall{verb: "evictPod", name: pod.Name, uid: pod.UID}); !pass {
		return err
	}
	return r.next.evictPod(ctx, pod)
}

func (r *recordingWriter) patchNode(ctx context.Context, name string, pt types.PatchType, data []byte, sub ...string) (*corev1.Node, error) {
	if pass, err := r.record(writeCall{verb: "patchNode", name: name, subresource: strings.Join(sub, "/"), data: data}); !pass {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, err
	}
	return r.next.patchNode(ctx, name, pt, data, sub...)
}

func (r *recordingWriter) patchWorkload(ctx context.Context, t live.Target, data []byte, sub ...string) error {
	if pass, err := r.record(writeCall{verb: "patchWorkload", name: t.String(), subresource: strings.Join(sub, "/"), data: data}); !pass {
		return err
	}
	return r.next.patchWorkload(ctx, t, data, sub...)
}

func (r *recordingWriter) updateReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	if pass, err := r.record(writeCall{verb: "updateReplicaSet", name: rs.Name, uid: rs.UID}); !pass {
		return err
	}
	return r.next.updateReplicaSet(ctx, rs)
}

func (r *recordingWriter) deleteReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	if pass, err := r.record(writeCall{verb: "deleteReplicaSet", name: rs.Name, uid: rs.UID}); !pass {
		return err
	}
	return r.next.deleteReplicaSet(ctx, rs)
}

// record installs a recordingWriter in x and returns it.
func record(x *Executor, drop bool) *recordingWriter {
	w := &recordingWriter{next: x.writer, drop: drop}
	x.writer = w
	return w
}

// TestClientWriter: every request the client-go writer sends carries the
// field manager (patches, updates), dryRun=All exactly in a dry run, and
// the preconditions its methods promise.
func TestClientWriter(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", UID: "pod-uid"}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-1", UID: "rs-uid", ResourceVersion: "7"}}
	for _, dry := range []bool{false, true} {
		cs := fake.NewClientset()
		var got []string
		cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			var dryRun []string
			manager, pre := "-", "-"
			switch a := a.(type) {
			case k8stesting.PatchActionImpl:
				dryRun, manager = a.PatchOptions.DryRun, a.PatchOptions.FieldManager
			case k8stesting.UpdateActionImpl:
				dryRun, manager = a.UpdateOptions.DryRun, a.UpdateOptions.FieldManager
			case k8stesting.DeleteActionImpl:
				dryRun = a.DeleteOptions.DryRun
				if p := a.DeleteOptions.Preconditions; p != nil && p.UID != nil {
					pre = string(*p.UID)
					if p.ResourceVersion != nil {
						pre += "@" + *p.ResourceVersion
					}
				}
			case k8stesting.CreateActionImpl:
				if ev, ok := a.GetObject().(*policyv1.Eviction); ok && ev.DeleteOptions != nil {
					dryRun = ev.DeleteOptions.DryRun
					if p := ev.DeleteOptions.Preconditions; p != nil && p.UID != nil {
						pre = string(*p.UID)
					}
				}
			}
			got = append(got, strings.Join([]string{a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), manager, pre, strings.Join(dryRun, ",")}, " "))
			return true, nil, nil
		})
		w := clientWriter{client: cs, dryRun: dry}
		ctx := context.Background()
		_, _ = w.patchPod(ctx, pod, types.StrategicMergePatchType, []byte("{}"), "status")
		_ = w.deletePod(ctx, pod)
		_ = w.evictPod(ctx, pod)
		_, _ = w.patchNode(ctx, "n1", types.MergePatchType, []byte("{}"))
		_ = w.patchWorkload(ctx, live.Target{Namespace: ns, Kind: "StatefulSet", Name: "web"}, []byte("{}"), "status")
		_ = w.patchWorkload(ctx, live.Target{Namespace: ns, Kind: "Deployment", Name: "api"}, []byte("{}"))
		_ = w.patchWorkload(ctx, live.Target{Namespace: ns, Kind: "DaemonSet", Name: "agent"}, []byte("{}"))
		_ = w.updateReplicaSet(ctx, rs)
		_ = w.deleteReplicaSet(ctx, rs)
		all := ""
		if dry {
			all = metav1.DryRunAll
		}
		want := []string{
			"patch pods status rollplan - " + all,
			"delete pods  - pod-uid " + all,
			"create pods eviction - pod-uid " + all,
			"patch nodes  rollplan - " + all,
			"patch statefulsets status rollplan - " + all,
			"patch deployments  rollplan - " + all,
			"patch daemonsets  rollplan - " + all,
			"update replicasets  rollplan - " + all,
			"delete replicasets  - rs-uid@7 " + all,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("dry run %v: requests\n%s\nwant\n%s", dry, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if err := (clientWriter{client: fake.NewClientset()}).patchWorkload(context.Background(), live.Target{Kind: "Job"}, nil); err == nil {
		t.Error("patchWorkload of a Job: no error")
	}
}

// sends is the client-go writer behind w, under the fake API server's
// writer (clusterWriter, nodeWriter) when the test's cluster has one.
func sends(w writer) (clientWriter, bool) {
	switch c := w.(type) {
	case clusterWriter:
		w = c.writer
	case nodeWriter:
		w = c.writer
	}
	cw, ok := w.(clientWriter)
	return cw, ok
}
