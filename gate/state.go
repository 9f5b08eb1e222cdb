package gate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// workloadState is what a disruption is judged on: the workload's facts
// as the executor observes them, its pods as cached, and its budgets as
// the policy resolves them. Read-only once built.
type workloadState struct {
	rollout *facts.Rollout
	pods    map[string]*corev1.Pod // by name
	budgets []plan.Budget
	// elsewhere: by PDB, the unavailable pods of other workloads it
	// selects (what facts.PDB.UnavailableElsewhere counts), for denials.
	elsewhere                       map[string][]string
	captureErr, factsErr, policyErr error
	managed                         bool
	// timeless: time alone cannot change this state (clockFree): it is
	// kept until an object changes, however old.
	timeless bool
}

// stateKey: a workload's state is the same for the same cache contents
// (generations) and the same policy, at the same second.
type stateKey struct {
	target  live.Target
	nsGen   uint64
	nodeGen uint64
	engine  *engine.Engine
}

// stateEntry is a state built at second.
type stateEntry struct {
	state  *workloadState
	second int64
}

// generations count the informer events per namespace (and of the Nodes):
// a state built after reading a generation holds every change the
// generation counts, so a state cached under it is exact until it moves.
type generations struct {
	ns    sync.Map // namespace → *atomic.Uint64
	nodes atomic.Uint64
}

func (g *generations) of(ns string) uint64 {
	if c, ok := g.ns.Load(ns); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

func (g *generations) bump(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		ns, _, _ := strings.Cut(d.Key, "/")
		if !strings.Contains(d.Key, "/") {
			ns = ""
		}
		g.bumpNamespace(ns)
		return
	}
	m, ok := obj.(interface{ GetNamespace() string })
	if !ok {
		g.nodes.Add(1)
		return
	}
	g.bumpNamespace(m.GetNamespace())
}

func (g *generations) bumpNamespace(ns string) {
	if ns == "" { // Nodes
		g.nodes.Add(1)
		return
	}
	c, _ := g.ns.LoadOrStore(ns, &atomic.Uint64{})
	c.(*atomic.Uint64).Add(1)
}

// nodeFactsChanged says whether a Node update changes anything the facts
// read of a Node (facts.Build: labels, for zones and DaemonSet placement;
// taints; spec.unschedulable; the rollplan.dev/cordoned-by annotation;
// the MaintenancePlanned and MaintenanceInProgress conditions being True,
// facts.Maintenance). Every Node update would otherwise invalidate every
// cached state, and a large cluster's Nodes change status all the time
// (heartbeats, other conditions). A new Node field in the facts must be
// added here.
func nodeFactsChanged(old, cur *corev1.Node) bool {
	op, oi := facts.Maintenance(old)
	cp, ci := facts.Maintenance(cur)
	return !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!apiequality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		old.Annotations[facts.AnnCordonedBy] != cur.Annotations[facts.AnnCordonedBy] ||
		op != cp || oi != ci
}

// informing is a Cache that exposes its informers (capture.ListerSource):
// the gate then caches workload states, invalidated by their events.
type informing interface {
	Informers() []cache.SharedIndexInformer
}

// stateCache holds the latest state of each workload and generation; it
// is cleared when it grows past maxStates (entries of past generations
// are never hit again).
type stateCache struct {
	gens   *generations
	builds atomic.Int64 // states built, for tests
	mu     sync.Mutex
	m      map[stateKey]stateEntry
	flight singleflight.Group // one build per key and second at a time
	// background: one background build at a time, so that a second's
	// turn does not rebuild every workload at once and starve requests.
	background chan struct{}
}

const maxStates = 4096

func newStateCache(c Cache) (*stateCache, error) {
	inf, ok := c.(informing)
	if !ok {
		return nil, nil
	}
	sc := &stateCache{gens: &generations{}, m: map[stateKey]stateEntry{}, background: make(chan struct{}, 1)}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: sc.gens.bump,
		UpdateFunc: func(old, obj any) {
			o, wasNode := old.(*corev1.Node)
			n, isNode := obj.(*corev1.Node)
			if wasNode && isNode && !nodeFactsChanged(o, n) {
				return // a status update (heartbeat, conditions, images)
			}
			sc.gens.bump(obj)
		},
		DeleteFunc: sc.gens.bump,
	}
	for _, i := range inf.Informers() {
		if _, err := i.AddEventHandler(h); err != nil {
			return nil, fmt.Errorf("gate: watch the cache: %w", err)
		}
	}
	return sc, nil
}

// Ages of a cached state in whole seconds (see state).
const (
	refreshAfter = 2 // rebuilt in the background from this age on
	maxAge       = 5 // never served older: the request waits for a build
)

