package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// RolloutStatus is what `rollplan status` reports about one workload's
// rollout: a read-only look at the live state, planned as `rollplan apply`
// would plan its next step. It is the -o json / -o yaml document; fields
// are added, never renamed.
type RolloutStatus struct {
	// APIVersion is statusAPIVersion, Kind is statusKind.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Workload names the workload and how it rolls.
	Workload StatusWorkload `json:"workload"`
	// Time of the read (RFC 3339).
	Time string `json:"time"`
	// State: RolledOut, InProgress, Halted, Paused, WaitingForDriver or
	// Stalled (the Status* constants).
	State string `json:"state"`
	// Verdict is the one-line summary: "rolled out", "in progress: wave 2
	// of 5" (Waves.Current of Waves.Total), "in progress: rolled by the
	// Deployment controller, 3 waves left", "halted: ...", "paused" (a
	// paused Deployment rollplan does not manage, or any workload under
	// rollplan pause), "stalled for 5m0s: budget maxUnavailable is used up
	// (1/1): ..." and "waiting for a driver (run rollplan apply, or
	// install the controller)" (see observed).
	Verdict string `json:"verdict"`
	// Revisions: the revision pods are rolled from (current) and to (update).
	Revisions StatusRevisions `json:"revisions"`
	Pods      StatusPods      `json:"pods"`
	// Held: pods kept out of the rollout, with why (partition, policy, ...).
	Held []StatusPod `json:"held"`
	// InFlight: pods being updated in place right now, with why (the
	// executor's detection: InFlight). They count as unavailable.
	InFlight []StatusPod `json:"inFlight"`
	// Waves: the rollout's waves, numbered against its own plan (see
	// originPlan and waves).
	Waves StatusWaves `json:"waves"`
	// CurrentWave: the plan's next wave, what apply would carry out now;
	// absent when nothing is left to plan. Its Number is the wave of the
	// rollout's own plan its first pod falls in (Waves.Current or later).
	CurrentWave *StatusWave `json:"currentWave,omitempty"`
	// Budgets: every budget of the plan with how much is in use now.
	Budgets []StatusBudget `json:"budgets"`
	// Halted and Denied: the policy's halt reasons and the guard rails that
	// refuse the workload's spec; either makes the State Halted.
	Halted []string `json:"halted"`
	Denied []string `json:"denied,omitempty"`
	// Notes from the plan (why nothing is planned, ...).
	Notes []string `json:"notes,omitempty"`
	// Stalled: the State is Stalled: what holds the rollout and since when.
	Stalled *StatusStall `json:"stalled,omitempty"`
	// LastActivity: the latest sign in the cluster of the rollout moving
	// (see Activity); absent when the read shows none.
	LastActivity *Activity `json:"lastActivity,omitempty"`
	// Driver: who drives the rollout, from its driver Lease (the rollplan
	// controller or a person's apply); absent when no Lease exists.
	Driver *Holder `json:"driver,omitempty"`
	// Analysis: the gate the rollout waits at or passed last, with the
	// values measured and the verdict (the annotation rollplan.dev/analysis,
	// see AnalysisState); absent when none is recorded for this revision.
	Analysis *AnalysisState `json:"analysis,omitempty"`
	// Controller: the rollplan controller's record of the rollout (the
	// workload's annotation rollplan.dev/rollout-state); absent when the
	// controller has not stepped it.
	Controller *live.RolloutState `json:"controller,omitempty"`
	// ControllerStale: why Controller no longer describes the rollout,
	// when it does not: it was recorded for another revision (the
	// controller has not stepped this one: paused, stopped), or its driver
	// no longer holds the driver Lease (the controller stopped or lost
	// it). "" when it is current, or absent.
	ControllerStale string `json:"controllerStale,omitempty"`
}

// StatusStall is what holds a stalled rollout.
type StatusStall struct {
	// Reason: the plan's stall reason (plan.Stall.Reason).
	Reason string `json:"reason"`
	// Budget: the enforced budget used up at the read, when one is
	// ("maxUnavailable"); "" when something else holds it.
	Budget string `json:"budget,omitempty"`
	// For: how long nothing has moved (now − LastActivity), whole seconds;
	// "" when the read shows no activity at all.
	For string `json:"for,omitempty"`
}

// Activity is a sign of a rollout moving: when, and what.
type Activity struct {
	Time string `json:"time"`
	What string `json:"what"`
}

