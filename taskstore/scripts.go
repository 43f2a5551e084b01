package taskstore

import "github.com/redis/go-redis/v9"

// One Lua script per state change, modelled on asynq's internal/rdb:
//   - every key arrives through KEYS (built by keys.go); scripts build none;
//   - "now" arrives in ARGV from the Store's clock; scripts never read time;
//   - the first element of every reply is a code (errors.go, codeErr);
//   - a script that changes what a waiter cares about PUBLISHes on the task's
//     channel (events.go) in the same atomic step, payload "<kind>:<status>".
//
// The field names below are the f* constants of task.go.

// luaPrologue loads and checks the task every per-task script starts with.
// It needs KEYS[1] = task hash, ARGV[1] = owner, ARGV[2] = now (unix ms), and
// leaves `status` set. A task of another owner is "not found"; a task whose
// ttl has elapsed by the caller's clock is "expired" even if Redis has not
// deleted it yet, so every backend and clock agrees on expiry.
const luaPrologue = `
local t = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'ttl')
if not t[1] or t[1] ~= ARGV[1] then return {1} end
if tonumber(t[3]) + tonumber(t[4]) <= tonumber(ARGV[2]) then return {2} end
local status = t[2]
local function terminal(s) return s == 'completed' or s == 'failed' or s == 'cancelled' end
` + luaOps + luaTimeline + luaWebhook

// luaOps keeps the operator's index (keys.ops, ops.go) as a task ends:
// opsEnd moves the member from run to its terminal status' ZSET, keeping
// its created score. o is the KEYS position of the index's first key; a
// script called without the index keys (Redis Cluster: they are in
// another slot) leaves it alone.
const luaOps = `
local function opsEnd(o, member, to)
  if member == '' or #KEYS < o + 6 then return end
  local sc = redis.call('ZSCORE', KEYS[o], member)
  if not sc then return end
  local at = {completed = 4, failed = 5, cancelled = 6}
  redis.call('ZREM', KEYS[o + 3], member)
  redis.call('ZADD', KEYS[o + at[to]], sc, member)
end
`

// luaTimeline keeps a task's timeline (timeline.go): a LIST next to the
// task hash, in its owner's slot, that expires with it. tlog appends an
// entry "<ms>|<kind>|<word>|<text>" to KEYS[i] when the script was given
// it (the store keeps timelines), capped at 100 entries (the oldest go).
// A list that did not exist (the task was created while timelines were
// off) gets the task's remaining ttl, so no entry outlives its task.
// tprogress replaces a last progress entry instead of adding one: a
// chatty task keeps its status changes. Texts are cut to 300 bytes.
const luaTimeline = `
local function tlog(i, entry)
  local k = KEYS[i]
  if not k then return end
  local n = redis.call('RPUSH', k, entry)
  if n == 1 then
    local left = redis.call('PTTL', KEYS[1])
    if left > 0 then redis.call('PEXPIRE', k, left) end
  elseif n > 100 then
    redis.call('LTRIM', k, -100, -1)
  end
end
local function tentry(kind, word, text) return ARGV[2] .. '|' .. kind .. '|' .. word .. '|' .. string.sub(text, 1, 300) end
local function tprogress(i, entry)
  local k = KEYS[i]
  if not k then return end
  local last = redis.call('LINDEX', k, -1)
  if last and string.match(last, '^%d+|progress|') then redis.call('LSET', k, -1, entry) else tlog(i, entry) end
end
`