// state returns the workload's state at now (whole seconds). States are
// cached per workload until an informer event in its namespace (or on a
// Node) or a new policy: then the next request rebuilds it. Time alone
// may change a state too (a Ready pod reaches minReadySeconds): unless it
// cannot (clockFree: the steady state of most workloads), a state up to
// maxAge seconds old is served while a current one is built in the
// background (one build at a time, from refreshAfter seconds on), so
// requests seldom wait for a build. That staleness errs one way: time
// only ever makes pods available (readiness itself changes by events), so
// an older state counts at most more pods unavailable than there are, and
// denies rather than over-admits — for a few seconds at most.
func (g *Gate) state(ctx context.Context, t live.Target, now time.Time) *workloadState {
	eng := g.engine.Load()
	sc := g.states
	if sc == nil {
		return g.buildState(ctx, t, now, *eng)
	}
	// Generations first: what the cache holds then is at least as new.
	key := stateKey{target: t, nsGen: sc.gens.of(t.Namespace), nodeGen: sc.gens.nodes.Load(), engine: eng}
	sec := now.Unix()
	sc.mu.Lock()
	e, ok := sc.m[key]
	sc.mu.Unlock()
	build := func(ctx context.Context) *workloadState { return g.buildState(ctx, t, now, *eng) }
	switch age := sec - e.second; {
	case ok && age >= 0 && e.state.timeless:
		return e.state
	case ok && age >= 0 && age < refreshAfter:
		return e.state
	case ok && age >= 0 && age <= maxAge:
		go func() {
			sc.background <- struct{}{}
			defer func() { <-sc.background }()
			sc.build(context.WithoutCancel(ctx), key, sec, build)
		}()
		return e.state
	}
	return sc.build(ctx, key, sec, build)
}

// build builds a state once per key and second, however many ask, and
// keeps it unless it failed (a timeout must not deny for a second).
func (sc *stateCache) build(ctx context.Context, key stateKey, sec int64, build func(context.Context) *workloadState) *workloadState {
	v, _, _ := sc.flight.Do(fmt.Sprintf("%v/%d", key, sec), func() (any, error) {
		sc.mu.Lock()
		e, ok := sc.m[key]
		sc.mu.Unlock()
		if ok && e.second >= sec {
			return e.state, nil // built while we waited
		}
		s := build(ctx)
		sc.builds.Add(1)
		if ctx.Err() == nil && s.captureErr == nil && s.factsErr == nil && s.policyErr == nil {
			sc.mu.Lock()
			if len(sc.m) >= maxStates {
				clear(sc.m)
			}
			sc.m[key] = stateEntry{state: s, second: sec}
			sc.mu.Unlock()
		}
		return s, nil
	})
	return v.(*workloadState)
}

func (g *Gate) buildState(ctx context.Context, t live.Target, now time.Time, eng engine.Engine) *workloadState {
	s := &workloadState{}
	snap, _, err := capture.CaptureFrom(ctx, g.opts.Cache, capture.Options{Namespace: t.Namespace, Workloads: []capture.Ref{{Kind: t.Kind, Name: t.Name}}, Now: func() time.Time { return now }})
	if err != nil {
		s.captureErr = err
		return s
	}
	s.pods = make(map[string]*corev1.Pod, len(snap.Pods))
	for _, p := range snap.Pods {
		s.pods[p.Name] = p
	}
	s.managed = isManaged(snap, t)
	var inFlight map[string]string
	if s.rollout, inFlight, s.factsErr = live.Observe(snap, t, now, g.cluster()); s.factsErr != nil {
		return s
	}
	s.elsewhere = unavailableElsewhere(snap, s.rollout)
	// Only the budgets decision point: the per-pod rules are most of the
	// cost of a full evaluation, and a disruption needs none of them.
	eb, err := engine.Budgets(ctx, eng, s.rollout)
	if err != nil {
		s.policyErr = err
		return s
	}
	s.budgets = plan.ResolveBudgets(s.rollout, eb)
	s.timeless = clockFree(eng, s.rollout, inFlight)
	return s
}

// clockFree: the state cannot change as time passes with no object
// changing. Time changes facts in three ways: the clock facts
// (engine.ClockFacts; budgets that read none ignore them), a Ready pod
// reaching minReadySeconds (none when every pod is available already),
// and an in-place update completing (none in flight). Everything else
// (readiness, pods created or deleted, specs, PDB status) comes with an
// informer event, which moves the generation the state is cached under.
func clockFree(eng engine.Engine, r *facts.Rollout, inFlight map[string]string) bool {
	if !engine.BudgetsIgnoreClock(eng) || len(inFlight) > 0 {
		return false
	}
	for i := range r.Pods {
		if !r.Pods[i].Available {
			return false
		}
	}
	return true
}

// unavailableElsewhere names, per PDB of r, the pods of other workloads it
// selects that are not Ready and not terminating: the pods
// facts.PDB.UnavailableElsewhere counts, counted the same way.
func unavailableElsewhere(snap *snapshot.Snapshot, r *facts.Rollout) map[string][]string {
	var out map[string][]string
	var mine map[string]bool
	for _, f := range r.PDBs {
		if f.UnavailableElsewhere == 0 {
			continue
		}
		if mine == nil {
			mine = map[string]bool{}
			for _, p := range r.Pods {
				mine[p.Name] = true
			}
		}
		for _, pdb := range snap.PDBs {
			if pdb.Name != f.Name || pdb.Namespace != r.Workload.Namespace || pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				continue
			}
			for _, p := range snap.Pods {
				if p.Namespace != pdb.Namespace || p.DeletionTimestamp != nil || mine[p.Name] || !sel.Matches(labels.Set(p.Labels)) || podReady(p) {
					continue
				}
				if out == nil {
					out = map[string][]string{}
				}
				out[f.Name] = append(out[f.Name], p.Name)
			}
		}
		slices.Sort(out[f.Name])
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
