package parity

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/plan"
)

// Upstream-fidelity rules: properties of kube-controller-manager v1.36 that
// a plan of a native rollout must show (reference: shared/reference/
// k8s-rollout-semantics.md). Unlike the budget rules they are about what
// upstream does first, not only about what must never happen.
const (
	// RuleSTSCondemned: a StatefulSet pod whose ordinal is at or beyond
	// start + replicas is updated; upstream deletes such condemned pods
	// (scale-down, §4.3/§4.4), it never recreates them.
	RuleSTSCondemned = "sts-condemned"
	// RuleSTSMissing: a StatefulSet pod is deleted while a replica the
	// controller must create first (a missing ordinal) is not available
	// yet and the budget counts it (§4.3 placeholders are unavailable; §4.7
	// counts every replica; OrderedReady creates it and waits).
	RuleSTSMissing = "sts-missing"
	// RuleSTSProgress: upstream's first sync of a native StatefulSet
	// deletes a pod (§4.5: the highest-ordinal pod not at the update
	// revision, unless an unavailable updated or terminating pod above it
	// blocks; §4.7: budget − unavailable pods from the top) that the plan
	// does not start in a first wave at 0s.
	RuleSTSProgress = "sts-progress"
	// RuleDSEvict: a DaemonSet pod on a node with an untolerated NoExecute
	// taint (shouldContinueRunning false) is not deleted at once; upstream's
	// manage() deletes it before and whatever the rolling update (§3.4).
	RuleDSEvict = "ds-evict"
	// RuleDSProgress: a surge DaemonSet plan stalls on an available pod of
	// a node that should no longer run it; upstream deletes such pods while
	// more nodes hold an available pod than should run one (§3.7 rule 3).
	RuleDSProgress = "ds-progress"
	// RuleDSReplaced: a native surge DaemonSet's old pod whose node already
	// runs its replacement (one pod of each, surgeReplaced) is not deleted
	// when upstream deletes it: once the replacement is available, at once
	// when the old pod is not Ready or terminated (manage §3.4,
	// rollingUpdate §3.7), by the planner's own estimates.
	RuleDSReplaced = "ds-replaced"
	// RuleDSSurge: the first wave at 0s of a native surge DaemonSet does not
	// create as many pods as upstream's first sync (§3.7): one on every
	// node whose only pod is an unavailable old one (budget-free), plus
	// min(nodes whose only pod is an available old one, maxSurge − nodes at
	// surge), nodes at surge being those whose Ready old pod is kept beside
	// a replacement that is not available yet. Checked when nothing else
	// decides: every pod in scope, no node with excess pods, no budget but
	// the strategy's.
	RuleDSSurge = "ds-surge"
)

// native: a rollout the workload's controller drives (not rollplan).
func (c *checker) native() bool { return !c.r.Workload.Managed }

// stsMissing lists the replica indexes without a pod (not-yet-created
// placeholders upstream).
func (c *checker) stsMissing() []int {
	w := c.r.Workload
	if w.Kind != "StatefulSet" {
		return nil
	}
	have := map[int]bool{}
	for _, p := range c.r.Pods {
		have[p.Index] = true
	}
	var out []int
	for i := 0; i < w.Replicas; i++ {
		if !have[i] {
			out = append(out, i)
		}
	}
	return out
}

// stsCountsMissing: upstream makes the rollout wait for missing replicas
// (OrderedReady stops at the first, §4.4; the gate counts them, §4.7;
// rollplan's own budget for a managed set must count the pods its
// controller creates). Native Parallel with the gate off only blocks on
// pods above the next one to replace (§4.5), so no claim there.
func (c *checker) stsCountsMissing() bool {
	w := c.r.Workload
	gateOffParallel := !c.r.FeatureGates[GateMaxUnavailableStatefulSet] && !w.Managed && w.PodManagementPolicy == "Parallel"
	return w.Kind == "StatefulSet" && !gateOffParallel
}

// upstream runs the fidelity rules on a pod-by-pod plan.
func (c *checker) upstream() {
	switch c.r.Workload.Kind {
	case "StatefulSet":
		c.stsCondemned()
		c.stsProgress()
	case "DaemonSet":
		c.dsEvict()
		c.dsProgress()
		c.dsReplaced()
		c.dsSurge()
	}
}

