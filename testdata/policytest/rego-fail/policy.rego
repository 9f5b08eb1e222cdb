# A fixture policy: StatefulSets go wave by wave, and a label freezes a rollout.
package rollplan.strategy

import data.rollplan.defaults

pacing := "wave" if {
	input.workload.kind == "StatefulSet"
} else := defaults.pacing

halt := ["frozen by label"] if {
	input.workload.labels.frozen == "true"
} else := defaults.halt

# Never evaluated by the tests below: not covered.
deny := ["no DaemonSets"] if {
	input.workload.kind == "DaemonSet"
} else := []
