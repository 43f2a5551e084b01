package taskstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Webhook events, stage 1: the outbox (doc.go, "Webhooks").
//
// With Options.Webhooks, every script that changes a task's status also
// appends one event to the owner's outbox (keys.outbox, a STREAM in the
// owner's slot) in the same atomic step: a replica that dies right after
// the change loses no event, and Redis Cluster works (one slot per
// script). The event id is "evt_<task id>_<n>", n counted in the task hash
// (field whseq): unique and stable, so a receiver drops a duplicate by its
// webhook-id (Standard Webhooks, "Webhook Metadata"). The script then
// PUBLISHes the outbox key on keys.webhookNotify, so a dispatcher wakes at
// once (WatchWebhookEvents); pub/sub is only a hint, the stream is the
// truth.
//
// Because outboxes are per owner, the Store also SADDs the outbox key to
// the hint SET keys.outboxes, in the same pipeline right after the script
// (another slot: not atomic, like the leases index). SweepWebhookOutboxes
// re-adds any outbox the hint lost (SCAN on every master, at most once a
// minute across the fleet).
//
// Readers share one consumer group (whGroup), created lazily, so any
// replica reads any outbox, each entry at least once. One outbox is read
// by one consumer at a time: new entries are read only when none is
// pending, and pending ones are taken over (XAUTOCLAIM) once they have
// been idle for claimAfter (their reader died). So a task's events are
// handed out in the order they happened. AckWebhookEvents XACKs and XDELs
// them; an outbox left empty is deleted with its group (an owner who goes
// away leaves nothing behind) and dropped from the hint.
//
//	evt entry: id type at task owner tool status [message] created attempt
//	           [trace] [im imsg] [rbytes err]

// whGroup is the consumer group of every outbox.
const whGroup = "wh"

// Event types (Standard Webhooks' "type" of the payload).
const (
	WebhookTaskCreated       = "task.created"
	WebhookTaskInputRequired = "task.input_required"
	WebhookTaskCompleted     = "task.completed"
	WebhookTaskFailed        = "task.failed"
	WebhookTaskCancelled     = "task.cancelled"
	WebhookTaskRerun         = "task.rerun"
)

// WebhookEvent is one event read from an outbox.
type WebhookEvent struct {
	ID, Type string    // "evt_<task>_<n>", "task.completed"…
	At       time.Time // when the change happened (the Store's clock)
	Outbox   string    // the outbox key it came from (for Ack)
	StreamID string    // its stream entry id (for Ack)

	TaskID, Owner, Tool, Status, StatusMessage string
	CreatedAt                                  time.Time
	Attempt                                    int // 1 for the first run; reruns count up
	// InputMethod and InputMessage: task.input_required's first request
	// (in key order): its method and its params' message, if any.
	InputMethod, InputMessage string
	// ResultBytes and IsError: outcomes (completed, failed).
	ResultBytes int
	IsError     bool
	// TraceParent is the task's trace (Task.Trace), for the delivery
	// span's link.
	TraceParent string
}

// luaWebhook is whEmit, included in every status-changing script:
// whEmit(k, ch, typ, x) appends the task's event typ to the outbox
// KEYS[k], with the task's fields read from KEYS[1] after the change and
// x's field/value pairs, and PUBLISHes the outbox key on ch. ch is the
// script's webhook ARGV: empty when the store records no events (then
// nothing happens), else the notify channel. It needs ARGV[2] = now.
const luaWebhook = `
local function whEmit(k, ch, typ, x)
  if ch == '' then return end
  local n = redis.call('HINCRBY', KEYS[1], 'whseq', 1)
  local t = redis.call('HMGET', KEYS[1], 'id', 'owner', 'tool', 'status', 'message', 'created', 'attempts', 'trace')
  local f = {'id', 'evt_' .. t[1] .. '_' .. n, 'type', typ, 'at', ARGV[2], 'task', t[1], 'owner', t[2],
    'tool', t[3] or '', 'status', t[4], 'created', t[6], 'attempt', t[7] or '1'}
  if t[5] then f[#f + 1] = 'message'; f[#f + 1] = string.sub(t[5], 1, 1000) end
  if t[8] then f[#f + 1] = 'trace'; f[#f + 1] = t[8] end
  for i = 1, #x do f[#f + 1] = x[i] end
  redis.call('XADD', KEYS[k], '*', unpack(f))
  redis.call('PUBLISH', ch, KEYS[k])
end
`

