# Example policy "one zone at a time".
#
# Rolls one topology zone at a time: at most one zone has pods in flight,
# and pods are ordered zone by zone. Everything else (scope, eligibility,
# pacing, halt and the kind's own budgets) is the default strategy.
package rollplan.strategy

import data.rollplan.defaults

# budgets: the default budgets all still hold; this one adds a zone limit.
budgets := array.concat(defaults.budgets, [{
	"name": "one-zone-at-a-time",
	"groupBy": "zone",
	"maxGroups": 1,
	"source": "policy one-zone-at-a-time: at most one zone with pods in flight",
}])

# order: unavailable pods still go first (the default's first key), then
# zone by zone, then the default order within the zone.
order(pod) := array.concat([key[0], pod.zone], array.slice(key, 1, count(key))) if {
	key := defaults.order(pod)
}