// driverGrace: a rollout that could act now but shows no activity for
// this long is not being driven (WaitingForDriver), or, when it cannot
// act, stalled. rollplan apply steps at least every 5s (Options.MaxPoll)
// and acts at once on a wave that starts now, so 30s of quiet means no
// apply or controller drives it (status also reads the driver Lease:
// a rollout a live driver holds is never waiting for one).
const driverGrace = 30 * time.Second

// The document's type, and the values of RolloutStatus.State.
const (
	statusAPIVersion = "rollplan.dev/v1alpha1"
	statusKind       = "RolloutStatus"

	StatusRolledOut  = "RolledOut"
	StatusInProgress = "InProgress"
	StatusHalted     = "Halted"
	StatusPaused     = "Paused"
	// StatusWaitingForDriver: a rollout rollplan drives that nobody drives
	// now (no apply running): see observed.
	StatusWaitingForDriver = "WaitingForDriver"
	// StatusStalled: the rollout's pods do not move and the plan says they
	// cannot within its budgets: see observed.
	StatusStalled = "Stalled"
)

// StatusWorkload names the workload.
type StatusWorkload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Strategy: RollingUpdate, Recreate or OnDelete.
	Strategy string `json:"strategy"`
	// Managed: annotated rollplan.dev/managed="true" (rollplan apply drives it).
	Managed bool `json:"managed"`
	// PodUpdatePolicy: Recreate, InPlaceIfPossible or InPlaceOnly.
	PodUpdatePolicy string `json:"podUpdatePolicy"`
	Paused          bool   `json:"paused,omitempty"`
}

// StatusRevisions: ControllerRevision names (StatefulSet, DaemonSet) or
// ReplicaSet names (Deployment).
type StatusRevisions struct {
	Current string `json:"current"`
	Update  string `json:"update"`
	// Other: revisions other than current and update that pods to update
	// run, with how many (the plan's otherRevisions): after an undo, the
	// broken revision the pods still run.
	Other map[string]int `json:"other,omitempty"`
}

// StatusPods counts the workload's pods at the read.
type StatusPods struct {
	// Desired: spec.replicas, or the nodes that should run a DaemonSet's pod.
	Desired int `json:"desired"`
	// Total: the pods that exist, terminating ones included.
	Total int `json:"total"`
	// Updated: pods running the update revision (held pods excluded).
	Updated int `json:"updated"`
	// Available: Ready for minReadySeconds and not being updated in place.
	Available int `json:"available"`
	Held      int `json:"held"`
	InFlight  int `json:"inFlight"`
}

// StatusPod is a pod and a reason.
type StatusPod struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// StatusWaves counts waves.
type StatusWaves struct {
	// Total: the waves of the rollout's own plan (originPlan); Current:
	// the wave going on now (the last pod that started moving is in it),
	// else the next one, never below a previous read's nor past Total;
	// Done: Current-1; Remaining: Total-Done. Without the rollout's own
	// plan (a Deployment rolled by its controller, no previous revision
	// known) only Remaining is set, the plan's waves; Done, Current and
	// Total are 0. See waves.
	Done      int `json:"done"`
	Current   int `json:"current,omitempty"`
	Remaining int `json:"remaining"`
	Total     int `json:"total"`
}

// StatusWave is the plan's next wave.
type StatusWave struct {
	// Number of the wave in the whole rollout (1-based, see StatusWaves;
	// 0 for a Deployment rolled by its controller).
	Number int `json:"number"`
	// Start: offset from now at which the plan starts it ("0s": now).
	Start   string         `json:"start"`
	Actions []StatusAction `json:"actions"`
}

// StatusAction is one action of the wave, as in the plan.
type StatusAction struct {
	Type string `json:"type"`
	Pod  string `json:"pod,omitempty"`
	// Node: the node a CordonNode, DrainNode or UncordonNode prepares.
	Node       string   `json:"node,omitempty"`
	ReplicaSet string   `json:"replicaSet,omitempty"`
	From       *int     `json:"from,omitempty"`
	To         *int     `json:"to,omitempty"`
	Reasons    []string `json:"reasons,omitempty"`
}

// StatusBudget is a budget and its use now.
type StatusBudget struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	InUse    int    `json:"inUse"`
	Limit    int    `json:"limit"`
	Advisory bool   `json:"advisory,omitempty"`
	Source   string `json:"source,omitempty"`
}

