# Example policy "leader last".
#
# Updates pods labelled role=leader after every other pod, so a
# replicated service fails over once, at the end. Everything else is the
# default strategy; within each group the default order applies.
package rollplan.strategy

import data.rollplan.defaults

# leader_key: 1 for pods labelled role=leader (sorted last), 0 otherwise.
# Pods without labels (null or missing) are not leaders.
leader_key(pod) := 1 if {
	object.get(pod, ["labels", "role"], "") == "leader"
} else := 0

order(pod) := array.concat([leader_key(pod)], defaults.order(pod))
