package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/analysis"
	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// AnalysisState is the gate's record on the workload (plan.AnalysisState):
// the plan reads it too, so that a plan of a live rollout shows the gate
// the driver holds.
type AnalysisState = plan.AnalysisState

// ParseAnalysisState reads the annotation's value ("" : none).
func ParseAnalysisState(v string) (*AnalysisState, error) { return plan.ParseAnalysisState(v) }

// AnalysisRecord is the gate's state as the rollout state and the Rollout
// carry it (nil: none).
func AnalysisRecord(s *AnalysisState) *live.RolloutAnalysis {
	if s == nil {
		return nil
	}
	return &live.RolloutAnalysis{Wave: s.Wave, Attempt: s.Attempt, State: s.State(), Verdict: s.Verdict, Message: s.Summary()}
}

// ResumeAnalysis clears a halt the workload's analysis gate recorded, so
// that the next step measures the wave again from a first try, and lets a
// revision a failed analysis rolled back from roll again (rollplan
// resume). A gate that did neither is left as it is.
func ResumeAnalysis(ctx context.Context, client kubernetes.Interface, t live.Target, now time.Time) (bool, error) {
	st, err := ReadAnalysisState(ctx, client, t)
	if err != nil || st == nil {
		return false, err
	}
	if st.RolledBack {
		if st.From == "" {
			return false, nil
		}
		// The revision that failed may roll again.
		st.From = ""
		return true, WriteAnalysisState(ctx, client.AppsV1(), t.Kind, t.Namespace, t.Name, st)
	}
	if st.Halted == "" {
		return false, nil
	}
	st.Halted, st.Verdict, st.Message, st.Results, st.Attempt, st.MeasuredFrom = "", "", "", nil, 1, ""
	st.MeasureAt = now.UTC().Format(time.RFC3339Nano)
	return true, WriteAnalysisState(ctx, client.AppsV1(), t.Kind, t.Namespace, t.Name, st)
}

// analysisFieldManager owns the annotation alone, so that applying it
// never takes or drops the fields rollplan's other writes own.
const analysisFieldManager = "rollplan-analysis"

// Event reasons of the analysis.
const (
	ReasonAnalysisPassed       = "AnalysisPassed"
	ReasonAnalysisFailed       = "AnalysisFailed"
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	reasonRolledBack           = "RolloutRolledBack"
)

// analysisState reads the state from the API server (a cache may not have
// seen the last write yet): nil when there is none.
func (e *Executor) analysisState(ctx context.Context) (*AnalysisState, error) {
	return ReadAnalysisState(ctx, e.client, e.opts.Target)
}

// ReadAnalysisState reads the workload's analysis state from the API
// server; nil when there is none.
func ReadAnalysisState(ctx context.Context, client kubernetes.Interface, t live.Target) (*AnalysisState, error) {
	var (
		m   metav1.Object
		err error
	)
	switch t.Kind {
	case capture.StatefulSet:
		m, err = client.AppsV1().StatefulSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	case capture.DaemonSet:
		m, err = client.AppsV1().DaemonSets(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	default:
		m, err = client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	}
	if err != nil {
		if nf := capture.WorkloadNotFound(t.Kind, t.Name, t.Namespace, err); nf != err {
			return nil, nf
		}
		return nil, fmt.Errorf("%s: read the analysis state: %w", t, err)
	}
	return ParseAnalysisState(m.GetAnnotations()[facts.AnnAnalysis])
}

// writeAnalysisState applies the annotation (server-side apply). A dry
// run writes nothing.
func (e *Executor) writeAnalysisState(ctx context.Context, s *AnalysisState) error {
	e.gate = s
	if e.opts.DryRun {
		return nil
	}
	return WriteAnalysisState(ctx, e.client.AppsV1(), e.opts.Target.Kind, e.opts.Target.Namespace, e.opts.Target.Name, s)
}

// WriteAnalysisState applies s as the workload's analysis annotation
// under the analysis field manager (rollplan promote writes it too).
func WriteAnalysisState(ctx context.Context, apps appsv1client.AppsV1Interface, kind, namespace, name string, s *AnalysisState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace, "annotations": map[string]string{facts.AnnAnalysis: string(b)}}})
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: analysisFieldManager, Force: ptr.To(true)}
	switch kind {
	case capture.StatefulSet:
		_, err = apps.StatefulSets(namespace).Patch(ctx, name, types.ApplyPatchType, body, opts)
	case capture.DaemonSet:
		_, err = apps.DaemonSets(namespace).Patch(ctx, name, types.ApplyPatchType, body, opts)
	default:
		_, err = apps.Deployments(namespace).Patch(ctx, name, types.ApplyPatchType, body, opts)
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s: write the analysis state: %w", kind, namespace, name, err)
	}
	return nil
}