// Status reads the live state as Step does (same reader, same in-flight
// normalisation, same plan) and reports it. It only reads: it works for
// every workload kind, driven by rollplan or by its controller.
func (e *Executor) Status(ctx context.Context) (*RolloutStatus, error) {
	state, err := e.read(ctx)
	if err != nil {
		return nil, err
	}
	res, err := plan.Build(ctx, []*facts.Rollout{state.rollout}, e.opts.Engine, plan.Metadata{Now: state.now.UTC().Format(time.RFC3339)}, e.opts.PlanOptions)
	if err != nil {
		return nil, err
	}
	if len(res.Plan.Workloads) == 0 {
		return nil, fmt.Errorf("%s: the plan has no workload", e.opts.Target)
	}
	wp := res.Plan.Workloads[0]
	origin, err := e.originPlan(ctx, state.snap, state.rollout, wp, state.now)
	if err != nil {
		return nil, err
	}
	st := BuildStatus(state.rollout, wp, origin, state.inFlight, state.now)
	observed(st, state.rollout, wp, lastActivity(state.snap, state.rollout), state.now)
	if err := e.driven(ctx, st, state.rollout); err != nil {
		return nil, err
	}
	return st, nil
}

// driven adds who drives the rollout (its driver Lease) and the
// controller's record to the status. A rollout a live driver holds is not
// waiting for one; one the controller halted stays halted (until its
// template changes or rollplan resume) even when the policy would not halt
// it at this read.
func (e *Executor) driven(ctx context.Context, st *RolloutStatus, r *facts.Rollout) error {
	h, err := ReadDriver(ctx, e.client, e.opts.Target, e.opts.Now)
	if err != nil {
		return err
	}
	if h != nil && h.Identity != "" {
		st.Driver = h
	}
	rec, err := live.ParseRolloutState(r.Workload.Annotations[facts.AnnRolloutState])
	if err != nil {
		st.Notes = append(st.Notes, fmt.Sprintf("%s: unreadable: %v", e.opts.Target, err))
	}
	st.Controller = rec
	st.ControllerStale = staleRecord(rec, st.Revisions.Update, st.Driver)
	if st.State == StatusWaitingForDriver && st.Driver != nil && st.Driver.Live {
		st.State = StatusInProgress
		st.Verdict = strings.Replace(st.Verdict, "waiting for a driver (run rollplan apply, or install the controller)", "in progress, driven by "+st.Driver.Identity, 1)
	}
	if rec != nil && rec.Phase == live.RolloutHalted && rec.Revision == st.Revisions.Update && st.State != StatusHalted {
		st.State = StatusHalted
		st.Halted = append(st.Halted, rec.Reasons...)
		st.Verdict = "halted (the controller keeps it halted until the template changes or `rollplan resume`)"
		if len(rec.Reasons) > 0 {
			st.Verdict += ": " + rec.Reasons[0]
		}
	}
	return nil
}

// staleRecord says why the controller's record rec no longer describes a
// rollout to revision update that h holds (nil: no Lease holder), or "".
func staleRecord(rec *live.RolloutState, update string, h *Holder) string {
	if rec == nil {
		return ""
	}
	var why []string
	if rec.Revision != "" && rec.Revision != update {
		why = append(why, fmt.Sprintf("recorded for revision %s; the rollout now rolls to %s", rec.Revision, update))
	}
	if rec.Driver != "" {
		switch {
		case h == nil:
			why = append(why, rec.Driver+" no longer holds the driver Lease (nobody holds it)")
		case h.Identity != rec.Driver:
			why = append(why, fmt.Sprintf("%s no longer holds the driver Lease (%s does)", rec.Driver, h.Identity))
		case !h.Live:
			why = append(why, rec.Driver+" no longer holds the driver Lease (it lapsed)")
		}
	}
	return strings.Join(why, "; ")
}

