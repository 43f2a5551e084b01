package taskstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Webhook deliveries, stage 2: one queue per endpoint (doc.go, "Webhooks").
//
// The dispatcher turns each outbox event into one delivery per endpoint
// that wants it (EnqueueDelivery), with the payload rendered and signed
// once. Every key of one endpoint has the hash tag {wh:<endpoint>}, so
// each step is one script in one slot:
//
//	<prefix>:{wh:<ep>}:m:<event id>   STR   enqueued once (idempotency marker)
//	<prefix>:{wh:<ep>}:d:<event id>   HASH  the delivery (fields below)
//	<prefix>:{wh:<ep>}:q:<task id>    LIST  the task's pending event ids, in order
//	<prefix>:{wh:<ep>}:due            ZSET  event id -> due ms (heads of the lists)
//	<prefix>:{wh:<ep>}:dead           ZSET  event id -> dead ms (newest 1,000, 30 days)
//
// Only the head of a task's list is ever in due, so one task's events go
// out in order (a receiver sees task.completed after task.created). Claim
// moves a due delivery's score to now+lease: if the claimer dies, it is
// due again then (at least once; the receiver drops duplicates by
// webhook-id). Done removes it and makes the task's next one due; Retry
// makes it due again later; Dead keeps it in the dead letters and makes
// the task's next one due; RetryDead makes a dead letter due now, outside
// its task's order (the operator asked). The marker outlives the
// delivery (keep), so an event read again from the outbox (the
// dispatcher died before its ack) is not enqueued twice.
//
//	delivery hash: event endpoint task type payload attempts enq next err trace keep [dead]

const (
	// DeadLetterMax and DeadLetterKeep bound an endpoint's dead letters.
	DeadLetterMax  = 1000
	DeadLetterKeep = 30 * 24 * time.Hour
)

// Delivery is one event to POST to one endpoint.
type Delivery struct {
	EventID, Endpoint, TaskID, Type string
	// Payload is the body, rendered once at enqueue.
	Payload []byte
	// Attempts counts the claims so far: 1 when first handed out.
	Attempts int
	// EnqueuedAt: when it was enqueued (or an operator retried it as a
	// dead letter: the retry window starts again). NextAt: when it is due.
	EnqueuedAt, NextAt time.Time
	LastError          string
	// TraceParent is the task's trace, for the delivery span's link.
	TraceParent string
	// DeadAt: when it became a dead letter (DeadDeliveries).
	DeadAt time.Time
}

// ErrBadEndpoint: an endpoint name the delivery keys cannot carry.
var ErrBadEndpoint = errors.New("taskstore: bad webhook endpoint name")

// checkEndpoint: a name between 1 and 200 bytes without braces (it is a
// Cluster hash tag, which ends at the first '}').
func checkEndpoint(name string) error {
	if name == "" || len(name) > 200 || strings.ContainsAny(name, "{}") {
		return fmt.Errorf("%w: %q", ErrBadEndpoint, name)
	}
	return nil
}

// eventTask is the task id in an event id "evt_<task id>_<n>".
func eventTask(eventID string) (string, bool) {
	rest, ok := strings.CutPrefix(eventID, "evt_")
	if !ok || len(rest) < 38 || rest[36] != '_' {
		return "", false
	}
	id := rest[:36]
	if uuid.Validate(id) != nil {
		return "", false
	}
	if _, err := strconv.ParseUint(rest[37:], 10, 64); err != nil {
		return "", false
	}
	return id, true
}

// queueKeys checks endpoint and event id and returns the delivery's hash
// and its task's list.
func (s *Store) queueKeys(endpoint, eventID string) (hash, list string, err error) {
	if err := checkEndpoint(endpoint); err != nil {
		return "", "", err
	}
	task, ok := eventTask(eventID)
	if !ok {
		return "", "", fmt.Errorf("%w: event id %q", ErrNotFound, eventID)
	}
	return s.k.whDelivery(endpoint, eventID), s.k.whTask(endpoint, task), nil
}

