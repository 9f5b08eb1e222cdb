package plan

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

// Options are the per-action duration estimates the simulator uses.
type Options struct {
	// RecreateSeconds: from deleting (or creating) a pod to the new pod being
	// Ready, before minReadySeconds.
	RecreateSeconds int
	// InPlaceSeconds: from the in-place patch to the container being Ready again.
	InPlaceSeconds int
	// TerminateSeconds: how long a deleted pod that is not replaced takes to go.
	TerminateSeconds int
	// Upstream models what a workload's own controller does: a workload
	// rollplan does not drive is planned with its answers where the
	// policy's differ (controllerDecisions). Callers set the default
	// strategy in Go (engines.Upstream); plan does not import an engine.
	// Nil: such a workload is planned with the policy's answers and a
	// warning that its controller could not be modelled.
	Upstream engine.Engine
	// Analysis: recorded measurement results (plan --analysis-results):
	// the gates they exist for show the policy's verdict instead of
	// pending. A pointer, so that Options stays comparable.
	Analysis *facts.AnalysisResults
	// Progress, when set, is told how many workloads are planned, after
	// each (from the goroutines that plan them): rollplan plan's progress
	// line. A pointer, so that Options stays comparable.
	Progress *ProgressFunc
}

// ProgressFunc is told that done of total workloads are planned.
type ProgressFunc func(done, total int)

// DefaultOptions are conservative estimates for a typical pod.
var DefaultOptions = Options{RecreateSeconds: 60, InPlaceSeconds: 20, TerminateSeconds: 30}

// Detail is everything that placed a workload's pods, for `explain`.
type Detail struct {
	Facts *facts.Rollout
	// Decisions: the policy's answers (explain and policy tests show them).
	Decisions *engine.Decisions
	// Planned: the answers the waves were planned from — the policy's, or
	// its controller's for a workload rollplan does not drive (Overrides
	// says where they differ), after Go's feasibility override.
	Planned *engine.Decisions
	// Wave: pod name → wave index (0 when not in a wave).
	Wave map[string]int
	// Overrides: pod name → why Go changed the policy's answer.
	Overrides map[string]string
	// Waited: pod name → why a pod the plan places in wave N > 1 was not
	// in wave N-1 (the budget that was full, or what else held it). Pods
	// of the first wave, and of no wave, have none.
	Waited map[string]*Wait
	// removed: pods a controller deletes outside the plan's actions
	// (simulation.removed), for counting again after an analysis stops
	// the plan.
	removed []string
}

// Result is a plan with the details behind it.
type Result struct {
	Plan    *Plan
	Details []*Detail
}

// Build evaluates the engine for every rollout and packs the plan.
func Build(ctx context.Context, rollouts []*facts.Rollout, eng engine.Engine, meta Metadata, o Options) (*Result, error) {
	meta.Engine = eng.Name()
	meta.PolicyDigest = eng.Digest()
	plans := make([]WorkloadPlan, len(rollouts))
	details := make([]*Detail, len(rollouts))
	// Workloads are independent and an engine is safe for concurrent use, so
	// they are planned on every core. Every workload runs to the end (no
	// cancellation) so that the error reported is the first in snapshot
	// order, exactly as a sequential run would report it.
	errs := make([]error, len(rollouts))
	var g errgroup.Group
	g.SetLimit(max(1, runtime.GOMAXPROCS(0)))
	var done atomic.Int64
	for i, r := range rollouts {
		g.Go(func() error {
			if o.Progress != nil {
				defer func() { (*o.Progress)(int(done.Add(1)), len(rollouts)) }()
			}
			d, err := eng.Decide(ctx, r)
			if err != nil {
				errs[i] = err
				return nil
			}
			plans[i], details[i] = Workload(r, d, o)
			if details[i] != nil && plans[i].Error == "" {
				recordedGate(&plans[i], details[i])
			}
			if o.Analysis != nil && details[i] != nil && details[i].Decisions.Analysis != nil {
				errs[i] = judgeGates(ctx, eng, &plans[i], details[i], o.Analysis)
			}
			return nil
		})
	}
	_ = g.Wait() // errors are collected per workload
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return &Result{Plan: &Plan{APIVersion: APIVersion, Kind: Kind, Metadata: meta, Workloads: plans}, Details: details}, nil
}

