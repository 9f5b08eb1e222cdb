package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const gateNS = "rollplan-system"

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// store is a reservation ConfigMap of workload as Reserve writes it, at
// resourceVersion "1", holding reservations until each of untils.
func store(workload string, untils ...time.Time) *corev1.ConfigMap {
	rs := []Reservation{}
	for i, u := range untils {
		rs = append(rs, Reservation{Pod: "db-" + string(rune('0'+i)), UID: "uid", Until: u})
	}
	raw, _ := json.Marshal(rs)
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(workload), Namespace: gateNS, ResourceVersion: "1",
		Labels:      map[string]string{LabelBudget: "true", "app.kubernetes.io/name": "rollplan-gate"},
		Annotations: map[string]string{annWorkload: workload}},
		Data: map[string]string{dataKey: string(raw)}}
}

// enforcePreconditions makes the fake API server refuse a delete whose
// resourceVersion precondition no longer holds, as the real one does (the
// fake ignores delete options). before runs first, for a writer racing
// the delete.
func enforcePreconditions(c *fake.Clientset, before func(name string)) {
	c.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		if before != nil {
			before(d.GetName())
		}
		p := d.GetDeleteOptions().Preconditions
		if p == nil || p.ResourceVersion == nil {
			return false, nil, nil
		}
		cur, err := c.Tracker().Get(configMaps, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*corev1.ConfigMap).ResourceVersion; rv != *p.ResourceVersion {
			return true, nil, apierrors.NewConflict(configMaps.GroupResource(), d.GetName(),
				fmt.Errorf("precondition resourceVersion %s, object has %s", *p.ResourceVersion, rv))
		}
		return false, nil, nil
	})
}

func TestConfigMapStorePrune(t *testing.T) {
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	lapsedStore := store("shop/StatefulSet/db", past, past)
	liveStore := store("shop/StatefulSet/web", past, future)
	emptyStore := store("shop/Deployment/gone")
	notStores := []runtime.Object{
		// No label: someone else's, whatever its name.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rollplan-budget-notes", Namespace: gateNS, ResourceVersion: "1"}},
		// The label without the name.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "copied-labels", Namespace: gateNS, ResourceVersion: "1",
			Labels: map[string]string{LabelBudget: "true"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: gateNS, ResourceVersion: "1"},
			Data: map[string]string{"ca.crt": "…"}},
	}
	// A lapsed store in another namespace: another gate's.
	elsewhere := store("shop/StatefulSet/db", past)
	elsewhere.Namespace = "other-gate"
	// A store Reserve cannot read either: kept, and reported.
	corrupt := store("shop/StatefulSet/bad")
	corrupt.Data[dataKey] = "{"

	for _, c := range []struct {
		name    string
		objs    []runtime.Object
		race    bool // another replica reserves between the list and the delete
		deleted int
		wantErr bool
		kept    []string
	}{
		{name: "lapsed store is deleted", objs: []runtime.Object{lapsedStore}, deleted: 1},
		{name: "store without reservations is deleted", objs: []runtime.Object{emptyStore}, deleted: 1},
		{name: "store with one live reservation is kept", objs: []runtime.Object{liveStore, lapsedStore}, deleted: 1,
			kept: []string{liveStore.Name}},
		{name: "store written since the list is kept", objs: []runtime.Object{lapsedStore}, race: true, deleted: 0,
			kept: []string{lapsedStore.Name}},
		{name: "configmaps that are not stores are never touched", objs: append(slices.Clone(notStores), elsewhere), deleted: 0,
			kept: []string{"rollplan-budget-notes", "copied-labels", "kube-root-ca.crt"}},
		{name: "unreadable store is kept and reported", objs: []runtime.Object{corrupt, lapsedStore}, deleted: 1, wantErr: true,
			kept: []string{corrupt.Name}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset(c.objs...)
			var race func(string)
			if c.race {
				race = func(name string) {
					cm := store("shop/StatefulSet/db", now.Add(time.Minute))
					cm.ResourceVersion = "2"
					if err := client.Tracker().Update(configMaps, cm, gateNS); err != nil {
						t.Fatal(err)
					}
				}
			}
			enforcePreconditions(client, race)
			s := &ConfigMapStore{Client: client, Namespace: gateNS}
			n, err := s.Prune(t.Context(), now)
			if (err != nil) != c.wantErr {
				t.Errorf("error %v, want error %v", err, c.wantErr)
			}
			if n != c.deleted {
				t.Errorf("deleted %d, want %d", n, c.deleted)
			}
			left, err := client.CoreV1().ConfigMaps(gateNS).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, cm := range left.Items {
				names = append(names, cm.Name)
			}
			for _, k := range c.kept {
				if !slices.Contains(names, k) {
					t.Errorf("configmap %s deleted; left: %v", k, names)
				}
			}
			if got, want := len(names), countIn(c.objs, gateNS)-c.deleted; got != want {
				t.Errorf("%d configmaps left, want %d: %v", got, want, names)
			}
			for _, o := range c.objs {
				if m := o.(metav1.Object); m.GetNamespace() != gateNS {
					if _, err := client.CoreV1().ConfigMaps(m.GetNamespace()).Get(t.Context(), m.GetName(), metav1.GetOptions{}); err != nil {
						t.Errorf("configmap %s/%s: %v", m.GetNamespace(), m.GetName(), err)
					}
				}
			}
		})
	}
}

