package plan

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// Gate statuses.
const (
	GatePending      = "pending"
	GatePassed       = "passed"
	GateFailed       = "failed"
	GateInconclusive = "inconclusive"
)

// Gate is what the next wave waits for once this wave's pods are
// available (the policy's analysis answer): a soak, then measurements,
// then the policy's verdict. Only waves followed by another have one.
type Gate struct {
	// Soak: how long the rollout waits once the wave's pods are available.
	Soak string `json:"soak"`
	// Measurements: what is measured after the soak, with the queries
	// rendered for the wave.
	Measurements []GateMeasurement `json:"measurements,omitempty"`
	// MaxInconclusive and OnFail: the policy's answers (engine.Analysis).
	MaxInconclusive int    `json:"maxInconclusive"`
	OnFail          string `json:"onFail"`
	// Status: pending (no result yet: a plan from a snapshot), passed,
	// failed or inconclusive (the policy's verdict over recorded results,
	// plan --analysis-results).
	Status string `json:"status"`
	// Attempt: the try the verdict is for (recorded results), from 1.
	Attempt int `json:"attempt,omitempty"`
	// Message: the verdict's message (naming the query and the value), or
	// what a pending gate waits for.
	Message string `json:"message"`
}

// GateMeasurement is one measurement of a gate.
type GateMeasurement struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Query: the template rendered for the workload and the wave.
	Query    string `json:"query"`
	Interval string `json:"interval"`
	Count    int    `json:"count"`
	Window   string `json:"window,omitempty"`
	Options  string `json:"options,omitempty"`
	// Results recorded for the wave (plan --analysis-results); none
	// while the gate is pending.
	Results []facts.Result `json:"results,omitempty"`
}

// Rollback says that a failed analysis rolls the rollout back.
type Rollback struct {
	// AfterWave: the wave whose analysis failed.
	AfterWave int `json:"afterWave"`
	// ToRevision: the revision the pods return to.
	ToRevision string `json:"toRevision"`
	Reason     string `json:"reason"`
}

// gates gives every wave but the last the gate the analysis answer
// declares (pending), and moves each wave's start, and the whole
// rollout's, back by the time the gates before it take. No analysis: no
// change at all.
func gates(wp *WorkloadPlan, r *facts.Rollout, a *engine.Analysis, end float64) (float64, []string) {
	if a == nil || len(wp.Waves) < 2 {
		return end, nil
	}
	var warnings []string
	wait := gateSeconds(a)
	for i := range wp.Waves {
		if i > 0 {
			if start, err := ParseDuration(wp.Waves[i].Start); err == nil {
				wp.Waves[i].Start = formatDuration(start + wait*float64(i))
			}
		}
		if i == len(wp.Waves)-1 {
			break
		}
		g, err := pendingGate(r, a, &wp.Waves[i])
		if err != nil {
			warnings = append(warnings, err.Error())
		}
		wp.Waves[i].Gate = g
	}
	return end + wait*float64(len(wp.Waves)-1), warnings
}

// gateSeconds: the soak, then the longest measurement (count takes,
// interval apart, the first at once).
func gateSeconds(a *engine.Analysis) float64 {
	soak, _ := time.ParseDuration(a.Soak)
	longest := time.Duration(0)
	for _, m := range a.Measurements {
		iv, _ := time.ParseDuration(m.Interval)
		longest = max(longest, iv*time.Duration(m.Count-1))
	}
	return (soak + longest).Seconds()
}

func pendingGate(r *facts.Rollout, a *engine.Analysis, w *Wave) (*Gate, error) {
	g := &Gate{Soak: a.Soak, MaxInconclusive: a.MaxInconclusive, OnFail: a.OnFail, Status: GatePending}
	t := queryTarget(r, w)
	var errs []string
	var names []string
	for _, m := range a.Measurements {
		q, err := engine.RenderQuery(m, t)
		if err != nil {
			errs = append(errs, err.Error())
			q = m.Query
		}
		g.Measurements = append(g.Measurements, GateMeasurement{Name: m.Name, Provider: m.Provider, Query: q, Interval: m.Interval, Count: m.Count, Window: m.Window, Options: m.Options})
		names = append(names, m.Name)
	}
	g.Message = fmt.Sprintf("wave %d waits for its pods to be available, then soaks %s", w.Index, a.Soak)
	if len(names) > 0 {
		g.Message += ", then measures " + strings.Join(names, ", ") + " and asks the policy for a verdict"
	}
	if len(errs) > 0 {
		return g, fmt.Errorf("wave %d: %s", w.Index, strings.Join(errs, "; "))
	}
	return g, nil
}

