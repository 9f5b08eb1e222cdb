package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// ResolveBudgets turns the engine's budgets into the plan's: one Budget per
// limit (unavailable, surge, groups), with what is in use at snapshot
// time (AtSnapshot). The gate resolves budgets through it too, from the
// budgets decision point alone.
func ResolveBudgets(r *facts.Rollout, budgets []engine.Budget) []Budget {
	out := []Budget{}
	for _, b := range budgets {
		add := func(limit int, typ string) {
			rb := Budget{Name: b.Name, Limit: limit, Type: typ, GroupBy: b.GroupBy, PDB: b.PDB, Advisory: b.Advisory, Source: b.Source}
			rb.InUse = AtSnapshot.Use(r, rb)
			out = append(out, rb)
		}
		if b.MaxUnavailable != nil {
			add(*b.MaxUnavailable, "unavailable")
		}
		if b.MaxSurge != nil {
			add(*b.MaxSurge, "surge")
		}
		if b.MaxGroups != nil {
			add(*b.MaxGroups, "groups")
		}
	}
	return out
}

// Count is the budget ledger over live facts: what a budget holds in a
// workload's current state. The plan (Budget.InUse), the executor's
// re-check before each write and the gate's admission check all count
// through it; they look at the same facts with different questions, and
// each difference between them is one field here, set by the caller.
// The zero Count takes the facts as they are.
type Count struct {
	// Down: pods counted unavailable whatever the facts say: the pod a
	// write or a disruption is for, those written or admitted moments ago
	// that the facts do not show yet, and (the gate) daemon pods in flight
	// since rollplan cordoned their node. nil: none.
	Down func(*facts.Pod) bool
	// Surplus: pods the workload no longer wants, which its controller
	// removes whatever the budgets (the gate): they count neither as
	// unavailable nor as present. nil: none.
	Surplus func(*facts.Pod) bool
	// Missing: the pods the workload should have and lacks (its desired
	// replicas minus the pods not terminating) count as unavailable on
	// every budget, and as one more group on a groups budget (a pod that
	// is not there is in a group nobody knows): a deleted pod frees no
	// budget until its replacement is available. The live checks count
	// them; the plan counts only a StatefulSet's replicas without a pod,
	// on its ungrouped budget, as upstream counts replicas (§4.7).
	Missing bool
	// HoleOnly: a terminating or terminal pod counts only through the hole
	// it leaves (Missing), not also as an unavailable pod of its own (the
	// gate: its controller has already let it go).
	HoleOnly bool
	// GroupsByPDB: a groups budget with a PDB counts only the groups of
	// the pods the PDB selects, as an unavailable budget counts its pods
	// (the gate); otherwise a groups budget counts every unavailable pod.
	GroupsByPDB bool
	// AgainstDesired: a budget that CountsAgainstDesired holds desired
	// replicas minus available pods, as upstream counts a Deployment, so
	// a surge pod still starting costs nothing (the plan, the gate).
	AgainstDesired bool
	// Pod: the pod whose disruption is checked (the gate). Its own budget
	// of a StatefulSet its controller updates from the top
	// (UpdatesFromTheTop) then counts only the replicas above it, and it.
	Pod *facts.Pod
	// ReservedElsewhere: per PDB, disruptions of other workloads' pods it
	// selects that were admitted and that the facts do not count yet (the
	// gate). They count on top of UnavailableElsewhere, on a groups budget
	// too.
	ReservedElsewhere map[string]int
}

// AtSnapshot counts what the plan reports in use at snapshot time.
var AtSnapshot = Count{AgainstDesired: true}

// Use is what budget b holds in r.
func (c Count) Use(r *facts.Rollout, b Budget) int {
	n, _ := c.count(r, b, false)
	return n
}

// Held is what budget b holds in r, and the pods that count against it
// (the largest group's, for a budget per group), in the facts' order.
func (c Count) Held(r *facts.Rollout, b Budget) (int, []string) {
	return c.count(r, b, true)
}

// Present counts the pods that count as available, and the pods missing
// (the desired replicas minus the pods not terminating; surplus pods are
// neither).
func (c Count) Present(r *facts.Rollout) (available, missing int) {
	active := 0
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Terminating || p.Terminal || c.surplus(p) {
			continue
		}
		active++
		if !c.down(p) {
			available++
		}
	}
	return available, max(0, r.Workload.Replicas-active)
}

func (c *Count) surplus(p *facts.Pod) bool {
	return c.Surplus != nil && c.Surplus(p)
}

