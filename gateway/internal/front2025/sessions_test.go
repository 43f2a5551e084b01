package front2025

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
)

func TestSessionCacheBounded(t *testing.T) {
	c := newSessionCacheSize(4)
	now := time.Now()
	keep := newSessionEntry(newSessionInfo("keep", core.Version2025, core.Version2025, nil), now)
	c.put("keep", keep)
	for i := 0; i < 40; i++ {
		c.put(fmt.Sprint(i), newSessionEntry(nil, now))
		if c.get("keep") != keep { // in use: promoted, so it survives
			t.Fatalf("recently used entry evicted after %d puts", i)
		}
		if n := c.count(); n > 8 {
			t.Fatalf("cache holds %d entries, bound is 8", n)
		}
	}
	if c.get("0") != nil {
		t.Error("oldest unused entry survived")
	}
	c.delete("keep")
	if c.get("keep") != nil {
		t.Error("deleted entry still there")
	}
}

func TestUpstreamHeaderHotPath(t *testing.T) {
	f := New(front.Deps{}, nil, core.AnonymousTasks{})
	now := time.Now()
	f.sessions.cache.put("same", newSessionEntry(newSessionInfo("same", core.Version2025, core.Version2025, nil), now))
	f.sessions.cache.put("older", newSessionEntry(newSessionInfo("older", core.Version2025, "2025-06-18", nil), now))
	req := func(sid, version string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Mcp-Session-Id", sid)
		r.Header.Set("MCP-Protocol-Version", version)
		r.Header.Set("Authorization", "Bearer x")
		return r
	}
	for _, r := range []*http.Request{req("same", core.Version2025), req("older", "2025-06-18"), req("whatever", "2026-07-28")} {
		if n := testing.AllocsPerRun(100, func() {
			if got := f.UpstreamHeader(r); &got == nil {
				t.Fatal("nil")
			}
		}); n != 0 {
			t.Errorf("upstreamHeader(%s, %s) allocates %v times", r.Header.Get("Mcp-Session-Id"), r.Header.Get("MCP-Protocol-Version"), n)
		}
	}
	r := req("older", core.Version2025)
	got := f.UpstreamHeader(r)
	if got.Get("MCP-Protocol-Version") != "2025-06-18" || got.Get("Authorization") != "Bearer x" || got.Get("Mcp-Session-Id") != "older" {
		t.Errorf("rewritten header = %v", got)
	}
	if r.Header.Get("MCP-Protocol-Version") != core.Version2025 {
		t.Error("the client's header was modified")
	}
}
