-- Argo CD health of a rollplan Rollout (rollouts.rollplan.dev), the status
-- object rollplan's controller keeps per managed workload (docs/gitops.md).
-- Its conditions are in kstatus form: Stalled True is a halt (or a stall,
-- or a rollout rollplan cannot drive), Reconciling True a rollout under
-- way, Ready True rolled out; status.phase Paused is `rollplan pause`.
-- Needs no standard library.

local status = obj.status
if status == nil then
  return {status = "Progressing", message = "Waiting for rollplan's controller to record the rollout"}
end
local generation = (obj.metadata or {}).generation
if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  return {status = "Progressing", message = "Waiting for rollplan's controller to observe the Rollout"}
end
local conds = {}
for _, c in ipairs(status.conditions or {}) do
  conds[c.type] = c
end
local function isTrue(t)
  return conds[t] ~= nil and conds[t].status == "True"
end
local function message(t)
  return conds[t].message or ""
end
if isTrue("Stalled") then
  return {status = "Degraded", message = message("Stalled")}
end
if status.phase == "Paused" then
  return {status = "Suspended", message = status.message or "paused"}
end
if isTrue("Reconciling") then
  return {status = "Progressing", message = message("Reconciling")}
end
if isTrue("Ready") then
  return {status = "Healthy", message = message("Ready")}
end
return {status = "Progressing", message = "Waiting for rollplan's controller to record the rollout"}