// gateWave applies the analysis gate to this step. It returns the pods
// the step may act on (nil: any) and whether the step must act on none.
func (e *Executor) gateWave(ctx context.Context, state *liveState, wp *plan.WorkloadPlan, out *StepResult) (map[string]bool, bool, error) {
	w := state.rollout.Workload
	gated := len(wp.Waves) > 0 && wp.Waves[0].Gate != nil
	if !gated && w.Annotations[facts.AnnAnalysis] == "" {
		return nil, false, nil
	}
	st, err := e.analysisState(ctx)
	if err != nil {
		return nil, false, err
	}
	// A halt the gate recorded, and a revision it rolled back from applied
	// again, halt the plan itself (plan.AnalysisState, recordedGate), so
	// Step has stopped before this: no step measures or rolls them again.
	if st != nil && st.Revision != w.UpdateRevision {
		st = nil // a state of an earlier rollout
	}
	e.gate = st
	if st != nil && st.RolledBack {
		return nil, false, nil
	}
	if st != nil && st.Aborted {
		return nil, true, e.rollBack(ctx, state, wp, st, out, "aborted by hand (rollplan abort)")
	}
	if !st.Open() {
		if !gated {
			return nil, false, nil
		}
		// Record the wave before its first action: a restart must know
		// which pods the gate waits for.
		next := &AnalysisState{Revision: w.UpdateRevision, From: wp.FromRevision, Wave: 1, Gate: wp.Waves[0].Gate, Attempt: 1}
		if st != nil {
			next.Wave = st.Wave + 1
		}
		next.Pods = wavePods(wp.Waves[0])
		next.Updated = updatedAvailable(state.rollout) + len(next.Pods)
		for _, p := range state.rollout.Pods {
			if p.Updated && p.Available && slices.Contains(next.Pods, p.Name) {
				next.Updated-- // already counted
			}
		}
		if err := e.writeAnalysisState(ctx, next); err != nil {
			return nil, false, err
		}
		e.opts.Log.Info("analysis", "workload", e.opts.Target.String(), "wave", next.Wave, "pods", strings.Join(next.Pods, ","), "gate", fmt.Sprintf("soak %s, %d measurement(s)", next.Gate.Soak, len(next.Gate.Measurements)))
		return podSet(next.Pods), false, nil
	}
	if !waveDone(state, st) {
		out.Note = fmt.Sprintf("wave %d (%s) is in progress: the next wave waits for its analysis", st.Wave, strings.Join(st.Pods, ", "))
		return podSet(st.Pods), false, nil
	}
	now := state.now
	if st.AvailableAt == "" {
		soak, _ := time.ParseDuration(st.Gate.Soak)
		st.AvailableAt = now.UTC().Format(time.RFC3339Nano)
		st.MeasureAt = now.Add(soak).UTC().Format(time.RFC3339Nano)
		if err := e.writeAnalysisState(ctx, st); err != nil {
			return nil, true, err
		}
		e.opts.Log.Info("soak", "workload", e.opts.Target.String(), "wave", st.Wave, "soak", st.Gate.Soak, "until", st.MeasureAt)
	}
	at, _ := time.Parse(time.RFC3339Nano, st.MeasureAt)
	if wait := at.Sub(now); wait > 0 {
		out.Note = fmt.Sprintf("wave %d is available: soaking until %s before its analysis", st.Wave, st.MeasureAt)
		if out.NextAvailable == 0 || wait < out.NextAvailable {
			out.NextAvailable = wait
		}
		return nil, true, nil
	}
	return nil, true, e.analyse(ctx, state, wp, st, out)
}

