package taskstore

// Which principal each client session belongs to. With the gateway's own
// token validation, every session a client opens through it (a stdio
// child, an HTTP+SSE session, a session passed through to the upstream,
// one the gateway holds itself) is bound at initialize, before its id
// reaches the client, to the owner that opened it; a request naming the
// session is served only for that owner (docs/ARCHITECTURE.md invariant
// 8). Every replica checks the same record.
//
//	<prefix>:bind:<sha>   STRING  the owner that opened the session; PEXPIRE ttl
//	                              (SessionBinding renews)
//
// <sha> is 32 hex digits of SHA-256(session id), as for sessions.go: the
// id comes from a client header, so hashing keeps braces out of key names
// and bounds the key length. Each operation touches one key.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBoundElsewhere: the session id is already bound to another owner. It
// never happens with random session ids; an upstream that reuses ids must
// not make one principal's session another's.
var ErrBoundElsewhere = errors.New("taskstore: session is bound to another owner")

// sessionBinding is the record of a session's owner.
func (k keys) sessionBinding(id string) string { return k.prefix + ":bind:" + ownerTag(id) }

// BindSession records that session id belongs to owner, for ttl. Binding
// it again to the same owner renews it; to another, ErrBoundElsewhere.
func (s *Store) BindSession(ctx context.Context, id, owner string, ttl time.Duration) error {
	if id == "" || owner == "" {
		return errors.New("taskstore: bind session: empty session id or owner")
	}
	key := s.k.sessionBinding(id)
	ok, err := s.rdb.SetNX(ctx, key, owner, ttl).Result()
	if err != nil {
		return fmt.Errorf("taskstore: bind session: %w", classify(ctx, err))
	}
	if ok {
		return nil
	}
	have, err := s.SessionBinding(ctx, id, ttl)
	switch {
	case err != nil:
		return err
	case have != owner:
		return fmt.Errorf("taskstore: bind session: %w", ErrBoundElsewhere)
	}
	return nil
}

// SessionBinding returns the owner session id is bound to, and renews the
// record to ttl from now; "" when there is none (never bound, ended, or
// expired).
func (s *Store) SessionBinding(ctx context.Context, id string, ttl time.Duration) (string, error) {
	owner, err := s.rdb.GetEx(ctx, s.k.sessionBinding(id), ttl).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("taskstore: session binding: %w", classify(ctx, err))
	}
	return owner, nil
}

// UnbindSession deletes session id's record (the session ended).
func (s *Store) UnbindSession(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, s.k.sessionBinding(id)).Err(); err != nil {
		return fmt.Errorf("taskstore: unbind session: %w", classify(ctx, err))
	}
	return nil
}
