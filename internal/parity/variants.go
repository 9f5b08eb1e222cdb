package parity

import "github.com/rollplan/rollplan/planner/facts"

// Variants are r and copies of it with the workload switches the
// strategies branch on flipped (managed, the pod update policy, the
// MaxUnavailableStatefulSet gate, a short progress deadline), so that real
// facts reach every branch of an engine. Pods are shared: engines only
// read them.
func Variants(r *facts.Rollout) []*facts.Rollout {
	out := []*facts.Rollout{r}
	for _, managed := range []bool{false, true} {
		for _, policy := range []string{"Recreate", "InPlaceIfPossible", "InPlaceOnly"} {
			for _, gate := range []bool{false, true} {
				v := *r
				v.Workload.Managed = managed
				v.Workload.PodUpdatePolicy = policy
				v.FeatureGates = map[string]bool{"MaxUnavailableStatefulSet": gate}
				v.Workload.ProgressDeadlineSeconds = 30
				out = append(out, &v)
			}
		}
	}
	return out
}
