package decide

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// TestCatalogMissStaysCached: a tool the store does not know is looked up
// there at most once per catalogMissFresh, also after this replica's own
// entry for it went stale (it was read again on every call then).
func TestCatalogMissStaysCached(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var n atomic.Int64
	rdb.AddHook(redistest.CountHook{N: &n})
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close() })
	d := NewDecider(policy.NewCurrent(nil), store, zerolog.Nop())
	rdb.Ping(context.Background()) // the connection's own setup commands are not counted
	for _, listed := range []bool{false, true} {
		// This replica's entry, gone stale: the store is read once...
		d.tools.set("t", catalogEntry{decl: ToolDecl{TaskSupport: "optional"}, listed: listed, at: time.Now().Add(-catalogFresh - time.Second)})
		before := n.Load()
		for i := 0; i < 5; i++ {
			decl, got := d.ToolInfo(context.Background(), "t")
			// ...and what this replica knew stands when the store has
			// nothing.
			if got != listed || decl.TaskSupport != "optional" {
				t.Fatalf("listed %v: toolInfo = %+v %v", listed, decl, got)
			}
		}
		if reads := n.Load() - before; reads != 1 {
			t.Errorf("listed %v: 5 calls read the store %d times, want 1", listed, reads)
		}
	}
}
