# Example policy "cordon nodes".
#
# Prepares each node before its daemon pod is updated: every DaemonSet
# gets the node cordoned (no new pod lands there while its agent is
# replaced) and uncordoned once the pod is available again; a DaemonSet
# labelled node-preparation=drain (an agent the node's other pods cannot
# run without: CNI, storage, a node-local proxy) gets the node drained
# too. Only DaemonSets that rollplan apply drives (OnDelete, managed) are
# prepared; the other kinds keep the default answer, none. Everything else
# is the default strategy.
package rollplan.strategy

import data.rollplan.defaults

node_preparation := "drain" if {
	input.workload.kind == "DaemonSet"
	object.get(input.workload, ["labels", "node-preparation"], "") == "drain"
} else := "cordon" if {
	input.workload.kind == "DaemonSet"
} else := defaults.node_preparation