// claimDeliveriesCmd takes due deliveries: each still due by now gets the
// lease as its score and one more attempt. A head whose hash expired
// (nobody delivered for longer than keep) is dropped, and its task's next
// becomes due.
//
// KEYS[1] -> due
// KEYS[2i], KEYS[2i+1] -> candidate i's hash and task list
// ARGV[1] -> now, unix ms
// ARGV[2] -> lease deadline, unix ms
// ARGV[2+i] -> candidate i's event id
//
// Returns {0, {field, value, …}, …}: the claimed deliveries' hashes.
var claimDeliveriesCmd = redis.NewScript(`
local r = {0}
for i = 3, #ARGV do
  local id = ARGV[i]
  local h, l = KEYS[2 * (i - 2)], KEYS[2 * (i - 2) + 1]
  local sc = redis.call('ZSCORE', KEYS[1], id)
  if sc and tonumber(sc) <= tonumber(ARGV[1]) then
    if redis.call('EXISTS', h) == 1 then
      redis.call('ZADD', KEYS[1], ARGV[2], id)
      redis.call('HINCRBY', h, 'attempts', 1)
      redis.call('HSET', h, 'next', ARGV[2])
      r[#r + 1] = redis.call('HGETALL', h)
    else
      redis.call('ZREM', KEYS[1], id)
      redis.call('LREM', l, 1, id)
      local nx = redis.call('LINDEX', l, 0)
      if nx then redis.call('ZADD', KEYS[1], 'NX', ARGV[1], nx) end
    end
  end
end
return r
`)

// ClaimDeliveries hands out up to max deliveries of the endpoint that are
// due, each leased for lease: it is due again then unless DeliveryDone,
// DeliveryRetry or DeliveryDead said what became of it. Two round trips:
// a read of the candidates, then a script that claims those still due.
func (s *Store) ClaimDeliveries(ctx context.Context, endpoint string, max int, lease time.Duration) ([]Delivery, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, fmt.Errorf("taskstore: claim deliveries: %w", err)
	}
	if max <= 0 {
		return nil, nil
	}
	now := s.opt.Clock()
	due := s.k.whDue(endpoint)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: due, ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(max)}).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: claim deliveries: %w", classify(ctx, err))
	}
	keys := []string{due}
	args := []interface{}{now.UnixMilli(), now.Add(lease).UnixMilli()}
	for _, id := range ids {
		hash, list, err := s.queueKeys(endpoint, id)
		if err != nil { // not ours: drop it rather than stall the queue
			_ = s.rdb.ZRem(ctx, due, id).Err()
			continue
		}
		keys = append(keys, hash, list)
		args = append(args, id)
	}
	if len(keys) == 1 {
		return nil, nil
	}
	vals, err := s.run(ctx, claimDeliveriesCmd, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("taskstore: claim deliveries: %w", err)
	}
	ds := make([]Delivery, 0, len(vals)-1)
	for _, v := range vals[1:] {
		pairs, _ := v.([]interface{})
		ds = append(ds, decodeDelivery(decodePairs(pairs)))
	}
	return ds, nil
}

func decodeDelivery(m map[string]string) Delivery {
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(m[f], 10, 64)
		return n
	}
	d := Delivery{
		EventID: m["event"], Endpoint: m["endpoint"], TaskID: m["task"], Type: m["type"],
		Payload: []byte(m["payload"]), Attempts: int(num("attempts")),
		EnqueuedAt: fromMS(num("enq")), NextAt: fromMS(num("next")), LastError: m["err"],
		TraceParent: m["trace"],
	}
	if v := num("dead"); v > 0 {
		d.DeadAt = fromMS(v)
	}
	return d
}