// Workload packs one workload's decisions into waves.
func Workload(r *facts.Rollout, d *engine.Decisions, o Options) (WorkloadPlan, *Detail) {
	w := r.Workload
	wp := WorkloadPlan{
		Kind: w.Kind, Namespace: w.Namespace, Name: w.Name,
		FromRevision: w.CurrentRevision, ToRevision: w.UpdateRevision,
		PodUpdatePolicy: w.PodUpdatePolicy, Managed: w.Managed, Pacing: d.Pacing,
		Budgets: []Budget{}, Waves: []Wave{}, Held: []Held{}, Halted: []string{},
		Warnings:          append([]string(nil), r.Warnings...),
		EstimatedDuration: "0s",
	}
	for i := range r.Pods {
		p := &r.Pods[i]
		if !p.Updated && d.Pods[i].InScope && p.Revision != "" && p.Revision != w.CurrentRevision && p.Revision != w.UpdateRevision {
			if wp.OtherRevisions == nil {
				wp.OtherRevisions = map[string]int{}
			}
			wp.OtherRevisions[p.Revision]++
		}
	}
	det := &Detail{Facts: r, Decisions: d, Wave: map[string]int{}, Overrides: map[string]string{}}
	// det keeps the policy's answers (explain, policy tests show them);
	// the waves are planned from what runs.
	d, notes := controllerDecisions(r, d, det, o.Upstream)
	wp.Pacing = d.Pacing
	wp.Warnings = append(wp.Warnings, notes...)
	enforceFeasibility(r, d, det)
	det.Planned = d

	wp.Summary.Pods = len(r.Pods)
	for i, p := range r.Pods {
		if p.Updated {
			wp.Summary.Updated++
			continue
		}
		pd := d.Pods[i]
		if !pd.InScope {
			wp.Held = append(wp.Held, Held{Pod: p.Name, Reason: pd.HeldReason})
			continue
		}
	}
	wp.Summary.Held = len(wp.Held)
	wp.Budgets = ResolveBudgets(r, d.Budgets)
	wp.Warnings = append(wp.Warnings, duplicateBudgetNames(d.Budgets)...)

	wp.Denied = append(wp.Denied, d.Deny...)
	wp.Warnings = append(wp.Warnings, nodePreparationWarnings(r, d)...)
	wp.Warnings = append(wp.Warnings, analysisWarnings(r, d)...)
	if len(d.Halt) > 0 {
		wp.Halted = append(wp.Halted, d.Halt...)
		const halted = "halted: no wave is planned until the halt reasons are resolved"
		wp.Notes = append(wp.Notes, halted)
		countPods(&wp, r, d, nil, halted)
		return wp, det
	}
	stopped := ""
	switch {
	case w.Strategy.Type == "OnDelete" && !w.Managed:
		stopped = fmt.Sprintf("updateStrategy OnDelete: the %s controller replaces a pod only when it is deleted; annotate %s=\"true\" to let rollplan drive the rollout", w.Kind, facts.AnnManaged)
	case w.Paused && !w.Managed:
		stopped = "spec.paused: the Deployment controller does not roll a paused Deployment; resume it to start the rollout"
	case w.Kind == "StatefulSet" && w.Strategy.Type == "Recreate":
		if refused := recreateRefused(r); refused != "" {
			wp.Warnings = append(wp.Warnings, refused)
			const none = "no wave is planned: the StatefulSet controller rolls nothing under this strategy"
			wp.Notes = append(wp.Notes, none)
			countPods(&wp, r, d, nil, none)
			return wp, det
		}
	}
	if stopped != "" {
		wp.Notes = append(wp.Notes, stopped)
		countPods(&wp, r, d, nil, stopped)
		return wp, det
	}

	var sim *simulation
	if w.Kind == "Deployment" && !inPlaceDeployment(r, d) {
		sim = simulateDeployment(r, d, o)
		switch {
		case !w.Managed || w.PodUpdatePolicy == "Recreate":
		case activeReplicaSets(r) > 1:
			wp.Notes = append(wp.Notes, fmt.Sprintf("%d ReplicaSets have pods: rollplan updates pods in place within one ReplicaSet only, so the Deployment controller finishes this rollout (upstream rolling update)", activeReplicaSets(r)))
		default:
			wp.Notes = append(wp.Notes, "some pods cannot be updated in place: the Deployment falls back to the upstream rolling update")
		}
	} else {
		sim = simulatePods(r, d, o)
	}
	if sim.err != nil {
		// The policy's deny rules stand without a plan: the gate reads
		// them from here.
		f := Failed(w.Kind, w.Namespace, w.Name, fmt.Errorf("%s %s/%s: %w", w.Kind, w.Namespace, w.Name, sim.err))
		f.Denied = wp.Denied
		return f, det
	}
	if sim.waves != nil {
		wp.Waves = sim.waves // else [] (as set above), never null
	}
	det.Waited = sim.waited
	det.removed = sim.removed
	wp.Notes = append(wp.Notes, sim.notes...)
	wp.Stalled = sim.stalled
	wp.Warnings = append(wp.Warnings, sim.warnings...)
	for wi, wave := range sim.waves {
		for _, a := range wave.Actions {
			if a.Pod != "" {
				det.Wave[a.Pod] = wi + 1
			}
			for _, p := range a.Pods {
				det.Wave[p] = wi + 1
			}
		}
	}
	countPods(&wp, r, d, sim, cmp.Or(sim.stall, "placed in no wave"))
	wp.Notes = append(wp.Notes, terminatingNotes(r, d, det)...)
	wp.Summary.Waves = len(wp.Waves)
	end, gateWarnings := gates(&wp, r, drivenAnalysis(r, d), sim.end)
	wp.Warnings = append(wp.Warnings, gateWarnings...)
	wp.EstimatedDuration = formatDuration(end)
	return wp, det
}

