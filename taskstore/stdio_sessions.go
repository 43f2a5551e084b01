package taskstore

// Where each stdio session's child runs. With a child process per client
// session (upstream/stdio), a session lives on the replica that started its
// child; every replica records its sessions here, with the URL another
// replica reaches it at, so a request that lands elsewhere is forwarded
// there (docs/stdio-replicas.md).
//
//	<prefix>:stdio:<sha>   STRING  the owning replica's URL; PEXPIRE ttl
//	                               (RenewSessionReplicas renews)
//
// <sha> is 32 hex digits of SHA-256(session id), as for sessions.go: the id
// comes from a client header, so hashing keeps braces out of key names and
// bounds the key length. Each key stands alone (one slot per command), and
// a replica that dies leaves records that expire after ttl.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// sessionReplica is the record of a stdio session's replica.
func (k keys) sessionReplica(id string) string { return k.prefix + ":stdio:" + ownerTag(id) }

// PutSessionReplica records that session id's child runs on the replica
// reached at url, for ttl.
func (s *Store) PutSessionReplica(ctx context.Context, id, url string, ttl time.Duration) error {
	if id == "" || url == "" {
		return errors.New("taskstore: put session replica: empty session id or url")
	}
	if err := s.rdb.Set(ctx, s.k.sessionReplica(id), url, ttl).Err(); err != nil {
		return fmt.Errorf("taskstore: put session replica: %w", classify(ctx, err))
	}
	return nil
}

// SessionReplica returns the URL of the replica running session id's
// child, or "" when there is no record (never recorded, ended, or expired).
func (s *Store) SessionReplica(ctx context.Context, id string) (string, error) {
	url, err := s.rdb.Get(ctx, s.k.sessionReplica(id)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("taskstore: session replica: %w", classify(ctx, err))
	}
	return url, nil
}

// RenewSessionReplicas extends the records of ids to ttl from now, in one
// pipeline (one round trip; on Cluster, one per node). It returns the ids
// that have no record (lost with a Redis restart, say), for the caller to
// put again; it never creates one.
func (s *Store) RenewSessionReplicas(ctx context.Context, ids []string, ttl time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.BoolCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.PExpire(ctx, s.k.sessionReplica(id), ttl)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskstore: renew session replicas: %w", classify(ctx, err))
	}
	var missing []string
	for i, c := range cmds {
		if !c.Val() {
			missing = append(missing, ids[i])
		}
	}
	return missing, nil
}

// RemoveSessionReplicas deletes the records of ids (sessions that ended).
func (s *Store) RemoveSessionReplicas(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.Del(ctx, s.k.sessionReplica(id))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("taskstore: remove session replicas: %w", classify(ctx, err))
	}
	return nil
}
