package taskstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durable tasks (docs/durable.md): a task whose tool is safe to repeat
// carries what the gateway needs to run its call again (SetRerun, the
// field rerun, opaque here), written once Create succeeded: a create
// whose reply was lost (and which the gateway then removes, abandon.go)
// is never run again, only failed. When its replica dies, or the upstream call
// fails on the way, one replica begins the next attempt (BeginAttempt):
// atomically, it takes the lease (exactly one replica wins an expired
// lease, as with Claim), counts the attempt against a limit, records why
// the last one ended and when the next may start (the backoff), and drops
// the dead attempt's outstanding input requests, whose upstream requests
// died with it. The task stays working.
//
// The client's answers are kept for the rerun: a question asked with a
// digest (InputRequest.Digest, the gateway's hash of its method and
// params) keeps its answer under that digest (ans:<digest>) when the
// client gives it, in the same step that records the answer, so a rerun
// that asks the same question gets the answer again without asking the
// client (Task.Answered). At most maxAnswered answers per task, each at
// most maxAnswerBytes: a larger or later one is asked again.
//
//	rerun         the gateway's spec          attempts      started so far
//	next_attempt  unix ms                     last_cause    why the previous ended
//	up_task       the upstream's own task     dg:<key>      a question's digest
//	ans:<digest>  the client's answer         answered      how many ans: fields

const (
	maxAnswered    = 64
	maxAnswerBytes = 64 << 10
)

// The same bounds, spelled into the scripts.
var (
	maxAnsweredLua    = strconv.Itoa(maxAnswered)
	maxAnswerBytesLua = strconv.Itoa(maxAnswerBytes)
)

// AttemptRequest asks BeginAttempt for the task's next attempt.
type AttemptRequest struct {
	// Holder is the replica that runs the attempt; it gets the lease for
	// Lease.
	Holder string
	Lease  time.Duration
	// Takeover: the lease must have expired (a recoverer; a live lease,
	// even Holder's own, is ErrLeaseHeld, so a task is taken over once);
	// false: Holder holds it (its worker's call failed on the way).
	Takeover bool
	// Max is how many attempts the task may have in all.
	Max int
	// Backoff: the attempt starts this long from now (NextAttempt).
	Backoff time.Duration
	// Cause is why the attempt before ended; Message the task's
	// statusMessage now.
	Cause, Message string
}

// Attempt is the attempt BeginAttempt began.
type Attempt struct {
	N      int       // its number, 2 for the first rerun
	NextAt time.Time // when it may start
	// Keys is how many input request keys the task used: the new worker
	// mints keys after them (keys are unique for the task's lifetime).
	Keys int
	// From is the holder the lease was taken from ("" when Holder held it).
	From string
}

// BeginAttempt begins the task's next attempt (see above). ErrLeaseHeld:
// a takeover of a lease still live; ErrLeaseLost: Holder does not hold it;
// ErrTerminal; ErrAttemptsExhausted when Max attempts ran already, and
// then Holder holds the lease (a takeover took it), to fail the task.
func (s *Store) BeginAttempt(ctx context.Context, owner, id string, r AttemptRequest) (Attempt, error) {
	a, err := s.beginAttempt(ctx, owner, id, r)
	if err != nil {
		return Attempt{}, fmt.Errorf("taskstore: begin attempt %s: %w", id, err)
	}
	return a, nil
}

func (s *Store) beginAttempt(ctx context.Context, owner, id string, r AttemptRequest) (Attempt, error) {
	if !validID(id) {
		return Attempt{}, ErrNotFound
	}
	if r.Holder == "" {
		return Attempt{}, fmt.Errorf("empty lease holder")
	}
	now := s.opt.Clock()
	until := now.Add(r.Lease).UnixMilli()
	next := now.Add(max(r.Backoff, 0))
	takeover := "0"
	if r.Takeover {
		takeover = "1"
	}
	vals, err := s.runWith(ctx, beginAttemptCmd, []string{s.k.task(owner, id), s.k.outbox(owner)},
		[]interface{}{owner, now.UnixMilli(), r.Holder, takeover, until, ms(s.opt.LeaseGrace), r.Max, next.UnixMilli(),
			r.Cause, r.Message, s.k.channel(owner, id), s.whArg()}, s.whHint(ctx, owner))
	if err != nil {
		return Attempt{}, err
	}
	c := code(vals)
	if c == codeOK || c == codeExhausted {
		// As Claim: the index learns of the lease only once it is taken.
		m := redis.Z{Score: float64(until), Member: leaseMember(owner, id)}
		_ = s.rdb.ZAdd(ctx, s.k.leases(), m).Err()
	}
	if c == codeExhausted {
		return Attempt{}, fmt.Errorf("%w (%s attempts)", ErrAttemptsExhausted, detail(vals))
	}
	if err := s.replyErr(ctx, owner, id, vals); err != nil {
		return Attempt{}, err
	}
	a := Attempt{NextAt: fromMS(next.UnixMilli())}
	n, _ := vals[1].(int64)
	keys, _ := vals[2].(int64)
	a.N, a.Keys = int(n), int(keys)
	a.From, _ = vals[3].(string)
	return a, nil
}

