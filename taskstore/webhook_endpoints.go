package taskstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// WebhookEndpoints returns the names of the endpoints whose delivery
// queues hold something (a due ZSET or a dead-letter ZSET: Redis drops a
// ZSET once empty), sorted, at most limit. The console lists them beside
// the endpoints configured now, so the dead letters of an endpoint taken
// out of the configuration stay visible for their DeadLetterKeep.
//
// It SCANs every master (one, unless Cluster) for
// <prefix>:{wh:*}:due and :dead: O(keys in Redis) per call, as the
// outbox sweep; the caller reads it seldom (the console caches it).
func (s *Store) WebhookEndpoints(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var mu sync.Mutex
	found := map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, suffix := range []string{":due", ":dead"} {
			pattern := s.k.prefix + ":{wh:*}" + suffix
			var cursor uint64
			for {
				ks, next, err := c.ScanType(ctx, cursor, pattern, 1000, "zset").Result()
				if err != nil {
					return classify(ctx, err)
				}
				mu.Lock()
				for _, k := range ks {
					if name, ok := s.k.whEndpointOf(k, suffix); ok && len(found) < limit {
						found[name] = true
					}
				}
				full := len(found) >= limit
				mu.Unlock()
				if cursor = next; cursor == 0 || full {
					break
				}
			}
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("unsupported client %T", s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("taskstore: webhook endpoints: %w", err)
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// whEndpointOf is the endpoint name of a key whBase(name)+suffix, when it
// is one (a name the delivery keys can carry).
func (k keys) whEndpointOf(key, suffix string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+":{wh:")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}"+suffix)
	if !ok || checkEndpoint(name) != nil {
		return "", false
	}
	return name, true
}