// doneCmd removes a delivery and makes its task's next one due.
//
// KEYS[1] -> due, KEYS[2] -> hash, KEYS[3] -> task list, KEYS[4] -> dead
// ARGV[1] -> event id
// ARGV[2] -> now, unix ms
//
// Returns {0}.
var doneCmd = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('LREM', KEYS[3], 1, ARGV[1])
local nx = redis.call('LINDEX', KEYS[3], 0)
if nx then redis.call('ZADD', KEYS[1], 'NX', ARGV[2], nx) end
return {0}
`)

// DeliveryDone records that the endpoint accepted the event (2xx): the
// delivery is removed and the task's next one is due. Unknown or already
// done: nothing happens.
func (s *Store) DeliveryDone(ctx context.Context, endpoint, eventID string) error {
	hash, list, err := s.queueKeys(endpoint, eventID)
	if err == nil {
		_, err = s.run(ctx, doneCmd, []string{s.k.whDue(endpoint), hash, list, s.k.whDead(endpoint)}, eventID, s.nowMS())
	}
	if err != nil {
		return fmt.Errorf("taskstore: delivery %s done: %w", eventID, err)
	}
	return nil
}

// retryCmd makes a queued delivery due again at ARGV[2].
//
// KEYS[1] -> due, KEYS[2] -> hash
// ARGV[1] -> event id
// ARGV[2] -> next, unix ms
// ARGV[3] -> the last error
//
// Returns {0}, {1} when it is no longer queued.
var retryCmd = redis.NewScript(`
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('EXISTS', KEYS[2]) == 0 then return {1} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], 'next', ARGV[2], 'err', ARGV[3])
return {0}
`)

// DeliveryRetry makes the delivery due again at next, recording lastErr
// (cut to 1,000 bytes). A delivery no longer queued (done, dead, expired)
// is left alone.
func (s *Store) DeliveryRetry(ctx context.Context, endpoint, eventID string, next time.Time, lastErr string) error {
	hash, _, err := s.queueKeys(endpoint, eventID)
	if err == nil {
		_, err = s.run(ctx, retryCmd, []string{s.k.whDue(endpoint), hash}, eventID, next.UnixMilli(), cut(lastErr, 1000))
	}
	if err != nil {
		return fmt.Errorf("taskstore: retry delivery %s: %w", eventID, err)
	}
	return nil
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// deadCmd makes a delivery a dead letter and its task's next one due, and
// trims the dead letters (older than the keep, beyond the max).
//
// KEYS[1] -> due, KEYS[2] -> hash, KEYS[3] -> task list, KEYS[4] -> dead
// ARGV[1] -> event id
// ARGV[2] -> now, unix ms
// ARGV[3] -> the last error
// ARGV[4] -> dead letter keep ms
// ARGV[5] -> dead letters max
//
// Returns {0, trimmed id, …} (their hashes are the caller's to delete),
// {1} when the delivery is unknown.
var deadCmd = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('LREM', KEYS[3], 1, ARGV[1])
local nx = redis.call('LINDEX', KEYS[3], 0)
if nx then redis.call('ZADD', KEYS[1], 'NX', ARGV[2], nx) end
if redis.call('EXISTS', KEYS[2]) == 0 then return {1} end
redis.call('HSET', KEYS[2], 'err', ARGV[3], 'dead', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
local r = {0}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[4]))) do r[#r + 1] = id end
local over = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[5])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, over - 1)) do r[#r + 1] = id end
end
for i = 2, #r do redis.call('ZREM', KEYS[4], r[i]) end
return r
`)

// DeliveryDead makes the delivery a dead letter (its retry window is
// spent), recording lastErr, and makes its task's next one due. Dead
// letters are kept for DeadLetterKeep, the newest DeadLetterMax per
// endpoint.
func (s *Store) DeliveryDead(ctx context.Context, endpoint, eventID, lastErr string) error {
	err := s.deliveryDead(ctx, endpoint, eventID, lastErr)
	if err != nil {
		return fmt.Errorf("taskstore: dead delivery %s: %w", eventID, err)
	}
	return nil
}

