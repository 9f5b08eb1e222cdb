// Package controller runs the executor for every managed workload of a
// cluster: `rollplan controller`. It is a controller in the upstream
// mould: shared informers over the workloads, their pods and everything a
// plan reads; a rate-limited workqueue of workload keys, so one workload
// is never stepped by two workers at once; and each step the executor's
// own (executor.Step), so the controller carries out exactly what `rollplan
// apply` would. It keeps no state of its own: the rollout's progress is on
// the pods (as for apply), its halts and summary in an annotation of the
// workload (facts.AnnRolloutState, a live.RolloutState), who drives it in a Lease
// (executor.AcquireDriver). Leader election is the caller's: Run is called
// by the leader only.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsapply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/rollplan/rollplan/analysis"
	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Policies picks the engine that plans a workload: the default one, or
// the one its rollplan.dev/policy annotation names.
type Policies interface {
	// For returns the engine for the policy name ("" the default) and
	// the name it stands under; an error names a policy it does not have.
	For(name string) (engine.Engine, error)
}

// Options configure a Controller.
type Options struct {
	Client kubernetes.Interface
	// Dynamic writes each managed workload's Rollout (rollouts.rollplan.dev);
	// nil: the state goes to the workload's annotation only.
	Dynamic dynamic.Interface
	// Namespace: only this namespace ("" all).
	Namespace string
	// Selector narrows the managed workloads by label (nil: all).
	Selector labels.Selector
	Policies Policies
	// Workers: workloads stepped at once (--concurrent-rollouts).
	Workers int
	// DryRun: plan and report every action (dryRun=All writes), take no
	// Lease, write no state and record no Event.
	DryRun bool
	// DeleteMethod, KubernetesVersion, FeatureGates and PlanOptions are
	// the executor's (executor.Options).
	DeleteMethod      string
	KubernetesVersion kubeversion.Version
	FeatureGates      map[string]bool
	PlanOptions       plan.Options
	// Identity names this replica in driver Leases; Liveness is the
	// NAMESPACE/NAME of the Lease it holds while it leads (see
	// executor.Driver).
	Identity, Liveness string
	// Events records the executor's Events and the controller's own.
	Events executor.Recorder
	// Metrics: required (NewMetrics).
	Metrics *Metrics
	// Providers take the measurements of the policies' analysis gates
	// (--analysis-config); nil: none configured (executor.Options).
	Providers *analysis.Resolver
	// RollBack: how a failed analysis rolls a workload back
	// (executor.Options.RollBack; the command wires package history).
	RollBack executor.RollBacker
	Log      *slog.Logger
	Now      func() time.Time
	// Recheck: how soon a workload in progress is stepped again without a
	// change (a Ready pod's minReadySeconds, a PDB, a node); default 5s.
	Recheck time.Duration
}

// Controller drives every managed workload's rollout.
type Controller struct {
	o       Options
	factory informers.SharedInformerFactory
	nodes   informers.SharedInformerFactory
	src     *capture.ListerSource
	reader  live.Reader
	checker live.Reader
	queue   workqueue.TypedRateLimitingInterface[key]

	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
	replicaSets  appslisters.ReplicaSetLister

	mu sync.Mutex
	// leases: the driver Leases this replica holds, by workload.
	leases map[key]*executor.DriverLease
	// phases: each workload's last phase, for the rollouts metrics.
	phases map[key]string
	// progress: for each rollout in progress, what its last step saw
	// (progressMark) and since when, for the last-progress metric.
	progress map[key]progress
	// dryRuns: the last dry-run report of each workload, logged when it
	// changes (a dry run changes nothing, so every step would repeat it).
	dryRuns map[key]string
	// ownGen: for a Deployment, the generation recorded in the state this
	// replica last wrote and the generation that write gave it (see
	// generation).
	ownGen map[key][2]int64
	// rollouts: what this replica last wrote to each workload's Rollout;
	// noCRD: when the API server last said it has no Rollout resource.
	rollouts map[key]rolloutRecord
	noCRD    time.Time
}

// key names a workload in the queue.
type key struct{ Kind, Namespace, Name string }

func (k key) target() live.Target {
	return live.Target{Namespace: k.Namespace, Kind: k.Kind, Name: k.Name}
}
func (k key) String() string { return k.target().String() }