// createCmd creates a task and indexes it under its owner. Before the cap
// check it drops the owner's expired ids from the active index, so the cap
// counts only live tasks, and trims the created index of ids older than
// MaxTTL (surely expired). The owner's index keys live MaxTTL past the
// owner's last Create, so an owner who goes away leaves nothing behind.
// With Options.Webhooks it records task.created (whEmit).
// With the operator's index keys it also adds the task there, after
// dropping up to 100 members whose ttl has elapsed: each create adds one
// and may drop many, so the index holds live tasks only.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>       task hash
// KEYS[2] -> <prefix>:{<owner>}:t:<id>:gone  tombstone
// KEYS[3] -> <prefix>:{<owner>}:created      ZSET id -> created ms
// KEYS[4] -> <prefix>:{<owner>}:active       ZSET non-terminal id -> expiry ms
// KEYS[5] -> <prefix>:{<owner>}:wh         the owner's webhook outbox
// KEYS[6] -> <prefix>:{<owner>}:t:<id>:log  the timeline, absent when off
// KEYS[7..14] -> the operator's index (keys.ops), absent on Cluster or off
// ARGV[1] -> task id
// ARGV[2] -> now, unix ms
// ARGV[3] -> ttl ms
// ARGV[4] -> max ttl ms
// ARGV[5] -> max non-terminal tasks for the owner, -1 for no limit
// ARGV[6] -> tombstone window ms after expiry, 0 for none
// ARGV[7] -> "1": listed (indexed in KEYS[3] for List), "0": not
// ARGV[8] -> the task's member in the operator's index (opsMember)
// ARGV[9] -> the tool, kept with the id in the index (cut to 100 bytes)
// ARGV[10] -> the webhook notify channel, empty when events are not recorded
// ARGV[11..] -> field, value pairs of the task hash
//
// Returns {0} created, {5} owner at the cap, {6} id exists (or existed:
// a tombstone, e.g. abandonCmd's, is there).
var createCmd = redis.NewScript(luaWebhook + `
local now = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local maxttl = tonumber(ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return {6} end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local max = tonumber(ARGV[5])
if max >= 0 and redis.call('ZCARD', KEYS[4]) >= max then return {5} end
redis.call('HSET', KEYS[1], unpack(ARGV, 11))
redis.call('PEXPIRE', KEYS[1], ttl)
local window = tonumber(ARGV[6])
if window > 0 then redis.call('SET', KEYS[2], '1', 'PX', ttl + window) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - maxttl)
if ARGV[7] == '1' then redis.call('ZADD', KEYS[3], now, ARGV[1]) end
redis.call('ZADD', KEYS[4], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[3], maxttl)
redis.call('PEXPIRE', KEYS[4], maxttl)
if KEYS[6] then
  redis.call('RPUSH', KEYS[6], ARGV[2] .. '|created|working|')
  redis.call('PEXPIRE', KEYS[6], ttl)
end
if #KEYS >= 14 then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now, 'LIMIT', 0, 100)) do
    local id = string.sub(m, 1, 36)
    if redis.call('ZSCORE', KEYS[10], m) then
      -- its ttl elapsed before it ended: kept for the failures page
      redis.call('LPUSH', KEYS[14], redis.call('ZSCORE', KEYS[8], m) .. '|' .. m .. '|' .. (redis.call('HGET', KEYS[9], id) or ''))
      redis.call('LTRIM', KEYS[14], 0, 199)
    end
    for i = 7, 13 do if i ~= 9 then redis.call('ZREM', KEYS[i], m) end end
    redis.call('HDEL', KEYS[9], id)
  end
  redis.call('ZADD', KEYS[7], now, ARGV[8])
  redis.call('ZADD', KEYS[8], now + ttl, ARGV[8])
  redis.call('HSET', KEYS[9], ARGV[1], string.sub(ARGV[8], 38) .. '|' .. string.sub(ARGV[9], 1, 100))
  redis.call('ZADD', KEYS[10], now, ARGV[8])
end
whEmit(5, ARGV[10], 'task.created', {})
return {0}
`)

// abandonCmd removes what a Create whose outcome is unknown (Redis went
// away before its reply came) may have written, and leaves a tombstone so
// that the write, should it still be executed late, is refused (createCmd
// checks KEYS[2]). Nobody ever learned the id, so nobody misses the task.
// The leases index entry, in another slot, is dropped by ListExpiredLeases
// once the hash is gone.
//
// KEYS[1..4] -> as createCmd's
// KEYS[5] -> the outbox (unused: a task.created event recorded there
// stays; the receiver finds no task behind it)
// KEYS[6] -> the timeline, KEYS[7..14] the operator's index, as createCmd's
// ARGV[1] -> task id
// ARGV[2] -> tombstone lifetime ms
// ARGV[3] -> the removals channel (keys.removals)
// ARGV[4] -> the task's member in the operator's index
//
// Returns {0}.
var abandonCmd = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 1 then redis.call('PUBLISH', ARGV[3], ARGV[1]) end
redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[2]))
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if KEYS[6] then redis.call('DEL', KEYS[6]) end
if #KEYS >= 14 then
  for i = 7, 13 do if i ~= 9 then redis.call('ZREM', KEYS[i], ARGV[4]) end end
  redis.call('HDEL', KEYS[9], ARGV[1])