// analyse takes the gate's measurements that are due and, once each has
// its Count values, asks the policy for its verdict and acts on it.
func (e *Executor) analyse(ctx context.Context, state *liveState, wp *plan.WorkloadPlan, st *AnalysisState, out *StepResult) error {
	fresh := st.MeasuredFrom == ""
	before, _ := st.Taken()
	done, next := e.measure(ctx, st)
	if err := ctx.Err(); err != nil {
		return err // stopped while measuring: what is not recorded is taken again
	}
	if !done {
		// The values so far go on the workload: a restart keeps them, and
		// this step gives its worker back until the next is due.
		wait := max(next.Sub(e.now()), time.Millisecond)
		taken, want := st.Taken()
		out.Note = fmt.Sprintf("wave %d (try %d): %d of %d values taken; the next at %s", st.Wave, st.Attempt, taken, want, next.UTC().Format(time.RFC3339Nano))
		if out.NextAvailable == 0 || wait < out.NextAvailable {
			out.NextAvailable = wait
		}
		if !fresh && taken == before {
			return nil // woken by a pod's change, not a due value: nothing to record
		}
		return e.writeAnalysisState(ctx, st)
	}
	judged := *state.rollout
	judged.Analysis = facts.Analysis{Wave: st.Wave, Attempt: st.Attempt, Pods: append([]string{}, st.Pods...), Measurements: []facts.MeasurementResults{}}
	for _, m := range st.Gate.Measurements {
		rs := st.Results[m.Name]
		if rs == nil {
			rs = []facts.Result{}
		}
		judged.Analysis.Measurements = append(judged.Analysis.Measurements, facts.MeasurementResults{Name: m.Name, Provider: m.Provider, Query: m.Query, Results: rs})
	}
	d, err := e.opts.Engine.Decide(ctx, &judged)
	if err != nil {
		return err
	}
	v := d.Verdict
	switch {
	case d.Analysis == nil:
		v = &engine.Verdict{Verdict: engine.VerdictPass, Message: "the policy declares no analysis any more"}
	case v == nil:
		v = &engine.Verdict{Verdict: engine.VerdictInconclusive, Message: fmt.Sprintf("the policy gave no verdict for wave %d", st.Wave)}
	}
	st.Verdict, st.Message = v.Verdict, v.Message
	e.metrics.AnalysisMeasurements.WithLabelValues(v.Verdict).Inc()
	note := fmt.Sprintf("analysis of wave %d (try %d): %s: %s", st.Wave, st.Attempt, v.Verdict, v.Message)
	e.opts.Log.Info("analysis", "workload", e.opts.Target.String(), "wave", st.Wave, "attempt", st.Attempt, "verdict", v.Verdict, "message", v.Message)
	switch v.Verdict {
	case engine.VerdictPass:
		e.event(state, nil, corev1.EventTypeNormal, ReasonAnalysisPassed, "Analyse", note)
		return e.writeAnalysisState(ctx, st)
	case engine.VerdictFail:
		e.event(state, nil, corev1.EventTypeWarning, ReasonAnalysisFailed, "Analyse", note)
		if err := e.writeAnalysisState(ctx, st); err != nil {
			return err
		}
		if st.Gate.OnFail == engine.AnalysisRollback {
			return e.rollBack(ctx, state, wp, st, out, fmt.Sprintf("analysis after wave %d failed: %s", st.Wave, st.Message))
		}
		reason := fmt.Sprintf("analysis after wave %d failed: %s", st.Wave, v.Message)
		st.Halted = reason
		if err := e.writeAnalysisState(ctx, st); err != nil {
			return err
		}
		e.event(state, nil, corev1.EventTypeWarning, reasonRolloutHalted, "Halt", "rollout halted by policy: "+reason)
		return &HaltedError{Target: e.opts.Target, Reasons: []string{reason}}
	default:
		e.event(state, nil, corev1.EventTypeWarning, ReasonAnalysisInconclusive, "Analyse", note)
		if st.Attempt > st.Gate.MaxInconclusive {
			reason := fmt.Sprintf("analysis after wave %d inconclusive after %d tries (maxInconclusive %d): %s", st.Wave, st.Attempt, st.Gate.MaxInconclusive, v.Message)
			st.Halted = reason
			if err := e.writeAnalysisState(ctx, st); err != nil {
				return err
			}
			e.event(state, nil, corev1.EventTypeWarning, reasonRolloutHalted, "Halt", "rollout halted by policy: "+reason)
			return &HaltedError{Target: e.opts.Target, Reasons: []string{reason}}
		}
		st.Attempt++
		st.MeasuredFrom = ""
		st.MeasureAt = e.now().Add(retryInterval(st.Gate)).UTC().Format(time.RFC3339Nano)
		out.Note = note + "; measured again at " + st.MeasureAt
		if wait := retryInterval(st.Gate); out.NextAvailable == 0 || wait < out.NextAvailable {
			out.NextAvailable = wait
		}
		return e.writeAnalysisState(ctx, st)
	}
}