// Failed is the plan of a workload that could not be planned: its name and
// the error, nothing else (see WorkloadPlan.Error).
func Failed(kind, namespace, name string, err error) WorkloadPlan {
	return WorkloadPlan{Kind: kind, Namespace: namespace, Name: name,
		Budgets: []Budget{}, Waves: []Wave{}, Held: []Held{}, Halted: []string{},
		EstimatedDuration: "0s", Error: err.Error()}
}

// WithFailed adds the plans of the workloads that could not be planned to
// p's, in the plan's order (kind, namespace, name).
func WithFailed(p *Plan, failed []WorkloadPlan) {
	if len(failed) == 0 {
		return
	}
	p.Workloads = append(p.Workloads, failed...)
	sort.SliceStable(p.Workloads, func(i, j int) bool {
		a, b := p.Workloads[i], p.Workloads[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// countPods counts each pod to update by what the waves do with it (see
// Summary) and lists those no wave places as blocked, with why: the
// simulation's reason for the pod, else why (the halt, what stops the
// rollout, the simulation's stall). sim is nil when nothing is simulated.
func countPods(wp *WorkloadPlan, r *facts.Rollout, d *engine.Decisions, sim *simulation, why string) {
	acted := map[string]string{}
	if sim != nil {
		for _, p := range sim.removed {
			acted[p] = ActionDelete
		}
	}
	for _, wave := range wp.Waves {
		for _, a := range wave.Actions {
			switch a.Type {
			case ActionInPlace, ActionRecreate, ActionDelete:
				acted[a.Pod] = a.Type
			case ActionScaleRS:
				for _, p := range a.Pods {
					acted[p] = ActionRecreate
				}
			}
		}
	}
	s := &wp.Summary
	for i, p := range r.Pods {
		if p.Updated || !d.Pods[i].InScope {
			continue // updated and held are counted already
		}
		s.ToUpdate++
		switch acted[p.Name] {
		case ActionInPlace:
			s.InPlace++
		case ActionRecreate:
			s.Recreate++
		case ActionDelete:
			s.Deleted++
		default:
			if p.Terminating {
				s.Terminating++
				continue
			}
			reason := why
			if sim != nil && sim.blocked[p.Name] != "" {
				reason = sim.blocked[p.Name]
			}
			s.Blocked++
			wp.Blocked = append(wp.Blocked, Held{Pod: p.Name, Reason: reason})
		}
	}
}

// terminatingNotes: a pod to update that is already terminating gets no
// action of its own (the summary counts it as terminating); say why.
func terminatingNotes(r *facts.Rollout, d *engine.Decisions, det *Detail) []string {
	var names []string
	for i, p := range r.Pods {
		if p.Terminating && !p.Updated && d.Pods[i].InScope && det.Wave[p.Name] == 0 {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	then := fmt.Sprintf("the %s controller creates its replacement at the update revision once it is gone", r.Workload.Kind)
	if r.Workload.Kind == "Deployment" {
		then = "it is already leaving its ReplicaSet"
	}
	return []string{fmt.Sprintf("%s: terminating, so no action of its own: %s", strings.Join(names, ", "), then)}
}

// enforceFeasibility overrides an InPlace answer that the API would refuse.
func enforceFeasibility(r *facts.Rollout, d *engine.Decisions, det *Detail) {
	for i, p := range r.Pods {
		pd := &d.Pods[i]
		if p.Updated || pd.Action != engine.InPlace {
			continue
		}
		var blocking []string
		for _, c := range p.Changes {
			if !c.InPlace {
				blocking = append(blocking, fmt.Sprintf("%s changed: %s", c.Path, c.Detail))
			}
		}
		if len(blocking) > 0 {
			pd.Action = engine.Recreate
			pd.Reasons = append(blocking, "planned as Recreate: the policy answered InPlace, but the API does not let a running pod take these changes")
			why := "InPlace planned as Recreate: " + strings.Join(blocking, "; ")
			if prev, ok := det.Overrides[p.Name]; ok {
				why = prev + "; " + why
			}
			det.Overrides[p.Name] = why
		}
	}
}

// inPlaceDeployment: every pod to update goes in place, so the Deployment's
// pods are patched within their ReplicaSet instead of rolled to a new one
// (also once every pod is updated that way: the plan is then empty).
// That ReplicaSet takes the new template at the end, so it must be the only
// one with pods: a rollout between ReplicaSets in progress is the
// controller's to finish.
func inPlaceDeployment(r *facts.Rollout, d *engine.Decisions) bool {
	if !r.Workload.Managed || r.Workload.PodUpdatePolicy == "Recreate" || activeReplicaSets(r) > 1 {
		return false
	}
	for i, p := range r.Pods {
		if p.Updated || !d.Pods[i].InScope {
			continue
		}
		if d.Pods[i].Action != engine.InPlace {
			return false
		}
	}
	// Every pod updated (in place, its ReplicaSet not given the template
	// yet): nothing left but completing it.
	return len(r.Pods) > 0
}

// duplicateBudgetNames warns about budget names more than one budget
// carries (two rules, or composed policies): the plan, explain and scripts
// reading -o json tell budgets apart by name.
func duplicateBudgetNames(bs []engine.Budget) []string {
	count := map[string]int{}
	var names []string
	for _, b := range bs {
		if count[b.Name]++; count[b.Name] == 2 {
			names = append(names, b.Name)
		}
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, fmt.Sprintf("%d budgets are named %q: the plan lists budgets by name, so rename all but one in the policy", count[n], n))
	}
	return out
}

// formatDuration prints whole seconds the way kubectl does (4m30s).
func formatDuration(sec float64) string {
	if sec+0.5 >= maxDurationSeconds {
		// Past time.Duration's range (292 years): a huge StatefulSet
		// created one replica at a time. Written as Duration.String would.
		whole := math.Floor(sec + 0.5)
		h := math.Floor(whole / 3600)
		rest := int64(whole - h*3600)
		return strings.Replace(strings.Replace(fmt.Sprintf("%.0fh%dm%ds", h, rest/60, rest%60), "m0s", "m", 1), "h0m", "h", 1)
	}
	d := time.Duration(sec+0.5) * time.Second
	s := d.String()
	s = strings.Replace(s, "m0s", "m", 1)
	return strings.Replace(s, "h0m", "h", 1)
}

// maxDurationSeconds: the seconds time.Duration holds.
const maxDurationSeconds = float64(math.MaxInt64 / int64(time.Second))

// ParseDuration reads a duration of the plan (a wave's start, the
// estimated duration): time.ParseDuration's form, hours beyond its range
// included.
func ParseDuration(s string) (float64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), nil
	}
	var h, m, sec float64
	rest := s
	for _, unit := range []struct {
		suffix string
		v      *float64
	}{{"h", &h}, {"m", &m}, {"s", &sec}} {
		i := strings.Index(rest, unit.suffix)
		if i < 0 {
			continue
		}
		n, err := strconv.ParseUint(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		*unit.v, rest = float64(n), rest[i+1:]
	}
	if rest != "" || s == "" {
		return 0, fmt.Errorf("duration %q: want a form like 1h2m3s", s)
	}
	return h*3600 + m*60 + sec, nil
}

// compareKeys orders two policy sort keys element by element.
func compareKeys(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareValue(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func compareValue(a, b any) int {
	rank := func(v any) int {
		switch v.(type) {
		case int64, float64:
			return 0
		case string:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case int64:
		return cmpNum(float64(x), num(b))
	case float64:
		return cmpNum(x, num(b))
	case string:
		return strings.Compare(x, b.(string))
	}
	return 0
}

func num(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

func cmpNum(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ordered returns the indexes of pods in policy order (name breaks ties).
func ordered(r *facts.Rollout, d *engine.Decisions, idx []int) []int {
	out := append([]int(nil), idx...)
	sort.SliceStable(out, func(i, j int) bool {
		if c := compareKeys(d.Pods[out[i]].Order, d.Pods[out[j]].Order); c != 0 {
			return c < 0
		}
		return r.Pods[out[i]].Name < r.Pods[out[j]].Name
	})
	return out
}

// activeReplicaSets counts a Deployment's ReplicaSets with replicas or pods.
func activeReplicaSets(r *facts.Rollout) int {
	n := 0
	for _, rs := range r.ReplicaSets {
		if rs.Replicas > 0 || rs.Pods > 0 {
			n++
		}
	}
	return n
}

// recreateRefused says why the StatefulSet controller of the version
// planned for refuses updateStrategy Recreate, or "" when it takes it
// (v1.37+ with gate StatefulSetRecreateStrategy on, §8).
func recreateRefused(r *facts.Rollout) string {
	w := r.Workload
	if !atLeast137(r) {
		return fmt.Sprintf("spec.updateStrategy.type Recreate: Kubernetes %s has no Recreate strategy for StatefulSets (it arrived in v1.37, gate %s): its API server rejects the StatefulSet; use RollingUpdate or OnDelete, or plan with --kubernetes-version v1.37", r.KubernetesVersion, kubeversion.StatefulSetRecreateStrategy)
	}
	if !r.FeatureGates[kubeversion.StatefulSetRecreateStrategy] {
		return fmt.Sprintf("spec.updateStrategy.type Recreate needs feature gate %s, off by default in %s: the StatefulSet controller refuses %s/%s (Warning event UnknownStrategy) and replaces no pod; turn the gate on (kube-apiserver and kube-controller-manager, and --feature-gates %s=true here) or use RollingUpdate", kubeversion.StatefulSetRecreateStrategy, r.KubernetesVersion, w.Namespace, w.Name, kubeversion.StatefulSetRecreateStrategy)
	}
	return ""
}
