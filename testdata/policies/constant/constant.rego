# A policy that answers every decision point with a constant. It is no
# strategy anyone should run: the benchmarks use it to measure what the Rego
# engine costs before a policy does any work (converting the facts to Rego
# input, one call per pod and per-pod decision point, decoding the answers).
package rollplan.strategy

scope(_) := {"in": true}

eligibility(_) := {"action": "Recreate", "reasons": ["constant policy"]}

order(_) := [0]

budgets := [{"name": "constant", "maxUnavailable": 1, "maxSurge": 0}]

pacing := "rolling"

node_preparation := "none"

halt := []

deny := []