// readOutboxCmd reads one outbox for one consumer (see above). While
// entries are pending, new ones are not read (they would overtake them,
// and one task's events must be queued in order): the consumer's own
// pending entries first (ID 0: those it read and could not acknowledge,
// a failed queueing or a reply lost to a Redis restart; read again at
// once rather than after ARGV[4]), else those idle for ARGV[4] ms (a dead
// reader's). Only when none are pending, new ones.
//
// KEYS[1] -> <prefix>:{<owner>}:wh   the outbox
// ARGV[1] -> group
// ARGV[2] -> consumer
// ARGV[3] -> count
// ARGV[4] -> claim after, ms
//
// Returns {0, entries} (maybe none: another consumer is at it), {1} the
// outbox is gone (empty, deleted).
var readOutboxCmd = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if p.err then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0')
  p = {0}
end
if p[1] > 0 then
  local own = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '0')
  local mine = {}
  for _, e in ipairs((own and own[1] and own[1][2]) or {}) do
    -- an entry deleted while pending comes back without fields: drop it
    if e[2] then mine[#mine + 1] = e else redis.call('XACK', KEYS[1], ARGV[1], e[1]) end
  end
  if #mine > 0 then return {0, mine} end
  local c = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[4], '0-0', 'COUNT', ARGV[3])
  return {0, c[2]}
end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
if r and r[1] and #r[1][2] > 0 then return {0, r[1][2]} end
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1])
  return {1}