// lastActivity is the latest sign in the snapshot that the rollout moved,
// from what the cluster records of the executor's and the controllers'
// writes: the update revision's creation (the template changed), a pod of
// the workload created (a replacement), a deletion requested
// (deletionTimestamp − grace period), an in-place update sent (the
// AnnInPlaceUpdate record's time), and a pod at the update revision
// turning Ready. Events are not read (a read captures none). Nil when
// none is known.
func lastActivity(snap *snapshot.Snapshot, r *facts.Rollout) *Activity {
	var last time.Time
	what := ""
	see := func(t time.Time, why string) {
		if t.After(last) {
			last, what = t, why
		}
	}
	rev := r.Workload.UpdateRevision
	for _, cr := range snap.ControllerRevisions {
		if cr.Name == rev && cr.Namespace == r.Workload.Namespace {
			see(cr.CreationTimestamp.Time, "update revision "+rev+" created")
		}
	}
	for _, rs := range snap.ReplicaSets {
		if rs.Name == rev && rs.Namespace == r.Workload.Namespace {
			see(rs.CreationTimestamp.Time, "ReplicaSet "+rev+" created")
		}
	}
	mine := map[string]facts.Pod{}
	for _, p := range r.Pods {
		mine[p.Name] = p
	}
	for _, p := range snap.Pods {
		fp, ok := mine[p.Name]
		if !ok || p.Namespace != r.Workload.Namespace {
			continue
		}
		see(p.CreationTimestamp.Time, "pod "+p.Name+" created")
		if p.DeletionTimestamp != nil {
			t := p.DeletionTimestamp.Time
			if g := p.DeletionGracePeriodSeconds; g != nil {
				t = t.Add(-time.Duration(*g) * time.Second)
			}
			see(t, "pod "+p.Name+" deleted")
		}
		if raw, ok := p.Annotations[live.AnnInPlaceUpdate]; ok {
			var rec live.InPlaceRecord
			if json.Unmarshal([]byte(raw), &rec) == nil {
				if at, err := time.Parse(time.RFC3339, rec.At); err == nil {
					see(at, "pod "+p.Name+" updated in place")
				}
			}
		}
		if c := live.PodCondition(p, corev1.PodReady); fp.Updated && c != nil && c.Status == corev1.ConditionTrue {
			see(c.LastTransitionTime.Time, "pod "+p.Name+" Ready at the update revision")
		}
	}
	if last.IsZero() {
		return nil
	}
	return &Activity{Time: last.UTC().Format(time.RFC3339), What: what}
}

// observed judges a status that BuildStatus says is in progress from
// what the cluster shows, for a reader that does not drive the rollout
// itself (rollplan status):
//
//   - Stalled: the plan stalls before its first wave (plan.Stall, no
//     wave), nothing is in flight or terminating, and nothing has moved
//     for driverGrace: the pods do not move, and the plan says they cannot
//     within the budgets. The status names the budget used up (if one is),
//     the plan's reason and how long nothing has moved.
//   - WaitingForDriver: rollplan drives the rollout (managed; a managed
//     Deployment while rollplan holds it paused), the plan's first wave
//     starts now, nothing is in flight or terminating, and nothing has
//     moved for driverGrace: apply would have acted by then, so none runs.
//
// act is LastActivity's answer (nil: no activity known, as good as long
// ago). Other states are left as they are.
func observed(st *RolloutStatus, r *facts.Rollout, wp plan.WorkloadPlan, act *Activity, now time.Time) {
	st.LastActivity = act
	if st.State != StatusInProgress || len(st.InFlight) > 0 {
		return
	}
	for _, p := range r.Pods {
		if p.Terminating {
			return // a deletion is going on
		}
	}
	quietFor := time.Duration(-1) // unknown: no activity known
	if act != nil {
		t, err := time.Parse(time.RFC3339, act.Time)
		if err != nil {
			return
		}
		if quietFor = now.Sub(t); quietFor < driverGrace {
			return // something moved a moment ago
		}
	}
	since := ""
	if quietFor >= 0 {
		since = quietFor.Truncate(time.Second).String()
	}
	w := r.Workload
	switch {
	case wp.Stalled != nil && len(wp.Waves) == 0:
		stall := &StatusStall{Reason: wp.Stalled.Reason, For: since}
		for _, b := range wp.Budgets {
			if !b.Advisory && (b.Type == "unavailable" || b.Type == "groups") && b.InUse >= b.Limit {
				stall.Budget = b.Name
				break
			}
		}
		st.State, st.Stalled = StatusStalled, stall
		st.Verdict = "stalled"
		if since != "" {
			st.Verdict += " for " + since
		}
		if stall.Budget != "" {
			for _, b := range st.Budgets {
				if b.Name == stall.Budget {
					st.Verdict += fmt.Sprintf(": budget %s is used up (%d/%d)", b.Name, b.InUse, b.Limit)
					break
				}
			}
		}
		st.Verdict += ": " + stall.Reason
	case w.Managed && (w.Kind != "Deployment" || w.Paused) && len(wp.Waves) > 0 && startsNow(wp.Waves[0]):
		st.State = StatusWaitingForDriver
		st.Verdict = "waiting for a driver (run rollplan apply, or install the controller)"
		if since != "" {
			st.Verdict += ": nothing has moved for " + since
		}
	}
}

