package taskstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// enqueueCmd records deliveries of one endpoint, each once: the
// dispatcher queues a whole batch of events per endpoint in one script
// (one round trip), not one per event, which under load cost task
// handling Redis time and round trips (bench -mode webhooks). All keys
// share the endpoint's hash tag {wh:<ep>}, so it is one slot (Redis
// Cluster, "Keys hash tags").
//
// KEYS[1] -> due
// KEYS[3i-1], KEYS[3i], KEYS[3i+1] -> delivery i's marker, hash, task list (i from 1)
// ARGV[1] -> keep ms (marker, hash and list lifetime)
// then per delivery: event id, due (unix ms), n, and n field/value args of its hash
//
// Returns {0, e1, e2, …}: ei is 1 when delivery i was enqueued, 0 when
// it was known already (within keep, or earlier in this batch).
var enqueueCmd = redis.NewScript(`
local r, a, keep = {0}, 2, ARGV[1]
for i = 1, (#KEYS - 1) / 3 do
  local m, h, l = KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1]
  local id, due, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  if redis.call('SET', m, '1', 'NX', 'PX', keep) then
    redis.call('HSET', h, unpack(ARGV, a + 3, a + 2 + n))
    redis.call('PEXPIRE', h, keep)
    if redis.call('RPUSH', l, id) == 1 then redis.call('ZADD', KEYS[1], due, id) end
    redis.call('PEXPIRE', l, keep)
    r[#r + 1] = 1
  else
    r[#r + 1] = 0
  end
  a = a + 3 + n
end
return r
`)

// EnqueueDelivery queues d for d.Endpoint, due at d.NextAt (now when
// zero), unless the event was enqueued for the endpoint within keep (use
// the retry window and a day): then it returns false. d.EventID must be
// an event id of this store ("evt_<task>_<n>").
func (s *Store) EnqueueDelivery(ctx context.Context, d Delivery, keep time.Duration) (bool, error) {
	fresh, err := s.EnqueueDeliveries(ctx, []Delivery{d}, keep)
	if err != nil {
		return false, err
	}
	return fresh[0], nil
}

// EnqueueDeliveries queues ds as EnqueueDelivery does each, in order
// (one task's events queue in the order given), with one script per
// endpoint. fresh[i] is false when ds[i] was known already. A bad
// delivery (endpoint, event id) fails the whole call before anything is
// queued; a Redis error may leave an earlier endpoint's part queued,
// which a retry of the call finds known.
func (s *Store) EnqueueDeliveries(ctx context.Context, ds []Delivery, keep time.Duration) (fresh []bool, err error) {
	if keep <= 0 {
		return nil, fmt.Errorf("taskstore: enqueue deliveries: keep %v", keep)
	}
	byEndpoint := map[string][]int{}
	var order []string
	for i, d := range ds {
		if _, _, err := s.queueKeys(d.Endpoint, d.EventID); err != nil {
			return nil, fmt.Errorf("taskstore: enqueue delivery: %w", err)
		}
		if _, ok := byEndpoint[d.Endpoint]; !ok {
			order = append(order, d.Endpoint)
		}
		byEndpoint[d.Endpoint] = append(byEndpoint[d.Endpoint], i)
	}
	fresh = make([]bool, len(ds))
	now := s.nowMS()
	for _, ep := range order {
		idx := byEndpoint[ep]
		keys, args := s.enqueueArgs(ep, ds, idx, now, ms(keep))
		vals, err := s.run(ctx, enqueueCmd, keys, args...)
		if err != nil {
			return nil, fmt.Errorf("taskstore: enqueue %d deliveries to %s: %w", len(idx), ep, err)
		}
		for j, i := range idx {
			if j+1 < len(vals) {
				n, _ := vals[j+1].(int64)
				fresh[i] = n == 1
			}
		}
	}
	return fresh, nil
}

// enqueueArgs are enqueueCmd's keys and args for ds[idx…], all of endpoint ep.
func (s *Store) enqueueArgs(ep string, ds []Delivery, idx []int, now, keep int64) ([]string, []interface{}) {
	keys := make([]string, 1, 1+3*len(idx))
	keys[0] = s.k.whDue(ep)
	args := make([]interface{}, 1, 1+len(idx)*24)
	args[0] = keep
	for _, i := range idx {
		d := ds[i]
		hash, list, _ := s.queueKeys(ep, d.EventID) // checked by the caller
		keys = append(keys, s.k.whMarker(ep, d.EventID), hash, list)
		due := now
		if !d.NextAt.IsZero() {
			due = d.NextAt.UnixMilli()
		}
		fields := []interface{}{"event", d.EventID, "endpoint", d.Endpoint, "task", d.TaskID, "type", d.Type,
			"payload", d.Payload, "attempts", d.Attempts, "enq", now, "next", due, "keep", keep}
		if d.TraceParent != "" {
			fields = append(fields, "trace", d.TraceParent)
		}
		if d.LastError != "" {
			fields = append(fields, "err", d.LastError)
		}
		args = append(args, d.EventID, due, len(fields))
		args = append(args, fields...)
	}
	return keys, args
}