// down: the pod counts as unavailable.
func (c *Count) down(p *facts.Pod) bool {
	return !c.surplus(p) && (!p.Available || (c.Down != nil && c.Down(p)))
}

func (c *Count) count(r *facts.Rollout, b Budget, names bool) (int, []string) {
	w := &r.Workload
	if b.Type == "surge" {
		switch {
		case w.Kind == "Deployment":
			active := 0
			for i := range r.Pods {
				if !r.Pods[i].Terminating && !r.Pods[i].Terminal {
					active++
				}
			}
			return max(0, active-w.Replicas), nil
		case w.Kind == "DaemonSet" && b.Limit > 0:
			// A surge DaemonSet counts each node whose old pod is kept
			// beside a replacement that is not available yet (§3.7).
			return surgeInUse(r), nil
		}
		return 0, nil
	}
	available, missing := c.Present(r)
	if !c.Missing {
		missing = 0
	}
	reserved := 0
	if b.PDB != "" {
		reserved = c.ReservedElsewhere[b.PDB]
	}
	elsewhere := UnavailableElsewhere(r, b.PDB) + reserved
	if c.Pod != nil && c.Pod.Index >= 0 && UpdatesFromTheTop(r) && !b.Advisory && b.Type == "unavailable" && b.GroupBy == "" && b.PDB == "" {
		// The controller replaces a pod whenever no replica above it is
		// unavailable, whatever the pods below (§4.5): its own budget
		// counts the same way, as the simulator does (stsAbove).
		return c.above(r, names)
	}
	if c.AgainstDesired && CountsAgainstDesired(r, b.Type, b.GroupBy, b.PDB) {
		n := max(0, w.Replicas-available) + elsewhere
		if !names {
			return n, nil
		}
		_, pods := c.pods(r, b, true)
		return n, pods
	}
	if b.Type == "groups" {
		n, pods := c.groups(r, b, names)
		if missing > 0 {
			n++ // a pod that is not there is in a group nobody knows
		}
		// The PDB's pods elsewhere are in no group of the workload, but
		// disruptions admitted there count against it all the same.
		return n + reserved, pods
	}
	n, pods := c.pods(r, b, names)
	if !c.Missing && w.Kind == "StatefulSet" && b.GroupBy == "" && b.PDB == "" {
		// A replica with no pod at all (deleted, not recreated yet) is
		// unavailable too, as upstream counts replicas (§4.7).
		n += missingReplicas(r)
	}
	return missing + elsewhere + n, pods
}

// counted: pod p counts against budget b.
func (c *Count) counted(p *facts.Pod, b Budget) bool {
	if !c.down(p) || (c.HoleOnly && (p.Terminating || p.Terminal)) {
		return false
	}
	if b.Type == "groups" && !c.GroupsByPDB {
		return true
	}
	return b.PDB == "" || slices.Contains(p.PDBs, b.PDB)
}

// groups: the groups of b with a pod counted, and those pods.
func (c *Count) groups(r *facts.Rollout, b Budget, names bool) (int, []string) {
	var pods []string
	groups := map[string]bool{}
	for i := range r.Pods {
		if p := &r.Pods[i]; c.counted(p, b) {
			groups[engine.GroupKey(p, b.GroupBy)] = true
			if names {
				pods = append(pods, p.Name)
			}
		}
	}
	return len(groups), pods
}

// pods: the pods counted in b's largest group (the first in group key
// order among equals), and their names.
func (c *Count) pods(r *facts.Rollout, b Budget, names bool) (int, []string) {
	perGroup := map[string]int{}
	for i := range r.Pods {
		if p := &r.Pods[i]; c.counted(p, b) {
			perGroup[engine.GroupKey(p, b.GroupBy)]++
		}
	}
	best, group := 0, ""
	for g, n := range perGroup {
		if n > best || (n == best && g < group) {
			best, group = n, g
		}
	}
	if !names {
		return best, nil
	}
	pods := []string{}
	for i := range r.Pods {
		if p := &r.Pods[i]; best > 0 && c.counted(p, b) && engine.GroupKey(p, b.GroupBy) == group {
			pods = append(pods, p.Name)
		}
	}
	return best, pods
}