// New creates the controller and registers its informers; Start them.
func New(o Options) (*Controller, error) {
	if o.Client == nil || o.Policies == nil || o.Metrics == nil {
		return nil, errors.New("controller: Client, Policies and Metrics are required")
	}
	if o.Workers <= 0 {
		o.Workers = 10
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Recheck <= 0 {
		o.Recheck = 5 * time.Second
	}
	if o.Selector == nil {
		o.Selector = labels.Everything()
	}
	opts := []informers.SharedInformerOption{informers.WithTransform(capture.StripManagedFields)}
	if o.Namespace != "" {
		opts = append(opts, informers.WithNamespace(o.Namespace))
	}
	c := &Controller{o: o,
		factory: informers.NewSharedInformerFactoryWithOptions(o.Client, 0, opts...),
		nodes:   informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTransform(capture.StripManagedFields)),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "rollouts", MetricsProvider: o.Metrics.queue}),
		leases: map[key]*executor.DriverLease{}, phases: map[key]string{}, progress: map[key]progress{}, dryRuns: map[key]string{}, ownGen: map[key][2]int64{},
		rollouts: map[key]rolloutRecord{},
	}
	c.src = capture.NewListerSource(c.factory, c.nodes)
	c.reader = live.ListerReader{Source: c.src, Now: o.Now}
	c.checker = recheckReader{src: recheckSource{APISource: capture.APISource{Client: o.Client}, cache: c.src}, now: o.Now}
	apps := c.factory.Apps().V1()
	c.deployments, c.statefulSets, c.daemonSets, c.replicaSets = apps.Deployments().Lister(), apps.StatefulSets().Lister(), apps.DaemonSets().Lister(), apps.ReplicaSets().Lister()
	workloads := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueWorkload(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueWorkload(obj) },
		DeleteFunc: func(obj any) { c.enqueueWorkload(obj) },
	}
	pods := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueuePod(obj) },
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
		DeleteFunc: func(obj any) { c.enqueuePod(obj) },
	}
	for _, inf := range []cache.SharedIndexInformer{apps.Deployments().Informer(), apps.StatefulSets().Informer(), apps.DaemonSets().Informer()} {
		if _, err := inf.AddEventHandler(workloads); err != nil {
			return nil, fmt.Errorf("controller: watch workloads: %w", err)
		}
	}
	if _, err := c.factory.Core().V1().Pods().Informer().AddEventHandler(pods); err != nil {
		return nil, fmt.Errorf("controller: watch pods: %w", err)
	}
	return c, nil
}

// Start starts the informers and waits until their caches are synced (a
// standby replica keeps them warm, so it takes over at once).
func (c *Controller) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	c.nodes.Start(ctx.Done())
	if err := c.src.WaitForSync(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

// HasSynced: the caches are synced (readiness).
func (c *Controller) HasSynced() bool { return c.src.HasSynced() }

// Run steps workloads with Options.Workers workers until ctx ends, then
// gives up the driver Leases it holds (so a person or the next leader need
// not wait for them).
func (c *Controller) Run(ctx context.Context) {
	// The events that arrived before this replica led were dropped by
	// nobody: queue every managed workload once.
	c.enqueueAll()
	var wg sync.WaitGroup
	for range c.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDownWithDrain()
	wg.Wait()
	c.releaseAll()
}

// Requeue queues every managed workload (after a policy reload).
func (c *Controller) Requeue() { c.enqueueAll() }

func (c *Controller) enqueueAll() {
	add := func(kind, ns, name string, meta metav1.Object) {
		if c.selected(meta) {
			c.queue.Add(key{kind, ns, name})
		}
	}
	if ds, err := c.deployments.List(c.o.Selector); err == nil {
		for _, d := range ds {
			add(capture.Deployment, d.Namespace, d.Name, d)
		}
	}
	if ss, err := c.statefulSets.List(c.o.Selector); err == nil {
		for _, s := range ss {
			add(capture.StatefulSet, s.Namespace, s.Name, s)
		}
	}
	if ds, err := c.daemonSets.List(c.o.Selector); err == nil {
		for _, d := range ds {
			add(capture.DaemonSet, d.Namespace, d.Name, d)
		}
	}
}

// selected: the workload is managed and the selector matches it.
func (c *Controller) selected(m metav1.Object) bool {
	return m.GetAnnotations()[facts.AnnManaged] == "true" && c.o.Selector.Matches(labels.Set(m.GetLabels()))
}

func (c *Controller) enqueueWorkload(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var kind string
	switch obj.(type) {
	case *appsv1.Deployment:
		kind = capture.Deployment
	case *appsv1.StatefulSet:
		kind = capture.StatefulSet
	case *appsv1.DaemonSet:
		kind = capture.DaemonSet
	default:
		return
	}
	m := obj.(metav1.Object)
	k := key{kind, m.GetNamespace(), m.GetName()}
	// A workload that stops being managed may hold a Lease of ours: its
	// key goes through once more to give it up.
	if c.selected(m) || c.holds(k) {
		c.queue.Add(k)
	}
}

// enqueuePod queues the managed workload that owns the pod.
func (c *Controller) enqueuePod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	var m metav1.Object
	var kind string
	switch ref.Kind {
	case "StatefulSet":
		kind = capture.StatefulSet
		if s, err := c.statefulSets.StatefulSets(pod.Namespace).Get(ref.Name); err == nil && s.UID == ref.UID {
			m = s
		}
	case "DaemonSet":
		kind = capture.DaemonSet
		if d, err := c.daemonSets.DaemonSets(pod.Namespace).Get(ref.Name); err == nil && d.UID == ref.UID {
			m = d
		}
	case "ReplicaSet":
		kind = capture.Deployment
		rs, err := c.replicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
		if err != nil {
			return
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
			if d, err := c.deployments.Deployments(pod.Namespace).Get(owner.Name); err == nil && d.UID == owner.UID {
				m = d
			}
		}
	}
	if m != nil && c.selected(m) {
		c.queue.Add(key{kind, m.GetNamespace(), m.GetName()})
	}
}

