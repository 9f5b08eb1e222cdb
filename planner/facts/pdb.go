package facts

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// pdbs attaches the PodDisruptionBudgets that select the rollout's pods,
// resolved as the disruption controller does (percentages round up against
// the expected pod count).
func (b *builder) pdbs(r *Rollout) {
	mine := map[string]int{}
	for i, p := range r.Pods {
		mine[p.Name] = i
	}
	for _, pdb := range b.snap.PDBs {
		if pdb.Namespace != r.Workload.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("PodDisruptionBudget %s/%s: spec.selector: %v; ignored", pdb.Namespace, pdb.Name, err))
			continue
		}
		selectedMine, elsewhere, elsewhereUnavailable := 0, 0, 0
		for i := range r.Pods {
			if sel.Matches(labels.Set(r.Pods[i].Labels)) {
				selectedMine++
				r.Pods[i].PDBs = append(r.Pods[i].PDBs, pdb.Name)
			}
		}
		if selectedMine == 0 {
			continue
		}
		for _, p := range b.snap.Pods {
			if p.Namespace != pdb.Namespace || p.DeletionTimestamp != nil {
				continue
			}
			if _, ok := mine[p.Name]; ok || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			elsewhere++
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					ready = true
				}
			}
			if !ready {
				elsewhereUnavailable++
			}
		}
		expected := r.Workload.Replicas + elsewhere
		f := PDB{Name: pdb.Name, ExpectedPods: expected, UnavailableElsewhere: elsewhereUnavailable}
		switch {
		case pdb.Spec.MaxUnavailable != nil:
			v, err := IntOrPercent(pdb.Spec.MaxUnavailable, "spec.maxUnavailable", true)
			if err != nil {
				r.Warnings = append(r.Warnings, fmt.Sprintf("PodDisruptionBudget %s/%s: %v; ignored", pdb.Namespace, pdb.Name, err))
				continue
			}
			f.MaxUnavailable = min(Scale(v, expected, true), expected)
			f.Source = fmt.Sprintf("PodDisruptionBudget %s: maxUnavailable=%s", pdb.Name, describePDB(v, expected))
		case pdb.Spec.MinAvailable != nil:
			v, err := IntOrPercent(pdb.Spec.MinAvailable, "spec.minAvailable", true)
			if err != nil {
				r.Warnings = append(r.Warnings, fmt.Sprintf("PodDisruptionBudget %s/%s: %v; ignored", pdb.Namespace, pdb.Name, err))
				continue
			}
			f.MaxUnavailable = max(0, expected-Scale(v, expected, true))
			f.Source = fmt.Sprintf("PodDisruptionBudget %s: minAvailable=%s", pdb.Name, describePDB(v, expected))
		default:
			continue
		}
		r.PDBs = append(r.PDBs, f)
	}
	sort.Slice(r.PDBs, func(i, j int) bool { return r.PDBs[i].Name < r.PDBs[j].Name })
}

// describePDB: a PDB's value against its expected pods, a percent rounded
// up as upstream's disruption controller does: "1 of 6 expected pods",
// "33% of 6 expected pods = 1.98, ceil: 2".
func describePDB(v any, expected int) string {
	if s, ok := v.(string); ok {
		return DescribePercent(s, expected, " expected pods", true)
	}
	return fmt.Sprintf("%v of %d expected pods", v, expected)
}
