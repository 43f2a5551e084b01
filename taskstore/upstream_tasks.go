package taskstore

// Upstream tasks: tasks an upstream with tasks of its own created (its
// tool declares execution.taskSupport), which the gateway passes through
// rather than runs. The gateway records each id under the owner whose call
// created it, so that a tasks/get, tasks/result or tasks/cancel of that id
// on any replica goes to the upstream, and another owner's never does.
//
//	<prefix>:{<owner>}:ut:<id>   STRING "1"; PEXPIRE the task's ttl

import (
	"context"
	"fmt"
	"time"
)

// DefaultUpstreamTaskTTL is how long an upstream task's record lives when
// the upstream named no ttl.
const DefaultUpstreamTaskTTL = 24 * time.Hour

func (k keys) upstreamTask(owner, id string) string { return k.ownerBase(owner) + ":ut:" + id }

// maxUpstreamTaskID bounds an upstream task id the store keeps.
const maxUpstreamTaskID = 256

// PutUpstreamTask records that owner's call created the upstream's task
// id, for ttl (zero or negative: DefaultUpstreamTaskTTL; at most MaxTTL).
func (s *Store) PutUpstreamTask(ctx context.Context, owner, id string, ttl time.Duration) error {
	if id == "" || len(id) > maxUpstreamTaskID {
		return fmt.Errorf("taskstore: upstream task id of %d bytes", len(id))
	}
	if ttl <= 0 {
		ttl = DefaultUpstreamTaskTTL
	}
	ttl = min(ttl, s.opt.MaxTTL)
	if err := s.rdb.Set(ctx, s.k.upstreamTask(owner, id), "1", ttl).Err(); err != nil {
		return fmt.Errorf("taskstore: put upstream task %s: %w", id, classify(ctx, err))
	}
	return nil
}

// IsUpstreamTask reports whether owner's call created the upstream's task
// id (PutUpstreamTask), and it has not expired.
func (s *Store) IsUpstreamTask(ctx context.Context, owner, id string) (bool, error) {
	if id == "" || len(id) > maxUpstreamTaskID {
		return false, nil
	}
	n, err := s.rdb.Exists(ctx, s.k.upstreamTask(owner, id)).Result()
	if err != nil {
		return false, fmt.Errorf("taskstore: upstream task %s: %w", id, classify(ctx, err))
	}
	return n == 1, nil
}
