package render

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/internal/plural"
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
// use at snapshot time through every wave's use (plan.Wave.Budgets: the
// most in use while the wave runs), the limit as a horizontal line, and a
// dot on each wave this budget binds (plan.Wave.Binding).
func budgetCharts(wp *plan.WorkloadPlan, spans []span, ts timeScale) []budgetChart {
	out := make([]budgetChart, 0, len(wp.Budgets))
	for bi, b := range wp.Budgets {
		c := budgetChart{Name: b.Name, Type: b.Type, Source: b.Source, Limit: b.Limit, Peak: b.InUse, Advisory: b.Advisory}
		use := make([]int, len(wp.Waves))
		for i := range wp.Waves {
			wb, ok := waveBudget(&wp.Waves[i], bi, b.Name)
			switch {
			case !ok:
				use[i] = b.InUse // a plan without the numbers: nothing drawn but the snapshot's
			case wb.Uncounted:
				c.Uncounted = true
			default:
				use[i] = wb.InUse
			}
			c.Peak = max(c.Peak, use[i])
		}
		c.MaxY = max(c.Limit, c.Peak, 1)
		// A fifth of headroom: the limit line shows above a use at the limit.
		y := func(v int) float64 { return round1(chartBase - float64(v)/(float64(c.MaxY)*1.2)*(chartBase-chartTop)) }
		var path strings.Builder
		fmt.Fprintf(&path, "M0 %s", fmtNum(y(b.InUse)))
		for i, s := range spans {
			fmt.Fprintf(&path, " H%s V%s H%s", fmtNum(ts.x(s.start)), fmtNum(y(use[i])), fmtNum(ts.x(s.end)))
			if bd := wp.Waves[i].Binding; bd != nil && bd.Budget == b.Name {
				c.Binds = append(c.Binds, bindMark{
					X: pctOf(ts.x(s.end)), Y: pctOf(y(use[i]) / chartHeight * 1000),
					Title: fmt.Sprintf("binds wave %d: %s", wp.Waves[i].Index, bd.Reason),
				})
			}
		}
		if len(spans) == 0 {
			path.WriteString(" H1000")
		}
		c.Path = path.String()
		c.LimitY = y(c.Limit)
		c.Title = fmt.Sprintf("%s (%s): limit %d, %d in use at snapshot time, at most %d while a wave runs", b.Name, b.Type, b.Limit, b.InUse, c.Peak)
		if c.Uncounted {
			c.Title = fmt.Sprintf("%s (%s): limit %d, %d in use at snapshot time; not counted wave by wave (the scheduler places the new pods)", b.Name, b.Type, b.Limit, b.InUse)
		}
		if len(c.Binds) > 0 {
			c.Title += fmt.Sprintf("; binds %d of %s", len(c.Binds), plural.Count(len(wp.Waves), "wave", "waves"))
		}
		out = append(out, c)
	}
	return out
}

// waveBudget is budget bi (named name) of wave w, if the wave has it.
func waveBudget(w *plan.Wave, bi int, name string) (plan.WaveBudget, bool) {
	if bi < len(w.Budgets) && w.Budgets[bi].Name == name {
		return w.Budgets[bi], true
	}
	for _, wb := range w.Budgets {
		if wb.Name == name {
			return wb, true
		}
	}
	return plan.WaveBudget{}, false
}

// bindMark is a dot on a budget chart where the budget binds a wave (at
// the wave's end, as a percentage of the chart).
type bindMark struct {
	X, Y  string
	Title string
}

func pctOf(v float64) string { return fmtNum(v/10) + "%" }

func fmtNum(v float64) string { return fmt.Sprint(round1(v)) }

// waveBinding is what held the wave's next pods out, in words, with what
// it waited for ("" when nothing did).
func waveBinding(w *plan.Wave) string {
	b := w.Binding
	if b == nil {
		return ""
	}
	var parts []string
	if b.Reason != "" {
		parts = append(parts, "held by "+b.Reason)
	}
	if len(b.WaitsFor) > 0 {
		parts = append(parts, "waits for "+strings.Join(b.WaitsFor, ", "))
	}
	return strings.Join(parts, "; ")
}