// above: the replicas above c.Pod (index greater, missing ones included)
// that are unavailable or going, plus c.Pod itself, and their names.
func (c *Count) above(r *facts.Rollout, names bool) (int, []string) {
	n, seen := 1, map[int]bool{}
	var pods []string
	for i := range r.Pods {
		p := &r.Pods[i]
		if p.Index < 0 || p.Index >= r.Workload.Replicas {
			continue
		}
		seen[p.Index] = true
		if p.Index > c.Pod.Index && (p.Terminating || p.Terminal || c.down(p)) {
			n++
			if names {
				pods = append(pods, p.Name)
			}
		}
	}
	// Missing replicas above, not replaced yet: counted, not walked (the
	// work must not grow with spec.replicas).
	if above := r.Workload.Replicas - 1 - c.Pod.Index; above > 0 {
		n += above
		for i := range seen {
			if i > c.Pod.Index {
				n--
			}
		}
	}
	return n, pods
}

// UpdatesFromTheTop: a StatefulSet its controller rolls with Parallel pod
// management and MaxUnavailableStatefulSet off. That controller deletes
// the highest out-of-date ordinal unless a replica above it is
// unavailable, and waits for nothing else (§4.5; the simulator's stsAbove).
func UpdatesFromTheTop(r *facts.Rollout) bool {
	w := &r.Workload
	return w.Kind == "StatefulSet" && !w.Managed && w.PodManagementPolicy == "Parallel" && !r.FeatureGates["MaxUnavailableStatefulSet"]
}

// ledger is the budget ledger the simulator keeps as its waves start and
// finish pods: what Count counts from live facts, kept step by step. A
// unit is a pod, or the slot of a pod that should exist; it counts in
// one group per budget, and only in the budgets that count it (place).
type ledger struct {
	budgets []Budget
	// Per budget: group → unavailable units, group → units in flight
	// (unavailable or surging; no empty groups), surge units in flight,
	// and the PDB's unavailable pods outside the workload.
	unavail   []map[string]int
	inFlight  []map[string]int
	surgeUse  []int
	elsewhere []int
}

func newLedger(r *facts.Rollout, budgets []Budget) ledger {
	n := len(budgets)
	l := ledger{budgets: budgets, unavail: make([]map[string]int, n), inFlight: make([]map[string]int, n), surgeUse: make([]int, n), elsewhere: make([]int, n)}
	for bi, b := range budgets {
		l.unavail[bi], l.inFlight[bi] = map[string]int{}, map[string]int{}
		for _, pdb := range r.PDBs {
			if b.PDB != "" && pdb.Name == b.PDB {
				l.elsewhere[bi] = pdb.UnavailableElsewhere
			}
		}
	}
	return l
}

// place fills in, per budget, pod p's group and whether the budget counts
// it: only the pods its PDB selects, and none when the pod is outside the
// replicas (a condemned StatefulSet pod, §4.7).
func (l *ledger) place(p *facts.Pod, outside bool, groups []string, relevant []bool) {
	for bi, b := range l.budgets {
		groups[bi] = engine.GroupKey(p, b.GroupBy)
		relevant[bi] = !outside && (b.PDB == "" || slices.Contains(p.PDBs, b.PDB))
	}
}

// down: n units become unavailable, and so in flight.
func (l *ledger) down(groups []string, relevant []bool, n int) {
	for bi := range l.budgets {
		if relevant[bi] {
			l.unavail[bi][groups[bi]] += n
			l.inFlight[bi][groups[bi]] += n
		}
	}
}

// surging: a unit becomes a surge unit, and so in flight (unless it is
// unavailable already).
func (l *ledger) surging(groups []string, relevant []bool, unavailable bool) {
	for bi := range l.budgets {
		if !relevant[bi] {
			continue
		}
		if !unavailable {
			l.inFlight[bi][groups[bi]]++
		}
		if l.budgets[bi].Type == "surge" {
			l.surgeUse[bi]++
		}
	}
}

// release takes units out of the counts they are in: unavailable of them
// unavailable (a pod is one unit, a run of missing replicas several), or
// one surging.
func (l *ledger) release(groups []string, relevant []bool, unavailable int, surging bool) {
	for bi := range l.budgets {
		if !relevant[bi] {
			continue
		}
		g := groups[bi]
		flight := unavailable
		if flight == 0 && surging {
			flight = 1
		}
		l.unavail[bi][g] -= unavailable
		if flight > 0 {
			l.inFlight[bi][g] -= flight
			if l.inFlight[bi][g] == 0 {
				delete(l.inFlight[bi], g)
			}
		}
		if surging && l.budgets[bi].Type == "surge" {
			l.surgeUse[bi]--
		}
	}
}

