package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// errUndefined marks an answer the Rego default leaves undefined (the Rego
// engine then fails with "rule budgets is undefined").
var errUndefined = errors.New("undefined")

// budgets mirrors rule budgets: array.concat(strategy_budgets, pdb_budgets),
// then the checks rego's decode makes (checkBudget). The Rego engine decodes
// an empty answer to an empty, non-nil slice.
func (w *workload) budgets() ([]engine.Budget, error) {
	out, err := w.strategyBudgets()
	if err != nil {
		return nil, fmt.Errorf("native default strategy: rule budgets for %s: %w", w.id, err)
	}
	// pdb_budgets: enforced when managed (rollplan evicts through the
	// Eviction API), advisory otherwise (rule pdb_advisory).
	for _, p := range w.r.PDBs {
		out = append(out, engine.Budget{
			Name:           "pdb/" + p.Name,
			MaxUnavailable: intp(p.MaxUnavailable),
			PDB:            p.Name,
			Advisory:       !w.managed,
			Source:         p.Source,
		})
	}
	for _, b := range out {
		if err := engine.ValidateBudget(b); err != nil {
			return nil, fmt.Errorf("native default strategy: rule budgets for %s: %w", w.id, err)
		}
	}
	return out, nil
}

func intp(v int) *int { return &v }

func unavailableBudget(n int, source string) engine.Budget {
	return engine.Budget{Name: "maxUnavailable", MaxUnavailable: intp(n), Source: source}
}

func surgeBudget(n int, source string) engine.Budget {
	return engine.Budget{Name: "maxSurge", MaxSurge: intp(n), Source: source}
}

// strategyBudgets mirrors rule strategy_budgets.
func (w *workload) strategyBudgets() ([]engine.Budget, error) {
	st := w.r.Workload.Strategy
	if st.Type == "OnDelete" && !w.managed {
		// unmanaged_on_delete: nobody rolls the workload.
		return []engine.Budget{}, nil
	}
	switch w.kind {
	case kindDeployment:
		return w.deploymentBudgets()
	case kindDaemonSet:
		return w.daemonSetBudgets()
	case kindStatefulSet:
		return w.statefulSetBudgets()
	}
	return []engine.Budget{}, nil
}

// deploymentBudgets mirrors rule deployment_budgets (upstream
// ResolveFenceposts, MaxUnavailable, MaxSurge).
func (w *workload) deploymentBudgets() ([]engine.Budget, error) {
	wl := &w.r.Workload
	st := wl.Strategy
	d := wl.Replicas
	switch st.Type {
	case "Recreate":
		return []engine.Budget{
			unavailableBudget(d, "spec.strategy.type=Recreate: all pods at once"),
			surgeBudget(0, "spec.strategy.type=Recreate: no surge"),
		}, nil
	case "RollingUpdate":
	default:
		return nil, fmt.Errorf("%w for a Deployment with strategy %q", errUndefined, st.Type)
	}
	rawSurge, rawUnavailable := st.MaxSurge, st.MaxUnavailable
	// resolve_fenceposts: nil counts as 0; surge rounds up, unavailable down.
	surge, err := scaled(valueOr(rawSurge, 0), d, true)
	if err != nil {
		return nil, fmt.Errorf("maxSurge: %w", err)
	}
	unavailable, err := scaled(valueOr(rawUnavailable, 0), d, false)
	if err != nil {
		return nil, fmt.Errorf("maxUnavailable: %w", err)
	}
	resolved := unavailable
	if surge == 0 && unavailable == 0 { // fencepost
		resolved = 1
	}
	// deployment_max_unavailable: 0 when D = 0, else capped at D.
	maxUnavailable := min(resolved, d)
	if d == 0 {
		maxUnavailable = 0
	}
	surgeSource, err := describe(sourcePath(st.MaxSurgeSource, "spec.strategy.rollingUpdate.maxSurge"), rawSurge, d, "ceil", 0)
	if err != nil {
		return nil, err
	}
	base, err := describe(sourcePath(st.MaxUnavailableSource, "spec.strategy.rollingUpdate.maxUnavailable"), rawUnavailable, d, "floor", 0)
	if err != nil {
		return nil, err
	}
	// deployment_unavailable_source
	unavailableSource := base
	switch {
	case d == 0:
		unavailableSource = base + "; 0 replicas: 0"
	case surge == 0 && unavailable == 0:
		unavailableSource = base + "; maxSurge and maxUnavailable both 0: 1"
	case resolved > d:
		unavailableSource = base + "; capped at " + strconv.Itoa(d) + " replicas"
	}
	return []engine.Budget{
		unavailableBudget(maxUnavailable, unavailableSource),
		surgeBudget(surge, surgeSource),
	}, nil
}