end
return {0}
`)

// transitionCmd moves a task along the state machine (MCP 2025-11-25, Tasks
// (utilities/tasks), section "Task Status Lifecycle"): working <->
// input_required, either -> completed, failed or cancelled. Terminal states
// are sticky; a self-transition is rejected. The status message is replaced
// (cleared when empty): a message describes the state it was written for.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// KEYS[2] -> <prefix>:{<owner>}:active      ZSET non-terminal id -> expiry ms
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> task id
// ARGV[4] -> channel
// ARGV[5] -> new status (validated by the caller)
// ARGV[6] -> status message, empty for none
// ARGV[7] -> the task's member in the operator's index
// ARGV[8] -> the webhook notify channel, empty when events are not recorded
// KEYS[3] -> <prefix>:{<owner>}:wh         the owner's webhook outbox
// KEYS[4] -> <prefix>:{<owner>}:t:<id>:log  the timeline, absent when off
// KEYS[5..12] -> the operator's index (keys.ops), absent on Cluster or off
//
// Returns {0, old status}, {1} not found, {2} expired, {3, status} terminal,
// {4, status} self-transition.
var transitionCmd = redis.NewScript(luaPrologue + `
local to = ARGV[5]
if terminal(status) then return {3, status} end
if status == to then return {4, status} end
redis.call('HSET', KEYS[1], 'status', to, 'updated', ARGV[2])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'message', ARGV[6]) else redis.call('HDEL', KEYS[1], 'message') end
if terminal(to) then
  redis.call('ZREM', KEYS[2], ARGV[3])
  opsEnd(5, ARGV[7], to)
end
tlog(4, tentry('status', to, ARGV[6]))
if terminal(to) or to == 'input_required' then whEmit(3, ARGV[8], 'task.' .. to, {}) end
redis.call('PUBLISH', ARGV[4], 'status:' .. to)
return {0, status}
`)

// finishCmd ends a task with its outcome: completed or failed, with the
// JSON-RPC result and/or error. A second terminal write is rejected, so a
// result arriving after a cancel leaves the task cancelled (MCP 2025-11-25,
// Tasks (utilities/tasks), section "Task Cancellation", item 3).
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// KEYS[2] -> <prefix>:{<owner>}:active      ZSET non-terminal id -> expiry ms
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> task id
// ARGV[4] -> channel
// ARGV[5] -> 'completed' or 'failed'
// ARGV[6] -> status message, empty for none
// ARGV[7] -> result JSON, empty for none
// ARGV[8] -> error JSON, empty for none
// ARGV[9] -> write id, empty for none
// ARGV[10] -> the task's member in the operator's index
// ARGV[11] -> the webhook notify channel, empty when events are not recorded
// ARGV[12] -> the outcome's size in bytes (result and error), for the event
// ARGV[13] -> "1": the outcome is an error (JSON-RPC error or isError), "0": not
// ARGV[14] -> a lease holder, or empty: when set, the script also gives
// that holder's lease up (as releaseCmd does), also when the task was
// already terminal
// ARGV[15], ARGV[16] -> a channel and a message published on it when
// the write changes the task (a session's notification), or empty
// KEYS[3] -> <prefix>:{<owner>}:wh         the owner's webhook outbox
// KEYS[4] -> <prefix>:{<owner>}:t:<id>:log  the timeline, absent when off
// KEYS[5..12] -> the operator's index (keys.ops), absent on Cluster or off
//
// Returns {0, old status}, {1}, {2}, {3, status}. A task already terminal
// through a write with this write id answers {0, status}: a retry of a
// write that landed, whose reply was lost. A third element says whether
// the lease was given up (1) or not (0: no holder given, or it was not
// that holder's).
var finishCmd = redis.NewScript(luaPrologue + `
local function give()
  if not ARGV[14] or ARGV[14] == '' or redis.call('HGET', KEYS[1], 'lease_holder') ~= ARGV[14] then return 0 end
  redis.call('HDEL', KEYS[1], 'lease_holder', 'lease_until', 'lease_from')
  return 1
end
if terminal(status) then
  if ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'write') == ARGV[9] then return {0, status, give()} end
  return {3, status, give()}