// unavailableIn: what budget bi holds in group g (with its PDB's pods
// elsewhere).
func (l *ledger) unavailableIn(bi int, g string) int {
	return l.unavail[bi][g] + l.elsewhere[bi]
}

// groupsInFlight: budget bi's groups with a unit in flight.
func (l *ledger) groupsInFlight(bi int) int {
	return len(l.inFlight[bi])
}

// over: budget bi holds more than its limit (in any group it has
// counted).
func (l *ledger) over(bi int) bool {
	b := l.budgets[bi]
	switch b.Type {
	case "unavailable":
		for g := range l.unavail[bi] {
			if l.unavailableIn(bi, g) > b.Limit {
				return true
			}
		}
	case "surge":
		return l.surgeUse[bi] > b.Limit
	case "groups":
		return l.groupsInFlight(bi) > b.Limit
	}
	return false
}

// missingReplicas: a StatefulSet's indexes 0..replicas-1 that no pod holds.
func missingReplicas(r *facts.Rollout) int {
	held := map[int]bool{}
	for _, p := range r.Pods {
		if p.Index >= 0 && p.Index < r.Workload.Replicas {
			held[p.Index] = true
		}
	}
	return r.Workload.Replicas - len(held)
}

// CountsAgainstDesired: a budget of type typ counts as upstream counts a
// Deployment's unavailability, desired replicas minus available pods (§2),
// so a surge pod still starting costs nothing: an ungrouped unavailability
// budget of a Deployment, or a PDB budget whose PDB selects every pod of
// the Deployment (its expected count is then the Deployment's replicas).
func CountsAgainstDesired(r *facts.Rollout, typ, groupBy, pdb string) bool {
	if r.Workload.Kind != "Deployment" || typ != "unavailable" || groupBy != "" {
		return false
	}
	for _, p := range r.Pods {
		if pdb != "" && !slices.Contains(p.PDBs, pdb) {
			return false
		}
	}
	return true
}

// UnavailableElsewhere: the unavailable pods PodDisruptionBudget pdb
// selects outside the workload (0 without one).
func UnavailableElsewhere(r *facts.Rollout, pdb string) int {
	n := 0
	if pdb != "" {
		for _, x := range r.PDBs {
			if x.Name == pdb {
				n += x.UnavailableElsewhere
			}
		}
	}
	return n
}

// surgeInUse: the nodes a surge DaemonSet counts as surge pods at snapshot
// time: an old pod kept beside a replacement that is not available yet.
func surgeInUse(r *facts.Rollout) int {
	n := 0
	for o, nw := range surgeReplacements(r) {
		if keptBeside(&r.Pods[o]) && !r.Pods[nw].Available {
			n++
		}
	}
	return n
}

// countAbove adds d to the item's index in the per-index counts (stsAbove).
func (s *podSim) countAbove(ii int, d int) {
	it := &s.items[ii]
	pos, _ := slices.BinarySearch(s.indexes, it.index)
	for bi, b := range s.budgets {
		if !it.relevant[bi] || b.Type != "unavailable" {
			continue
		}
		f := s.above[bi][it.groups[bi]]
		if f == nil {
			f = &fenwick{n: len(s.indexes), t: map[int]int{}}
			s.above[bi][it.groups[bi]] = f
		}
		f.add(pos, d)
	}
}

// unavailableAbove: unavailable items of the budget's group whose index is
// above the item's (stsAbove).
func (s *podSim) unavailableAbove(bi int, ii int) int {
	it := &s.items[ii]
	f := s.above[bi][it.groups[bi]]
	if f == nil {
		return 0
	}
	pos, _ := slices.BinarySearch(s.indexes, it.index)
	return f.sum(len(s.indexes)-1) - f.sum(pos)
}

