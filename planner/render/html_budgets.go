package render

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
)

// chartHeight is the height of a budget chart; values are drawn between
// chartTop and chartBase.
const (
	chartHeight = 60.0
	chartTop    = 6.0
	chartBase   = 54.0
)

// budgetCharts draws each budget's use over time: a step line from the
// use at snapshot time through every wave's use, and the limit as a
// horizontal line.
func budgetCharts(wp *plan.WorkloadPlan, det *plan.Detail, spans []span, ts timeScale) []budgetChart {
	use, estimated := waveBudgetUse(wp, det)
	out := make([]budgetChart, 0, len(wp.Budgets))
	for bi, b := range wp.Budgets {
		c := budgetChart{Name: b.Name, Type: b.Type, Source: b.Source, Limit: b.Limit, Peak: b.InUse, Advisory: b.Advisory, Estimated: estimated}
		for _, u := range use {
			c.Peak = max(c.Peak, u[bi])
		}
		c.MaxY = max(c.Limit, c.Peak, 1)
		// A fifth of headroom: the limit line shows above a use at the limit.
		y := func(v int) float64 { return round1(chartBase - float64(v)/(float64(c.MaxY)*1.2)*(chartBase-chartTop)) }
		var path strings.Builder
		fmt.Fprintf(&path, "M0 %s", fmtNum(y(b.InUse)))
		for i, s := range spans {
			fmt.Fprintf(&path, " H%s V%s H%s", fmtNum(ts.x(s.start)), fmtNum(y(use[i][bi])), fmtNum(ts.x(s.end)))
		}
		if len(spans) == 0 {
			path.WriteString(" H1000")
		}
		c.Path = path.String()
		c.LimitY = y(c.Limit)
		c.Title = fmt.Sprintf("%s (%s): limit %d, %d in use at snapshot time, at most %d during the rollout", b.Name, b.Type, b.Limit, b.InUse, c.Peak)
		if estimated {
			c.Title += " (estimated from the waves' actions)"
		}
		out = append(out, c)
	}
	return out
}

func fmtNum(v float64) string { return fmt.Sprint(round1(v)) }

// waveBudgetUse is, per wave and per budget of wp (in wp.Budgets' order),
// how much of the budget is in use while the wave runs, and whether the
// numbers are estimates.
//
// The plan does not carry these numbers yet, so they are estimated from
// the waves' actions: the use at snapshot time plus what the wave's own
// actions take (an unavailable budget: the pods it takes down, not the
// surge ones; a surge budget: its surge pods and ReplicaSet scale-ups
// the surge ones; a surge budget: its surge pods; a groups budget: the
// groups (engine.GroupKey of the pods the details know) its pods are in).
// It is a lower bound: what earlier waves still hold is not counted.
func waveBudgetUse(wp *plan.WorkloadPlan, det *plan.Detail) ([][]int, bool) {
	pods := map[string]*facts.Pod{}
	if det != nil && det.Facts != nil {
		for i := range det.Facts.Pods {
			pods[det.Facts.Pods[i].Name] = &det.Facts.Pods[i]
		}
	}
	out := make([][]int, len(wp.Waves))
	for i, w := range wp.Waves {
		var down, surge int
		var named []string
		for _, a := range w.Actions {
			switch {
			case a.Pod != "" && a.Surge:
				surge++
			case a.Pod != "":
				down++
			case a.Type == plan.ActionScaleRS && a.From != nil && a.To != nil && *a.To < *a.From:
				// A scale-down waits for the pods a scale-up brought:
				// the biggest step, not their sum, is what is down at once.
				down = max(down, *a.From-*a.To)
			}
			if a.Pod != "" {
				named = append(named, a.Pod)
			} else if a.Type == plan.ActionScaleRS {
				named = append(named, a.Pods...)
			}
		}
		row := make([]int, len(wp.Budgets))
		for bi, b := range wp.Budgets {
			switch b.Type {
			case "surge":
				row[bi] = b.InUse + surge
			case "groups":
				groups := map[string]bool{}
				for _, name := range named {
					if p, ok := pods[name]; ok {
						groups[engine.GroupKey(p, b.GroupBy)] = true
					}
				}
				row[bi] = b.InUse + len(groups)
			default:
				row[bi] = b.InUse + down
			}
		}
		out[i] = row
	}
	return out, true
}

// waveBinding is the budget that decides when a wave starts, in words,
// when the plan says ("" until it does).
func waveBinding(_ *plan.Wave) string { return "" }
