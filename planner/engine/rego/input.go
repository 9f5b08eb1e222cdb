package rego

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/rollplan/rollplan/planner/facts"
)

// Interned key terms: building the input is the largest cost of a Rego run
// (about 5 µs per pod through InterfaceToValue), so pods are converted to
// AST directly and keys are shared.
var (
	kName, kUID, kRevision, kUpdated      = ast.StringTerm("name"), ast.StringTerm("uid"), ast.StringTerm("revision"), ast.StringTerm("updated")
	kOrdinal, kIndex, kNode, kZone        = ast.StringTerm("ordinal"), ast.StringTerm("index"), ast.StringTerm("node"), ast.StringTerm("zone")
	kPhase, kScheduled, kReady            = ast.StringTerm("phase"), ast.StringTerm("scheduled"), ast.StringTerm("ready")
	kReadySeconds, kAvailable             = ast.StringTerm("readySeconds"), ast.StringTerm("available")
	kUnavailableSeconds, kTerminating     = ast.StringTerm("unavailableSeconds"), ast.StringTerm("terminating")
	kTerminal, kRestarts, kSidecar        = ast.StringTerm("terminal"), ast.StringTerm("restarts"), ast.StringTerm("sidecarRestarts")
	kOwner, kLabels, kDeletionCost        = ast.StringTerm("owner"), ast.StringTerm("labels"), ast.StringTerm("deletionCost")
	kColocated, kReadyBucket, kCreatedBkt = ast.StringTerm("colocated"), ast.StringTerm("readyBucket"), ast.StringTerm("createdBucket")
	kChanges, kPDBs                       = ast.StringTerm("changes"), ast.StringTerm("pdbs")
	kPath, kClass, kInPlace, kDetail      = ast.StringTerm("path"), ast.StringTerm("class"), ast.StringTerm("inPlace"), ast.StringTerm("detail")
	kPods                                 = ast.StringTerm("pods")
)

// inputValue converts a rollout's facts to an AST value.
func inputValue(r *facts.Rollout) (ast.Value, error) {
	// Everything but the pods is small: convert it generically.
	head := *r
	head.Pods = nil
	v, err := ast.InterfaceToValue(head)
	if err != nil {
		return nil, err
	}
	obj := v.(ast.Object)
	pods := make([]*ast.Term, len(r.Pods))
	c := converter{changes: map[changesKey]*ast.Term{}, strings: map[string]*ast.Term{}}
	for i := range r.Pods {
		pods[i] = c.pod(&r.Pods[i])
	}
	obj.Insert(kPods, ast.ArrayTerm(pods...))
	return obj, nil
}

// converter builds the pods' terms of one input, sharing the terms that
// repeat from pod to pod (terms are immutable, so one input may hold a term
// many times, as OPA's own interned terms are held).
type converter struct {
	// changes: facts.Build gives the pods of one revision one shared change
	// list; each list is converted once. The cache is keyed by the list
	// itself, not by the revision name: pods whose revision is not in the
	// snapshot have changes of their own (diffed from their own spec), which
	// may differ between pods of one revision, and each pod must be judged
	// on its own.
	changes map[changesKey]*ast.Term
	// strings: the values few pods differ in (revision, node, zone, phase,
	// owner, label keys and values, PDB names), one term each.
	strings map[string]*ast.Term
}

// changesKey identifies a change list by its backing array and length.
type changesKey struct {
	first *facts.Change
	n     int
}

func keyOf(cs []facts.Change) changesKey {
	if len(cs) == 0 {
		return changesKey{}
	}
	return changesKey{&cs[0], len(cs)}
}

// str is the shared term of a repeated string.
func (c *converter) str(s string) *ast.Term {
	t, ok := c.strings[s]
	if !ok {
		t = ast.StringTerm(s)
		c.strings[s] = t
	}
	return t
}

func (c *converter) pod(p *facts.Pod) *ast.Term {
	k := keyOf(p.Changes)
	changes, ok := c.changes[k]
	if !ok {
		cs := make([]*ast.Term, len(p.Changes))
		for i, ch := range p.Changes {
			cs[i] = ast.ObjectTerm(
				ast.Item(kPath, ast.StringTerm(ch.Path)),
				ast.Item(kClass, ast.StringTerm(ch.Class)),
				ast.Item(kInPlace, ast.InternedTerm(ch.InPlace)),
				ast.Item(kDetail, ast.StringTerm(ch.Detail)),
			)
		}
		changes = ast.ArrayTerm(cs...)
		c.changes[k] = changes
	}
	labels := make([][2]*ast.Term, 0, len(p.Labels))
	for k, v := range p.Labels {
		labels = append(labels, ast.Item(c.str(k), c.str(v)))
	}
	pdbs := make([]*ast.Term, len(p.PDBs))
	for i, n := range p.PDBs {
		pdbs[i] = c.str(n)
	}
	return ast.ObjectTerm(
		ast.Item(kName, ast.StringTerm(p.Name)),
		ast.Item(kUID, ast.StringTerm(p.UID)),
		ast.Item(kRevision, c.str(p.Revision)),
		ast.Item(kUpdated, ast.InternedTerm(p.Updated)),
		ast.Item(kOrdinal, ast.IntNumberTerm(p.Ordinal)),
		ast.Item(kIndex, ast.IntNumberTerm(p.Index)),
		ast.Item(kNode, c.str(p.Node)),
		ast.Item(kZone, c.str(p.Zone)),
		ast.Item(kPhase, c.str(p.Phase)),
		ast.Item(kScheduled, ast.InternedTerm(p.Scheduled)),
		ast.Item(kReady, ast.InternedTerm(p.Ready)),
		ast.Item(kReadySeconds, ast.IntNumberTerm(int(p.ReadySeconds))),
		ast.Item(kAvailable, ast.InternedTerm(p.Available)),
		ast.Item(kUnavailableSeconds, ast.IntNumberTerm(int(p.UnavailableSeconds))),
		ast.Item(kTerminating, ast.InternedTerm(p.Terminating)),
		ast.Item(kTerminal, ast.InternedTerm(p.Terminal)),
		ast.Item(kRestarts, ast.IntNumberTerm(p.Restarts)),
		ast.Item(kSidecar, ast.IntNumberTerm(p.SidecarRestarts)),
		ast.Item(kOwner, c.str(p.Owner)),
		ast.Item(kLabels, ast.ObjectTerm(labels...)),
		ast.Item(kDeletionCost, ast.IntNumberTerm(p.DeletionCost)),
		ast.Item(kColocated, ast.IntNumberTerm(p.Colocated)),
		ast.Item(kReadyBucket, ast.IntNumberTerm(p.ReadyBucket)),
		ast.Item(kCreatedBkt, ast.IntNumberTerm(p.CreatedBucket)),
		ast.Item(kChanges, changes),
		ast.Item(kPDBs, ast.ArrayTerm(pdbs...)),
	)
}
