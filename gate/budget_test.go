package gate

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

// nativeParallel: the 4-pod Parallel StatefulSet of the fixtures, rolled by
// its controller (RollingUpdate, no rollplan annotations), with the named
// pods not Ready.
func nativeParallel(unready ...string) []runtime.Object {
	return edit(statefulSet(4, unready...), nil, func(o runtime.Object) {
		if set, ok := o.(*appsv1.StatefulSet); ok {
			delete(set.Annotations, facts.AnnManaged)
			delete(set.Annotations, facts.AnnMaxUnavailable)
			delete(set.Annotations, facts.AnnPodUpdatePolicy)
			set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
		}
	})
}

// A native Parallel StatefulSet with MaxUnavailableStatefulSet off (the
// default through v1.36): its
// controller replaces the highest out-of-date ordinal whenever no replica
// above it is unavailable, whatever the pods below (§4.5), and the planner
// plans it so. The gate counts its budget (one pod at a time) the same way:
// an unready pod below does not stall the rollout, one above does.
func TestNativeParallelStatefulSetCountsAbove(t *testing.T) {
	cases := []struct {
		name    string
		objs    []runtime.Object
		pod     string
		allowed bool
		want    string
	}{
		{"unready pod below", nativeParallel("db-1"), "db-3", true, ""},
		{"unready pod above", nativeParallel("db-3"), "db-2", false, "budget maxUnavailable allows 1 pod unavailable, this would make 2 (already unavailable: db-3)"},
		{"the unready pod itself", nativeParallel("db-1"), "db-1", true, ""},
		{"every pod available", nativeParallel(), "db-0", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{KubernetesVersion: kubeversion.V1_36}, c.objs...)
			resp, _ := f.review(evict(c.pod, true))
			if resp.Allowed != c.allowed {
				t.Fatalf("eviction of %s: allowed %v, want %v: %v", c.pod, resp.Allowed, c.allowed, resp.Result)
			}
			if c.want != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, c.want)) {
				t.Errorf("message %v, want %q", resp.Result, c.want)
			}
		})
	}
}

// A native Parallel StatefulSet on v1.37 (MaxUnavailableStatefulSet on by
// default): its controller deletes every unavailable old pod whatever
// maxUnavailable (phase 1, reference §8). The gate admits any disruption of
// a pod that is unavailable already, so it never stalls phase 1; an
// available pod still needs room in the budget.
func TestNativeParallelStatefulSetPhase1OnV137(t *testing.T) {
	cases := []struct {
		name    string
		version kubeversion.Version
		gates   map[string]bool
		objs    []runtime.Object
		pod     string
		allowed bool
	}{
		{"v1.37: an unavailable old pod past the budget", kubeversion.V1_37, nil, nativeParallel("db-1", "db-2"), "db-1", true},
		{"v1.37: an available pod past the budget", kubeversion.V1_37, nil, nativeParallel("db-1", "db-2"), "db-3", false},
		{"v1.36, gate on: an available pod past the budget", kubeversion.V1_36, map[string]bool{kubeversion.MaxUnavailableStatefulSet: true}, nativeParallel("db-1", "db-2"), "db-3", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{KubernetesVersion: c.version, FeatureGates: c.gates}, c.objs...)
			resp, _ := f.review(evict(c.pod, true))
			if resp.Allowed != c.allowed {
				t.Fatalf("eviction of %s: allowed %v, want %v: %v", c.pod, resp.Allowed, c.allowed, resp.Result)
			}
		})
	}
}

// An eviction the PDB's own status refuses is denied without a
// reservation: the Eviction API calls webhooks before its PDB check, and a
// reservation for an eviction it then refused would deny, until it lapsed,
// the evictions the PDB allows by then.
func TestEvictionThePDBRefusesReservesNothing(t *testing.T) {
	pdb := func(allowed int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-pdb", Generation: 2},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, DisruptionsAllowed: allowed, ExpectedPods: 5, CurrentHealthy: 5, DesiredHealthy: 4},
		}
	}
	cases := []struct {
		name     string
		allowed  int32
		req      *admissionv1.AdmissionRequest
		admitted bool
		want     string
	}{
		{"eviction, the PDB allows none now", 0, evict("db-0", false), false, "PodDisruptionBudget shop/db-pdb allows no disruption now (status.disruptionsAllowed 0), so the Eviction API refuses it"},
		{"eviction, the PDB allows one", 1, evict("db-0", false), true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, append(statefulSet(5), pdb(c.allowed))...)
			resp, _ := f.review(c.req)
			if resp.Allowed != c.admitted {
				t.Fatalf("admitted %v, want %v: %v", resp.Allowed, c.admitted, resp.Result)
			}
			if c.want != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, c.want)) {
				t.Errorf("message %v, want %q", resp.Result, c.want)
			}
			if got := len(f.reserved()); got != map[bool]int{true: 1, false: 0}[c.admitted] {
				t.Errorf("%d reservations, want one only for an admitted eviction", got)
			}
		})
	}
}

// Two workloads under one PDB reserve in one store: the second of two
// disruptions racing for the PDB's last unit is denied, though the cache
// does not show the first yet. The audit saw both admitted in 6 of 6 rounds.
func TestSharedPDBReservesAcrossWorkloads(t *testing.T) {
	second := edit(statefulSet(3), nil, func(o runtime.Object) {
		m := o.(metav1.Object)
		m.SetName(strings.Replace(m.GetName(), "db", "kv", 1))
		m.SetUID(types.UID(strings.Replace(string(m.GetUID()), "db", "kv", 1)))
		refs := m.GetOwnerReferences()
		for i := range refs {
			refs[i].Name, refs[i].UID = "kv", "kv-uid"
		}
		m.SetOwnerReferences(refs)
		labels := m.GetLabels()
		if labels != nil && labels[appsv1.ControllerRevisionHashLabelKey] != "" {
			labels[appsv1.ControllerRevisionHashLabelKey] = "kv-1"
		}
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			o.Spec.Selector.MatchLabels["set"] = "kv"
			o.Spec.Template.Labels = map[string]string{"app": "db", "set": "kv"}
			o.Status.CurrentRevision, o.Status.UpdateRevision = "kv-1", "kv-1"
		case *corev1.Pod:
			o.Labels["set"] = "kv"
		}
	})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1},
	}
	objs := append(append(statefulSet(5), second...), pdb)
	f := newFixture(t, Options{}, objs...)
	del := func(name string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{UID: types.UID("del-" + name), Namespace: ns, Name: name, Resource: podResource(), Operation: admissionv1.Delete,
			OldObject: runtime.RawExtension{Raw: f.podJSON(name, nil)}}
	}
	if resp, d := f.review(del("db-0")); !resp.Allowed {
		t.Fatalf("the first delete under the shared PDB: %s %v, want admitted", d, resp.Result)
	}
	resp, _ := f.review(del("kv-0"))
	if resp.Allowed {
		t.Fatal("the second delete under the shared PDB (maxUnavailable 1) was admitted while the first is not in the cache yet")
	}
	if want := "budget pdb/shared allows 1 pod unavailable, this would make 2"; resp.Result == nil || !strings.Contains(resp.Result.Message, want) {
		t.Errorf("message %v, want %q", resp.Result, want)
	}
}