end
return {0, {}}
`)

// ackOutboxCmd acknowledges and removes handled entries; an outbox left
// empty is deleted (with its group: readOutboxCmd makes a new one).
//
// KEYS[1] -> <prefix>:{<owner>}:wh   the outbox
// ARGV[1] -> group
// ARGV[2..] -> entry ids
//
// Returns {0}, or {1} when the outbox was deleted.
var ackOutboxCmd = redis.NewScript(`
redis.pcall('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1])
  return {1}
end
return {0}
`)

// maxOutboxesRead bounds the outboxes one ReadWebhookEvents reads.
const maxOutboxesRead = 64

// ReadWebhookEvents reads up to about limit events for consumer (a
// replica's id) from the outboxes the hint names, taking over those
// another consumer read and left unacknowledged for claimAfter. Every
// event it returns must be passed to AckWebhookEvents once handled; one
// that is not comes back after claimAfter.
func (s *Store) ReadWebhookEvents(ctx context.Context, consumer string, limit int, claimAfter time.Duration) ([]WebhookEvent, error) {
	if consumer == "" {
		return nil, fmt.Errorf("taskstore: read webhook events: empty consumer")
	}
	if limit <= 0 {
		limit = 100
	}
	outboxes, err := s.rdb.SRandMemberN(ctx, s.k.outboxes(), int64(min(limit, maxOutboxesRead))).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: read webhook events: %w", classify(ctx, err))
	}
	if len(outboxes) == 0 {
		return nil, nil
	}
	per := max(1, limit/len(outboxes))
	calls := make([][]interface{}, len(outboxes))
	for i := range outboxes {
		calls[i] = []interface{}{whGroup, consumer, per, max(ms(claimAfter), 1)}
	}
	replies, err := s.runEach(ctx, readOutboxCmd, outboxes, calls)
	if err != nil {
		return nil, fmt.Errorf("taskstore: read webhook events: %w", err)
	}
	var evs []WebhookEvent
	var gone []string
	for i, vals := range replies {
		if code(vals) == 1 {
			gone = append(gone, outboxes[i])
			continue
		}
		if len(vals) > 1 {
			entries, _ := vals[1].([]interface{})
			evs = append(evs, decodeEvents(outboxes[i], entries)...)
		}
	}
	s.unhint(ctx, gone)
	return evs, nil
}

// AckWebhookEvents acknowledges handled events and removes them from
// their outboxes.
func (s *Store) AckWebhookEvents(ctx context.Context, evs []WebhookEvent) error {
	byOutbox := map[string][]interface{}{}
	var order []string
	for _, ev := range evs {
		if !s.k.isOutbox(ev.Outbox) || ev.StreamID == "" {
			return fmt.Errorf("taskstore: ack webhook event %q: not read from an outbox", ev.ID)
		}
		if byOutbox[ev.Outbox] == nil {
			order = append(order, ev.Outbox)
			byOutbox[ev.Outbox] = []interface{}{whGroup}
		}
		byOutbox[ev.Outbox] = append(byOutbox[ev.Outbox], ev.StreamID)
	}
	if len(order) == 0 {
		return nil
	}
	calls := make([][]interface{}, len(order))
	for i, o := range order {
		calls[i] = byOutbox[o]
	}
	replies, err := s.runEach(ctx, ackOutboxCmd, order, calls)
	if err != nil {
		return fmt.Errorf("taskstore: ack webhook events: %w", err)
	}
	var gone []string
	for i, vals := range replies {
		if code(vals) == 1 {
			gone = append(gone, order[i])
		}
	}
	s.unhint(ctx, gone)
	return nil
}

// unhint drops deleted outboxes from the hint SET. A script may have
// appended to one (creating it anew) since: it SADDs after its script,
// but perhaps before our SREM, so an outbox that exists again after the
// SREM is added back. Errors only leave a stale hint, which the next read
// drops.
func (s *Store) unhint(ctx context.Context, gone []string) {
	if len(gone) == 0 {
		return
	}
	members := make([]interface{}, len(gone))
	for i, g := range gone {
		members[i] = g
	}
	if s.rdb.SRem(ctx, s.k.outboxes(), members...).Err() != nil {
		return
	}
	pipe := s.rdb.Pipeline()
	ex := make([]*redis.IntCmd, len(gone))
	for i, g := range gone {
		ex[i] = pipe.Exists(ctx, g)
	}
	_, _ = pipe.Exec(ctx)
	for i, g := range gone {
		if ex[i].Val() == 1 {
			_ = s.rdb.SAdd(ctx, s.k.outboxes(), g).Err()
		}
	}
}

// runEach runs sc once per key (KEYS = {keys[i]}, ARGV = args[i]) in one
// pipeline, loading the script once if Redis lost it.
func (s *Store) runEach(ctx context.Context, sc *redis.Script, keys []string, args [][]interface{}) ([][]interface{}, error) {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.EvalSha(ctx, sc.Hash(), []string{k}, args[i]...)
		}
		_, _ = pipe.Exec(ctx)
		out := make([][]interface{}, len(keys))
		var noscript bool
		for i, c := range cmds {
			vals, err := c.Slice()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				noscript = true
				continue
			}
			if err != nil {
				return nil, classify(ctx, err)
			}
			if len(vals) == 0 {
				return nil, errors.New("taskstore: empty script reply")
			}
			out[i] = vals
		}
		if !noscript {
			return out, nil
		}
		if attempt > 0 {
			return nil, errors.New("taskstore: script not loaded")
		}
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return nil, classify(ctx, err)
		}
	}
}

// decodeEvents turns stream entries ({id, {field, value, …}}) into events.
func decodeEvents(outbox string, entries []interface{}) []WebhookEvent {
	evs := make([]WebhookEvent, 0, len(entries))
	for _, e := range entries {
		pair, _ := e.([]interface{})
		if len(pair) != 2 {
			continue
		}
		sid, _ := pair[0].(string)
		kv, _ := pair[1].([]interface{})
		f := make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			v, _ := kv[i+1].(string)
			f[k] = v
		}
		evs = append(evs, decodeEvent(outbox, sid, f))
	}
	return evs
}

func decodeEvent(outbox, sid string, f map[string]string) WebhookEvent {
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(f[k], 10, 64)
		return n
	}
	ev := WebhookEvent{
		ID: f["id"], Type: f["type"], At: fromMS(num("at")), Outbox: outbox, StreamID: sid,
		TaskID: f["task"], Owner: f["owner"], Tool: f["tool"], Status: f["status"],
		StatusMessage: f["message"], CreatedAt: fromMS(num("created")), Attempt: int(num("attempt")),
		InputMethod: f["im"], InputMessage: f["imsg"], ResultBytes: int(num("rbytes")),
		IsError: f["err"] == "1", TraceParent: f["trace"],
	}
	if ev.ID == "" { // not written by whEmit: still acknowledgeable
		ev.ID = "evt_unknown_" + sid
	}
	return ev
}

// WatchWebhookEvents sends on ch (without blocking: a full ch already
// says "read") whenever a script announces an outbox event, and when the
// subscription (re)becomes live, since announcements may have been lost
// meanwhile. It returns at once; stop ends it. The dispatcher reads on a
// timer too: pub/sub is at most once.
func (s *Store) WatchWebhookEvents(ctx context.Context, ch chan<- struct{}) (stop func(), err error) {
	poke := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return s.hub.listen(ctx, s.k.webhookNotify(), Removals{
		Removed: func(string) { poke() },
		Live: func(live bool) {
			if live {
				poke()
			}
		},
	})
}

// whSweepLock makes the sweep run at most once per whSweepEvery across
// the fleet: <prefix>:whsweep.
const whSweepEvery = time.Minute

func (k keys) whSweep() string { return k.prefix + ":whsweep" }

// SweepWebhookOutboxes is the hint SET's backstop: at most once a minute
// across every replica (a lock key), it SCANs every master for outboxes
// and adds them to the hint. It returns how many it found (0 also when
// another replica swept within the minute).
func (s *Store) SweepWebhookOutboxes(ctx context.Context) (int, error) {
	ok, err := s.rdb.SetNX(ctx, s.k.whSweep(), "1", whSweepEvery).Result()
	if err != nil {
		return 0, fmt.Errorf("taskstore: sweep webhook outboxes: %w", classify(ctx, err))
	}
	if !ok {
		return 0, nil
	}
	n, err := s.sweepOutboxes(ctx)
	if err != nil {
		return n, fmt.Errorf("taskstore: sweep webhook outboxes: %w", err)
	}
	return n, nil
}

// sweepOutboxes SCANs every master (one, unless Cluster) for outboxes and
// SADDs them to the hint.
func (s *Store) sweepOutboxes(ctx context.Context) (int, error) {
	var total atomic.Int64
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			ks, next, err := c.ScanType(ctx, cursor, s.k.outboxPattern(), 1000, "stream").Result()
			if err != nil {
				return classify(ctx, err)
			}
			var found []interface{}
			for _, k := range ks {
				if s.k.isOutbox(k) {
					found = append(found, k)
				}
			}
			if len(found) > 0 {
				if err := s.rdb.SAdd(ctx, s.k.outboxes(), found...).Err(); err != nil {
					return classify(ctx, err)
				}
				total.Add(int64(len(found)))
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err := c.ForEachMaster(ctx, scan)
		return int(total.Load()), err
	case *redis.Client:
		err := scan(ctx, c)
		return int(total.Load()), err
	}
	return 0, fmt.Errorf("unsupported client %T", s.rdb)
}

// whArg is the scripts' webhook ARGV: the notify channel when the store
// records events, else empty (whEmit does nothing).
func (s *Store) whArg() string {
	if s.opt.Webhooks {
		return s.k.webhookNotify()
	}
	return ""
}

// whHint is what a status-changing script's pipeline adds after it when
// the store records events: the owner's outbox named in the hint SET.
// Also after a refused change (then the next read finds the outbox empty
// and drops it again).
func (s *Store) whHint(ctx context.Context, owner string) func(redis.Pipeliner) {
	if !s.opt.Webhooks {
		return nil
	}
	return func(p redis.Pipeliner) { p.SAdd(ctx, s.k.outboxes(), s.k.outbox(owner)) }
}

// also runs both additions to a pipeline; either may be nil.
func also(a, b func(redis.Pipeliner)) func(redis.Pipeliner) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(p redis.Pipeliner) { a(p); b(p) }
}

// isErrorArg is finishCmd's "is an error" ARGV: a JSON-RPC error, or a
// CallToolResult with isError (MCP 2025-11-25, Tools, "Error Handling").
// The result is only parsed when the store records events.
func (s *Store) isErrorArg(o Outcome) string {
	if len(o.Error) > 0 {
		return "1"
	}
	if !s.opt.Webhooks || len(o.Result) == 0 {
		return "0"
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(o.Result, &r) == nil && r.IsError {
		return "1"
	}
	return "0"
}

// maxInputMessage bounds the input request message an event carries.
const maxInputMessage = 1000

// inputMessageArg is addInputsCmd's message ARGV: the request's
// params.message (an elicitation's, MCP 2025-11-25, Elicitation; a
// sampling request has none), when the store records events.
func (s *Store) inputMessageArg(r InputRequest) string {
	if !s.opt.Webhooks || len(r.Params) == 0 {
		return ""
	}
	var p struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(r.Params, &p) != nil {
		return ""
	}
	return cut(p.Message, maxInputMessage)
}