// rollBack returns the workload to the revision the rollout came from, as
// rollplan undo does: the template goes back and the next steps roll the
// updated pods back, in place where the policy allows, under the same
// budgets. The rollback waits for no gate.
func (e *Executor) rollBack(ctx context.Context, state *liveState, wp *plan.WorkloadPlan, st *AnalysisState, out *StepResult, why string) error {
	t := e.opts.Target
	from := st.From
	if from == "" {
		from = wp.FromRevision
	}
	if e.opts.RollBack == nil {
		reason := why + ": no rollback is configured (Options.RollBack): halted instead"
		return &HaltedError{Target: t, Reasons: []string{reason}}
	}
	to, err := e.opts.RollBack(ctx, e.client, t, from, e.opts.DryRun)
	if err != nil {
		return fmt.Errorf("%s: roll back to %s: %w", why, from, err)
	}
	msg := fmt.Sprintf("%s: rolling back to %s", why, to)
	e.opts.Log.Info("rollback", "workload", t.String(), "wave", st.Wave, "to", to, "reason", why)
	e.event(state, nil, corev1.EventTypeWarning, reasonRolledBack, "Rollback", msg)
	out.Note = msg
	back := *st
	// The workload's controller takes the revision that records the
	// template as its update revision again.
	back.Revision, back.From, back.RolledBack, back.Message = to, st.Revision, true, why
	return e.writeAnalysisState(ctx, &back)
}

// RollBacker sets the workload's pod template back to that of revision
// from (the plan's FromRevision: a ControllerRevision or ReplicaSet name)
// as rollplan undo does, and returns the name of the revision that
// records it. The commands wire it to package history, which the
// executor does not import (the consumers meet only in the planner).
type RollBacker func(ctx context.Context, client kubernetes.Interface, t live.Target, from string, dryRun bool) (string, error)

