// Package executor carries out a rollout plan on a live cluster, one safe
// step at a time, like an upstream controller: it keeps no state of its own.
//
// A Step reads the live state of one workload (an InformerReader: client-go
// informer caches; or a CaptureReader: a fresh list from the API server),
// marks the pods it is updating in place as not Ready (InFlight, from the
// pod itself), builds the facts, asks the engine, packs the plan, and
// carries out the actions of the plan's first wave that every budget
// allows now. Before each write it reads the live state again from the API
// server (Options.Checker) and checks every enforced budget with the pod
// added (overBudget): a stale plan or a cache that lags skips the action
// instead of over-disrupting. Run repeats Step until the plan has nothing
// left, the policy halts it, or the context ends; between steps it waits
// for a change the informers report (or, without them, polls with
// backoff).
//
// Writes: an in-place update is one strategic-merge patch of the pod
// (container images, the revision label the owning controller counts, the
// AnnInPlaceUpdate record) with metadata.resourceVersion as precondition; a
// Recreate or Delete is a policy/v1 Eviction with the pod's UID as
// precondition, so PodDisruptionBudgets are honoured (429: not now), or,
// with DeleteMethod DeletePlain, a plain delete with the same precondition
// (no PodDisruptionBudget is enforced then). A cpu/memory change is sent
// before the main patch through the pods/resize subresource. With
// DryRun every write carries dryRun=All. A pod that declares the readiness
// gate rollplan.dev/in-place-update-ready gets that condition set False
// before an in-place image update and True once it is complete (see
// ReadinessGate).
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/analysis"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/engine/engines"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// Options configure an Executor.
type Options struct {
	live.Target
	// Engine decides; required.
	Engine engine.Engine
	// KubernetesVersion is the cluster's version (zero: the newest
	// rollplan knows); FeatureGates override its defaults.
	KubernetesVersion kubeversion.Version
	FeatureGates      map[string]bool
	// PlanOptions: the duration estimates of the plan (only reported) and the
	// upstream model (default: the native engine).
	PlanOptions plan.Options
	// DryRun sends every write with dryRun=All.
	DryRun bool
	// DeleteMethod: how a Recreate or Delete removes a pod: DeleteEvict
	// (default, the Eviction API, which honours PodDisruptionBudgets) or
	// DeletePlain (a plain delete with a UID precondition, for clusters
	// where eviction is not allowed; the API server then enforces no
	// PodDisruptionBudget — only the plan's own budgets hold).
	DeleteMethod string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Log receives one line per action; default slog.Default().
	Log *slog.Logger
	// Poll and MaxPoll bound Run's wait between steps; defaults 500ms and
	// 5s. With a Notifier, Run steps on a change (at most once per Poll)
	// or when a Ready pod's minReadySeconds run out, and after MaxPoll at
	// the latest; otherwise it backs off from Poll, doubling to MaxPoll
	// while nothing changes.
	Poll, MaxPoll time.Duration
	// Reader reads the live state a step plans from; default CaptureReader
	// over the client. A Notifier (InformerReader) makes Run step on
	// changes instead of polling.
	Reader live.Reader
	// Checker reads the live state again right before every write, for
	// the budget re-check and the write's preconditions; default
	// CaptureReader over the client: the API server, never a cache that
	// may not have seen the previous write yet.
	Checker live.Reader
	// Events records Kubernetes Events on the workload: one per action
	// carried out, per halt and on completion. Nil: none. A dry run
	// records none (it logs them at debug level).
	Events Recorder
	// Metrics: the executor's Prometheus metrics; default NewMetrics on a
	// registry of its own (see Executor.Metrics).
	Metrics *Metrics
	// Progress, when set, is called by Run after every step with its
	// result (StepResult.Status included).
	Progress func(*StepResult)
	// Providers take the measurements of the gates between waves (see
	// AnalysisState); nil: none is configured, and every measurement is
	// an error result (inconclusive, never a pass).
	Providers *analysis.Resolver
	// RollBack rolls the template back after a failed analysis with
	// onFail rollback (and rollplan abort); nil: such a rollout halts
	// instead.
	RollBack RollBacker
}

// Cluster is what the facts need to know of the cluster: its version and
// gates.
func (o Options) Cluster() facts.Options {
	return facts.Options{KubernetesVersion: o.KubernetesVersion, FeatureGates: o.FeatureGates}
}

// Delete methods (Options.DeleteMethod).
const (
	DeleteEvict = "evict"
	DeletePlain = "delete"
)

