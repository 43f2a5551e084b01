package taskstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicas' heartbeats, for the operator's console: each replica
// publishes a small record of itself every few seconds; the console lists
// the ones seen lately. Bounded: a record expires on its own (keep), and
// the set naming the replicas drops the ones not seen within keep at each
// publish.
//
//	<prefix>:replica:<id>   STRING the record (JSON), expiring after keep
//	<prefix>:replicas       ZSET id -> last publish ms

// ReplicaStatus is one replica's heartbeat record.
type ReplicaStatus struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Held is the upstream calls it holds, against MaxInflight (0: no
	// limit).
	Held        int `json:"held"`
	MaxInflight int `json:"max_inflight"`
	// Leases is how many tasks' leases its workers hold.
	Leases int `json:"leases"`
	// LastSweep is when its recoverer last reached the store (zero: not
	// yet).
	LastSweep time.Time `json:"last_sweep"`
	// Store is its store's kind (embedded, redis, sentinel, cluster)
	// and its connection pool, e.g. "redis, 4 connections (2 idle)".
	Store string `json:"store"`
	// UpstreamUp is whether it last saw its upstream answering as MCP.
	UpstreamUp bool `json:"upstream_up"`
	// Draining is true once it began shutting down.
	Draining bool `json:"draining,omitempty"`
	// At is when it published this record (the store's clock).
	At time.Time `json:"at"`
}

// maxReplicaRecord bounds one record: a replica id or version that long is
// a mistake, not a reason to grow Redis.
const maxReplicaRecord = 4096

// PublishReplica writes r as r.ID's heartbeat, kept for keep. One round
// trip (pipelined).
func (s *Store) PublishReplica(ctx context.Context, r ReplicaStatus, keep time.Duration) error {
	if r.ID == "" || strings.ContainsAny(r.ID, "\r\n") {
		return fmt.Errorf("taskstore: publish replica: bad replica id %q", r.ID)
	}
	now := s.nowMS()
	r.At = fromMS(now)
	b, err := json.Marshal(r)
	if err != nil || len(b) > maxReplicaRecord {
		return fmt.Errorf("taskstore: publish replica %s: record too large or invalid", r.ID)
	}
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, s.k.replica(r.ID), b, keep)
	pipe.ZAdd(ctx, s.k.replicas(), redis.Z{Score: float64(now), Member: r.ID})
	pipe.ZRemRangeByScore(ctx, s.k.replicas(), "-inf", "("+strconv.FormatInt(now-keep.Milliseconds(), 10))
	pipe.PExpire(ctx, s.k.replicas(), keep)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("taskstore: publish replica %s: %w", r.ID, classify(ctx, err))
	}
	return nil
}

// Replicas returns the heartbeats published within d, by replica id. Two
// round trips.
func (s *Store) Replicas(ctx context.Context, d time.Duration) ([]ReplicaStatus, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.k.replicas(), &redis.ZRangeBy{
		Min: strconv.FormatInt(s.nowMS()-d.Milliseconds(), 10), Max: "+inf", Count: 1000}).Result()
	if err != nil {
		return nil, fmt.Errorf("taskstore: replicas: %w", classify(ctx, err))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// One GET each, pipelined: on Cluster the records are in many slots.
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, s.k.replica(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("taskstore: replicas: %w", classify(ctx, err))
	}
	out := make([]ReplicaStatus, 0, len(ids))
	for i, c := range cmds {
		var r ReplicaStatus
		if b, err := c.Bytes(); err != nil || json.Unmarshal(b, &r) != nil || r.ID != ids[i] {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b ReplicaStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
