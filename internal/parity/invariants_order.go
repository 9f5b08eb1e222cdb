package parity

import (
	"fmt"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
)

// compareOrder compares two policy sort keys element by element as the
// contract defines them: numbers (numerically) < strings < anything else;
// a shorter key that is a prefix sorts first.
func compareOrder(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareOrderValue(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func orderNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func compareOrderValue(a, b any) int {
	rank := func(v any) int {
		if _, ok := orderNumber(v); ok {
			return 0
		}
		if _, ok := v.(string); ok {
			return 1
		}
		return 2
	}
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch ra {
	case 0:
		x, _ := orderNumber(a)
		y, _ := orderNumber(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	case 1:
		return strings.Compare(a.(string), b.(string))
	case 2:
		// Booleans: false < true (engines reject them today).
		x, xok := a.(bool)
		y, yok := b.(bool)
		if xok && yok && x != y {
			if !x {
				return -1
			}
			return 1
		}
	}
	return 0
}

// podLess: policy order, pod name breaking ties.
func (c *checker) podCompare(i, j int) int {
	if k := compareOrder(c.d.Pods[i].Order, c.d.Pods[j].Order); k != 0 {
		return k
	}
	return strings.Compare(c.r.Pods[i].Name, c.r.Pods[j].Name)
}

// deletionCompare: the order in which a ReplicaSet deletes its pods.
// Upstream ranks first by §2.10 rules 1–4 (unassigned, phase Pending <
// Unknown < Running, not Ready, lower pod-deletion-cost), whatever the
// policy; the policy order decides the rest (the default strategy's order
// is upstream's ranking itself, so for its pods this is podCompare). Pods
// at the update revision have no order decision: only the rules rank them.
func (c *checker) deletionCompare(i, j int) int {
	a, b := &c.r.Pods[i], &c.r.Pods[j]
	for _, d := range [][2]int{
		{b2i(a.Scheduled), b2i(b.Scheduled)},
		{facts.PhaseOrdinal(a.Phase), facts.PhaseOrdinal(b.Phase)},
		{b2i(a.Ready), b2i(b.Ready)},
		{a.DeletionCost, b.DeletionCost},
	} {
		if d[0] != d[1] {
			return d[0] - d[1]
		}
	}
	return c.podCompare(i, j)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *checker) key(i int) string {
	return fmt.Sprintf("%v", c.d.Pods[i].Order)
}

// order: a pod-by-pod plan acts on pods in ascending policy order, across
// waves and inside each. The packer starts, in each wave, a prefix of the
// pods still waiting (once one pod does not fit, every later pod waits, the
// DaemonSet's budget-free replacements of unavailable pods included; with
// the default order those come first anyway), so the concatenation of all
// waves is sorted. The one exception, documented in planner/plan/pods.go,
// is what a controller deletes whatever the rollout (controllerDelete):
// those Deletes are not ordered by the policy; the upstream rules check
// when they happen (dsEvict, the budget replay). Pods whose node rollplan
// already cordoned for the DaemonSet (preparedNode) go first too.
func (c *checker) order() {
	prev := -1
	prevWave := 0
	for wi, w := range c.wp.Waves {
		for ai := range w.Actions {
			a := &w.Actions[ai]
			i, ok := c.byName[a.Pod]
			if !ok || c.controllerDelete(a, &c.r.Pods[i]) || c.preparedNode(&c.r.Pods[i]) {
				continue
			}
			// Phase 1 of a v1.37 Parallel update replaces unavailable old
			// pods in the sync that reaches them, whatever comes before.
			// So does a rollout rollplan drives, whatever the policy's order.
			if (c.stsPhase1() || c.driven()) && !c.r.Pods[i].Available {
				continue
			}
			if prev >= 0 && c.podCompare(prev, i) > 0 {
				c.add(RuleOrder, wi+1, a.Pod, "planned after pod %s (wave %d, order key %s) but its order key %s sorts first", c.r.Pods[prev].Name, prevWave, c.key(prev), c.key(i))
			}
			prev, prevWave = i, wi+1
		}
	}
}

// complete: every pod that needs the update (not updated, in scope, not
// terminating) is in a wave unless the plan says why not.
func (c *checker) complete() {
	placed := map[string]bool{}
	for _, w := range c.wp.Waves {
		for _, a := range w.Actions {
			placed[a.Pod] = true
		}
	}
	var missing []string
	for i, p := range c.r.Pods {
		if !p.Updated && c.d.Pods[i].InScope && !p.Terminating && !placed[p.Name] {
			missing = append(missing, p.Name)
		}
	}
	stalls := c.hasNote("the rollout stalls")
	switch {
	case len(missing) > 0 && !stalls:
		c.add(RuleIncomplete, 0, missing[0], "%d pod(s) that need the update are in no wave (%s) and no note says the rollout stalls", len(missing), strings.Join(missing, ", "))
	case len(missing) == 0 && stalls:
		c.add(RuleIncomplete, 0, "", "the plan says the rollout stalls but every pod is placed")
	}
}
