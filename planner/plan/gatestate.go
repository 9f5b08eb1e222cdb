package plan

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// AnalysisState is the driver's record of the analysis gate a rollout
// waits at, kept on the workload (annotation facts.AnnAnalysis, JSON,
// written by server-side apply under its own field manager) so that a
// restarted apply or a new controller leader carries on where the last
// one stopped: the wave's pods, when they were all available, the results
// taken and the verdicts.
//
// A step that is about to start a wave with a gate (plan.Wave.Gate)
// records it first: from then on only that wave's pods are acted on. Once
// they are updated and available, the rollout soaks, measures every
// measurement of the gate (the queries as the plan rendered them), and
// asks the policy for a verdict over the results (the facts' analysis):
// pass opens the next wave; fail halts or rolls back (onFail); inconclusive
// measures again, one interval later, up to maxInconclusive times, then
// halts.
type AnalysisState struct {
	// Revision: the update revision the rollout goes to; a state for
	// another revision is over.
	Revision string `json:"revision"`
	// From: the revision the rollout came from (the plan's), which a
	// rollback returns to.
	From string `json:"from,omitempty"`
	// Wave: the gated wave, from 1 for each revision.
	Wave int `json:"wave"`
	// Pods: the wave's pods (the plan's actions).
	Pods []string `json:"pods"`
	// Updated: how many pods are updated and available once the wave is done.
	Updated int `json:"updated"`
	// Gate: the wave's gate as planned (soak, rendered queries, onFail).
	Gate *Gate `json:"gate,omitempty"`
	// AvailableAt: when the wave's pods were all available (RFC 3339).
	AvailableAt string `json:"availableAt,omitempty"`
	// MeasureAt: when the next measurements start (after the soak, or
	// one interval after an inconclusive verdict).
	MeasureAt string `json:"measureAt,omitempty"`
	// Attempt: the try the results are for, from 1.
	Attempt int `json:"attempt,omitempty"`
	// MeasuredFrom: when the try's first values were taken ("" : not
	// yet); a measurement's i-th value (from 0) is due Interval*i later.
	MeasuredFrom string `json:"measuredFrom,omitempty"`
	// Results of the last measurements, by measurement name.
	Results map[string][]facts.Result `json:"results,omitempty"`
	// Verdict and Message: the policy's last verdict (pass, fail,
	// inconclusive; "" while measuring).
	Verdict string `json:"verdict,omitempty"`
	Message string `json:"message,omitempty"`
	// Halted: why the gate halted the rollout ("" : it did not).
	Halted string `json:"halted,omitempty"`
	// Promoted: the gate was skipped by hand (rollplan promote).
	Promoted bool `json:"promoted,omitempty"`
	// Aborted: rollplan abort asked for the rollout to be rolled back; the
	// driver's next step does it.
	Aborted bool `json:"aborted,omitempty"`
	// RolledBack: Revision is the one a failed analysis rolled back to;
	// that rollout waits for no gate.
	RolledBack bool `json:"rolledBack,omitempty"`
}

// Open: the gate still holds the next wave.
func (s *AnalysisState) Open() bool {
	return s != nil && !s.RolledBack && !s.Promoted && s.Verdict != engine.VerdictPass && s.Gate != nil
}

// Summary is one line for rollplan status: where the gate is, the last
// verdict, and each measurement's values (or its error).
func (s *AnalysisState) Summary() string {
	var b strings.Builder
	switch {
	case s.RolledBack:
		fmt.Fprintf(&b, "rolled back from %s after wave %d: %s", s.From, s.Wave, s.Message)
		return b.String()
	case s.Aborted:
		fmt.Fprintf(&b, "wave %d: abort requested, the driver rolls back", s.Wave)
	case s.Promoted:
		fmt.Fprintf(&b, "wave %d: promoted by hand, the gate is skipped", s.Wave)
	case s.Verdict == "" && s.AvailableAt == "" && s.Gate != nil:
		fmt.Fprintf(&b, "wave %d (%s) in progress, then soak %s", s.Wave, strings.Join(s.Pods, ", "), s.Gate.Soak)
	case s.Verdict == "" && s.MeasuredFrom != "":
		taken, want := s.Taken()
		fmt.Fprintf(&b, "wave %d (try %d): measuring since %s, %d of %d values taken", s.Wave, s.Attempt, s.MeasuredFrom, taken, want)
	case s.Verdict == "":
		fmt.Fprintf(&b, "wave %d available at %s, measured from %s", s.Wave, s.AvailableAt, s.MeasureAt)
	case s.Halted != "":
		fmt.Fprintf(&b, "halted: %s", s.Halted)
	case s.Verdict == engine.VerdictInconclusive:
		// Attempt is already the next try's.
		fmt.Fprintf(&b, "wave %d (try %d): inconclusive: %s; try %d from %s", s.Wave, s.Attempt-1, s.Message, s.Attempt, s.MeasureAt)
	default:
		fmt.Fprintf(&b, "wave %d (try %d): %s: %s", s.Wave, s.Attempt, s.Verdict, s.Message)
	}
	names := make([]string, 0, len(s.Results))
	for n := range s.Results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var vs []string
		errs := 0
		for _, r := range s.Results[n] {
			if r.Error != "" {
				if errs++; errs == 1 {
					vs = append(vs, "error")
				}
				continue
			}
			vs = append(vs, fmt.Sprint(r.Value))
		}
		if errs > 0 {
			vs = append(vs, fmt.Sprintf("(%d of %d without a value; the message says why)", errs, len(s.Results[n])))
		}
		fmt.Fprintf(&b, "; %s = %s", n, strings.Join(vs, ", "))
	}
	return b.String()
}

