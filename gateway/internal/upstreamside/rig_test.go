package upstreamside

// The rig of this package's tests: Sides built as gateway.New builds
// them, on one Redis.

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// newSides is n replicas' Sides in front of upstreamURL, each with its own
// store and client on one miniredis, the policy package's defaults.
func newSides(t *testing.T, upstreamURL string, n int) []*Side {
	t.Helper()
	mr := miniredis.RunT(t)
	var out []*Side
	for range n {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		store := taskstore.New(rdb, taskstore.Options{})
		t.Cleanup(func() { rdb.Close() })
		t.Cleanup(func() { store.Close() })
		client, err := upstream.New(upstreamURL, upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := decide.NewDecider(policy.NewCurrent(&policy.Config{}), store, zerolog.Nop())
		out = append(out, New(client, store, d, DefaultKeepAlive, zerolog.Nop()))
	}
	return out
}
