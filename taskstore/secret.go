package taskstore

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// secretBytes is the size of a shared secret.
const secretBytes = 32

// SharedSecret returns the deployment's secret called name: secretBytes
// random bytes that every replica sharing the store reads alike, made by
// whichever replica asks first (SET NX) and kept for good. The gateway
// signs what it hands clients to bring back (an MRTR requestState) with
// it. Anyone who can read the store can read it, as they can read the
// tasks themselves.
//
//	<prefix>:secret:<name>   STRING, no expiry
func (s *Store) SharedSecret(ctx context.Context, name string) ([]byte, error) {
	key := s.k.prefix + ":secret:" + name
	v, err := s.rdb.Get(ctx, key).Bytes()
	if err == nil && len(v) == secretBytes {
		return v, nil
	}
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("taskstore: secret %s: %w", name, classify(ctx, err))
	}
	fresh := make([]byte, secretBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("taskstore: secret %s: %w", name, err)
	}
	// A value of another size (written by hand) is replaced; else the
	// first writer wins and everyone reads its value.
	if len(v) != 0 && len(v) != secretBytes {
		err = s.rdb.Set(ctx, key, fresh, 0).Err()
	} else {
		err = s.rdb.SetNX(ctx, key, fresh, 0).Err()
	}
	if err != nil {
		return nil, fmt.Errorf("taskstore: secret %s: %w", name, classify(ctx, err))
	}
	if v, err = s.rdb.Get(ctx, key).Bytes(); err != nil {
		return nil, fmt.Errorf("taskstore: secret %s: %w", name, classify(ctx, err))
	}
	if len(v) != secretBytes {
		return nil, fmt.Errorf("taskstore: secret %s: %d bytes, want %d", name, len(v), secretBytes)
	}
	return v, nil
}