func (s *Store) deliveryDead(ctx context.Context, endpoint, eventID, lastErr string) error {
	hash, list, err := s.queueKeys(endpoint, eventID)
	if err != nil {
		return err
	}
	vals, err := s.run(ctx, deadCmd, []string{s.k.whDue(endpoint), hash, list, s.k.whDead(endpoint)},
		eventID, s.nowMS(), cut(lastErr, 1000), ms(DeadLetterKeep), DeadLetterMax)
	if err != nil || len(vals) < 2 {
		return err
	}
	var trimmed []string
	for _, v := range vals[1:] {
		if id, ok := v.(string); ok {
			if h, _, err := s.queueKeys(endpoint, id); err == nil {
				trimmed = append(trimmed, h)
			}
		}
	}
	if len(trimmed) > 0 {
		// Another slot-mate of the hash, but a separate command: a
		// trimmed letter's hash would expire by itself anyway.
		_ = s.rdb.Del(ctx, trimmed...).Err()
	}
	return nil
}

// DeadDeliveries returns up to limit of the endpoint's dead letters,
// newest first.
func (s *Store) DeadDeliveries(ctx context.Context, endpoint string, limit int) ([]Delivery, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, fmt.Errorf("taskstore: dead deliveries: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	ids, err := s.rdb.ZRevRange(ctx, s.k.whDead(endpoint), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: dead deliveries: %w", classify(ctx, err))
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, 0, len(ids))
	for _, id := range ids {
		if hash, _, err := s.queueKeys(endpoint, id); err == nil {
			cmds = append(cmds, pipe.HGetAll(ctx, hash))
		}
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("taskstore: dead deliveries: %w", classify(ctx, err))
	}
	ds := make([]Delivery, 0, len(cmds))
	for _, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			ds = append(ds, decodeDelivery(m))
		}
	}
	return ds, nil
}

// retryDeadCmd makes a dead letter due now, with a new retry window.
//
// KEYS[1] -> dead, KEYS[2] -> due, KEYS[3] -> hash
// ARGV[1] -> event id
// ARGV[2] -> now, unix ms
//
// Returns {0}, {1} when it is no dead letter.
var retryDeadCmd = redis.NewScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return {1} end
if redis.call('EXISTS', KEYS[3]) == 0 then return {1} end
local keep = redis.call('HGET', KEYS[3], 'keep')
redis.call('HSET', KEYS[3], 'enq', ARGV[2], 'next', ARGV[2])
redis.call('HDEL', KEYS[3], 'dead')
if keep then redis.call('PEXPIRE', KEYS[3], keep) end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return {0}
`)

// RetryDead puts a dead letter back in the endpoint's queue, due now and
// with a new retry window (EnqueuedAt is now). It goes out on its own,
// not behind its task's pending events: the operator asked for it.
// ErrNotFound when it is no dead letter of the endpoint.
func (s *Store) RetryDead(ctx context.Context, endpoint, eventID string) error {
	hash, _, err := s.queueKeys(endpoint, eventID)
	if err == nil {
		var vals []interface{}
		vals, err = s.run(ctx, retryDeadCmd, []string{s.k.whDead(endpoint), s.k.whDue(endpoint), hash}, eventID, s.nowMS())
		if err == nil && code(vals) != 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: retry dead delivery %s: %w", eventID, err)
	}
	return nil
}

// WebhookQueueStats returns how many deliveries of the endpoint are
// scheduled (due now or later, claimed included; one per task with
// pending events) and how many are dead letters.
func (s *Store) WebhookQueueStats(ctx context.Context, endpoint string) (due, dead int64, err error) {
	if err := checkEndpoint(endpoint); err != nil {
		return 0, 0, fmt.Errorf("taskstore: webhook queue stats: %w", err)
	}
	pipe := s.rdb.Pipeline()
	d := pipe.ZCard(ctx, s.k.whDue(endpoint))
	x := pipe.ZCard(ctx, s.k.whDead(endpoint))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("taskstore: webhook queue stats: %w", classify(ctx, err))
	}
	return d.Val(), x.Val(), nil
}