// daemonSetBudgets mirrors rule daemonset_budgets (upstream
// updatedDesiredNodeCounts): both round up; both 0 with desired > 0 → 1.
func (w *workload) daemonSetBudgets() ([]engine.Budget, error) {
	wl := &w.r.Workload
	st := wl.Strategy
	if st.Type != "RollingUpdate" && st.Type != "OnDelete" {
		return nil, fmt.Errorf("%w for a DaemonSet with strategy %q", errUndefined, st.Type)
	}
	desired := wl.Replicas
	rawSurge, rawUnavailable := st.MaxSurge, st.MaxUnavailable
	surge, err := scaled(valueOr(rawSurge, 0), desired, true)
	if err != nil {
		return nil, fmt.Errorf("maxSurge: %w", err)
	}
	unavailable, err := scaled(valueOr(rawUnavailable, 0), desired, true)
	if err != nil {
		return nil, fmt.Errorf("maxUnavailable: %w", err)
	}
	surgeSource, err := describe(sourcePath(st.MaxSurgeSource, "spec.updateStrategy.rollingUpdate.maxSurge"), rawSurge, desired, "ceil", 0)
	if err != nil {
		return nil, err
	}
	unavailableSource, err := describe(sourcePath(st.MaxUnavailableSource, "spec.updateStrategy.rollingUpdate.maxUnavailable"), rawUnavailable, desired, "ceil", 0)
	if err != nil {
		return nil, err
	}
	maxUnavailable := unavailable
	if desired > 0 && surge == 0 && unavailable == 0 {
		// daemonset_max_unavailable, daemonset_unavailable_source
		maxUnavailable = 1
		unavailableSource += "; maxSurge and maxUnavailable both 0: 1"
	}
	return []engine.Budget{
		unavailableBudget(maxUnavailable, unavailableSource),
		surgeBudget(surge, surgeSource),
	}, nil
}

// statefulSetBudgets mirrors rule statefulset_budgets: updateStrategy
// Recreate (v1.37, gate StatefulSetRecreateStrategy) takes every pod at
// once; gate off and not managed, the controller updates one pod at a time;
// otherwise round down, nil → 1, at least 1.
func (w *workload) statefulSetBudgets() ([]engine.Budget, error) {
	wl := &w.r.Workload
	st := wl.Strategy
	if st.Type == "Recreate" {
		return []engine.Budget{unavailableBudget(wl.Replicas, "spec.updateStrategy.type=Recreate: every old pod at once")}, nil
	}
	gate := w.r.FeatureGates["MaxUnavailableStatefulSet"]
	if !gate && !w.managed && st.Type == "RollingUpdate" {
		return []engine.Budget{unavailableBudget(1, "MaxUnavailableStatefulSet off: one pod at a time")}, nil
	}
	raw := st.MaxUnavailable
	unavailable, err := scaled(valueOr(raw, 1), wl.Replicas, false)
	if err != nil {
		return nil, fmt.Errorf("maxUnavailable: %w", err)
	}
	source, err := describe(sourcePath(st.MaxUnavailableSource, "spec.updateStrategy.rollingUpdate.maxUnavailable"), raw, wl.Replicas, "floor", 1)
	if err != nil {
		return nil, err
	}
	if unavailable < 1 {
		source += "; at least 1"
	}
	return []engine.Budget{unavailableBudget(max(unavailable, 1), source)}, nil
}

// ---------------------------------------------------------------------------
// Int-or-percent values (reference §1.1). Facts send an int or a "N%"
// string (validated by Go) or nil; hand-built facts may hold any JSON number.

// valueOr mirrors value_or(v, d).
func valueOr(v any, d int) any {
	if v == nil {
		return d
	}
	return v
}

// sourcePath mirrors source_path: Go's <field>Source when set, else the
// fallback.
func sourcePath(source, fallback string) string {
	if source != "" {
		return source
	}
	return fallback
}