func (c *checker) stsCondemned() {
	w := c.r.Workload
	for wi, wave := range c.wp.Waves {
		for _, a := range wave.Actions {
			i, ok := c.byName[a.Pod]
			if !ok || a.Type == plan.ActionDelete {
				continue
			}
			if p := c.r.Pods[i]; p.Index >= w.Replicas {
				c.add(RuleSTSCondemned, wi+1, a.Pod, "%s of ordinal %d, beyond the %d replicas: upstream deletes condemned pods (scale-down) and never recreates them", a.Type, p.Ordinal, w.Replicas)
			}
		}
	}
}

// stsProgress: what upstream's first sync deletes for a native
// RollingUpdate StatefulSet, when that is determined by the snapshot.
func (c *checker) stsProgress() {
	w := c.r.Workload
	if !c.native() || w.Strategy.Type != "RollingUpdate" {
		return
	}
	byIndex := map[int]int{}
	condemned := false // any pod beyond the replicas, terminating ones included (§4.4: monotonic stops on them)
	for i, p := range c.r.Pods {
		if p.Index >= 0 && p.Index < w.Replicas {
			byIndex[p.Index] = i
		} else if p.Index >= w.Replicas {
			condemned = true
		}
	}
	unavailable := len(c.stsMissing())
	for idx := 0; idx < w.Replicas; idx++ {
		if i, ok := byIndex[idx]; ok && (!c.r.Pods[i].Available || c.r.Pods[i].Terminating) {
			unavailable++
		}
	}
	monotonic := w.PodManagementPolicy != "Parallel"
	if monotonic && (unavailable > 0 || condemned) {
		return // processReplica / processCondemned stop the sync first (§4.4)
	}
	var expect []int
	if !c.r.FeatureGates[GateMaxUnavailableStatefulSet] {
		// §4.5: highest ordinal first; one deletion, or wait.
		for idx := w.Replicas - 1; idx >= w.Strategy.Partition; idx-- {
			i, ok := byIndex[idx]
			if !ok {
				break // created at the update revision, not available yet: wait
			}
			p := &c.r.Pods[i]
			if p.Terminating {
				break
			}
			if !p.Updated {
				expect = append(expect, i)
				break
			}
			if !p.Available {
				break
			}
		}
	} else {
		budget := -1
		for _, b := range c.wp.Budgets {
			if b.Name == "maxUnavailable" && b.Type == "unavailable" && b.PDB == "" && b.GroupBy == "" {
				budget = b.Limit
			}
		}
		if budget < 0 {
			return
		}
		if c.stsPhase1() {
			// §8: phase 1 deletes every unavailable old pod from the
			// partition up, whatever the budget; phase 2 available old
			// pods, highest first, while budget − unavailable allows.
			left := budget - unavailable
			for idx := w.Replicas - 1; idx >= w.Strategy.Partition; idx-- {
				i, ok := byIndex[idx]
				if !ok || c.r.Pods[i].Updated || c.r.Pods[i].Terminating {
					continue
				}
				if !c.r.Pods[i].Available {
					expect = append(expect, i)
				} else if left > 0 {
					expect = append(expect, i)
					left--
				}
			}
		} else {
			if unavailable >= budget {
				return
			}
			// §4.7: budget − unavailable deletions from the top, skipping pods
			// at the update revision and terminating ones.
			for idx := w.Replicas - 1; idx >= w.Strategy.Partition && len(expect) < budget-unavailable; idx-- {
				if i, ok := byIndex[idx]; ok && !c.r.Pods[i].Updated && !c.r.Pods[i].Terminating {
					expect = append(expect, i)
				}
			}
		}
	}
	first := map[string]bool{}
	if len(c.wp.Waves) > 0 && c.starts[0] == 0 {
		for _, a := range c.wp.Waves[0].Actions {
			first[a.Pod] = true
		}
	}
	for _, i := range expect {
		p := &c.r.Pods[i]
		if !c.d.Pods[i].InScope || first[p.Name] {
			continue
		}
		gate := "off (§4.5)"
		if c.r.FeatureGates[GateMaxUnavailableStatefulSet] {
			gate = "on (§4.7)"
		}
		c.add(RuleSTSProgress, 1, p.Name, "upstream's first sync deletes %s (ordinal %d; MaxUnavailableStatefulSet %s, %s), but the plan does not start it in a first wave at 0s (%d waves%s)", p.Name, p.Ordinal, gate, w.PodManagementPolicy, len(c.wp.Waves), noteSuffix(c.wp.Notes))
	}
}

