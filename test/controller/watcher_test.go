package controller

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/harness"
)

// watcher follows every pod of the test's namespace through an informer
// and records, per workload (label app), the most pods unavailable at any
// moment (Want minus the pods Ready and running the image their spec
// names, terminating ones not counted), and per pod what happened to it:
// how often its spec image changed, how many in-place update records it
// got, its restarts. A pod updated twice shows in those counts.
type watcher struct {
	mu    sync.Mutex
	track map[string]*tracked // by app
	pods  map[string]*corev1.Pod
	// perPod: by pod UID.
	perPod map[string]*podHistory
	synced bool
}

type tracked struct {
	w      workload
	worst  int
	at     string
	groups func(*corev1.Pod) string
	// groupWant: pods per group; worstGroups: most groups with a pod
	// unavailable at once.
	groupWant   map[string]int
	worstGroups int
	groupsAt    string
}

// podHistory is what the watcher saw of one pod.
type podHistory struct {
	app, name string
	// seen: when the watcher first saw it.
	seen time.Time
	// images: the spec images in the order seen; records: the distinct
	// in-place update records (AnnInPlaceUpdate values) it got.
	images   []string
	imageAt  []time.Time
	records  []string
	restarts int32
}

func (e *env) watchPods() *watcher {
	e.t.Helper()
	w := &watcher{track: map[string]*tracked{}, pods: map[string]*corev1.Pod{}, perPod: map[string]*podHistory{}}
	harness.WatchPods(e.t, e.client, e.ns, "", harness.PodHandlers{
		Put: func(p *corev1.Pod) {
			w.mu.Lock()
			w.put(p)
			w.record(p.Labels["app"])
			w.mu.Unlock()
		},
		Delete: func(p *corev1.Pod) {
			w.mu.Lock()
			delete(w.pods, string(p.UID))
			w.record(p.Labels["app"])
			w.mu.Unlock()
		},
		Synced: func(pods []*corev1.Pod) {
			w.mu.Lock()
			for _, p := range pods {
				w.put(p)
			}
			w.synced = true
			w.mu.Unlock()
		},
	})
	return w
}

// follow starts recording the workload's availability against its budget.
func (w *watcher) follow(wl workload) *tracked {
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := &tracked{w: wl}
	w.track[wl.Name] = tr
	w.record(wl.Name)
	return tr
}

// groupBy makes the watcher also record how many groups (zones) have a pod
// unavailable at once.
func (w *watcher) groupBy(app string, of func(*corev1.Pod) string, want map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := w.track[app]
	tr.groups, tr.groupWant = of, want
	w.record(app)
}

func (w *watcher) put(p *corev1.Pod) {
	uid := string(p.UID)
	if old, ok := w.pods[uid]; ok {
		a, _ := strconv.ParseInt(old.ResourceVersion, 10, 64)
		b, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
		if b < a {
			return // a notification of the initial list, older than the cache
		}
	}
	w.pods[uid] = p
	h := w.perPod[uid]
	if h == nil {
		h = &podHistory{app: p.Labels["app"], name: p.Name, seen: time.Now()}
		w.perPod[uid] = h
	}
	img := p.Spec.Containers[0].Image
	if n := len(h.images); n == 0 || h.images[n-1] != img {
		h.images = append(h.images, img)
		h.imageAt = append(h.imageAt, time.Now())
	}
	if rec := p.Annotations[live.AnnInPlaceUpdate]; rec != "" {
		if n := len(h.records); n == 0 || h.records[n-1] != rec {
			h.records = append(h.records, rec)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		h.restarts = max(h.restarts, cs.RestartCount)
	}
}

func (w *watcher) record(app string) {
	tr := w.track[app]
	if !w.synced || tr == nil {
		return
	}
	avail := 0
	byGroup := map[string]int{}
	var desc []string
	for _, p := range w.pods {
		if p.Labels["app"] != app {
			continue
		}
		ok := harness.Available(p)
		if ok {
			avail++
			if tr.groups != nil {
				byGroup[tr.groups(p)]++
			}
		}
		desc = append(desc, fmt.Sprintf("%s(available=%t terminating=%t node=%s spec=%s)", p.Name, ok, p.DeletionTimestamp != nil, p.Spec.NodeName, p.Spec.Containers[0].Image))
	}
	if tr.w.Want-avail > tr.worst {
		sort.Strings(desc)
		tr.worst = tr.w.Want - avail
		tr.at = strings.Join(desc, "\n")
	}
	if tr.groups != nil {
		var short []string
		for g, n := range tr.groupWant {
			if byGroup[g] < n {
				short = append(short, fmt.Sprintf("%s: %d of %d available", g, byGroup[g], n))
			}
		}
		if len(short) > tr.worstGroups {
			sort.Strings(short)
			tr.worstGroups = len(short)
			tr.groupsAt = strings.Join(short, "; ")
		}
	}
}

// check fails the test if the workload ever had more pods unavailable than
// its budget, or (when it rolled) none at all (the watcher did not see
// it), or if a pod was updated twice or replaced more than once: each
// template change (changes) updates a pod in place at most once, and
// recreates each pod at most once.
func (w *watcher) check(e *env, app string, since time.Time, changes int) int {
	e.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := w.track[app]
	if tr.worst > tr.w.Budget {
		e.t.Errorf("%s: at some point %d pods were unavailable, budget %d:\n%s", tr.w.ref(), tr.worst, tr.w.Budget, tr.at)
	}
	if tr.worst == 0 {
		e.t.Errorf("%s: the watcher never saw a pod unavailable: it did not observe the rollout", tr.w.ref())
	}
	created := 0
	for uid, h := range w.perPod {
		if h.app != app {
			continue
		}
		if h.seen.After(since) {
			created++
		}
		if n := len(h.images) - 1; n > changes {
			e.t.Errorf("%s: pod %s (uid %s) changed image %d times (%v): updated more than once", tr.w.ref(), h.name, uid, n, h.images)
		}
		if len(h.records) > changes {
			e.t.Errorf("%s: pod %s (uid %s) got %d in-place update records: updated more than once:\n%s", tr.w.ref(), h.name, uid, len(h.records), strings.Join(h.records, "\n"))
		}
		if int(h.restarts) > changes && !tr.w.CrashLoops {
			e.t.Errorf("%s: pod %s (uid %s) restarted %d times", tr.w.ref(), h.name, uid, h.restarts)
		}
	}
	want := 0
	if !tr.w.InPlace {
		want = tr.w.Want * changes
	}
	if created > want {
		e.t.Errorf("%s: %d pods created during the rollout, want at most %d: a pod was replaced more than once", tr.w.ref(), created, want)
	}
	return tr.worst
}

// changedTo: for each pod of app whose spec image changed to image, when
// the watcher saw it.
func (w *watcher) changedTo(app, image string) map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Time{}
	for _, h := range w.perPod {
		if h.app != app {
			continue
		}
		for i, img := range h.images {
			if img == image && i > 0 {
				out[h.name] = h.imageAt[i]
			}
		}
	}
	return out
}
