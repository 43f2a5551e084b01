package taskstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Anonymous tasks. A task of a client that sends no credentials is its own
// owner (its id is the only bearer), so the per-owner cap cannot bound
// them; two indexes do, across all replicas:
//
//	<prefix>:{anon}:live          ZSET task id -> expiry ms, every anonymous task
//	<prefix>:{anon}:addr:<hash>   ZSET task id -> expiry ms, per client address
//
// Both share the {anon} hash tag, so one script checks and updates both on
// one Cluster slot. An entry counts until its task's expiry, finished or not:
// the caps bound what anonymous clients can make Redis hold.

// reserveAnonCmd reserves a place for an anonymous task.
//
// KEYS[1] -> <prefix>:{anon}:live
// KEYS[2] -> <prefix>:{anon}:addr:<hash>
// ARGV[1] -> task id
// ARGV[2] -> now, unix ms
// ARGV[3] -> the task's expiry, unix ms
// ARGV[4] -> global cap, -1 for none
// ARGV[5] -> per-address cap, -1 for none
//
// Returns {0} reserved, {1} at the global cap, {2} at the address's cap.
var reserveAnonCmd = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
local max, per = tonumber(ARGV[4]), tonumber(ARGV[5])
if max >= 0 and redis.call('ZCARD', KEYS[1]) >= max then return {1} end
if per >= 0 and redis.call('ZCARD', KEYS[2]) >= per then return {2} end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
for i = 1, 2 do
  local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[i], last[2])
end
return {0}
`)

func (k keys) anonLive() string { return k.prefix + ":{anon}:live" }

func (k keys) anonAddr(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return k.prefix + ":{anon}:addr:" + hex.EncodeToString(sum[:16])
}

// ReserveAnonymous counts anonymous task id, created by a client at addr
// and living until expiry, against the caps: max anonymous tasks in all,
// perAddr from one address (negative: no cap). ErrTooManyAnonymous or
// ErrTooManyFromAddress when a cap is reached; then nothing is counted.
func (s *Store) ReserveAnonymous(ctx context.Context, id, addr string, expiry time.Time, max, perAddr int) error {
	vals, err := s.run(ctx, reserveAnonCmd, []string{s.k.anonLive(), s.k.anonAddr(addr)},
		id, s.nowMS(), expiry.UnixMilli(), max, perAddr)
	if err == nil {
		switch code, _ := vals[0].(int64); code {
		case 0:
		case 1:
			err = ErrTooManyAnonymous
		case 2:
			err = ErrTooManyFromAddress
		default:
			err = fmt.Errorf("taskstore: unexpected reply %v", vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: reserve anonymous task %s: %w", id, err)
	}
	return nil
}

// renewAnonCmd moves the expiry of a reserved place later, without the
// caps' check: a place already held is kept, not taken anew. KEYS and
// ARGV[1], ARGV[3] as reserveAnonCmd's.
var renewAnonCmd = redis.NewScript(`
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], 'GT', ARGV[3], ARGV[1])
  local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[i], last[2])
end
return 1
`)

// RenewAnonymous keeps id's place in the anonymous caps until expiry (a
// session without Authorization still in use): it counts as before, or
// again if its place had lapsed, whatever the caps say now.
func (s *Store) RenewAnonymous(ctx context.Context, id, addr string, expiry time.Time) error {
	if err := renewAnonCmd.Run(ctx, s.rdb, []string{s.k.anonLive(), s.k.anonAddr(addr)}, id, s.nowMS(), expiry.UnixMilli()).Err(); err != nil {
		return fmt.Errorf("taskstore: renew anonymous place %s: %w", id, classify(ctx, err))
	}
	return nil
}

// ReleaseAnonymous gives back what ReserveAnonymous counted for id, for a
// task that was not created after all.
func (s *Store) ReleaseAnonymous(ctx context.Context, id, addr string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, s.k.anonLive(), id)
		p.ZRem(ctx, s.k.anonAddr(addr), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("taskstore: release anonymous task %s: %w", id, classify(ctx, err))
	}
	return nil
}
