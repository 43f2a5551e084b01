package upstreamside

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// The upstream side's part in the tool catalogue: when a client calls a
// tool the catalogue has no declaration for, the upstream's tools are
// listed first, at most once at a time and now and then per replica
// (internal/decide keeps the catalogue).

// discoverEvery bounds how often a replica lists the upstream's tools
// itself, for calls of tools it has no declaration for; discoverPages
// bounds the pages it reads.
const (
	discoverEvery = decide.CatalogMissFresh
	discoverPages = 100
)

// discovery is a replica's listing of the upstream's tools for calls of
// tools it has no declaration for (toolDeclared).
type discovery struct {
	mu       sync.Mutex
	inflight chan struct{} // closed when the listing in flight ends
	ok       time.Time     // when a listing last succeeded
	failed   time.Time     // when a listing last failed
}

// discoverRetry is how soon a failed listing may be tried again;
// discoverTimeout bounds one listing.
const (
	discoverRetry   = time.Second
	discoverTimeout = 10 * time.Second
)

// ToolDeclared returns the upstream's declaration of tool; when the
// catalogue has none, the upstream's tools are listed first on sess (a
// Client may call a tool without listing: every 2026-07-28 client may).
// One listing at a time per replica, which concurrent callers wait for; at
// most one per DiscoverEvery once one succeeded (a name the upstream does
// not list stays undeclared), and per discoverRetry after one failed.
func (u *Side) ToolDeclared(ctx context.Context, sess *upstream.Session, tool string) (decide.ToolDecl, bool) {
	d := u.catalogue
	if decl, listed := d.ToolInfo(ctx, tool); listed || !d.Learns() {
		return decl, listed
	}
	disc := &u.discovery
	disc.mu.Lock()
	if ch := disc.inflight; ch != nil {
		disc.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return d.ToolInfo(ctx, tool)
	}
	now := time.Now()
	if now.Sub(disc.ok) < discoverEvery || now.Sub(disc.failed) < discoverRetry {
		disc.mu.Unlock()
		return decide.ToolDecl{}, false
	}
	ch := make(chan struct{})
	disc.inflight = ch
	disc.mu.Unlock()

	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoverTimeout)
	ok := u.listTools(lctx, sess, tool)
	cancel()

	disc.mu.Lock()
	if ok {
		disc.ok = time.Now()
	} else {
		disc.failed = time.Now()
	}
	disc.inflight = nil
	close(ch)
	disc.mu.Unlock()
	return d.ToolInfo(ctx, tool)
}

// listTools reads every page of the upstream's tools/list on sess (at
// most discoverPages) into the catalogue, and reports whether it could.
func (u *Side) listTools(ctx context.Context, sess *upstream.Session, tool string) bool {
	cursor := ""
	for page := 0; page < discoverPages; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		resp, err := u.client.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/list", Params: mcpwire.MustMarshal(params)}, upstream.CallOptions{})
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		if err != nil {
			u.log.Debug().Str("op", "tools/list").Str("tool", tool).Err(err).Msg("cannot list the upstream's tools")
			return false
		}
		u.learnTools(ctx, resp.Result)
		var next struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(resp.Result, &next) != nil || next.NextCursor == "" || next.NextCursor == cursor {
			return true
		}
		cursor = next.NextCursor
	}
	return true
}