// fits reports whether starting the item now keeps every budget, and if
// not, which budget binds (its index) and why, with the numbers the check
// used.
func (s *podSim) fits(ii int, surge bool) (bool, int, string) {
	it := &s.items[ii]
	for bi, b := range s.budgets {
		if !it.relevant[bi] || b.Advisory {
			continue
		}
		g := it.groups[bi]
		switch b.Type {
		case "unavailable":
			if surge {
				continue
			}
			if s.stsAbove {
				// §4.5: the pod goes when nothing above it is unavailable.
				if above := s.unavailableAbove(bi, ii); above+s.elsewhere[bi]+1 > b.Limit {
					return false, bi, s.aboveReason(bi, ii, above)
				}
				continue
			}
			cur := s.unavailableIn(bi, g)
			add := 1
			if it.unavailable {
				add = 0
				if s.upstreamSTS {
					add = 1 + s.extra[bi]
				}
			}
			if cur+add > b.Limit {
				return false, bi, s.unavailableReason(bi, ii, cur, add)
			}
		case "surge":
			if surge && s.surgeUse[bi]+1 > b.Limit {
				return false, bi, fmt.Sprintf("%s %d/%d: %d surge pod(s) in flight, and %s would make %d", b.Name, s.surgeUse[bi], b.Limit, s.surgeUse[bi], s.items[ii].name, s.surgeUse[bi]+1)
			}
		case "groups":
			if n := s.groupsInFlight(bi); s.inFlight[bi][g] == 0 && n+1 > b.Limit {
				return false, bi, fmt.Sprintf("%s %d/%d: %d group(s) by %s in flight, and %s (%s) would make %d", b.Name, n, b.Limit, n, strings.TrimPrefix(b.GroupBy, "label:"), s.items[ii].name, groupName(b.GroupBy, g), n+1)
			}
		}
	}
	return true, -1, ""
}

// unavailableReason: why unavailable budget bi keeps item ii out, cur
// being what it holds in the item's group and add what the item would
// cost.
func (s *podSim) unavailableReason(bi, ii, cur, add int) string {
	b, it := s.budgets[bi], &s.items[ii]
	where := ""
	if b.GroupBy != "" {
		where = " in " + groupName(b.GroupBy, it.groups[bi])
	}
	if b.PDB != "" {
		where += " selected by PodDisruptionBudget " + b.PDB
	}
	if n := s.elsewhere[bi]; n > 0 {
		where += fmt.Sprintf(" (%d outside the workload)", n)
	}
	cost := ""
	if add > 1 {
		cost = fmt.Sprintf(" (replacing an unavailable pod spends budget too, %d already this wave, §4.7)", add-1)
	}
	return fmt.Sprintf("%s %d/%d: %d pod(s)%s unavailable, and %s would make %d%s", b.Name, cur, b.Limit, cur, where, it.name, cur+add, cost)
}

// aboveReason: why budget bi keeps item ii out of a StatefulSet its
// controller updates from the top (stsAbove).
func (s *podSim) aboveReason(bi, ii, above int) string {
	b, it := s.budgets[bi], &s.items[ii]
	n := above + s.elsewhere[bi]
	return fmt.Sprintf("%s %d/%d: %d replica(s) above %s unavailable, and it would make %d (the StatefulSet controller replaces a pod only while no replica above it is unavailable, §4.5)", b.Name, n, b.Limit, above, it.name, n+1)
}

// groupName prints the group g of a budget grouped by by for a sentence:
// zone "a", node "n1", label app="x".
func groupName(by, g string) string {
	what := strings.TrimPrefix(by, "label:")
	if what != by {
		return fmt.Sprintf("label %s=%s", what, strconv.Quote(g))
	}
	return what + " " + strconv.Quote(g)
}

// inUse: what budget bi holds now, as its limit counts it: its fullest
// group's unavailable pods (with its PDB's pods elsewhere), its surge pods,
// or its groups in flight.
func (l *ledger) inUse(bi int) int {
	b := l.budgets[bi]
	switch b.Type {
	case "unavailable":
		n := 0
		for g := range l.unavail[bi] {
			n = max(n, l.unavail[bi][g])
		}
		return n + l.elsewhere[bi]
	case "surge":
		return l.surgeUse[bi]
	case "groups":
		return l.groupsInFlight(bi)
	}
	return 0
}

// use: every budget's use now, in the plan's order.
func (l *ledger) use() []WaveBudget {
	out := make([]WaveBudget, len(l.budgets))
	for bi, b := range l.budgets {
		out[bi] = WaveBudget{Name: b.Name, Limit: b.Limit, InUse: l.inUse(bi)}
	}
	return out
}

// fenwick counts per position 0..n-1 (a binary indexed tree, sparse).
type fenwick struct {
	n int
	t map[int]int
}

func (f *fenwick) add(pos, d int) {
	for i := pos + 1; i <= f.n; i += i & -i {
		f.t[i] += d
	}
}

// sum of positions 0..pos.
func (f *fenwick) sum(pos int) int {
	n := 0
	for i := pos + 1; i > 0; i -= i & -i {
		n += f.t[i]
	}
	return n
}
