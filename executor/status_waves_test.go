package executor

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/facts"
)

// TestStatusWavesAlongARollout reads the status of rollouts at each state
// they pass through, as `status --watch` (or a CLI started anew) sees
// them, each read by a fresh executor: the total is the rollout's own plan
// at every read, the wave number never goes backwards and never passes
// the total. It used to count waves done in waves of the largest wave left
// and the waves left anew at every read: a DaemonSet's total flipped
// between 5 and 6 while a pod was replaced, and numbers overshot.
func TestStatusWavesAlongARollout(t *testing.T) {
	v1, v2 := "example.com/app:v1", "example.com/app:v2"
	// The StatefulSet: 6 pods, max-unavailable 2.
	inPlace := func(c *cluster, i int, state string) {
		name := fmt.Sprintf("web-%d", i)
		switch state {
		case "inflight": // patched: the spec says v2, the kubelet runs v1
			p := pod(name, v2, newRev, true)
			p.Status.ContainerStatuses[0].Image = v1
			c.pods[i] = p
		case "done":
			c.pods[i] = pod(name, v2, newRev, true)
		}
	}
	recreate := func(c *cluster, i int, state string) {
		name := fmt.Sprintf("web-%d", i)
		switch state {
		case "terminating":
			c.pods[i].DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-5 * time.Second)))
			c.pods[i].DeletionGracePeriodSeconds = ptr.To(int64(30))
			c.pods[i].Finalizers = []string{"test/keep"}
		case "missing":
			c.pods[i] = nil
		case "starting":
			p := fresh(pod(name, v2, newRev, false))
			p.Spec.Containers[0].Env[0].Value = "b"
			c.pods[i] = p
		case "done":
			p := pod(name, v2, newRev, true)
			p.Spec.Containers[0].Env[0].Value = "b"
			c.pods[i] = p
		}
	}
	type step map[int]string // pod index → state
	stsStates := func(set func(c *cluster, i int, state string), env string, steps []step) []func() *cluster {
		var out []func() *cluster
		for k := range steps {
			out = append(out, func() *cluster {
				c := newCluster(6, appsv1.OnDeleteStatefulSetStrategyType, true, v2, env)
				for _, s := range steps[:k+1] { // each step on top of the previous
					for i, state := range s {
						set(c, i, state)
					}
				}
				var pods []*corev1.Pod
				for _, p := range c.pods {
					if p != nil {
						pods = append(pods, p)
					}
				}
				c.pods = pods
				return c
			})
		}
		return out
	}
	stsClient := func(f func() *cluster) func(t *testing.T) *Executor {
		return func(t *testing.T) *Executor {
			return newExec(t, f().client(&recorder{}, nil), false, &bytes.Buffer{})
		}
	}

	// The DaemonSet: 6 nodes, max-unavailable 1, each pod recreated.
	dsSet := func(c *dsCluster, i int, state string) {
		name := fmt.Sprintf("agent-%d", i)
		node := fmt.Sprintf("node-%d", i)
		switch state {
		case "terminating":
			c.pods[i].DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-5 * time.Second)))
			c.pods[i].DeletionGracePeriodSeconds = ptr.To(int64(30))
		case "missing":
			c.pods[i] = nil
		case "unbound": // created, not yet bound to its node
			p := fresh(dsPod(name+"-new", node, "new", false))
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
			c.pods[i] = p
		case "starting":
			c.pods[i] = fresh(dsPod(name+"-new", node, "new", false))
		case "done":
			c.pods[i] = dsPod(name+"-new", node, "new", true)
		}
	}
	dsStates := func(steps []step) []func(t *testing.T) *Executor {
		var out []func(t *testing.T) *Executor
		for k := range steps {
			out = append(out, func(t *testing.T) *Executor {
				c := newDSCluster(6, "1")
				for _, s := range steps[:k+1] {
					for i, state := range s {
						dsSet(c, i, state)
					}
				}
				var pods []*corev1.Pod
				for _, p := range c.pods {
					if p != nil {
						pods = append(pods, p)
					}
				}
				c.pods = pods
				return newDSExec(t, c.client(t, &nodeWrites{}, nil, nil), "", false, &bytes.Buffer{})
			})
		}
		return out
	}
	dsSteps := func(order []int) []step {
		var out []step
		for _, i := range order {
			for _, s := range []string{"terminating", "missing", "unbound", "starting", "done"} {
				out = append(out, step{i: s})
			}
		}
		return out
	}

	// A managed Deployment of 3 updated in place (max-unavailable 1): the
	// pods' spec takes v2, the kubelet runs it later.
	deploySteps := []map[int]string{{}, {2: "inflight"}, {2: "done"}, {1: "inflight"}, {1: "done"}, {0: "inflight"}}
	deployReads := func() []func(t *testing.T) *Executor {
		var out []func(t *testing.T) *Executor
		for k := range deploySteps {
			out = append(out, func(t *testing.T) *Executor {
				objs := deployCluster(true, v2, "a", v1, false)
				for _, o := range objs {
					p, ok := o.(*corev1.Pod)
					if !ok {
						continue
					}
					p.Annotations = nil
					for _, s := range deploySteps[:k+1] {
						for i, state := range s {
							if p.Name != fmt.Sprintf("api-aaa-%d", i) {
								continue
							}
							p.Spec.Containers[0].Image = v2
							if state == "done" {
								p.Status.ContainerStatuses[0].Image = v2
							}
						}
					}
				}
				for _, o := range objs {
					if d, ok := o.(*appsv1.Deployment); ok {
						d.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceIfPossible"
					}
				}
				return deployExec(t, fake.NewClientset(objs...), &bytes.Buffer{})
			})
		}
		return out
	}

	tests := []struct {
		name   string
		reads  []func(t *testing.T) *Executor
		total  int
		want   []int // the wave number at each read; 0: rolled out
		minima []int // with want nil: at least these (never backwards is checked anyway)
	}{
		{
			name: "StatefulSet in place, two pods a wave",
			reads: func() []func(t *testing.T) *Executor {
				var out []func(t *testing.T) *Executor
				for _, f := range stsStates(inPlace, "a", []step{
					{}, {5: "inflight", 4: "inflight"}, {5: "done"}, {4: "done"},
					{3: "inflight"}, {2: "inflight"}, {3: "done"}, {2: "done"},
					{1: "inflight", 0: "inflight"}, {1: "done"}, {0: "done"},
				}) {
					out = append(out, stsClient(f))
				}
				return out
			}(),
			total: 3,
			want:  []int{1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 0},
		},
		{
			name: "StatefulSet recreated, two pods a wave: terminating, missing, starting",
			reads: func() []func(t *testing.T) *Executor {
				var out []func(t *testing.T) *Executor
				for _, f := range stsStates(recreate, "b", []step{
					{}, {5: "terminating"}, {4: "terminating", 5: "missing"}, {5: "starting", 4: "missing"},
					{4: "starting"}, {5: "done", 4: "done"},
					{3: "terminating"}, {3: "missing"}, {3: "starting"}, {3: "done"},
				}) {
					out = append(out, stsClient(f))
				}
				return out
			}(),
			total: 3,
			want:  []int{1, 1, 1, 1, 1, 2, 2, 2, 2, 2},
		},
		{
			name:  "Deployment held by rollplan, in place, one pod a wave",
			reads: deployReads(),
			total: 3,
			want:  []int{1, 1, 2, 2, 3, 3},
		},
		{
			name:  "DaemonSet recreated, one pod a wave",
			reads: dsStates(append([]step{{}}, dsSteps([]int{0, 1, 2, 3, 4, 5})...)),
			total: 6,
			want: []int{1,
				1, 1, 1, 1, 2,
				2, 2, 2, 2, 3,
				3, 3, 3, 3, 4,
				4, 4, 4, 4, 5,
				5, 5, 5, 5, 6,
				6, 6, 6, 6, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := 0
			for i, read := range tt.reads {
				st, err := read(t).Status(context.Background())
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				got := st.Waves.Current
				if st.State == StatusRolledOut {
					got = 0
					if st.Waves.Done != tt.total || st.Waves.Total != tt.total {
						t.Errorf("read %d: rolled out with waves %+v, want %d done of %d", i, st.Waves, tt.total, tt.total)
					}
				} else {
					if st.Waves.Total != tt.total {
						t.Errorf("read %d: %q: total %d, want the rollout's own %d (%+v)", i, st.Verdict, st.Waves.Total, tt.total, st.Waves)
					}
					if got < last || got > tt.total || got < 1 {
						t.Errorf("read %d: %q: wave %d after wave %d, of %d", i, st.Verdict, got, last, tt.total)
					}
					if st.Waves.Done+st.Waves.Remaining != st.Waves.Total || st.Waves.Current != st.Waves.Done+1 {
						t.Errorf("read %d: waves %+v do not add up", i, st.Waves)
					}
					last = got
				}
				if tt.want != nil && i < len(tt.want) && got != tt.want[i] {
					t.Errorf("read %d: %q: wave %d, want %d (waves %+v, pods %+v)", i, st.Verdict, got, tt.want[i], st.Waves, st.Pods)
				}
			}
		})
	}
}

// fresh is p created 5s ago, its Ready condition (and container) since then.
func fresh(p *corev1.Pod) *corev1.Pod {
	t := metav1.NewTime(now.Add(-5 * time.Second))
	p.CreationTimestamp = t
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].LastTransitionTime = t
	}
	for i := range p.Status.ContainerStatuses {
		if r := p.Status.ContainerStatuses[i].State.Running; r != nil {
			r.StartedAt = t
		}
	}
	return p
}