// queryTarget: the wave's pods by the names they have once updated, when
// every one keeps its name (in place, or a StatefulSet's); else none, and
// the template's PodRegex matches by prefix (engine.NewQueryTarget).
func queryTarget(r *facts.Rollout, w *Wave) engine.QueryTarget {
	wl := r.Workload
	var pods []string
	known := true
	for _, a := range w.Actions {
		switch a.Type {
		case ActionInPlace:
			pods = append(pods, a.Pod)
		case ActionRecreate:
			if wl.Kind != "StatefulSet" {
				known = false
			}
			pods = append(pods, a.Pod)
		case ActionScaleRS:
			known = false
		}
	}
	if !known {
		pods = nil
	}
	sort.Strings(pods)
	return engine.NewQueryTarget(wl.Kind, wl.Namespace, wl.Name, wl.UpdateRevision, w.Index, pods)
}

// judgeGates asks the engine for the verdict of every gate that recorded
// results exist for, in wave order, and acts on it as the rollout would:
// pass goes on; fail halts or rolls back after the wave (the later waves
// are dropped and their pods blocked); inconclusive measures again, up to
// maxInconclusive times, then halts.
func judgeGates(ctx context.Context, eng engine.Engine, wp *WorkloadPlan, det *Detail, rec *facts.AnalysisResults) error {
	r, a := det.Facts, det.Decisions.Analysis
	w := r.Workload
	wp.Warnings = append(wp.Warnings, unusedResults(wp, a, rec)...)
	for i := range wp.Waves {
		g := wp.Waves[i].Gate
		res := rec.Wave(w.Kind, w.Namespace, w.Name, wp.Waves[i].Index)
		if g == nil || res == nil {
			continue
		}
		judged := *r
		judged.Analysis = facts.Analysis{Wave: wp.Waves[i].Index, Attempt: max(res.Attempt, 1), Pods: queryTarget(r, &wp.Waves[i]).Pods, Measurements: []facts.MeasurementResults{}}
		if judged.Analysis.Pods == nil {
			judged.Analysis.Pods = []string{}
		}
		for j := range g.Measurements {
			m := &g.Measurements[j]
			m.Results = res.Measurements[m.Name]
			judged.Analysis.Measurements = append(judged.Analysis.Measurements, facts.MeasurementResults{Name: m.Name, Provider: m.Provider, Query: m.Query, Results: nonNilResults(m.Results)})
		}
		d, err := eng.Decide(ctx, &judged)
		if err != nil {
			return err
		}
		if d.Verdict == nil {
			return fmt.Errorf("%s %s/%s: the policy gave no analysis verdict for wave %d", w.Kind, w.Namespace, w.Name, wp.Waves[i].Index)
		}
		g.Attempt, g.Message = judged.Analysis.Attempt, d.Verdict.Message
		switch d.Verdict.Verdict {
		case engine.VerdictPass:
			g.Status = GatePassed
			continue
		case engine.VerdictFail:
			g.Status = GateFailed
			if a.OnFail == engine.AnalysisRollback {
				stopAfter(wp, det, i, "", &Rollback{AfterWave: wp.Waves[i].Index, ToRevision: wp.FromRevision, Reason: d.Verdict.Message})
			} else {
				stopAfter(wp, det, i, fmt.Sprintf("analysis after wave %d failed: %s", wp.Waves[i].Index, d.Verdict.Message), nil)
			}
			return nil
		case engine.VerdictInconclusive:
			g.Status = GateInconclusive
			if g.Attempt > a.MaxInconclusive {
				stopAfter(wp, det, i, fmt.Sprintf("analysis after wave %d inconclusive after %d tries (maxInconclusive %d): %s", wp.Waves[i].Index, g.Attempt, a.MaxInconclusive, d.Verdict.Message), nil)
				return nil
			}
			wp.Notes = append(wp.Notes, fmt.Sprintf("analysis after wave %d inconclusive (try %d of %d): measured again before wave %d starts", wp.Waves[i].Index, g.Attempt, a.MaxInconclusive+1, wp.Waves[i].Index+1))
		}
	}
	return nil
}

