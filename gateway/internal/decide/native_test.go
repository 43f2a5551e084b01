package decide

import (
	"encoding/json"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// TestNativeNeedsServerCapability: a tool is native only if the upstream
// also declares task-augmented tools/call in its capabilities (MCP
// 2025-11-25, Tasks); what one replica's initialize saw, another reads
// from the store. Unknown (no initialize seen yet) trusts tools/list.
func TestNativeNeedsServerCapability(t *testing.T) {
	mr := miniredis.RunT(t)
	replica := func() *Decider {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		store := taskstore.New(rdb, taskstore.Options{})
		t.Cleanup(func() { rdb.Close() })
		t.Cleanup(func() { store.Close() })
		return NewDecider(policy.NewCurrent(&policy.Config{}), store, zerolog.Nop())
	}
	a, b := replica(), replica()
	ctx := t.Context()
	a.LearnTools(ctx, map[string]ToolDecl{"research": {TaskSupport: policy.TaskSupportRequired}})
	if c := a.DecideCall(ctx, "research", policy.Client2025); !c.Native {
		t.Fatal("with no initialize seen, a tool declaring taskSupport is native")
	}
	a.LearnServerCaps(ctx, json.RawMessage(`{"tools":{}}`))
	if c := a.DecideCall(ctx, "research", policy.Client2025); c.Native {
		t.Error("an upstream without capabilities.tasks has native tools")
	}
	if c := b.DecideCall(ctx, "research", policy.Client2025); c.Native {
		t.Error("the other replica did not read the capability from the store")
	}
	if ts := a.DecideCall(ctx, "research", policy.Client2025).Upstream; ts != "" {
		t.Errorf("upstreamTaskSupport = %q, want none", ts)
	}
	a.LearnServerCaps(ctx, json.RawMessage(`{"tasks":{"requests":{"tools":{"call":{}}}}}`))
	if c := a.DecideCall(ctx, "research", policy.Client2025); !c.Native {
		t.Error("an upstream declaring task-augmented tools/call has no native tools")
	}
}
