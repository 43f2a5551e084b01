package front2025

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/policy"
)

// TestStatelessUpstreamAnonymousSessions: sessions opened without
// Authorization count against the anonymous per-address cap (a DELETE
// gives the place back), and their tasks do too.
func TestStatelessUpstreamAnonymousSessions(t *testing.T) {
	up := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: true}))
	t.Cleanup(up.Close)
	fl := newFleet(t, up.URL+"/mcp")
	fl.Add(func(c *frontrig.Config) {
		c.Anonymous.PerAddress = 3
		c.Policy = gwtest.RulesPolicy(gwtest.Rules(t, "slow", policy.Task))
	})
	initialize := func() (sid string, msg string) {
		resp := rawPost(t, fl.URLs[0], "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"anon","version":"1"}}}`)
		r := gwtest.OneReply(t, resp)
		if r.Error != nil {
			return "", r.Error.Message
		}
		return resp.Header.Get("Mcp-Session-Id"), ""
	}
	first, _ := initialize()
	second, _ := initialize()
	if first == "" || second == "" {
		t.Fatalf("two anonymous sessions: %q %q", first, second)
	}
	// A session in use keeps its place past its first idle lifetime: each
	// renewal of its record moves its place's expiry on.
	slot := redis.NewClient(&redis.Options{Addr: fl.MR.Addr()})
	defer slot.Close()
	placeOf := func() float64 {
		return slot.ZScore(context.Background(), "tg:{anon}:live", anonSessionSlot(first)).Val()
	}
	before := placeOf()
	if before == 0 {
		t.Fatal("the anonymous session has no place in the caps")
	}
	time.Sleep(emulatedRecheck + 100*time.Millisecond) // the replica's next look at the record renews it
	ping := &gwtest.Client{T: t, URLs: fl.URLs, SID: first}
	if r := ping.Call("ping", map[string]any{}); r.Error != nil {
		t.Fatal(r.Error.Message)
	}
	if after := placeOf(); after <= before {
		t.Errorf("the session's place expires at %v after use, %v before: not renewed", after, before)
	}
	// The third place goes to a task of the first session.
	c := &gwtest.Client{T: t, URLs: fl.URLs, SID: first}
	c.StartTask("slow", map[string]any{"seconds": 0.01}, nil)
	if sid, msg := initialize(); sid != "" || !strings.Contains(msg, "too many sessions and tasks without Authorization from this address") {
		t.Fatalf("an anonymous session past the per-address cap: session %q, error %q", sid, msg)
	}
	if r := c.Call("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"seconds": 0.01}, "task": map[string]any{}}); r.Error == nil {
		t.Errorf("an anonymous task past the per-address cap: %s", r.Result)
	}
	req, _ := http.NewRequest(http.MethodDelete, fl.URLs[0], nil)
	req.Header.Set("Mcp-Session-Id", second)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sid, msg := initialize(); sid == "" {
		t.Errorf("after a DELETE, an anonymous session is refused: %s", msg)
	}
}