// BuildStatus computes the status from the facts of a (normalised) read,
// its plan, the rollout's own plan (origin, see originPlan; nil: its
// waves are not numbered) and the pods in flight.
func BuildStatus(r *facts.Rollout, wp plan.WorkloadPlan, origin *plan.WorkloadPlan, inFlight map[string]string, now time.Time) *RolloutStatus {
	w := r.Workload
	st := &RolloutStatus{
		APIVersion: statusAPIVersion, Kind: statusKind,
		Workload: StatusWorkload{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Strategy: w.Strategy.Type,
			Managed: w.Managed, PodUpdatePolicy: w.PodUpdatePolicy, Paused: w.Paused},
		Time:      now.UTC().Format(time.RFC3339),
		Revisions: StatusRevisions{Current: w.CurrentRevision, Update: w.UpdateRevision, Other: wp.OtherRevisions},
		Held:      []StatusPod{}, InFlight: []StatusPod{}, Budgets: []StatusBudget{},
		Halted: append([]string{}, wp.Halted...), Denied: wp.Denied, Notes: wp.Notes,
	}
	if a, err := ParseAnalysisState(w.Annotations[facts.AnnAnalysis]); err == nil && a != nil && a.Revision == w.UpdateRevision {
		st.Analysis = a
	}
	if st.Revisions.Update == "" {
		st.Revisions.Update = wp.ToRevision
	}
	if st.Revisions.Current == "" {
		st.Revisions.Current = wp.FromRevision
	}
	held := map[string]bool{}
	for _, h := range wp.Held {
		held[h.Pod] = true
		st.Held = append(st.Held, StatusPod{Pod: h.Pod, Reason: h.Reason})
	}
	for p, why := range inFlight {
		st.InFlight = append(st.InFlight, StatusPod{Pod: p, Reason: why})
	}
	sort.Slice(st.InFlight, func(i, j int) bool { return st.InFlight[i].Pod < st.InFlight[j].Pod })

	// Counted as StepResult counts them, plus completeness as finish sees it.
	// moving: a pod of the rollout is on its way (see waves).
	complete, active, moving := true, 0, len(inFlight) > 0
	st.Pods.Desired = w.Replicas
	for _, p := range r.Pods {
		st.Pods.Total++
		switch {
		case held[p.Name]:
			st.Pods.Held++
		case p.Updated:
			st.Pods.Updated++
			moving = moving || !p.Available
		}
		if p.Available {
			st.Pods.Available++
		}
		if p.Terminating || p.Terminal {
			moving = moving || (p.Terminating && !held[p.Name])
			continue
		}
		active++
		if !held[p.Name] && (!p.Updated || !p.Available) {
			complete = false
		}
	}
	st.Pods.InFlight = len(inFlight)
	if active < w.Replicas || len(wp.Waves) > 0 {
		complete = false
	}
	moving = moving || active < w.Replicas

	for _, b := range wp.Budgets {
		st.Budgets = append(st.Budgets, StatusBudget{Name: b.Name, Type: b.Type, InUse: b.InUse, Limit: b.Limit, Advisory: b.Advisory, Source: b.Source})
	}

	st.Waves, st.CurrentWave = waves(wp, origin, moving)

	switch {
	case len(wp.Halted)+len(wp.Denied) > 0:
		st.State = StatusHalted
		rs := append(append([]string{}, wp.Halted...), wp.Denied...)
		st.Verdict = "halted: " + rs[0]
		if len(rs) > 1 {
			st.Verdict += fmt.Sprintf(" (and %d more)", len(rs)-1)
		}
	case complete:
		st.State, st.Verdict = StatusRolledOut, "rolled out"
		if a := st.Analysis; a != nil && a.RolledBack {
			st.Verdict = fmt.Sprintf("rolled back to %s: %s failed its analysis", a.Revision, a.From)
		}
		st.Waves = StatusWaves{Done: st.Waves.Total, Total: st.Waves.Total}
	case w.Annotations[facts.AnnPaused] == "true":
		st.State, st.Verdict = StatusPaused, fmt.Sprintf("paused by rollplan pause (resume with `rollplan resume %s/%s -n %s`)", strings.ToLower(w.Kind), w.Name, w.Namespace)
	case w.Paused && !w.Managed:
		// A managed Deployment is held paused by rollplan: not a pause.
		st.State, st.Verdict = StatusPaused, "paused"
	default:
		st.State = StatusInProgress
		switch {
		case st.Waves.Total > 0:
			st.Verdict = fmt.Sprintf("in progress: wave %d of %d", st.Waves.Current, st.Waves.Total)
		case st.Waves.Remaining > 0:
			// A Deployment rolled by its controller: see waves.
			st.Verdict = fmt.Sprintf("in progress: rolled by the Deployment controller, %s left", plural.Count(st.Waves.Remaining, "wave", "waves"))
		case len(wp.Notes) > 0 && active >= w.Replicas && notUpdated(r, held) > 0:
			st.Verdict = "in progress: nothing planned: " + wp.Notes[0]
		default:
			st.Verdict = fmt.Sprintf("in progress: waiting for pods to become available (%d of %d)", st.Pods.Available, w.Replicas)
		}
		if a := st.Analysis; a != nil && a.RolledBack {
			st.Verdict = fmt.Sprintf("rolling back to %s (%s failed its analysis), %s", a.Revision, a.From, st.Verdict)
		}
	}
	return st
}