end
local to = ARGV[5]
local set = {'status', to, 'updated', ARGV[2]}
if ARGV[6] ~= '' then table.insert(set, 'message'); table.insert(set, ARGV[6]) else redis.call('HDEL', KEYS[1], 'message') end
if ARGV[7] ~= '' then table.insert(set, 'result'); table.insert(set, ARGV[7]) end
if ARGV[8] ~= '' then table.insert(set, 'error'); table.insert(set, ARGV[8]) end
if ARGV[9] ~= '' then table.insert(set, 'write'); table.insert(set, ARGV[9]) end
redis.call('HSET', KEYS[1], unpack(set))
redis.call('ZREM', KEYS[2], ARGV[3])
opsEnd(5, ARGV[10], to)
tlog(4, tentry('status', to, ARGV[6]))
whEmit(3, ARGV[11], 'task.' .. to, {'rbytes', ARGV[12], 'err', ARGV[13]})
redis.call('PUBLISH', ARGV[4], 'status:' .. to)
local released = give()
if ARGV[15] and ARGV[15] ~= '' then redis.call('PUBLISH', ARGV[15], ARGV[16]) end
return {0, status, released}
`)

// cancelCmd records a cancellation request and moves the task to cancelled
// at once: the legacy tasks/cancel must answer with the cancelled task
// ("Task Cancellation" 2), and the modern ack is allowed to be that strong.
// The worker learns from the event (kind "cancel") and stops the call.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// KEYS[2] -> <prefix>:{<owner>}:active      ZSET non-terminal id -> expiry ms
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> task id
// ARGV[4] -> channel
// ARGV[5] -> status message, empty for none
// ARGV[6] -> the task's member in the operator's index
// ARGV[7] -> who asked: "client" or "operator" (the console), for the timeline
// ARGV[8] -> the webhook notify channel, empty when events are not recorded
// KEYS[3] -> <prefix>:{<owner>}:wh         the owner's webhook outbox
// KEYS[4] -> <prefix>:{<owner>}:t:<id>:log  the timeline, absent when off
// KEYS[5..12] -> the operator's index (keys.ops), absent on Cluster or off
//
// Returns {0, field, value, …} (the task after the change), {1}, {2},
// {3, status}.
var cancelCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'updated', ARGV[2], 'cancel', '1')
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'message', ARGV[5]) else redis.call('HDEL', KEYS[1], 'message') end
redis.call('ZREM', KEYS[2], ARGV[3])
opsEnd(5, ARGV[6], 'cancelled')
tlog(4, tentry('cancel', ARGV[7], ARGV[5]))
whEmit(3, ARGV[8], 'task.cancelled', {})
redis.call('PUBLISH', ARGV[4], 'cancel:cancelled')
local r = redis.call('HGETALL', KEYS[1])
table.insert(r, 1, 0)
return r
`)

// addInputsCmd records new outstanding input requests and sets the task
// input_required, recording task.input_required (every new set of
// requests is a new question for a person). Either every key is new for the task's lifetime and all are
// written, or nothing is (SEP-2663: keys are unique over a task's lifetime).
// A write id makes a retry safe: when every key was issued by a write with
// the same id, that write landed (its reply was lost) and nothing changes.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> channel
// ARGV[4] -> status message, empty for none
// ARGV[5] -> write id, empty for none
// ARGV[6] -> the webhook notify channel, empty when events are not recorded
// ARGV[7] -> the first request's message (its params' "message"), for the event
// ARGV[8..] -> key, method, request JSON, digest quadruples (digest "":
// none; else kept as dg:<key>, under which answerInputsCmd keeps the
// answer for a rerun: rerun.go)
// KEYS[2] -> <prefix>:{<owner>}:wh  the owner's webhook outbox
// KEYS[3] -> the timeline, absent when off: one entry per request, its
// method and key (never its params)
//
// Returns {0, old status}, {1}, {2}, {3, status}, {9, reused key}.
var addInputsCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
local replayed = 0
for i = 8, #ARGV, 4 do
  local by = redis.call('HGET', KEYS[1], 'used:' .. ARGV[i])
  if by then
    if ARGV[5] == '' or by ~= ARGV[5] then return {9, ARGV[i]} end
    replayed = replayed + 1
  end
end
if replayed > 0 then
  if replayed * 4 ~= #ARGV - 7 then return {9, 'part of a replayed write'} end
  return {0, status}
