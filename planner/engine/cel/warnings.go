package cel

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Warnings are what loading the policies found worth saying but not fatal:
// answers composition ignores (overrideWarnings). cmd/rollplan prints them.
func (e *Engine) Warnings() []string { return slices.Clone(e.warnings) }

// overrideWarnings: order, pacing, node preparation and analysis come from the first
// matching policy (in cs order: by metadata.name) that defines them, so a
// later policy's answer is silently dropped for the workloads both match.
// One warning per pair of policies that define one of these points and may
// match one workload; matchConstraints decide that when the policies load.
func overrideWarnings(cs []*compiled) []string {
	var out []string
	for i, first := range cs {
		for _, later := range cs[i+1:] {
			var points []string
			if first.orderAll != nil && later.orderAll != nil {
				points = append(points, "spec.order")
			}
			if first.pacing != nil && later.pacing != nil {
				points = append(points, "spec.pacing")
			}
			if first.nodePreparation != nil && later.nodePreparation != nil {
				points = append(points, "spec.nodePreparation")
			}
			if first.analysis != nil && later.analysis != nil {
				points = append(points, "spec.analysis")
			}
			if len(points) == 0 || !mayOverlap(first, later) {
				continue
			}
			verb := "is"
			if len(points) > 1 {
				verb = "are"
			}
			msg := fmt.Sprintf("%s: %s %s ignored for the workloads %s also matches", later.policy.where(), andList(points), verb, first.policy.where())
			if covers(first, later) {
				msg = fmt.Sprintf("%s: %s %s never used: %s matches every workload this one matches", later.policy.where(), andList(points), verb, first.policy.where())
			}
			out = append(out, msg+": that policy defines "+andList(points)+" too and comes first by metadata.name (one policy answers order, pacing, node preparation and analysis)")
		}
	}
	return out
}

func andList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// mayOverlap: some workload could match both policies. Kinds and
// namespaces must intersect, and the label selectors must not contradict
// each other on a key.
func mayOverlap(a, b *compiled) bool {
	ma, mb := constraints(a), constraints(b)
	if !intersect(ma.Kinds, mb.Kinds) || !intersect(ma.Namespaces, mb.Namespaces) {
		return false
	}
	reqs := map[string][]labels.Requirement{}
	for _, s := range []labels.Selector{a.selector, b.selector} {
		rs, _ := s.Requirements()
		for _, r := range rs {
			reqs[r.Key()] = append(reqs[r.Key()], r)
		}
	}
	for _, rs := range reqs {
		if !satisfiable(rs) {
			return false
		}
	}
	return true
}

// covers: every workload b matches, a matches too.
func covers(a, b *compiled) bool {
	ma, mb := constraints(a), constraints(b)
	subset := func(of, s []string) bool {
		if len(of) == 0 {
			return true
		}
		if len(s) == 0 {
			return false
		}
		for _, x := range s {
			if !slices.Contains(of, x) {
				return false
			}
		}
		return true
	}
	if !subset(ma.Kinds, mb.Kinds) || !subset(ma.Namespaces, mb.Namespaces) {
		return false
	}
	ra, _ := a.selector.Requirements()
	rb, _ := b.selector.Requirements()
	for _, r := range ra {
		if !slices.ContainsFunc(rb, func(x labels.Requirement) bool { return x.Equal(r) }) {
			return false
		}
	}
	return true
}

func constraints(c *compiled) MatchConstraints {
	if mc := c.policy.Spec.MatchConstraints; mc != nil {
		return *mc
	}
	return MatchConstraints{}
}

// intersect: empty lists match everything.
func intersect(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// satisfiable: some value of one label (or its absence) meets all of rs.
// Gt and Lt are taken as satisfiable: the check only has to avoid warning
// about policies that can never meet.
func satisfiable(rs []labels.Requirement) bool {
	var allowed []string // nil: any value
	constrained, exists, absent := false, false, false
	var excluded []string
	for _, r := range rs {
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			vals := r.ValuesUnsorted()
			if constrained {
				vals = slices.DeleteFunc(vals, func(v string) bool { return !slices.Contains(allowed, v) })
			}
			allowed, constrained, exists = vals, true, true
		case selection.NotIn, selection.NotEquals:
			excluded = append(excluded, r.ValuesUnsorted()...)
		case selection.Exists, selection.GreaterThan, selection.LessThan:
			exists = true
		case selection.DoesNotExist:
			absent = true
		}
	}
	if exists && absent {
		return false
	}
	if constrained {
		return slices.ContainsFunc(allowed, func(v string) bool { return !slices.Contains(excluded, v) })
	}
	return true
}