func countIn(objs []runtime.Object, namespace string) int {
	n := 0
	for _, o := range objs {
		if o.(metav1.Object).GetNamespace() == namespace {
			n++
		}
	}
	return n
}

// A Reserve that read a store which was then pruned writes it again: its
// update finds nothing (NotFound), which is no reason to fail the request.
func TestReserveAfterPrune(t *testing.T) {
	const w = "shop/StatefulSet/db"
	client := fake.NewClientset(store(w, now.Add(-time.Minute)))
	pruned := false
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !pruned {
			pruned = true
			if err := client.Tracker().Delete(configMaps, gateNS, ConfigMapName(w)); err != nil {
				t.Fatal(err)
			}
		}
		return false, nil, nil
	})
	s := &ConfigMapStore{Client: client, Namespace: gateNS}
	until := now.Add(time.Minute)
	err := s.Reserve(t.Context(), w, func([]Reservation) ([]Reservation, bool, error) {
		return []Reservation{{Pod: "db-0", UID: "uid", Until: until}}, true, nil
	})
	if err != nil {
		t.Fatalf("Reserve after prune: %v", err)
	}
	cm, err := client.CoreV1().ConfigMaps(gateNS).Get(t.Context(), ConfigMapName(w), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reservation lost: %v", err)
	}
	if cm.Labels[LabelBudget] != "true" || !strings.Contains(cm.Data[dataKey], `"db-0"`) {
		t.Errorf("store written again as %+v", cm)
	}
}

func TestMemoryStorePrune(t *testing.T) {
	s := &MemoryStore{m: map[string][]Reservation{
		"shop/StatefulSet/db":  {{Pod: "db-0", Until: now.Add(-time.Second)}},
		"shop/StatefulSet/web": {{Pod: "web-0", Until: now.Add(-time.Second)}, {Pod: "web-1", Until: now.Add(time.Second)}},
	}}
	if n, err := s.Prune(context.Background(), now); n != 1 || err != nil {
		t.Errorf("Prune: %d, %v; want 1 deleted", n, err)
	}
	if _, ok := s.m["shop/StatefulSet/web"]; !ok || len(s.m) != 1 {
		t.Errorf("left %v, want the live workload only", s.m)
	}
}

type prunerFunc func(context.Context, time.Time) (int, error)

func (f prunerFunc) Prune(ctx context.Context, now time.Time) (int, error) { return f(ctx, now) }

// One log line per run, a warning when it fails; the loop ends with the
// gate's context.
func TestPruneEvery(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"ok", nil, `"level":"INFO","msg":"reservation gc","deleted":2}`},
		{"error", errors.New("forbidden"), `"level":"WARN","msg":"reservation gc","deleted":2,"error":"forbidden"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			ctx, cancel := context.WithCancel(t.Context())
			runs := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				PruneEvery(ctx, prunerFunc(func(context.Context, time.Time) (int, error) {
					runs++
					cancel()
					return 2, c.err
				}), time.Hour, slog.New(slog.NewJSONHandler(&buf, nil)))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("PruneEvery did not stop with its context")
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if runs != 1 || len(lines) != 1 || !strings.HasSuffix(lines[0], c.want) {
				t.Errorf("%d runs, log %q; want one line ending %s", runs, buf.String(), c.want)
			}
		})
	}
}