// State is where the gate stands, one of the Analysis* values.
func (s *AnalysisState) State() string {
	switch {
	case s.RolledBack:
		return AnalysisRolledBack
	case s.Aborted:
		return AnalysisAborted
	case s.Promoted:
		return AnalysisPromoted
	case s.Halted != "":
		return AnalysisHalted
	case s.Verdict == engine.VerdictPass:
		return AnalysisPassed
	case s.Verdict == engine.VerdictFail:
		return AnalysisFailed
	case s.Verdict == engine.VerdictInconclusive:
		return AnalysisInconclusive
	case s.AvailableAt == "":
		return AnalysisWaveInProgress
	case s.MeasuredFrom != "":
		return AnalysisMeasuring
	default:
		return AnalysisSoaking
	}
}

// Taken counts the values the try has and wants (every measurement's
// Count).
func (s *AnalysisState) Taken() (int, int) {
	taken, want := 0, 0
	if s.Gate == nil {
		return 0, 0
	}
	for _, m := range s.Gate.Measurements {
		want += max(m.Count, 1)
		taken += min(len(s.Results[m.Name]), max(m.Count, 1))
	}
	return taken, want
}

// Values of AnalysisState.State.
const (
	AnalysisWaveInProgress = "WaveInProgress" // the gated wave's pods are being updated
	AnalysisSoaking        = "Soaking"        // they are available; measured once the soak is over
	AnalysisMeasuring      = "Measuring"      // values are being taken, one interval apart
	AnalysisPassed         = "Passed"
	AnalysisFailed         = "Failed"
	AnalysisInconclusive   = "Inconclusive" // measured again later
	AnalysisHalted         = "Halted"       // a failing or inconclusive verdict halted the rollout
	AnalysisPromoted       = "Promoted"     // a person skipped the gate (rollplan promote)
	AnalysisAborted        = "Aborted"      // a person asked for a rollback (rollplan abort)
	AnalysisRolledBack     = "RolledBack"   // a failing verdict or an abort rolled the rollout back
)

// ParseAnalysisState reads the annotation's value ("" : none).
func ParseAnalysisState(v string) (*AnalysisState, error) {
	if v == "" {
		return nil, nil
	}
	var s AnalysisState
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", facts.AnnAnalysis, err)
	}
	return &s, nil
}

// recordedGate folds in the gate the rollout's driver recorded on the
// workload for this revision, so that a plan of a live rollout shows what
// its driver does next (the executor plans each step the same way): a
// halt the gate recorded halts the plan; an abort rolls it back; a gate
// still open takes its own wave's pods first, and holds every later wave
// until its verdict, the time it still needs added to their starts.
func recordedGate(wp *WorkloadPlan, det *Detail) {
	r := det.Facts
	w := r.Workload
	st, err := ParseAnalysisState(w.Annotations[facts.AnnAnalysis])
	if err != nil {
		wp.Warnings = append(wp.Warnings, fmt.Sprintf("%s: the recorded analysis gate is ignored (rollplan resume or a new template records a new one)", err))
		return
	}
	if st != nil && st.RolledBack && st.From != "" && st.From == w.UpdateRevision {
		why := fmt.Sprintf("revision %s failed its analysis and was rolled back to %s (%s): it is not rolled again until `rollplan resume`, or fix the version and change the template", st.From, st.Revision, st.Message)
		wp.Halted = append(wp.Halted, why)
		dropAfter(wp, det, -1, "halted: "+why)
		return
	}
	if st == nil || st.Revision != w.UpdateRevision || st.RolledBack || st.Gate == nil {
		return
	}
	switch {
	case st.Aborted:
		why := fmt.Sprintf("rollplan abort at the analysis gate after wave %d: the rollout rolls back to %s", st.Wave, st.From)
		wp.Rollback = &Rollback{AfterWave: st.Wave, ToRevision: st.From, Reason: "aborted by hand (rollplan abort)"}
		wp.Notes = append(wp.Notes, why+": the updated pods return to it in place where they can, as rollplan undo does, under the same budgets")
		dropAfter(wp, det, -1, why)
	case st.Halted != "" && !st.Promoted:
		wp.Halted = append(wp.Halted, st.Halted)
		why := fmt.Sprintf("halted at the analysis gate after wave %d (recorded on the workload): no wave starts until `rollplan resume` (it measures again) or `rollplan abort` (it rolls back)", st.Wave)
		wp.Notes = append(wp.Notes, why)
		dropAfter(wp, det, -1, why)
	case st.Open():
		holdAtGate(wp, det, st)
	}
}

