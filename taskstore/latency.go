package taskstore

// Learned tool latencies, shared between replicas by periodic merge, which
// an "auto" decision follows (docs/ARCHITECTURE.md, "How a tools/call is
// decided"; policy.Latencies). Each replica publishes its own observations
// now and then and reads the others' back; nothing is written per
// tools/call.
//
//	<prefix>:latency:{<replica>}   HASH  tool -> encoded histogram (opaque here:
//	                                     policy.Histogram.MarshalBinary); PEXPIRE keep
//	<prefix>:latency:replicas      ZSET  replica -> time of its last publish (unix ms)
//
// A replica's hash is replaced whole at each publish and outlives its last
// publish by keep, so a replica that starts within keep of another one's
// last publish (a rolling deploy, a restart) starts warm. The index is
// trimmed by score on every load. Each replica's hash is in its own
// Cluster slot (hash tag {<replica>}) and the index in another, so a
// publish is a transaction on the hash then a write to the index, and a
// load reads the hashes in one pipeline.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// latency is a replica's published histograms: <prefix>:latency:{<replica>}.
func (k keys) latency(replica string) string { return k.prefix + ":latency:{" + replica + "}" }

// latencyReplicas is the index of publishing replicas: <prefix>:latency:replicas.
func (k keys) latencyReplicas() string { return k.prefix + ":latency:replicas" }

// PublishLatencies replaces what replica published before with hists (tool
// name → encoded histogram) and records the publish in the index; both
// expire keep after this publish unless it is renewed. An empty hists
// removes the replica's hash but still marks it alive. Two round trips:
// the hash is replaced atomically (one slot), then the index is updated.
func (s *Store) PublishLatencies(ctx context.Context, replica string, hists map[string][]byte, keep time.Duration) error {
	if replica == "" {
		return errors.New("taskstore: publish latencies: empty replica id")
	}
	if keep <= 0 {
		return errors.New("taskstore: publish latencies: keep must be positive")
	}
	key, index := s.k.latency(replica), s.k.latencyReplicas()
	now := s.nowMS()
	args := make([]interface{}, 0, 2*len(hists))
	for tool, h := range hists {
		args = append(args, tool, h)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		if len(args) > 0 {
			p.HSet(ctx, key, args...)
			p.PExpire(ctx, key, keep)
		}
		return nil
	})
	if err == nil {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, index, redis.Z{Score: float64(now), Member: replica})
			p.PExpire(ctx, index, keep)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("taskstore: publish latencies of %s: %w", replica, classify(ctx, err))
	}
	return nil
}

// LoadLatencies returns what every replica but except published within
// keep: replica → tool → encoded histogram. Replicas that have not
// published within keep leave the index. Two round trips.
func (s *Store) LoadLatencies(ctx context.Context, except string, keep time.Duration) (map[string]map[string][]byte, error) {
	index := s.k.latencyReplicas()
	oldest := s.nowMS() - keep.Milliseconds()
	var replicas *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, index, "-inf", "("+strconv.FormatInt(oldest, 10))
		replicas = p.ZRange(ctx, index, 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskstore: load latencies: %w", classify(ctx, err))
	}
	names := make([]string, 0, len(replicas.Val()))
	for _, r := range replicas.Val() {
		if r != except {
			names = append(names, r)
		}
	}
	out := make(map[string]map[string][]byte, len(names))
	if len(names) == 0 {
		return out, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(names))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range names {
			cmds[i] = p.HGetAll(ctx, s.k.latency(r))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskstore: load latencies: %w", classify(ctx, err))
	}
	for i, r := range names {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue
		}
		hists := make(map[string][]byte, len(m))
		for tool, h := range m {
			hists[tool] = []byte(h)
		}
		out[r] = hists
	}
	return out, nil
}