// measure takes the values of the gate's measurements that are due, all
// at once, with the queries the plan rendered: a measurement's i-th value
// (from 0) is due Interval*i after the try's first. A step that comes late
// takes one value per measurement and the next step follows at once, so
// none is skipped, and no step waits out an interval: the worker that
// measures is free again until the next value is due (when, next says).
// done: every measurement has its Count values.
func (e *Executor) measure(ctx context.Context, st *AnalysisState) (done bool, next time.Time) {
	now := e.now()
	if st.MeasuredFrom == "" { // a new try
		st.MeasuredFrom = now.UTC().Format(time.RFC3339Nano)
		st.Results, st.Verdict, st.Message = map[string][]facts.Result{}, "", ""
	}
	if st.Results == nil {
		st.Results = map[string][]facts.Result{}
	}
	from, _ := time.Parse(time.RFC3339Nano, st.MeasuredFrom)
	due := func(gm plan.GateMeasurement) (time.Time, bool) {
		taken := len(st.Results[gm.Name])
		if taken >= max(gm.Count, 1) {
			return time.Time{}, false
		}
		iv, _ := time.ParseDuration(gm.Interval)
		return from.Add(time.Duration(taken) * iv), true
	}
	t := analysis.Target{Namespace: e.opts.Namespace, Name: e.opts.Name, Kind: e.opts.Kind, Revision: st.Revision, Wave: st.Wave, Pods: st.Pods}
	taken := make([]facts.Result, len(st.Gate.Measurements))
	var wg sync.WaitGroup
	for i, gm := range st.Gate.Measurements {
		if at, ok := due(gm); !ok || now.Before(at) {
			continue
		}
		m := analysis.Measurement{Name: gm.Name, Provider: gm.Provider, Query: gm.Query, Rendered: true, Count: max(gm.Count, 1)}
		m.Interval, _ = time.ParseDuration(gm.Interval)
		m.Window, _ = time.ParseDuration(gm.Window)
		wg.Go(func() {
			r := facts.Result{Taken: now.UTC().Format(time.RFC3339)}
			p, err := e.opts.Providers.Provider(gm.Options, gm.Provider)
			if err == nil {
				err = m.Validate()
			}
			if err != nil {
				r.Error = fmt.Sprintf("measurement %q: %v", gm.Name, err)
			} else {
				began := time.Now()
				v := p.Measure(ctx, m, t, now)
				e.metrics.AnalysisQueryDuration.WithLabelValues(gm.Provider).Observe(time.Since(began).Seconds())
				r = facts.Result{Value: v.Value, Taken: v.Taken.UTC().Format(time.RFC3339), Error: v.Error}
			}
			result := "value"
			if r.Error != "" {
				result = "error"
			}
			e.metrics.AnalysisValues.WithLabelValues(gm.Name, gm.Provider, result).Inc()
			e.opts.Log.Info("measure", "workload", e.opts.Target.String(), "wave", st.Wave, "attempt", st.Attempt, "measurement", gm.Name, "query", gm.Query, "value", r.Value, "error", r.Error)
			taken[i] = r
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false, time.Time{} // a value cut short is no value: taken again
	}
	done = true
	for i, gm := range st.Gate.Measurements {
		if taken[i].Taken != "" {
			st.Results[gm.Name] = append(st.Results[gm.Name], taken[i])
		}
		if at, ok := due(gm); ok {
			done = false
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return done, next
}

// retryInterval: how long after an inconclusive verdict the gate
// measures again: the shortest interval of its measurements.
func retryInterval(g *plan.Gate) time.Duration {
	var d time.Duration
	for _, m := range g.Measurements {
		if iv, err := time.ParseDuration(m.Interval); err == nil && iv > 0 && (d == 0 || iv < d) {
			d = iv
		}
	}
	if d == 0 {
		d = time.Minute
	}
	return d
}

// wavePods are the pods a wave's actions update, sorted.
func wavePods(w plan.Wave) []string {
	var pods []string
	for _, a := range w.Actions {
		if a.Pod != "" && (a.Type == plan.ActionInPlace || a.Type == plan.ActionRecreate) {
			pods = append(pods, a.Pod)
		}
	}
	sort.Strings(pods)
	return pods
}

// waveDone: every pod of the wave is updated and available (a recreated
// DaemonSet pod has a new name: the count says it), none in flight.
func waveDone(state *liveState, st *AnalysisState) bool {
	for _, p := range state.rollout.Pods {
		if slices.Contains(st.Pods, p.Name) && (!p.Updated || !p.Available || p.Terminating) {
			return false
		}
	}
	for p := range state.inFlight {
		if slices.Contains(st.Pods, p) {
			return false
		}
	}
	return updatedAvailable(state.rollout) >= st.Updated
}

func updatedAvailable(r *facts.Rollout) int {
	n := 0
	for _, p := range r.Pods {
		if p.Updated && p.Available && !p.Terminating {
			n++
		}
	}
	return n
}

func podSet(pods []string) map[string]bool {
	s := make(map[string]bool, len(pods))
	for _, p := range pods {
		s[p] = true
	}
	return s
}