// Executor drives the rollout of one workload.
type Executor struct {
	client  kubernetes.Interface // reads the writes need (the pod before a patch, a node's pods)
	writer  writer
	reader  live.Reader
	checker live.Reader
	opts    Options
	metrics *Metrics
	// note: the last step's StepResult.Note, logged when it changes.
	note string
	// gate: the analysis state this step read or wrote last (nil: none
	// for the revision), which becomes StepResult.Analysis.
	gate *AnalysisState
}

// New returns an executor for one workload.
func New(client kubernetes.Interface, o Options) (*Executor, error) {
	if o.Engine == nil {
		return nil, errors.New("executor: no engine")
	}
	switch o.Kind {
	case capture.StatefulSet, capture.DaemonSet, capture.Deployment:
	default:
		return nil, fmt.Errorf("executor: kind %q: want StatefulSet, DaemonSet or Deployment", o.Kind)
	}
	switch o.DeleteMethod {
	case "":
		o.DeleteMethod = DeleteEvict
	case DeleteEvict, DeletePlain:
	default:
		return nil, fmt.Errorf("executor: delete method %q: want %s or %s", o.DeleteMethod, DeleteEvict, DeletePlain)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.MaxPoll < o.Poll {
		o.MaxPoll = max(o.Poll, 5*time.Second)
	}
	if o.PlanOptions == (plan.Options{}) {
		o.PlanOptions = plan.DefaultOptions
	}
	if o.PlanOptions.Upstream == nil {
		// Workloads rollplan does not drive are planned as their controller rolls them.
		o.PlanOptions.Upstream = engines.Upstream()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	e := &Executor{client: client, writer: clientWriter{client: client, dryRun: o.DryRun}, opts: o, reader: o.Reader, checker: o.Checker, metrics: o.Metrics}
	if e.reader == nil {
		e.reader = live.CaptureReader{Client: client, Now: o.Now}
	}
	if e.checker == nil {
		e.checker = live.CaptureReader{Client: client, Now: o.Now}
	}
	return e, nil
}

func (e *Executor) now() time.Time { return e.opts.Now() }

// Metrics are the executor's metrics (Options.Metrics or its own).
func (e *Executor) Metrics() *Metrics { return e.metrics }

// Outcomes of an action.
const (
	Done    = "done"    // the write was accepted
	Would   = "would"   // dry run: the server accepted the write and changed nothing
	Skipped = "skipped" // not now: a budget, a PDB, or the pod changed since the read
)

// ActionResult is what a step did about one action of the plan.
type ActionResult struct {
	Type string `json:"type"`
	Pod  string `json:"pod"`
	// Node: the node of a CordonNode, DrainNode or UncordonNode.
	Node    string `json:"node,omitempty"`
	Outcome string `json:"outcome"`
	// Reason: why it was done (the plan's reasons) or skipped.
	Reason string `json:"reason"`
}

// StepResult is what one reconcile step found and did.
type StepResult struct {
	Plan    plan.WorkloadPlan `json:"plan"`
	Actions []ActionResult    `json:"actions"`
	// Done: every pod in scope runs the update revision and is available,
	// and the plan has nothing left.
	Done bool `json:"done"`
	// InFlight: pods being updated in place, with why.
	InFlight map[string]string `json:"inFlight"`
	// Pods, Updated, Available, Held count the workload's pods at the read
	// (Pods: terminating ones included).
	Pods, Updated, Available, Held int
	// Desired: spec.replicas (a DaemonSet: the nodes that should run its
	// pod). "Updated/Desired-Held pods updated" is how apply and status
	// report progress: pods still terminating are not in it.
	Desired int
	// Note: why the step did nothing of the plan, when that is not the
	// budgets (a hold, a fallback to the Deployment controller, a pause).
	Note string `json:"note,omitempty"`
	// Status: the rollout's status at the read, as `rollplan status`
	// reports it (BuildStatus).
	Status *RolloutStatus `json:"-"`
	// NextAvailable: how long until the first Ready pod that is not yet
	// available reaches minReadySeconds, or the analysis gate's soak ends
	// or its next value is due (0: none is waiting). Time alone changes
	// the state then, without an event to watch.
	NextAvailable time.Duration `json:"-"`
	// Analysis: the analysis gate as the step left it: Status.Analysis is
	// the one read before the step's own writes (nil: none for the
	// revision).
	Analysis *AnalysisState `json:"-"`
}

// Acted counts the actions the step carried out (or would have).
func (s *StepResult) Acted() int {
	n := 0
	for _, a := range s.Actions {
		if a.Outcome != Skipped {
			n++
		}
	}
	return n
}

// HaltedError: the policy halted the rollout (or denied the workload's spec);
// the cluster is left as it is.
type HaltedError struct {
	Target  live.Target
	Reasons []string
}

// RolledBackError: a failed analysis (or rollplan abort) rolled the
// rollout back, and the rollback is done: the pods run the revision the
// rollout came from. The version applied did not roll out, so scripts get
// the halt's exit code (3), not success.
type RolledBackError struct {
	Target live.Target
	// From: the revision that failed; To: the one the pods run again.
	From, To string
	Reason   string
}

func (r *RolledBackError) Error() string {
	return fmt.Sprintf("%s: rolled back to %s: %s; the revision that failed (%s) is refused until the template changes again or `rollplan resume %s`",
		r.Target, r.To, r.Reason, r.From, targetRef(r.Target))
}

// Error is one line: the first reason (a count of the others: every pod
// that cannot go in place has its own, and a line of all of them is
// unreadable), what to do next, and where every reason is listed.
func (h *HaltedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: rollout halted by policy", h.Target)
	if len(h.Reasons) > 0 {
		b.WriteString(": " + h.Reasons[0])
	}
	if n := len(h.Reasons) - 1; n > 0 {
		fmt.Fprintf(&b, " (and %d more)", n)
	}
	ref := targetRef(h.Target)
	for _, r := range h.Reasons {
		if strings.HasPrefix(r, "InPlaceOnly:") {
			fmt.Fprintf(&b, "; to go on, let such pods be recreated (`kubectl annotate %s %s=InPlaceIfPossible --overwrite`) or revert the template change", ref, facts.AnnPodUpdatePolicy)
			break
		}
	}
	fmt.Fprintf(&b, "; every reason: `rollplan status %s` (or `rollplan plan`)", ref)
	return b.String()
}

// targetRef names the target as kubectl and rollplan take it, with the short
// kinds the docs' commands use: sts/web -n prod.
func targetRef(t live.Target) string {
	kind := strings.ToLower(t.Kind)
	switch t.Kind {
	case capture.Deployment:
		kind = "deploy"
	case capture.StatefulSet:
		kind = "sts"
	case capture.DaemonSet:
		kind = "ds"
	}
	if t.Namespace == "" {
		return kind + "/" + t.Name
	}
	return fmt.Sprintf("%s/%s -n %s", kind, t.Name, t.Namespace)
}

// RefusedError: the executor does not drive this workload.
type RefusedError struct {
	Target live.Target
	Reason string
}

func (r *RefusedError) Error() string { return fmt.Sprintf("%s: %s", r.Target, r.Reason) }

// refuse says whether the executor may drive the workload as it is now.
func refuse(t live.Target, snap *snapshot.Snapshot, r *facts.Rollout) error {
	w := r.Workload
	if t.Kind == capture.Deployment {
		return refuseDeployment(t, &w)
	}
	if w.Strategy.Type != string(appsv1.OnDeleteStatefulSetStrategyType) {
		return &RefusedError{t, fmt.Sprintf("updateStrategy %s: the %s controller drives this rollout itself, so rollplan apply leaves it alone (`rollplan plan` previews it); to let rollplan drive it, set updateStrategy.type OnDelete and annotate %s=\"true\"", w.Strategy.Type, t.Kind, facts.AnnManaged)}
	}
	if !w.Managed {
		return &RefusedError{t, fmt.Sprintf("updateStrategy OnDelete but not managed by rollplan: annotate %s=\"true\" to let rollplan apply drive it", facts.AnnManaged)}
	}
	return nil
}

// Step is one reconcile step: read, plan, carry out what the first wave
// allows now. It returns a *HaltedError when the policy halts and a
// *RefusedError for a workload the executor does not drive.
func (e *Executor) Step(ctx context.Context) (*StepResult, error) {
	start := time.Now()
	e.gate = nil
	e.metrics.Steps.Inc()
	defer func() { e.metrics.StepDuration.Observe(time.Since(start).Seconds()) }()
	state, err := e.read(ctx)
	if err != nil {
		if errors.Is(err, capture.ErrNotFound) && e.opts.Target.Kind == capture.DaemonSet {
			return nil, e.releaseCordons(ctx, err)
		}
		return nil, err
	}
	if err := refuse(e.opts.Target, state.snap, state.rollout); err != nil {
		return nil, err
	}
	res, err := plan.Build(ctx, []*facts.Rollout{state.rollout}, e.opts.Engine, plan.Metadata{Now: state.now.UTC().Format(time.RFC3339)}, e.opts.PlanOptions)
	if err != nil {
		return nil, err
	}
	wp := res.Plan.Workloads[0]
	origin, err := e.originPlan(ctx, state.snap, state.rollout, wp, state.now)
	if err != nil {
		return nil, err
	}
	out := &StepResult{Plan: wp, InFlight: state.inFlight, Actions: []ActionResult{}, Desired: state.rollout.Workload.Replicas,
		Status: BuildStatus(state.rollout, wp, origin, state.inFlight, state.now)}
	out.Analysis = out.Status.Analysis
	// The readiness gate first (halted or not): new pods and completed
	// in-place updates get it True, so they can become Ready.
	gates, err := e.syncGates(ctx, state)
	for _, r := range gates {
		out.Actions = append(out.Actions, r)
		e.opts.Log.Info(r.Type, "workload", e.opts.Target.String(), "pod", r.Pod, "outcome", r.Outcome, "reason", r.Reason)
	}
	if err != nil {
		return out, err
	}
	held := map[string]bool{}
	for _, h := range wp.Held {
		held[h.Pod] = true
	}
	minReady := int64(state.rollout.Workload.MinReadySeconds)
	for _, p := range state.rollout.Pods {
		if p.Ready && !p.Available && !p.Terminating && p.ReadySeconds < minReady {
			d := time.Duration(minReady-p.ReadySeconds) * time.Second
			if out.NextAvailable == 0 || d < out.NextAvailable {
				out.NextAvailable = d
			}
		}
		out.Pods++
		switch {
		case held[p.Name]:
			out.Held++
		case p.Updated:
			out.Updated++
		}
		if p.Available {
			out.Available++
		}
	}
	inFlight := make([]string, 0, len(state.inFlight))
	for p := range state.inFlight {
		inFlight = append(inFlight, p)
	}
	sort.Strings(inFlight)
	e.opts.Log.Debug("step", "workload", e.opts.Target.String(), "pods", out.Pods, "updated", out.Updated, "available", out.Available,
		"held", out.Held, "inFlight", strings.Join(inFlight, ","), "waves", len(wp.Waves))
	e.metrics.observe(out)
	if reasons := append(append([]string(nil), wp.Halted...), wp.Denied...); len(reasons) > 0 {
		e.event(state, nil, corev1.EventTypeWarning, reasonRolloutHalted, "Halt", "rollout halted by policy: "+strings.Join(reasons, "; "))
		return out, &HaltedError{Target: e.opts.Target, Reasons: reasons}
	}
	paused := state.rollout.Workload.Annotations[facts.AnnPaused] == "true"
	if paused {
		out.Note = fmt.Sprintf("paused (annotation %s): no new action until `rollplan resume %s/%s -n %s`", facts.AnnPaused, strings.ToLower(e.opts.Kind), e.opts.Name, e.opts.Namespace)
	}
	if e.opts.Kind == capture.Deployment {
		if handled, err := e.stepDeployment(ctx, state, wp, out, paused); handled {
			return out, err
		}
	}
	var allowed map[string]bool
	if !paused {
		var hold bool
		allowed, hold, err = e.gateWave(ctx, state, &wp, out)
		if e.gate != nil {
			out.Analysis = e.gate
		}
		if err != nil || hold {
			return out, err
		}
	}
	if len(wp.Waves) == 0 {
		out.Done, err = e.finish(ctx, state, held)
		if out.Done && err == nil {
			e.event(state, nil, corev1.EventTypeNormal, reasonRolloutComplete, "Complete",
				fmt.Sprintf("rollout complete: %d pod(s) at revision %s", out.Updated, state.rollout.Workload.UpdateRevision))
		}
		return out, err
	}
	if paused {
		return out, nil
	}
	spent := map[string]bool{}
	for _, a := range wp.Waves[0].Actions {
		if allowed != nil && a.Type != plan.ActionUncordonNode && !allowed[a.Pod] {
			out.Actions = append(out.Actions, ActionResult{Type: a.Type, Pod: a.Pod, Node: a.Node, Outcome: Skipped, Reason: "not in the wave the analysis gate waits for"})
			continue
		}
		r, err := e.act(ctx, state, wp, a, spent)
		if err != nil {
			return out, err
		}
		out.Actions = append(out.Actions, r)
		attrs := []any{"workload", e.opts.Target.String(), "action", r.Type, "pod", r.Pod, "outcome", r.Outcome, "reason", r.Reason}
		if r.Outcome == Skipped {
			e.opts.Log.Info("skip", attrs...)
		} else {
			e.opts.Log.Info(r.Type, attrs...)
		}
	}
	return out, nil
}

// finish: the plan has no wave. The rollout is done once every pod in
// scope is updated and available and the workload's controller says so.
func (e *Executor) finish(ctx context.Context, state *liveState, held map[string]bool) (bool, error) {
	r := state.rollout
	active := 0
	for _, p := range r.Pods {
		if p.Terminating || p.Terminal {
			continue
		}
		active++
		if held[p.Name] {
			continue
		}
		if !p.Updated || !p.Available {
			return false, nil
		}
	}
	if active < r.Workload.Replicas {
		return false, nil // a replacement is still to be created
	}
	switch {
	case e.opts.Kind == capture.StatefulSet && len(held) == 0:
		return e.completeStatefulSet(ctx, state)
	case e.opts.Kind == capture.Deployment:
		return e.completeDeployment(ctx, state)
	}
	return true, nil
}

// Summary is what Run did in all.
type Summary struct {
	Steps   int
	Actions map[string]int // by type, carried out (or would be, dry run)
	Last    *StepResult
}

// Run repeats Step until the rollout is done, halted or refused, the
// context ends (its error is returned, wrapped), or, with once, after one
// step. Between steps it polls with backoff: from Poll, doubling up to
// MaxPoll while a step does nothing, back to Poll after a step that acts.
func (e *Executor) Run(ctx context.Context, once bool) (*Summary, error) {
	sum := &Summary{Actions: map[string]int{}}
	wait := e.opts.Poll
	for {
		step, err := e.Step(ctx)
		if step != nil {
			sum.Last = step
			if step.Note != e.note && step.Note != "" {
				// Why nothing of the plan is done (not a write: "hold" and
				// "release" log the writes of spec.paused).
				e.opts.Log.Info("wait", "workload", e.opts.Target.String(), "reason", step.Note)
			}
			e.note = step.Note
			if e.opts.Progress != nil {
				e.opts.Progress(step)
			}
		}
		if err != nil {
			return sum, err
		}
		sum.Steps++
		for _, a := range step.Actions {
			if a.Outcome != Skipped {
				sum.Actions[a.Type]++
			}
		}
		if a := step.Analysis; step.Done && a != nil && a.RolledBack && !e.opts.DryRun {
			return sum, &RolledBackError{Target: e.opts.Target, From: a.From, To: a.Revision, Reason: a.Message}
		}
		if step.Done || once || e.opts.DryRun {
			return sum, nil
		}
		if step.Acted() > 0 {
			wait = e.opts.Poll
		}
		if err := e.wait(ctx, step, &wait); err != nil {
			return sum, err
		}
	}
}

// wait blocks until the next step is due (see Options.Poll). wait is the
// polling backoff, used without a Notifier.
func (e *Executor) wait(ctx context.Context, step *StepResult, wait *time.Duration) error {
	stopped := func() error {
		return fmt.Errorf("%s: stopped before the rollout finished (%d/%d pods updated, %d in flight): %w",
			e.opts.Target, step.Updated, step.Desired-step.Held, len(step.InFlight), context.Cause(ctx))
	}
	n, watching := e.reader.(live.Notifier)
	if !watching {
		t := time.NewTimer(*wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return stopped()
		case <-t.C:
		}
		*wait = min(2**wait, e.opts.MaxPoll)
		return nil
	}
	// Space steps by Poll: a burst of events (a wave of pods restarting)
	// makes one step, not one per event.
	t := time.NewTimer(e.opts.Poll)
	select {
	case <-ctx.Done():
		t.Stop()
		return stopped()
	case <-t.C:
	}
	limit := e.opts.MaxPoll
	if step.NextAvailable > 0 {
		limit = min(limit, max(step.NextAvailable-e.opts.Poll, 0)+10*time.Millisecond)
	}
	t = time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return stopped()
	case <-n.Changes():
	case <-t.C:
	}
	if ctx.Err() != nil { // both ready at once: select picks either
		return stopped()
	}
	return nil
}