end
local by = ARGV[5]
if by == '' then by = '1' end
local n = 0
for i = 8, #ARGV, 4 do
  redis.call('HSET', KEYS[1], 'in:' .. ARGV[i], ARGV[i + 2], 'used:' .. ARGV[i], by)
  if ARGV[i + 3] ~= '' then redis.call('HSET', KEYS[1], 'dg:' .. ARGV[i], ARGV[i + 3]) end
  tlog(3, tentry('input', string.sub(ARGV[i + 1], 1, 100), ARGV[i]))
  n = n + 1
end
redis.call('HINCRBY', KEYS[1], 'pending', n)
redis.call('HSET', KEYS[1], 'status', 'input_required', 'updated', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'message', ARGV[4]) else redis.call('HDEL', KEYS[1], 'message') end
if status ~= 'input_required' then tlog(3, tentry('status', 'input_required', ARGV[4])) end
whEmit(2, ARGV[6], 'task.input_required', {'im', ARGV[9], 'imsg', ARGV[7]})
redis.call('PUBLISH', ARGV[3], 'status:input_required')
return {0, status}
`)

// answerInputsCmd durably records responses to outstanding input requests.
// Keys that are not outstanding (never issued, already answered) are ignored;
// a partial set is fine (SEP-2663 tasks/update). When the last outstanding
// request is answered an input_required task goes back to working.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> channel
// ARGV[4..] -> key, response JSON pairs
// KEYS[2] -> the timeline, absent when off: the keys answered (never the
// answers)
//
// An answer to a question with a digest (dg:<key>, addInputsCmd) is also
// kept as ans:<digest>, for a rerun asking the same question (rerun.go):
// at most maxAnswered of them per task, each at most maxAnswerBytes.
//
// Returns {0, accepted count, status after}, {1}, {2}, {3, status}.
var answerInputsCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
local n = 0
for i = 4, #ARGV, 2 do
  if redis.call('HDEL', KEYS[1], 'in:' .. ARGV[i]) == 1 then
    redis.call('HSET', KEYS[1], 're:' .. ARGV[i], ARGV[i + 1])
    tlog(2, tentry('answered', '', ARGV[i]))
    n = n + 1
    local d = redis.call('HGET', KEYS[1], 'dg:' .. ARGV[i])
    if d and #ARGV[i + 1] <= ` + maxAnswerBytesLua + ` and redis.call('HEXISTS', KEYS[1], 'ans:' .. d) == 0
        and tonumber(redis.call('HGET', KEYS[1], 'answered') or '0') < ` + maxAnsweredLua + ` then
      redis.call('HSET', KEYS[1], 'ans:' .. d, ARGV[i + 1])
      redis.call('HINCRBY', KEYS[1], 'answered', 1)
    end
  end
end
if n == 0 then return {0, 0, status} end
local left = redis.call('HINCRBY', KEYS[1], 'pending', -n)
if left <= 0 and status == 'input_required' then
  status = 'working'
  redis.call('HSET', KEYS[1], 'status', status, 'updated', ARGV[2])
  redis.call('HDEL', KEYS[1], 'message')
  tlog(2, tentry('status', status, ''))
end
redis.call('PUBLISH', ARGV[3], 'inputs:' .. status)
return {0, n, status}
`)

// takeResponsesCmd hands the recorded input responses to the worker and
// forgets them; their keys stay used. With a take id, a take whose reply
// was lost (Redis died before answering) can be repeated: the responses a
// take moves out of re:<key> are kept as tk:<key> under its id, and a take
// with the same id returns them again (with any recorded since); a take
// with another id first drops them (the worker had them).
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> take id, empty for none
//
// Returns {0, status, key, response, …}, {1}, {2}.
var takeResponsesCmd = redis.NewScript(luaPrologue + `
local all = redis.call('HGETALL', KEYS[1])
local r = {0, status}
local id = ARGV[3]
local replay = id ~= '' and redis.call('HGET', KEYS[1], 'take') == id
for i = 1, #all, 2 do
  local f = all[i]
  local p = string.sub(f, 1, 3)
  if p == 'tk:' then
    if replay then
      r[#r + 1] = string.sub(f, 4)
      r[#r + 1] = all[i + 1]
    else
      redis.call('HDEL', KEYS[1], f)
    end
  elseif p == 're:' then
    redis.call('HDEL', KEYS[1], f)
    if id ~= '' then redis.call('HSET', KEYS[1], 'tk:' .. string.sub(f, 4), all[i + 1]) end
    r[#r + 1] = string.sub(f, 4)
    r[#r + 1] = all[i + 1]
  end
end
if id ~= '' then redis.call('HSET', KEYS[1], 'take', id) end
return r
`)

