package native

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rollplan/rollplan/planner/engine"
	"github.com/rollplan/rollplan/planner/facts"
)

// answer is one eligibility answer, shared by every pod of a revision. Its
// Reasons slice has len == cap, so that a caller appending to one pod's
// reasons gets a copy instead of writing into the others'.
type answer struct {
	action  string
	reasons []string
}

// revision memoises, per pod revision and change list, what the Rego
// engine computes once: the eligibility answer and the InPlaceOnly blocking
// paths.
type revision struct {
	key revKey
	// changes: the change list the pods of this entry share. facts.Build
	// gives the pods of a revision one list, except pods whose revision is
	// not in the snapshot: their changes are their own (diffed from their
	// own spec) and may differ from pod to pod, so the memo is per list.
	changes []facts.Change
	ans     *answer
	// blocking: blockingPaths(changes), once.
	blocking              string
	blockingOK, blockDone bool
}

// revKey: a revision name and a change list (its backing array and length).
type revKey struct {
	name  string
	first *facts.Change
	n     int
}

func keyOf(p *facts.Pod) revKey {
	k := revKey{name: p.Revision}
	if len(p.Changes) > 0 {
		k.first, k.n = &p.Changes[0], len(p.Changes)
	}
	return k
}

// revisions indexes the pods' revisions and the listed ones (input.revisions).
type revisions struct {
	w      *workload
	byName map[revKey]*revision
	last   *revision // pods are sorted by name, so revisions come in runs
	// listed is rule revision_eligibility, built on first use as Rego
	// evaluates it: only once some pod asks for its eligibility.
	listed     map[string]*answer
	listedDone bool
}

func newRevisions(w *workload) *revisions {
	return &revisions{w: w, byName: make(map[revKey]*revision, len(w.r.Revisions)+2)}
}

// of returns the memo entry of p's revision and change list, registering it
// when p is the first pod of it. Pods without a revision are not memoised
// (nil).
func (rs *revisions) of(p *facts.Pod) *revision {
	if p.Revision == "" {
		return nil
	}
	k := keyOf(p)
	if rs.last != nil && rs.last.key == k {
		return rs.last
	}
	r, ok := rs.byName[k]
	if !ok {
		r = &revision{key: k, changes: p.Changes}
		rs.byName[k] = r
	}
	rs.last = r
	return r
}

// eligibility mirrors rule eligibility(pod): the listed revision's answer,
// else eligibility_of(pod.changes, pod.revision).
func (rs *revisions) eligibility(r *revision, p *facts.Pod) (*answer, error) {
	if !rs.listedDone {
		if err := rs.buildListed(); err != nil {
			return nil, err
		}
	}
	if r != nil && r.ans != nil {
		return r.ans, nil
	}
	a, ok := rs.listed[p.Revision]
	if !ok {
		changes := p.Changes
		if r != nil {
			changes = r.changes
		}
		a = rs.w.eligibilityOf(changes, p.Revision)
	}
	if r != nil {
		r.ans = a
	}
	return a, nil
}

// buildListed mirrors rule revision_eligibility, an object comprehension over
// input.revisions: a name listed twice with different answers is a conflict
// that fails the Rego evaluation, and is an error here too.
func (rs *revisions) buildListed() error {
	rs.listedDone = true
	rs.listed = make(map[string]*answer, len(rs.w.r.Revisions))
	for _, rev := range rs.w.r.Revisions {
		a := rs.w.eligibilityOf(rev.Changes, rev.Name)
		if old, ok := rs.listed[rev.Name]; ok {
			if old.action != a.action || !slices.Equal(old.reasons, a.reasons) {
				return fmt.Errorf("native default strategy: rule revision_eligibility for %s: revision %s is listed twice with different changes", rs.w.id, rev.Name)
			}
			continue
		}
		rs.listed[rev.Name] = a
	}
	return nil
}

// blocking returns blockingPaths of p's changes, once per change list.
func (rs *revisions) blocking(p *facts.Pod) (string, bool) {
	r := rs.of(p)
	if r == nil {
		return blockingPaths(p.Changes)
	}
	if !r.blockDone {
		r.blocking, r.blockingOK = blockingPaths(r.changes)
		r.blockDone = true
	}
	return r.blocking, r.blockingOK
}

// eligibilityOf mirrors eligibility_of(changes, revision): InPlace only when
// requested and every change can go in place.
func (w *workload) eligibilityOf(changes []facts.Change, revision string) *answer {
	if !w.inPlaceRequested || len(changes) == 0 {
		return &answer{engine.Recreate, w.changedReasons(changes, revision)}
	}
	blocked := 0
	for _, c := range changes {
		if !c.InPlace {
			blocked++
		}
	}
	if blocked == 0 {
		paths := make([]string, len(changes))
		for i, c := range changes {
			paths[i] = c.Path
		}
		return &answer{engine.InPlace, []string{"only " + strings.Join(paths, ", ") + " changed"}}
	}
	reasons := make([]string, 0, blocked)
	for _, c := range changes {
		if !c.InPlace {
			reasons = append(reasons, c.Path+" changed: "+c.Detail)
		}
	}
	return &answer{engine.Recreate, reasons}
}

// changedReasons mirrors changed_reasons(changes, revision).
func (w *workload) changedReasons(changes []facts.Change, revision string) []string {
	if len(changes) == 0 {
		return []string{"revision " + revision + " differs from " + w.r.Workload.UpdateRevision}
	}
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.Path + " changed"
	}
	return out
}