// next steps one workload from the queue; false once the queue shuts down.
func (c *Controller) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	after, err := c.sync(ctx, k)
	switch {
	case err != nil && ctx.Err() == nil:
		c.o.Log.Error("step failed; retrying with backoff", "workload", k.String(), "retries", c.queue.NumRequeues(k), "error", err)
		c.o.Metrics.Errors.Inc()
		c.queue.AddRateLimited(k)
	case err != nil:
	default:
		c.queue.Forget(k)
		if after > 0 {
			c.queue.AddAfter(k, after)
		}
	}
	return true
}

// workload reads the workload from the cache: its object, and nil when
// it is gone.
func (c *Controller) workload(k key) (metav1.Object, runtime.Object, error) {
	var obj interface {
		metav1.Object
		runtime.Object
	}
	var err error
	switch k.Kind {
	case capture.Deployment:
		obj, err = c.deployments.Deployments(k.Namespace).Get(k.Name)
	case capture.StatefulSet:
		obj, err = c.statefulSets.StatefulSets(k.Namespace).Get(k.Name)
	case capture.DaemonSet:
		obj, err = c.daemonSets.DaemonSets(k.Namespace).Get(k.Name)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return obj, obj, nil
}

// sync is one step of one workload. It returns how soon to step it again
// without a change (0: only on a change).
func (c *Controller) sync(ctx context.Context, k key) (time.Duration, error) {
	m, obj, err := c.workload(k)
	if err != nil {
		return 0, fmt.Errorf("%s: read from cache: %w", k, err)
	}
	if m == nil || !c.selected(m) {
		// Gone, or no longer managed: nothing to drive, and no Rollout to
		// keep (a deleted workload's goes with it, as its owner).
		c.setPhase(k, "")
		return 0, errors.Join(c.release(ctx, k), c.forgetRollout(ctx, k, m))
	}
	prev, err := live.ParseRolloutState(m.GetAnnotations()[facts.AnnRolloutState])
	if err != nil {
		c.o.Log.Warn("ignoring an unreadable rollout state", "workload", k.String(), "error", err)
		prev = nil
	}
	gen := c.generation(k, m)
	if prev != nil && prev.Phase == live.RolloutHalted && prev.Generation == gen {
		// A halt holds until the template changes (a new generation) or
		// someone resumes it (rollplan resume clears the state).
		c.setPhase(k, live.RolloutHalted)
		return 0, errors.Join(c.release(ctx, k), c.recordRollout(ctx, k, m, *prev))
	}
	if m.GetAnnotations()[facts.AnnPaused] == "true" {
		c.setPhase(k, live.RolloutPaused)
		st := live.RolloutState{Phase: live.RolloutPaused, Generation: gen, Message: "paused: no new action until `rollplan resume`"}
		keepCounts(&st, prev)
		if err := c.release(ctx, k); err != nil {
			return 0, err
		}
		return 0, c.writeState(ctx, k, m, prev, st)
	}
	if prev != nil && prev.Generation == gen && (prev.Phase == live.RolloutComplete || prev.NotDriven) {
		// Rolled out, or not the executor's to drive, at this generation:
		// nothing to do until the spec changes (or rollplan resume clears
		// the state). Stepping it on every event would take and give up
		// its driver Lease each time, and refuse a person's apply meanwhile.
		c.setPhase(k, prev.Phase)
		return 0, errors.Join(c.release(ctx, k), c.recordRollout(ctx, k, m, *prev))
	}
	policy := m.GetAnnotations()[facts.AnnPolicy]
	eng, err := c.o.Policies.For(policy)
	if err != nil {
		c.setPhase(k, live.RolloutWaiting)
		st := live.RolloutState{Phase: live.RolloutWaiting, Generation: gen, Policy: policy, Message: err.Error()}
		if changed(prev, st) {
			c.event(obj, corev1.EventTypeWarning, "PolicyUnknown", err.Error())
		}
		return 0, c.writeState(ctx, k, m, prev, st)
	}
	if !c.o.DryRun {
		if err := c.acquire(ctx, k, m.GetUID()); err != nil {
			var held *executor.HeldError
			if !errors.As(err, &held) {
				return 0, err
			}
			// A person drives it: leave it to them, look again once
			// their hold could have lapsed.
			c.setPhase(k, live.RolloutWaiting)
			st := live.RolloutState{Phase: live.RolloutWaiting, Generation: gen, Policy: policy, Driver: held.Holder.Identity,
				Message: "driven by " + held.Holder.Identity + " (Lease " + held.Holder.Lease + "); the controller waits until it lets go"}
			keepCounts(&st, prev)
			if err := c.writeState(ctx, k, m, prev, st); err != nil {
				return 0, err
			}
			return executor.DriverLeaseDuration, nil
		}
	}
	if d, ok := obj.(*appsv1.Deployment); ok && d.Status.ObservedGeneration < d.Generation && gen != d.Generation {
		// Only the state's own writes moved the generation since the
		// Deployment controller last reported (see generation). Until it
		// has seen the new one the executor takes the rollout for
		// unfinished: a step now would record a Complete rollout as
		// InProgress, whose write moves the generation again, and so on.
		// The controller's status update queues the workload again.
		return c.o.Recheck, nil
	}
	log := c.o.Log
	if c.o.DryRun {
		log = slog.New(slog.DiscardHandler) // reported once per change below
	}
	x, err := executor.New(c.o.Client, executor.Options{
		Target: k.target(), Engine: eng, DryRun: c.o.DryRun, DeleteMethod: c.o.DeleteMethod,
		KubernetesVersion: c.o.KubernetesVersion, FeatureGates: c.o.FeatureGates, PlanOptions: c.o.PlanOptions,
		Now: c.o.Now, Log: log, Reader: c.reader, Checker: c.checker, Events: c.o.Events, Metrics: c.o.Metrics.executor(),
		Providers: c.o.Providers, RollBack: c.o.RollBack,
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", k, err)
	}
	res, err := x.Step(ctx)
	st := live.RolloutState{Generation: gen, Policy: policy, Driver: c.driverName()}
	if res != nil {
		fill(&st, res)
	}
	var halted *executor.HaltedError
	var refused *executor.RefusedError
	switch {
	case errors.As(err, &halted):
		st.Phase, st.Reasons = live.RolloutHalted, halted.Reasons
		st.Message = "halted by policy: " + halted.Reasons[0] + "; it stays halted until the template changes or `rollplan resume`"
		c.setPhase(k, live.RolloutHalted)
		if rerr := c.release(ctx, k); rerr != nil {
			return 0, rerr
		}
		st.Driver = ""
		return 0, c.report(ctx, k, m, prev, st)
	case errors.As(err, &refused):
		st.Phase, st.Message, st.Driver, st.NotDriven = live.RolloutWaiting, refused.Reason, "", true
		c.setPhase(k, live.RolloutWaiting)
		if changed(prev, st) {
			c.event(obj, corev1.EventTypeWarning, "NotDriven", refused.Reason)
		}
		if rerr := c.release(ctx, k); rerr != nil {
			return 0, rerr
		}
		return 0, c.report(ctx, k, m, prev, st)
	case err != nil:
		return 0, err
	case res.Done:
		st.Phase, st.Driver = live.RolloutComplete, ""
		c.setPhase(k, live.RolloutComplete)
		if err := c.release(ctx, k); err != nil {
			return 0, err
		}
		return 0, c.report(ctx, k, m, prev, st)
	}
	st.Phase = live.RolloutInProgress
	st.Message = res.Note
	if st.Stalled {
		st.Message = res.Status.Verdict
	}
	c.setPhase(k, live.RolloutInProgress)
	c.markProgress(k, st)
	if err := c.report(ctx, k, m, prev, st); err != nil {
		return 0, err
	}
	if c.o.DryRun {
		// Nothing changes by itself in a dry run: step again on changes.
		return 0, nil
	}
	after := c.o.Recheck
	if res.NextAvailable > 0 && res.NextAvailable < after {
		after = res.NextAvailable + 10*time.Millisecond
	}
	return after, nil
}

// fill copies a step's counts into the state.
func fill(s *live.RolloutState, r *executor.StepResult) {
	s.Desired, s.Updated, s.Available, s.InFlight = r.Desired-r.Held, r.Updated, r.Available, len(r.InFlight)
	s.PlanDigest = planDigest(r.Plan)
	s.Analysis = executor.AnalysisRecord(r.Analysis)
	if r.Status != nil {
		s.Revision = r.Status.Revisions.Update
		s.Wave, s.Waves = r.Status.Waves.Current, r.Status.Waves.Total
		s.Stalled = r.Status.State == executor.StatusStalled
	}
}

// generation is the workload's metadata.generation as the rollout state
// records it. The API server also moves a Deployment's generation when its
// annotations change (so that its controller copies them to the
// ReplicaSet): the state's own write would otherwise look like a new
// generation to the next step, which would write the state again, and so
// on for ever, and no halt would hold. The generation this replica's last
// write gave the Deployment therefore counts as the one that write
// recorded. A new leader, which has no such memory, writes the state once
// more (and steps a halted Deployment once more) before it holds.
func (c *Controller) generation(k key, m metav1.Object) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := m.GetGeneration()
	if own, ok := c.ownGen[k]; ok && own[1] == g {
		return own[0]
	}
	return g
}

// keepCounts carries the last recorded progress (revision, wave, pods)
// into a state the controller records without stepping (paused, someone
// else drives it).
func keepCounts(st, prev *live.RolloutState) {
	if prev == nil {
		return
	}
	st.Revision, st.Wave, st.Waves = prev.Revision, prev.Wave, prev.Waves
	st.Desired, st.Updated, st.Available, st.InFlight = prev.Desired, prev.Updated, prev.Available, prev.InFlight
}

// changed: the state differs from the one recorded.
func changed(prev *live.RolloutState, st live.RolloutState) bool {
	return prev == nil || prev.Encode() != st.Encode()
}

// report records the state: on the workload, or in a dry run in the log.
func (c *Controller) report(ctx context.Context, k key, m metav1.Object, prev *live.RolloutState, st live.RolloutState) error {
	if !c.o.DryRun {
		return c.writeState(ctx, k, m, prev, st)
	}
	c.mu.Lock()
	line := st.Summary()
	same := c.dryRuns[k] == line
	c.dryRuns[k] = line
	c.mu.Unlock()
	if !same {
		c.o.Log.Info("dry run", "workload", k.String(), "state", line)
	}
	return nil
}

// writeState applies the rollout state annotation when it changed (server-side apply,
// FieldManager, forced: the annotation is the controller's alone).
func (c *Controller) writeState(ctx context.Context, k key, m metav1.Object, prev *live.RolloutState, st live.RolloutState) error {
	if c.o.DryRun {
		return nil
	}
	if !changed(prev, st) {
		return c.recordRollout(ctx, k, m, st)
	}
	ann := map[string]string{facts.AnnRolloutState: st.Encode()}
	opts := metav1.ApplyOptions{FieldManager: live.RolloutStateFieldManager, Force: true}
	var err error
	switch k.Kind {
	case capture.Deployment:
		var d *appsv1.Deployment
		d, err = c.o.Client.AppsV1().Deployments(k.Namespace).Apply(ctx, appsapply.Deployment(k.Name, k.Namespace).WithAnnotations(ann), opts)
		if err == nil && d.Generation == m.GetGeneration()+1 {
			// Only this write moved it since the read (a template change
			// in between would have moved it further): see generation.
			c.mu.Lock()
			c.ownGen[k] = [2]int64{st.Generation, d.Generation}
			c.mu.Unlock()
		}
	case capture.StatefulSet:
		_, err = c.o.Client.AppsV1().StatefulSets(k.Namespace).Apply(ctx, appsapply.StatefulSet(k.Name, k.Namespace).WithAnnotations(ann), opts)
	case capture.DaemonSet:
		_, err = c.o.Client.AppsV1().DaemonSets(k.Namespace).Apply(ctx, appsapply.DaemonSet(k.Name, k.Namespace).WithAnnotations(ann), opts)
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted since the read
	}
	if err != nil {
		return fmt.Errorf("%s: record the rollout state (annotation %s): %w", k, facts.AnnRolloutState, err)
	}
	if prev == nil || prev.Phase != st.Phase {
		c.o.Log.Info("rollout", "workload", k.String(), "state", st.Summary())
	}
	return c.recordRollout(ctx, k, m, st)
}

func (c *Controller) event(obj runtime.Object, eventtype, reason, note string) {
	if c.o.Events == nil || c.o.DryRun {
		return
	}
	c.o.Events.Eventf(obj, nil, eventtype, reason, "Drive", "%s", note)
}

func (c *Controller) driverName() string {
	if c.o.DryRun {
		return ""
	}
	return executor.DriverController + " " + c.o.Identity
}

// acquire takes the workload's driver Lease unless this replica holds it.
func (c *Controller) acquire(ctx context.Context, k key, uid types.UID) error {
	if c.holds(k) {
		return nil
	}
	l, err := executor.AcquireDriver(ctx, c.o.Client, k.target(), uid, executor.Driver{Identity: c.driverName(), Liveness: c.o.Liveness}, c.o.Now)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.leases[k] = l
	c.mu.Unlock()
	c.o.Log.Info("driving", "workload", k.String(), "lease", k.Namespace+"/"+executor.DriverLeaseName(k.target()))
	return nil
}

func (c *Controller) holds(k key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leases[k] != nil
}

// release gives up the workload's driver Lease when this replica holds it.
func (c *Controller) release(ctx context.Context, k key) error {
	c.mu.Lock()
	l := c.leases[k]
	delete(c.leases, k)
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Release(ctx)
}

// releaseAll gives up every driver Lease, on the way out.
func (c *Controller) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.mu.Lock()
	keys := make([]key, 0, len(c.leases))
	for k := range c.leases {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		if err := c.release(ctx, k); err != nil {
			c.o.Log.Warn("could not give up the driver Lease; it lapses with this replica's leadership", "workload", k.String(), "error", err)
		}
	}
}

