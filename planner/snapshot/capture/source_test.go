package capture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The label index answers a selector exactly as a scan of the namespace
// does, whatever the selector's operators.
func TestListerSourcePodsByLabel(t *testing.T) {
	var objs []runtime.Object
	for _, ns := range []string{"a", "a-b", "b"} {
		for i := range 12 {
			l := map[string]string{"app": fmt.Sprintf("app-%d", i%3), "tier": []string{"web", "db"}[i%2],
				appsv1.StatefulSetPodNameLabel: fmt.Sprintf("p-%02d", 11-i), appsv1.PodIndexLabel: fmt.Sprint(i % 4)}
			if i%4 == 0 {
				l["canary"] = "true"
			}
			if i == 5 {
				l = nil
			}
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%02d", 11-i), Labels: l}})
		}
	}
	cs := fake.NewClientset(objs...)
	started := informers.NewSharedInformerFactory(cs, 0)
	_ = started.Core().V1().Pods().Informer()
	started.Start(t.Context().Done())
	started.WaitForCacheSync(t.Context().Done())
	f := informers.NewSharedInformerFactory(cs, 0)
	index := NewListerSource(f, f)
	scan := *index
	scan.labelIndex = false
	sources := map[string]*ListerSource{
		"index": index,
		// On an informer started already, the index takes the pods it holds.
		"late index": NewListerSource(started, started),
		"scan":       &scan,
	}
	f.Start(t.Context().Done())
	f.WaitForCacheSync(t.Context().Done())
	if !index.labelIndex || !sources["late index"].labelIndex {
		t.Fatalf("no label index")
	}
	lister := f.Core().V1().Pods().Lister()
	for _, s := range []string{"", "app=app-1", "app==app-1", "app=app-1,tier=db", "app in (app-0,app-2)", "app in (app-0,app-2),canary",
		"app=app-1,canary=true", "app=none", "tier=db,app notin (app-1)", "!canary", "canary", "app!=app-0", "tier=web,app=app-0,canary=true",
		// Labels left out of the index: another requirement, or a scan.
		appsv1.StatefulSetPodNameLabel + "=p-03", "app=app-2," + appsv1.StatefulSetPodNameLabel + "=p-03",
		appsv1.PodIndexLabel + " in (1,2),tier=db", appsv1.PodIndexLabel + "=3"} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"a", "a-b", metav1.NamespaceAll} {
			want, err := lister.Pods(ns).List(sel)
			if err != nil {
				t.Fatal(err)
			}
			for name, src := range sources {
				got, err := src.Pods(context.Background(), ns, sel)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := podKeys(got), podKeys(want); !slices.Equal(g, w) {
					t.Errorf("%s: Pods(%q, %q) = %q, want %q", name, ns, s, g, w)
				}
			}
		}
	}
	// A nil selector selects everything.
	got, err := sources["index"].Pods(context.Background(), "b", nil)
	if err != nil || len(got) != 12 {
		t.Errorf("Pods(b, nil) = %d pods (%v), want 12", len(got), err)
	}
	// Through the index, one namespace's pods come sorted by name.
	got, err = sources["index"].Pods(context.Background(), "a", labels.SelectorFromSet(labels.Set{"tier": "db"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(got, func(x, y *corev1.Pod) int { return strings.Compare(x.Name, y.Name) }) {
		t.Errorf("pods not sorted by name: %q", podKeys(got))
	}
}

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// A source on factories with the StripManagedFields transform serves pods
// without managed fields and with everything a capture reads.
func TestStripManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Labels: map[string]string{"app": "x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	f := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(pod), 0, informers.WithTransform(StripManagedFields))
	src := NewListerSource(f, f)
	f.Start(t.Context().Done())
	f.WaitForCacheSync(t.Context().Done())
	got, err := src.Pods(context.Background(), "a", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ManagedFields != nil || got[0].Labels["app"] != "x" || got[0].Spec.NodeName != "n1" {
		t.Fatalf("cached pods %+v, want p without managed fields, labels and spec kept", got)
	}
	// Not an object (a tombstone): passed on as it is.
	tomb := "not an object"
	if out, err := StripManagedFields(tomb); err != nil || out != tomb {
		t.Errorf("StripManagedFields(%q) = %v, %v", tomb, out, err)
	}
}
