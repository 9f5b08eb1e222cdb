package fixture.failing_test

import data.rollplan.strategy

test_statefulsets_go_by_wave if {
	strategy.pacing == "wave" with input as {"workload": {"kind": "StatefulSet"}}
}

# Fails on purpose: a Deployment keeps the default pacing, rolling.
test_deployments_go_by_wave_too if {
	strategy.pacing == "wave" with input as {"workload": {"kind": "Deployment"}}
}

# Errors on purpose: two values for one complete rule (eval_conflict_error).
conflicting := 1

conflicting := 2

test_errors if {
	conflicting == 1
}