// SetRerun makes the task durable: spec is what the gateway needs to run
// its call again (Task.Rerun), and the task has had one attempt.
// ErrTerminal when it ended meanwhile.
func (s *Store) SetRerun(ctx context.Context, owner, id string, spec []byte) error {
	err := ErrNotFound
	if validID(id) && len(spec) > 0 {
		var vals []interface{}
		vals, err = s.run(ctx, setRerunCmd, []string{s.k.task(owner, id)}, owner, s.nowMS(), spec)
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: record rerun %s: %w", id, err)
	}
	return nil
}

// setRerunCmd records a task's rerun spec.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> the spec
//
// Returns {0}, {1}, {2}, {3, status}.
var setRerunCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
redis.call('HSET', KEYS[1], 'rerun', ARGV[3])
redis.call('HSETNX', KEYS[1], 'attempts', 1)
return {0}
`)

// SetUpstreamTask records the upstream's own task the holder's call holds
// (a native tool), for a replica that takes the task over to re-attach to
// it instead of running the call again. ErrLeaseLost when holder does not
// hold the lease.
func (s *Store) SetUpstreamTask(ctx context.Context, owner, id, holder, upstreamTask string) error {
	err := ErrNotFound
	if validID(id) {
		var vals []interface{}
		vals, err = s.run(ctx, setUpTaskCmd, []string{s.k.task(owner, id)}, owner, s.nowMS(), holder, upstreamTask)
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: record upstream task %s: %w", id, err)
	}
	return nil
}

// beginAttemptCmd begins a task's next attempt (BeginAttempt).
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> holder
// ARGV[4] -> "1": take over an expired lease; "0": holder holds it
// ARGV[5] -> lease deadline, unix ms
// ARGV[6] -> grace ms
// ARGV[7] -> max attempts
// ARGV[8] -> next attempt, unix ms
// ARGV[9] -> cause of the previous attempt's end
// ARGV[10] -> status message
// ARGV[11] -> channel
// ARGV[12] -> the webhook notify channel, empty when events are not recorded
// KEYS[2] -> <prefix>:{<owner>}:wh  the owner's webhook outbox: task.rerun
//
// Returns {0, attempt, keys used, previous holder}, {1}, {2}, {3, status},
// {7, holder}, {8}, {10, attempts}.
var beginAttemptCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
local l = redis.call('HMGET', KEYS[1], 'lease_holder', 'lease_until', 'lease_from', 'attempts')
local prev = l[1] or ''
local holder = ARGV[3]
if ARGV[4] == '1' then
  if prev ~= '' and tonumber(l[2] or 0) + tonumber(ARGV[6]) > tonumber(ARGV[2]) then
    return {7, prev}
  end
elseif prev ~= holder then
  return {8}
end
redis.call('HSET', KEYS[1], 'lease_holder', holder, 'lease_until', ARGV[5])
if prev ~= '' and prev ~= holder and not l[3] then
  redis.call('HSET', KEYS[1], 'lease_from', prev)
end
local n = tonumber(l[4] or '1')
if n >= tonumber(ARGV[7]) then return {10, tostring(n)} end
n = n + 1
local all = redis.call('HGETALL', KEYS[1])
local used = 0
for i = 1, #all, 2 do
  local f = all[i]
  local p = string.sub(f, 1, 3)
  if p == 'in:' or p == 're:' or p == 'tk:' then
    redis.call('HDEL', KEYS[1], f)
  elseif string.sub(f, 1, 5) == 'used:' then
    used = used + 1
  end
end
redis.call('HDEL', KEYS[1], 'take')
redis.call('HSET', KEYS[1], 'attempts', n, 'next_attempt', ARGV[8], 'last_cause', ARGV[9],
  'status', 'working', 'updated', ARGV[2], 'pending', 0)
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'message', ARGV[10]) end
whEmit(2, ARGV[12], 'task.rerun', {})
redis.call('PUBLISH', ARGV[11], 'status:working')
return {0, n, used, prev}
`)

// setUpTaskCmd records the upstream's own task of a held call.
//
// KEYS[1] -> <prefix>:{<owner>}:t:<id>
// ARGV[1] -> owner
// ARGV[2] -> now, unix ms
// ARGV[3] -> holder
// ARGV[4] -> the upstream's task id
//
// Returns {0}, {1}, {2}, {3, status}, {8}.
var setUpTaskCmd = redis.NewScript(luaPrologue + `
if terminal(status) then return {3, status} end
if redis.call('HGET', KEYS[1], 'lease_holder') ~= ARGV[3] then return {8} end
redis.call('HSET', KEYS[1], 'up_task', ARGV[4])
return {0}
`)