// holdAtGate: the recorded gate's own pods go first (the driver acts on no
// other pod until it passes), then every later wave waits for it.
func holdAtGate(wp *WorkloadPlan, det *Detail, st *AnalysisState) {
	r := det.Facts
	mine := map[string]bool{}
	for _, p := range st.Pods {
		mine[p] = true
	}
	if len(wp.Waves) > 0 {
		var own, rest []Action
		for _, a := range wp.Waves[0].Actions {
			if mine[a.Pod] {
				own = append(own, a)
			} else {
				rest = append(rest, a)
			}
		}
		if len(own) > 0 && len(rest) > 0 {
			first, second := wp.Waves[0], wp.Waves[0]
			first.Actions, first.Gate = own, nil
			second.Actions = rest
			wp.Waves = append([]Wave{first, second}, wp.Waves[1:]...)
			for i := range wp.Waves {
				wp.Waves[i].Index = i + 1
			}
			wp.Summary.Waves = len(wp.Waves)
			if wp.Waves[1].Gate != nil { // its own pods now: the queries name them
				if a := drivenAnalysis(r, det.Planned); a != nil {
					g, _ := pendingGate(r, a, &wp.Waves[1])
					wp.Waves[1].Gate = g
				}
			}
		}
		if len(own) > 0 {
			g := *st.Gate
			g.Status, g.Attempt = GatePending, st.Attempt
			g.Message = "recorded by the driver: " + st.Summary()
			wp.Waves[0].Gate = &g
		}
	}
	wait := gateRemaining(st, r.Now)
	from := 0
	if len(wp.Waves) > 0 && wp.Waves[0].Gate != nil && st.AvailableAt == "" && len(st.Pods) > 0 && containsAny(wp.Waves[0].Actions, mine) {
		from = 1 // the gate's own wave goes now; the rest wait for it
	}
	for i := from; i < len(wp.Waves); i++ {
		if start, err := ParseDuration(wp.Waves[i].Start); err == nil {
			wp.Waves[i].Start = formatDuration(start + wait)
		}
	}
	if end, err := ParseDuration(wp.EstimatedDuration); err == nil && len(wp.Waves) > from {
		wp.EstimatedDuration = formatDuration(end + wait)
	}
	wp.Notes = append(wp.Notes, fmt.Sprintf("the analysis gate after wave %d of this rollout holds the next wave (recorded on the workload): %s", st.Wave, st.Summary()))
}

func containsAny(as []Action, pods map[string]bool) bool {
	for _, a := range as {
		if pods[a.Pod] {
			return true
		}
	}
	return false
}

// gateRemaining: the seconds the recorded gate still needs at now (RFC
// 3339): its soak's rest, then its values' (every measurement's last
// value is due Interval*(Count-1) after the try's first).
func gateRemaining(st *AnalysisState, now string) float64 {
	at, err := time.Parse(time.RFC3339, now)
	if err != nil {
		return 0
	}
	span := time.Duration(0)
	for _, m := range st.Gate.Measurements {
		iv, _ := time.ParseDuration(m.Interval)
		span = max(span, iv*time.Duration(max(m.Count, 1)-1))
	}
	soak, _ := time.ParseDuration(st.Gate.Soak)
	var left time.Duration
	switch {
	case st.AvailableAt == "":
		left = soak + span
	case st.MeasuredFrom != "" && st.Verdict == "":
		from, _ := time.Parse(time.RFC3339Nano, st.MeasuredFrom)
		left = from.Add(span).Sub(at)
	default: // soaking, or waiting to measure again
		measure, _ := time.Parse(time.RFC3339Nano, st.MeasureAt)
		left = max(measure.Sub(at), 0) + span
	}
	return max(left, 0).Seconds()
}
