-- Argo CD health of a StatefulSet, DaemonSet or Deployment, with rollplan
-- (one script under three argocd-cm keys; docs/gitops.md).
--
-- A workload annotated rollplan.dev/managed: "true" is rolled by rollplan,
-- not by its own controller (OnDelete, or a Deployment held paused), so
-- Argo CD's built-in health would call it Healthy, or Suspended, while
-- rollplan is still rolling it. Here it is:
--   Degraded     rollplan halted it (or it is stalled, or not drivable) at
--                this spec: the rollout state annotation says so;
--   Suspended    `rollplan pause`;
--   Progressing  rolling, or the spec changed and rollplan has not
--                recorded it yet: the workload's own status counts the
--                pods not yet updated;
--   Healthy      every pod updated and ready.
-- Any other workload gets Argo CD's built-in health, unchanged.
--
-- The rollout state is JSON (Go's encoding, fields in a fixed order);
-- reading it takes Lua's string library, which Argo CD opens for a custom
-- health script only with resource.customizations.useOpenLibs.<key>:
-- "true". Without it a managed workload is judged by its own status
-- alone, and a halt shows as Progressing.

local function num(v, default)
  if type(v) == "number" then
    return v
  end
  return default
end

-- n2s writes a count: gopher-lua prints a whole number without a
-- fraction.
local function n2s(v)
  return tostring(v)
end

local meta = obj.metadata or {}
local ann = meta.annotations or {}
local spec = obj.spec or {}
local st = obj.status or {}
local kind = obj.kind
local gen = num(meta.generation, 0)
local observed = num(st.observedGeneration, 0)

local function result(status, message)
  return {status = status, message = message}
end

---------------------------------------------------------------------------
-- Argo CD's built-in health (gitops-engine pkg/health), for workloads
-- rollplan does not manage.

local function builtinStatefulSet()
  if observed == 0 or gen > observed then
    return result("Progressing", "Waiting for statefulset spec update to be observed...")
  end
  local strategy = spec.updateStrategy or {}
  local ready = num(st.readyReplicas, 0)
  local updated = num(st.updatedReplicas, 0)
  if spec.replicas ~= nil and ready < spec.replicas then
    return result("Progressing", "Waiting for " .. n2s(spec.replicas - ready) .. " pods to be ready...")
  end
  if strategy.type == "RollingUpdate" and strategy.rollingUpdate ~= nil then
    local partition = strategy.rollingUpdate.partition
    if spec.replicas ~= nil and partition ~= nil and updated < spec.replicas - partition then
      return result("Progressing", "Waiting for partitioned roll out to finish: " .. n2s(updated) ..
        " out of " .. n2s(spec.replicas - partition) .. " new pods have been updated...")
    end
    return result("Healthy", "partitioned roll out complete: " .. n2s(updated) .. " new pods have been updated...")
  end
  if strategy.type == "OnDelete" then
    return result("Healthy", "statefulset has " .. n2s(ready) .. " ready pods")
  end
  local updateRevision = st.updateRevision or ""
  local currentRevision = st.currentRevision or ""
  if updateRevision ~= currentRevision then
    return result("Progressing", "waiting for statefulset rolling update to complete " .. n2s(updated) ..
      " pods at revision " .. updateRevision .. "...")
  end
  return result("Healthy", "statefulset rolling update complete " .. n2s(num(st.currentReplicas, 0)) ..
    " pods at revision " .. currentRevision .. "...")
end

local function builtinDaemonSet()
  local name = '"' .. (meta.name or "") .. '"'
  local desired = num(st.desiredNumberScheduled, 0)
  local updated = num(st.updatedNumberScheduled, 0)
  local available = num(st.numberAvailable, 0)
  if gen > observed then
    return result("Progressing", "Waiting for rollout to finish: observed daemon set generation less than desired generation")
  end
  if (spec.updateStrategy or {}).type == "OnDelete" then
    return result("Healthy", "daemon set " .. n2s(updated) .. " out of " .. n2s(desired) .. " new pods have been updated")
  end
  if updated < desired then
    return result("Progressing", "Waiting for daemon set " .. name .. " rollout to finish: " .. n2s(updated) ..
      " out of " .. n2s(desired) .. " new pods have been updated...")
  end
  if available < desired then
    return result("Progressing", "Waiting for daemon set " .. name .. " rollout to finish: " .. n2s(available) ..
      " of " .. n2s(desired) .. " updated pods are available...")
  end
  return result("Healthy", "")
end

local function builtinDeployment()
  if spec.paused == true then
    return result("Suspended", "Deployment is paused")
  end
  if gen > observed then
    return result("Progressing", "Waiting for rollout to finish: observed deployment generation less than desired generation")
  end
  for _, c in ipairs(st.conditions or {}) do
    if c.type == "Progressing" then
      if c.reason == "ProgressDeadlineExceeded" then
        return result("Degraded", 'Deployment "' .. (meta.name or "") .. '" exceeded its progress deadline')
      end
      break
    end
  end
  local updated = num(st.updatedReplicas, 0)
  local replicas = num(st.replicas, 0)
  local available = num(st.availableReplicas, 0)
  if spec.replicas ~= nil and updated < spec.replicas then
    return result("Progressing", "Waiting for rollout to finish: " .. n2s(updated) .. " out of " ..
      n2s(spec.replicas) .. " new replicas have been updated...")
  end
  if replicas > updated then
    return result("Progressing", "Waiting for rollout to finish: " .. n2s(replicas - updated) ..
      " old replicas are pending termination...")
  end
  if available < updated then
    return result("Progressing", "Waiting for rollout to finish: " .. n2s(available) .. " of " ..
      n2s(updated) .. " updated replicas are available...")
  end
  return result("Healthy", "")
end

local builtin = {StatefulSet = builtinStatefulSet, DaemonSet = builtinDaemonSet, Deployment = builtinDeployment}

if ann["rollplan.dev/managed"] ~= "true" or builtin[kind] == nil then
  if builtin[kind] == nil then
    return result("Unknown", "rollplan's health script does not know kind " .. tostring(kind))
  end
  return builtin[kind]()
end

---------------------------------------------------------------------------
-- A managed workload.

-- jsonString decodes the JSON string that starts at s[i] (its opening
-- quote), as Go's encoding/json writes them.
local function jsonString(s, i)
  local out = {}
  i = i + 1
  while i <= #s do
    local c = string.sub(s, i, i)
    if c == '"' then
      return table.concat(out)
    end
    if c == "\\" then
      local e = string.sub(s, i + 1, i + 1)
      i = i + 1
      if e == "n" then
        c = "\n"
      elseif e == "t" then
        c = "\t"
      elseif e == "r" then
        c = "\r"
      elseif e == "b" then
        c = "\b"
      elseif e == "f" then
        c = "\f"
      elseif e == "u" then
        local code = tonumber(string.sub(s, i + 1, i + 4), 16) or 63
        i = i + 4
        if code < 0x80 then
          c = string.char(code)
        elseif code < 0x800 then
          c = string.char(0xC0 + math.floor(code / 0x40), 0x80 + code % 0x40)
        else
          c = string.char(0xE0 + math.floor(code / 0x1000), 0x80 + math.floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
        end
      else
        c = e
      end
    end
    table.insert(out, c)
    i = i + 1
  end
  return table.concat(out)
end

-- readState reads the rollout state annotation (planner/live
-- RolloutState): nil if there is none or it cannot be read. Every quote
-- inside a JSON string is escaped, so a pattern '"key":' only meets keys.
local function readState(raw)
  if raw == nil or string == nil then
    return nil
  end
  local phase = string.match(raw, '^{"phase":"(%a+)"')
  if phase == nil then
    return nil
  end
  local s = {
    phase = phase,
    generation = tonumber(string.match(raw, '"generation":(%d+)[,}]') or "0"),
    updated = tonumber(string.match(raw, '"updated":(%d+)[,}]') or "0"),
    desired = tonumber(string.match(raw, '"desired":(%d+)[,}]') or "0"),
    wave = tonumber(string.match(raw, '"wave":(%d+)[,}]') or "0"),
    waves = tonumber(string.match(raw, '"waves":(%d+)[,}]') or "0"),
    stalled = string.find(raw, '"stalled":true', 1, true) ~= nil,
    notDriven = string.find(raw, '"notDriven":true', 1, true) ~= nil,
    message = "",
  }
  local d = string.find(raw, '"driver":"', 1, true)
  if d ~= nil then
    s.driver = jsonString(raw, d + 9)
  end
  local m = string.find(raw, '"message":"', 1, true)
  if m ~= nil then
    s.message = jsonString(raw, m + 10)
  end
  return s
end

-- current: the state is for the workload's spec as it is. A
-- Deployment's generation also moves when its annotations change, the
-- state's own writes included, so there the state may record an earlier
-- generation for the same spec; it still counts when its updated pods are
-- the pods the Deployment's new ReplicaSet has (a new template has none).
local function current(s)
  if s.generation == gen then
    return true
  end
  if kind ~= "Deployment" then
    return false
  end
  return s.generation == gen - 1 or s.updated == num(st.updatedReplicas, 0)
end

-- own: the rollout as the workload's own status tells it: done (every pod
-- updated, no old one left, all ready) and what it waits for.
local function own()
  if kind == "StatefulSet" then
    local want = num(spec.replicas, 1)
    local updated = num(st.updatedReplicas, 0)
    local revision = st.updateRevision or ""
    if updated < want then
      return false, n2s(updated) .. " of " .. n2s(want) .. " pods updated to revision " .. revision
    end
    if num(st.replicas, 0) > want then
      return false, n2s(num(st.replicas, 0) - want) .. " pods pending termination"
    end
    if num(st.readyReplicas, 0) < want then
      return false, n2s(num(st.readyReplicas, 0)) .. " of " .. n2s(want) .. " pods ready"
    end
    return true, n2s(want) .. " pods at revision " .. revision .. ", ready"
  elseif kind == "DaemonSet" then
    local want = num(st.desiredNumberScheduled, 0)
    local updated = num(st.updatedNumberScheduled, 0)
    if updated < want then
      return false, n2s(updated) .. " of " .. n2s(want) .. " pods updated"
    end
    if num(st.numberAvailable, 0) < want then
      return false, n2s(num(st.numberAvailable, 0)) .. " of " .. n2s(want) .. " pods available"
    end
    return true, n2s(want) .. " pods updated and available"
  end
  local want = num(spec.replicas, 1)
  local updated = num(st.updatedReplicas, 0)
  if updated < want then
    return false, n2s(updated) .. " of " .. n2s(want) .. " replicas updated"
  end
  if num(st.replicas, 0) > updated then
    return false, n2s(num(st.replicas, 0) - updated) .. " old replicas pending termination"
  end
  if num(st.availableReplicas, 0) < updated then
    return false, n2s(num(st.availableReplicas, 0)) .. " of " .. n2s(updated) .. " updated replicas available"
  end
  return true, n2s(want) .. " replicas updated and available"
end

if gen > observed then
  return result("Progressing", "rollplan: waiting for the " .. kind .. " controller to observe generation " .. n2s(gen))
end

local s = readState(ann["rollplan.dev/rollout-state"])
if s ~= nil and not current(s) then
  s = nil
end
if s ~= nil and s.phase == "Halted" then
  return result("Degraded", "rollplan halted the rollout: " .. s.message)
end
if s ~= nil and s.phase == "InProgress" and s.stalled then
  return result("Degraded", "rollplan: stalled: " .. s.message)
end
if s ~= nil and s.phase == "Waiting" and s.driver == nil then
  return result("Degraded", "rollplan cannot drive it: " .. s.message)
end
if ann["rollplan.dev/paused"] == "true" then
  return result("Suspended", "rollplan: paused; no new action until `rollplan resume`")
end
if s ~= nil and s.phase == "Paused" then
  return result("Suspended", "rollplan: " .. s.message)
end
if s ~= nil and s.phase == "InProgress" then
  local at = "starting"
  if s.waves > 0 then
    at = "wave " .. n2s(s.wave) .. " of " .. n2s(s.waves)
  end
  return result("Progressing", "rollplan is rolling it out: " .. at .. "; " .. n2s(s.updated) .. " of " ..
    n2s(s.desired) .. " pods updated")
end
if s ~= nil and s.phase == "Waiting" then
  return result("Progressing", "rollplan: " .. s.message)
end
local done, what = own()
local note = ""
if string == nil and ann["rollplan.dev/rollout-state"] ~= nil then
  note = " (rollplan's rollout state unread: set resource.customizations.useOpenLibs.apps_" .. kind .. ': "true" in argocd-cm)'
end
if done then
  return result("Healthy", "rolled out: " .. what .. note)
end
if s ~= nil then
  -- Complete at this spec, yet a pod is not ready (again).
  return result("Progressing", "rolled out by rollplan, waiting: " .. what .. note)
end
return result("Progressing", "rollplan rolls it out: " .. what .. note)
