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
//
// The record of a principal's child (--upstream-scope principal) is the
// same kind of key, under an id no session can have. Two replicas may try
// to start that child at once, so it is claimed, not put
// (ClaimSessionReplica): SET-if-absent in one script, which also renews a
// replica's own claim and takes over one whose replica does not answer;
// and released, not removed (ReleaseSessionReplicas): deleted only while
// it names the releasing replica.

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

// claimReplicaCmd claims a record for a replica: it sets it when there is
// none, renews it when it names the replica already, and takes it over
// when it names the replica the caller found gone (and nobody took it over
// first).
//
// KEYS[1] -> <prefix>:stdio:<sha>
// ARGV[1] -> the claiming replica's URL
// ARGV[2] -> ttl, ms
// ARGV[3] -> the URL of a replica found gone, to take over from ("": none)
//
// Returns {0} when the record names ARGV[1] now, {1, url} when it names
// another replica (url), which keeps it.
var claimReplicaCmd = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] and (ARGV[3] == '' or cur ~= ARGV[3]) then return {1, cur} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {0}
`)

// ClaimSessionReplica records that id's child runs on the replica at url,
// for ttl, unless another replica's record is there; from names a replica
// found gone, whose record is taken over ("" for none). It returns the
// URL the record names afterwards: url when the claim holds.
func (s *Store) ClaimSessionReplica(ctx context.Context, id, url, from string, ttl time.Duration) (string, error) {
	if id == "" || url == "" {
		return "", errors.New("taskstore: claim session replica: empty id or url")
	}
	if ttl < time.Millisecond {
		return "", fmt.Errorf("taskstore: claim session replica: ttl %v is under a millisecond", ttl)
	}
	res, err := claimReplicaCmd.Run(ctx, s.rdb, []string{s.k.sessionReplica(id)}, url, ttl.Milliseconds(), from).Slice()
	if err != nil {
		return "", fmt.Errorf("taskstore: claim session replica: %w", classify(ctx, err))
	}
	if len(res) == 2 {
		if holder, ok := res[1].(string); ok {
			return holder, nil
		}
	}
	return url, nil
}

// releaseReplicaCmd deletes a record only while it names the releasing
// replica: a claim another replica took over stays that one's.
//
// KEYS[1] -> <prefix>:stdio:<sha>
// ARGV[1] -> the releasing replica's URL
var releaseReplicaCmd = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`)

// ReleaseSessionReplicas deletes the records of ids that name the replica
// at url (claims, ClaimSessionReplica); a record naming another replica,
// which took the claim over, is left alone. One script per record: they
// end as rarely as principals' children stop.
func (s *Store) ReleaseSessionReplicas(ctx context.Context, ids []string, url string) error {
	for _, id := range ids {
		if err := releaseReplicaCmd.Run(ctx, s.rdb, []string{s.k.sessionReplica(id)}, url).Err(); err != nil {
			return fmt.Errorf("taskstore: release session replica: %w", classify(ctx, err))
		}
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