// number reports v as an int when it is a number (is_number); an error when
// it is a number the budgets cannot hold (the Rego engine then fails to
// decode the budget).
func number(v any) (n int, ok bool, err error) {
	switch x := v.(type) {
	case int:
		return x, true, nil
	case int8:
		return int(x), true, nil
	case int16:
		return int(x), true, nil
	case int32:
		return int(x), true, nil
	case int64:
		return int(x), true, nil
	case uint8:
		return int(x), true, nil
	case uint16:
		return int(x), true, nil
	case uint32:
		return int(x), true, nil
	case uint:
		if x > math.MaxInt {
			return 0, true, fmt.Errorf("%d is out of range", x)
		}
		return int(x), true, nil
	case uint64:
		if x > math.MaxInt {
			return 0, true, fmt.Errorf("%d is out of range", x)
		}
		return int(x), true, nil
	case float32:
		return floatInt(float64(x))
	case float64:
		return floatInt(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i), true, nil
		}
		f, err := x.Float64()
		if err != nil {
			return 0, true, fmt.Errorf("%s is not a number: %w", x, err)
		}
		return floatInt(f)
	}
	return 0, false, nil
}

func floatInt(f float64) (int, bool, error) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, true, fmt.Errorf("%v is not an integer", f)
	}
	return int(f), true, nil
}

// percent mirrors percent(v): to_number(trim_suffix(v, "%")) for a string
// ending in "%". Facts only send "N%" with N a whole number; other forms
// to_number accepts ("1e2%", "2.5%") are rejected here.
func percent(s string) (int, error) {
	if !strings.HasSuffix(s, "%") {
		return 0, fmt.Errorf("%w: %q is neither a number nor a percentage", errUndefined, s)
	}
	p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil {
		return 0, fmt.Errorf("percentage %q: %w", s, err)
	}
	return p, nil
}

// scaled mirrors scaled_up (up) and scaled_down: ints unchanged (never
// capped); percents ceil or floor(p × total / 100), i.e. div_floor(p × total
// (+ 99), 100) with div_floor(a, b) = (a - a % b) / b and Go's truncated %,
// which is Rego's. Rego computes with big integers: a result that does not
// fit an int is an error here, as its budget is when the Rego engine decodes it.
func scaled(v any, total int, up bool) (int, error) {
	if n, ok, err := number(v); ok {
		return n, err
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%w: %v (%T) is neither a number nor a percentage", errUndefined, v, v)
	}
	p, err := percent(s)
	if err != nil {
		return 0, err
	}
	a, ok := mulAdd(p, total, up)
	if !ok {
		return 0, fmt.Errorf("%s of %d is out of range", s, total)
	}
	return (a - a%100) / 100, nil
}

// mulAdd is p × total (+ 99 when up), reporting overflow.
func mulAdd(p, total int, up bool) (int, bool) {
	a := p * total
	if p != 0 && (a/p != total || (p == -1 && total == math.MinInt)) {
		return 0, false
	}
	if up {
		if a > math.MaxInt-99 {
			return 0, false
		}
		a += 99
	}
	return a, true
}

// describe mirrors describe(path, v, total, rounding, dflt): how a budget
// value was resolved, e.g. "<path>=25% of 10 = 2.5, floor: 2" (the exact
// product as facts.Hundredths prints it), or "<path> unset: default 1"
// for nil, and for a value Go defaulted (a path with facts.DefaultSuffix).
func describe(path string, v any, total int, rounding string, dflt int) (string, error) {
	if v == nil {
		return path + " unset: default " + strconv.Itoa(dflt), nil
	}
	if n, ok, err := number(v); ok {
		if name, defaulted := strings.CutSuffix(path, facts.DefaultSuffix); defaulted {
			return name + " unset: default " + strconv.Itoa(n), err
		}
		return path + "=" + strconv.Itoa(n), err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %v (%T) is neither a number nor a percentage", errUndefined, v, v)
	}
	n, err := scaled(s, total, rounding == "ceil")
	if err != nil {
		return "", err
	}
	p, _ := percent(s) // scaled parsed it
	a, _ := mulAdd(p, total, false)
	return path + "=" + s + " of " + strconv.Itoa(total) + " = " + facts.Hundredths(a) + ", " + rounding + ": " + strconv.Itoa(n), nil
}