func nonNilResults(rs []facts.Result) []facts.Result {
	if rs == nil {
		return []facts.Result{}
	}
	return rs
}

// stopAfter ends the plan after wave i: a halt (halt != "") or a rollback.
// The later waves are dropped; their pods are blocked, and counted again.
func stopAfter(wp *WorkloadPlan, det *Detail, i int, halt string, rb *Rollback) {
	why := fmt.Sprintf("the analysis after wave %d halts the rollout", i+1)
	if rb != nil {
		wp.Rollback = rb
		why = fmt.Sprintf("analysis after wave %d failed: the rollout rolls back to %s (onFail rollback)", rb.AfterWave, rb.ToRevision)
		wp.Notes = append(wp.Notes, why+": the updated pods return to it in place where they can, as rollplan undo does, under the same budgets")
	} else {
		wp.Halted = append(wp.Halted, halt)
		wp.Notes = append(wp.Notes, fmt.Sprintf("halted after wave %d: no later wave is planned until the halt reasons are resolved", i+1))
	}
	dropAfter(wp, det, i, why)
}

// dropAfter ends the plan after wave i (-1: before any): the later waves
// are dropped; their pods are blocked (why), and counted again.
func dropAfter(wp *WorkloadPlan, det *Detail, i int, why string) {
	dropped := wp.Waves[i+1:]
	wp.Waves = wp.Waves[:i+1]
	if len(dropped) > 0 {
		end, _ := ParseDuration(dropped[0].Start)
		wp.EstimatedDuration = formatDuration(end)
	}
	for p, wave := range det.Wave {
		if wave > i+1 {
			delete(det.Wave, p)
		}
	}
	s := &wp.Summary
	s.ToUpdate, s.InPlace, s.Recreate, s.Deleted, s.Terminating, s.Blocked = 0, 0, 0, 0, 0, 0
	wp.Blocked = nil
	wp.Stalled = nil
	countPods(wp, det.Facts, det.Planned, &simulation{removed: det.removed, blocked: map[string]string{}}, why)
	s.Waves = len(wp.Waves)
}

// unusedResults warns about recorded results the plan cannot use: a wave
// without a gate, a measurement the policy does not declare.
func unusedResults(wp *WorkloadPlan, a *engine.Analysis, rec *facts.AnalysisResults) []string {
	var out []string
	key := wp.Kind + "/" + wp.Namespace + "/" + wp.Name
	for _, wr := range rec.Workloads[key] {
		var g *Gate
		for i := range wp.Waves {
			if wp.Waves[i].Index == wr.Wave {
				g = wp.Waves[i].Gate
			}
		}
		if g == nil {
			out = append(out, fmt.Sprintf("analysis results for wave %d are not used: that wave has no gate (only waves followed by another wait for an analysis, and the policy must declare one)", wr.Wave))
			continue
		}
		names := make([]string, 0, len(wr.Measurements))
		for n := range wr.Measurements {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			declared := false
			for _, m := range a.Measurements {
				declared = declared || m.Name == n
			}
			if !declared {
				out = append(out, fmt.Sprintf("analysis results for wave %d: measurement %q is not declared by the policy: not used", wr.Wave, n))
			}
		}
	}
	return out
}

// drivenAnalysis: the analysis waves wait for, nil unless the policy
// declares one and rollplan drives the rollout (a workload's own
// controller waits for no measurement).
func drivenAnalysis(r *facts.Rollout, d *engine.Decisions) *engine.Analysis {
	if d.Analysis == nil || !drivenByRollplan(r, d) {
		return nil
	}
	return d.Analysis
}

// analysisWarnings: an analysis the workload's controller ignores.
func analysisWarnings(r *facts.Rollout, d *engine.Decisions) []string {
	if d.Analysis == nil || drivenByRollplan(r, d) {
		return nil
	}
	w := r.Workload
	return []string{fmt.Sprintf("the policy declares an analysis (soak %s, %d measurement(s)), but the %s controller rolls this %s and waits for none: only rollouts rollplan drives (annotated %s=\"true\"; StatefulSets and DaemonSets with updateStrategy OnDelete, Deployments whose pods all go in place) wait between waves", d.Analysis.Soak, len(d.Analysis.Measurements), w.Kind, w.Kind, facts.AnnManaged)}
}