func noteSuffix(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return "; notes: " + strings.Join(notes, "; ")
}

// dsEvict: pods on nodes that should not continue running the DaemonSet go
// at once (manage, §3.4), in the first wave at 0s.
func (c *checker) dsEvict() {
	cont := map[string]bool{}
	known := map[string]bool{}
	for _, n := range c.r.Nodes {
		cont[n.Name], known[n.Name] = n.ShouldContinueRunning, true
	}
	first := map[string]bool{}
	if len(c.wp.Waves) > 0 && c.starts[0] == 0 {
		for _, a := range c.wp.Waves[0].Actions {
			if a.Type == plan.ActionDelete {
				first[a.Pod] = true
			}
		}
	}
	for i, p := range c.r.Pods {
		if p.Updated || p.Terminating || !c.d.Pods[i].InScope || !known[p.Node] || cont[p.Node] || first[p.Name] {
			continue
		}
		c.add(RuleDSEvict, 1, p.Name, "node %s has a NoExecute taint the DaemonSet does not tolerate: upstream's manage() deletes the pod at once, whatever the budget; the plan %s", p.Node, c.placement(p.Name))
	}
}

// placement says where a pod is in the plan.
func (c *checker) placement(pod string) string {
	for wi, w := range c.wp.Waves {
		for _, a := range w.Actions {
			if a.Pod == pod {
				return fmt.Sprintf("has it in wave %d (%s) as %s", wi+1, w.Start, a.Type)
			}
		}
	}
	return "never acts on it" + noteSuffix(c.wp.Notes)
}

// dsProgress: a native surge DaemonSet does not stall on an available pod of a
// node that should no longer run it (upstream deletes those once more
// nodes hold an available pod than should run one, §3.7 rule 3; in the
// planner's own model every node that should run a pod ends available).
func (c *checker) dsProgress() {
	surge := false
	for _, b := range c.wp.Budgets {
		if b.Type == "surge" && !b.Advisory && b.Limit > 0 && b.PDB == "" {
			surge = true
		}
	}
	if !surge || !c.native() || !c.hasNote("the rollout stalls") {
		return
	}
	runs := map[string]bool{}
	for _, n := range c.r.Nodes {
		runs[n.Name] = n.ShouldRun
	}
	placed := map[string]bool{}
	for _, w := range c.wp.Waves {
		for _, a := range w.Actions {
			placed[a.Pod] = true
		}
	}
	var stuck []string
	for i, p := range c.r.Pods {
		if !p.Updated && !p.Terminating && p.Available && c.d.Pods[i].InScope && !runs[p.Node] && !placed[p.Name] {
			stuck = append(stuck, p.Name)
		}
	}
	sort.Strings(stuck)
	if len(stuck) > 0 {
		c.add(RuleDSProgress, 0, stuck[0], "surge DaemonSet: the plan stalls with available pod(s) %s on node(s) that should no longer run the DaemonSet; upstream deletes them once more nodes hold an available pod than should run one (§3.7)", strings.Join(stuck, ", "))
	}
}

