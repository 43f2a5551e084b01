package taskstore

// Upstream tasks: tasks an upstream with tasks of its own created (its
// tool declares execution.taskSupport), which the gateway passes through
// rather than runs. The gateway records each id under the owner whose call
// created it, so that a tasks/get, tasks/result or tasks/cancel of that id
// on any replica goes to the upstream, and another owner's never does.
//
//	<prefix>:{<owner>}:ut:<id>   STRING "1"; PEXPIRE the task's ttl
//	<prefix>:uta:<sha(id)>       STRING "1", same expiry: the id is some owner's
//	                             (requests the gateway would otherwise relay
//	                             without an owner check are refused for it)

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultUpstreamTaskTTL is how long an upstream task's record lives when
// the upstream named no ttl.
const DefaultUpstreamTaskTTL = 24 * time.Hour

func (k keys) upstreamTask(owner, id string) string { return k.ownerBase(owner) + ":ut:" + id }

func (k keys) anyUpstreamTask(id string) string { return k.prefix + ":uta:" + ownerTag(id) }

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
	pipe := s.rdb.Pipeline()
	mine := pipe.Set(ctx, s.k.upstreamTask(owner, id), "1", ttl)
	anyone := pipe.Set(ctx, s.k.anyUpstreamTask(id), "1", ttl)
	_, _ = pipe.Exec(ctx)
	for _, c := range []*redis.StatusCmd{mine, anyone} {
		if err := c.Err(); err != nil {
			return fmt.Errorf("taskstore: put upstream task %s: %w", id, classify(ctx, err))
		}
	}
	return nil
}

// UpstreamTaskOwner reports whether upstream task id was recorded for
// owner (mine), and whether for any owner (anyone).
func (s *Store) UpstreamTaskOwner(ctx context.Context, owner, id string) (mine, anyone bool, err error) {
	if id == "" || len(id) > maxUpstreamTaskID {
		return false, false, nil
	}
	pipe := s.rdb.Pipeline()
	m := pipe.Exists(ctx, s.k.upstreamTask(owner, id))
	a := pipe.Exists(ctx, s.k.anyUpstreamTask(id))
	_, _ = pipe.Exec(ctx)
	if err := errors.Join(m.Err(), a.Err()); err != nil {
		return false, false, fmt.Errorf("taskstore: upstream task %s: %w", id, classify(ctx, err))
	}
	return m.Val() == 1, a.Val() == 1, nil
}
