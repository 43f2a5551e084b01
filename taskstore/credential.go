package taskstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// PutCredential stores blob, a credential the caller sealed (encrypted),
// as the newest of principal, for ttl. Each principal has one; a newer
// replaces it.
//
//	<prefix>:cred:<principal>   STRING, expires after ttl
func (s *Store) PutCredential(ctx context.Context, principal string, blob []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.k.prefix+":cred:"+principal, blob, ttl).Err(); err != nil {
		return fmt.Errorf("taskstore: credential: %w", classify(ctx, err))
	}
	return nil
}

// Credential is principal's newest credential as PutCredential stored it;
// ErrNotFound when there is none (never stored, or expired).
func (s *Store) Credential(ctx context.Context, principal string) ([]byte, error) {
	v, err := s.rdb.Get(ctx, s.k.prefix+":cred:"+principal).Bytes()
	switch {
	case err == redis.Nil:
		return nil, fmt.Errorf("taskstore: credential: %w", ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("taskstore: credential: %w", classify(ctx, err))
	}
	return v, nil
}