// dsReplaced: when a native surge DaemonSet's old pods beside their
// replacement go (RuleDSReplaced). With rolling pacing the plan steps at
// every availability, so the Delete starts exactly then; with wave pacing
// not before.
func (c *checker) dsReplaced() {
	if !c.native() {
		return
	}
	olds := make([]int, 0, len(c.replaced))
	for o := range c.replaced {
		olds = append(olds, o)
	}
	sort.Ints(olds)
	for _, o := range olds {
		p, np := &c.r.Pods[o], &c.r.Pods[c.replaced[o]]
		if !c.d.Pods[o].InScope {
			continue
		}
		want, why := 0.0, fmt.Sprintf("%s is not Ready, so manage deletes it at once", p.Name)
		if keptBeside(p) {
			want, why = c.availableAgain(np), fmt.Sprintf("%s is available at %gs (the planner's estimate)", np.Name, c.availableAgain(np))
		}
		wave, start, typ := -1, 0.0, ""
		for wi, w := range c.wp.Waves {
			for _, a := range w.Actions {
				if a.Pod == p.Name {
					wave, start, typ = wi, c.starts[wi], a.Type
				}
			}
		}
		switch {
		case wave < 0:
			c.add(RuleDSReplaced, 0, p.Name, "node %s already runs %s at the update revision: upstream deletes the old pod %s once %s; the plan %s", p.Node, np.Name, p.Name, why, c.placement(p.Name))
		case typ != plan.ActionDelete:
			c.add(RuleDSReplaced, wave+1, p.Name, "node %s already runs %s at the update revision: upstream deletes the old pod %s and creates nothing, but the plan has a %s", p.Node, np.Name, p.Name, typ)
		case start < want:
			c.add(RuleDSReplaced, wave+1, p.Name, "the plan deletes old pod %s at %gs, before upstream does: %s", p.Name, start, why)
		case start > want && c.d.Pacing != engine.PacingWave:
			c.add(RuleDSReplaced, wave+1, p.Name, "the plan deletes old pod %s at %gs, after upstream does: %s", p.Name, start, why)
		}
	}
}

// dsSurge: the pods upstream's first sync of a native surge DaemonSet
// creates, against the Recreates of the plan's first wave at 0s
// (RuleDSSurge).
func (c *checker) dsSurge() {
	if !c.native() || !c.surgeMode() {
		return
	}
	maxSurge := -1
	for _, b := range c.wp.Budgets {
		switch {
		case b.Advisory:
		case b.PDB != "" || b.GroupBy != "" || (b.Type != "surge" && b.Type != "unavailable"):
			return // a policy's own budget decides too
		case b.Type == "surge":
			maxSurge = b.Limit
		}
	}
	for i, p := range c.r.Pods {
		if !p.Updated && !c.d.Pods[i].InScope {
			return
		}
	}
	runs := map[string]bool{}
	for _, n := range c.r.Nodes {
		runs[n.Name] = n.ShouldRun
	}
	allowed, candidates, surging := 0, 0, 0
	for node, n := range c.dsNodes() {
		switch {
		case len(n.olds) > 1 || len(n.news) > 1:
			return // manage keeps the oldest pods: the snapshot does not say which
		case len(n.olds) == 1 && len(n.news) == 1:
			if keptBeside(&c.r.Pods[n.olds[0]]) && !c.r.Pods[n.news[0]].Available {
				surging++
			}
		case len(n.olds) == 1 && (len(c.r.Nodes) == 0 || runs[node]):
			if c.r.Pods[n.olds[0]].Available {
				candidates++
			} else {
				allowed++
			}
		}
	}
	want := allowed + min(candidates, max(0, maxSurge-surging))
	got := 0
	if len(c.wp.Waves) > 0 && c.starts[0] == 0 {
		for _, a := range c.wp.Waves[0].Actions {
			if _, replaced := c.replaced[c.byName[a.Pod]]; a.Type == plan.ActionRecreate && !replaced {
				got++ // a Recreate of a replaced pod is RuleDSReplaced's
			}
		}
	}
	if got != want {
		c.add(RuleDSSurge, 1, "", "upstream's first sync creates %d pod(s): %d for unavailable old pods (budget-free) + min(%d available old pods, maxSurge %d − %d node(s) at surge); the plan's first wave at 0s recreates %d (%d waves%s)", want, allowed, candidates, maxSurge, surging, got, len(c.wp.Waves), noteSuffix(c.wp.Notes))
	}
}

// driven: rollplan apply drives the rollout (a managed OnDelete
// StatefulSet or DaemonSet, or a managed Deployment updated in place:
// its plan scales no ReplicaSet), so an unavailable old pod is replaced
// first, whatever the budget.
func (c *checker) driven() bool {
	w := c.r.Workload
	if !w.Managed {
		return false
	}
	if w.Kind != "Deployment" {
		return w.Strategy.Type == "OnDelete"
	}
	for _, wave := range c.wp.Waves {
		for _, a := range wave.Actions {
			if a.Type == plan.ActionScaleRS {
				return false
			}
		}
	}
	return true
}