// waves numbers the rollout's waves, one story for the verdict, the table
// and the progress line, against origin, the rollout's own plan (see
// originPlan): Total is its waves; Current = Done+1 is the wave going on
// now; Remaining = Total - Done. With c(k) the pods origin's first k
// waves update, and started the pods of the rollout that have started
// moving (origin's pods less those wp, the plan of what is left, still
// updates):
//
//   - while the rollout moves (pods in flight, terminating, missing, or
//     updated and not yet available), Current is the wave of the last pod
//     started: the least k with c(k) >= started;
//   - while it does not, Current is the next wave: the least k with
//     c(k) > started.
//
// Current stays within 1..Total. The returned StatusWave is wp's first
// wave, numbered as the wave of its first pod (never below Current).
//
// Without origin (a Deployment its controller rolls: its waves are the
// controller's syncs, re-predicted from availability at every read; no
// previous revision known) only what the plan has left is known:
// Remaining is wp's waves; Done, Current and Total stay 0, and the verdict
// says "K waves left".
func waves(wp plan.WorkloadPlan, origin *plan.WorkloadPlan, moving bool) (StatusWaves, *StatusWave) {
	var cw *StatusWave
	if len(wp.Waves) > 0 {
		first := wp.Waves[0]
		cw = &StatusWave{Start: first.Start, Actions: []StatusAction{}}
		for _, a := range first.Actions {
			sa := StatusAction{Type: a.Type, Pod: a.Pod, ReplicaSet: a.ReplicaSet, From: a.From, To: a.To, Reasons: a.Reasons}
			if a.Pod == "" {
				sa.Node = a.Node
			}
			cw.Actions = append(cw.Actions, sa)
		}
	}
	if origin == nil || len(origin.Waves) == 0 {
		return StatusWaves{Remaining: len(wp.Waves)}, cw
	}
	total := len(origin.Waves)
	cum := make([]int, total) // cum[k-1] = c(k)
	n := 0
	for i, w := range origin.Waves {
		n += waveUpdates(w)
		cum[i] = n
	}
	started := min(max(n-updates(wp.Waves), 0), n)
	// waveOf is the least k with c(k) >= m (Total when none is).
	waveOf := func(m int) int {
		for k, c := range cum {
			if c >= m {
				return k + 1
			}
		}
		return total
	}
	current := waveOf(started + 1) // the next wave
	if moving {
		current = waveOf(started)
	}
	current = min(max(current, 1), total)
	st := StatusWaves{Done: current - 1, Current: current, Remaining: total - current + 1, Total: total}
	if cw != nil {
		cw.Number = min(max(waveOf(started+1), current), total)
	}
	return st, cw
}

// startsNow: the plan starts the wave at once.
func startsNow(w plan.Wave) bool { return w.Start == "" || w.Start == "0s" }

func notUpdated(r *facts.Rollout, held map[string]bool) int {
	n := 0
	for _, p := range r.Pods {
		if !p.Updated && !held[p.Name] && !p.Terminating && !p.Terminal {
			n++
		}
	}
	return n
}
