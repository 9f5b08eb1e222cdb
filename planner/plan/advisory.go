package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
)

// checkAdvisory records the wave when an advisory budget is over its limit
// as the wave starts (every action of the wave begun, what was due by
// then complete): the moment its pods are least available.
func (s *podSim) checkAdvisory(wave int) {
	for bi, b := range s.budgets {
		if !b.Advisory {
			continue
		}
		if s.over(bi) && !slices.Contains(s.advisoryWaves[bi], wave) {
			if s.advisoryWaves == nil {
				s.advisoryWaves = map[int][]int{}
			}
			s.advisoryWaves[bi] = append(s.advisoryWaves[bi], wave)
		}
	}
}

// advisoryWarnings: the waves that break each advisory budget. Upstream
// controllers pace by neither PDBs nor a policy's own budgets.
func (s *podSim) advisoryWarnings() []string {
	var out []string
	kind := s.r.Workload.Kind
	for bi, b := range s.budgets {
		waves := s.advisoryWaves[bi]
		if len(waves) == 0 {
			continue
		}
		ws := make([]string, len(waves))
		for i, w := range waves {
			ws[i] = strconv.Itoa(w)
		}
		out = append(out, advisoryWarning(ws, b, kind))
	}
	return out
}

// advisoryWarning: the waves (as the plan numbers them, with any detail)
// that break advisory budget b of a workload its kind's controller rolls.
func advisoryWarning(waves []string, b Budget, kind string) string {
	if b.PDB != "" {
		return fmt.Sprintf("wave(s) %s leave more pods selected by PodDisruptionBudget %s unavailable than its limit of %d: the %s controller does not honour PDBs (annotate %s=\"true\" to let rollplan pace the rollout by it)", strings.Join(waves, ", "), b.PDB, b.Limit, kind, facts.AnnManaged)
	}
	what := map[string]string{"unavailable": "pods unavailable", "surge": "surge pods", "groups": "groups with pods in flight"}[b.Type]
	per := ""
	if b.GroupBy != "" && b.Type == "unavailable" {
		per = " per " + b.GroupBy
	}
	return fmt.Sprintf("wave(s) %s leave more %s than budget %q allows (%d%s): the %s controller does not pace by it; rollplan gate, running with the policy, holds the controller to it", strings.Join(waves, ", "), what, b.Name, b.Limit, per, kind)
}