// progressCmd stores the latest progress of a running task and tells
// listeners. Progress stops at terminal (MCP 2025-11-25, Tasks
// (utilities/tasks), section "Progress").
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> channel
// ARGV[4] -> progress JSON
// ARGV[5] -> status message, empty to keep the current one
// KEYS[2] -> the timeline, absent when off: its last progress entry
//
// Returns {0}, {1}, {2}, {3, status}.
var progressCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
redis.call('HSET', KEYS[1], 'progress', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'message', ARGV[5], 'updated', ARGV[2]) end
tprogress(2, tentry('progress', '', ARGV[4]))
redis.call('PUBLISH', ARGV[3], 'progress:' .. status)
return {0}
`)

// claimCmd takes a task's lease: when nobody holds it, when the holder
// already holds it, or when the holder's deadline plus the clock-skew grace
// has passed (recovery of a dead replica's task). The first takeover from
// another holder records that holder in lease_from: the replica whose
// worker ran the task, which a later takeover (the claimer did not finish
// the recovery) must still name.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> holder (replica id)
// ARGV[4] -> new deadline, unix ms
// ARGV[5] -> grace ms
//
// Returns {0, previous holder or empty}, {1}, {2}, {3, status}, {7, holder}.
var claimCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
local l = redis.call('HMGET', KEYS[1], 'lease_holder', 'lease_until', 'lease_from')
local prev = l[1] or ''
if prev ~= '' and prev ~= ARGV[3] and tonumber(l[2] or 0) + tonumber(ARGV[5]) > tonumber(ARGV[2]) then
  return {7, prev}
end
redis.call('HSET', KEYS[1], 'lease_holder', ARGV[3], 'lease_until', ARGV[4])
if prev ~= '' and prev ~= ARGV[3] and not l[3] then
  redis.call('HSET', KEYS[1], 'lease_from', prev)
end
return {0, prev}
`)

// extendCmd pushes the deadline of a lease the holder still holds. A lease
// that passed its deadline but was not taken over can still be extended.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> holder
// ARGV[4] -> new deadline, unix ms
//
// Returns {0}, {1}, {2}, {3, status}, {8}.
var extendCmd = redis.NewScript(luaPrologue + `
if redis.call('HGET', KEYS[1], 'lease_holder') ~= ARGV[3] then return {8} end
if terminal(status) then return {3, status} end
redis.call('HSET', KEYS[1], 'lease_until', ARGV[4])
return {0}
`)

// releaseCmd gives a lease up. It works on terminal and expired tasks too:
// releasing is how a worker says it is done.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> holder
//
// Returns {0}, {1}, {8}.
var releaseCmd = redis.NewScript(`
local t = redis.call('HMGET', KEYS[1], 'owner', 'lease_holder')
if not t[1] or t[1] ~= ARGV[1] then return {1} end
if t[2] ~= ARGV[2] then return {8} end
redis.call('HDEL', KEYS[1], 'lease_holder', 'lease_until', 'lease_from')
return {0}
`)

// tidyLeasesCmd fixes entries of the leases index that ListExpiredLeases
// found stale. It re-checks each score so that it never undoes a Claim that
// happened after the task hashes were read: an entry is dropped only while
// its score is still at or below the cutoff, and re-scored only upwards.
//
// KEYS[1] -> <prefix>:leases
// ARGV[1] -> cutoff, unix ms (now - grace)
// ARGV[2] -> n, the number of members to drop
// ARGV[3 .. 2+n] -> members to drop
// ARGV[3+n ..] -> member, new score pairs
//
// Returns {0}.
var tidyLeasesCmd = redis.NewScript(`
local cutoff = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 3, 2 + n do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) <= cutoff then redis.call('ZREM', KEYS[1], ARGV[i]) end
end
for i = 3 + n, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) < tonumber(ARGV[i + 1]) then redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i]) end
end
return {0}
`)