// setPhase records the workload's phase for the rollouts metrics ("":
// no longer managed). A rollout that leaves InProgress loses its progress
// clock: paused, halted or driven by someone else is not stalled.
func (c *Controller) setPhase(k key, phase string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.phases[k]; ok && old != phase {
		c.o.Metrics.RolloutPhase.Delete(phaseLabels(k, old))
	}
	if phase == "" {
		delete(c.phases, k)
		delete(c.dryRuns, k)
		delete(c.ownGen, k)
	} else {
		c.phases[k] = phase
		c.o.Metrics.RolloutPhase.With(phaseLabels(k, phase)).Set(1)
	}
	if phase != live.RolloutInProgress {
		delete(c.progress, k)
		c.o.Metrics.RolloutProgress.Delete(k.labels())
	}
	counts := map[string]int{}
	for _, p := range c.phases {
		counts[p]++
	}
	for _, p := range []string{live.RolloutInProgress, live.RolloutComplete, live.RolloutHalted, live.RolloutPaused, live.RolloutWaiting} {
		c.o.Metrics.Rollouts.WithLabelValues(strings.ToLower(p)).Set(float64(counts[p]))
	}
}

func phaseLabels(k key, phase string) prometheus.Labels {
	l := k.labels()
	l["phase"] = strings.ToLower(phase)
	return l
}

// progress is what a rollout's step saw, and since when.
type progress struct {
	mark  string
	since time.Time
}

// markProgress records the step of a rollout in progress: the clock of its
// last progress moves when the step sees it moved since the previous one
// (or at its first step in progress).
func (c *Controller) markProgress(k key, st live.RolloutState) {
	mark := fmt.Sprintf("%s %d/%d %d %d %d", st.Revision, st.Wave, st.Waves, st.Updated, st.Available, st.InFlight)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.progress[k]; ok && p.mark == mark {
		return
	}
	now := c.o.Now()
	c.progress[k] = progress{mark: mark, since: now}
	c.o.Metrics.RolloutProgress.With(k.labels()).Set(float64(now.UnixNano()) / 1e9)
}
