package front2025

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/gateway/internal/native"
	"github.com/taskgate/taskgate/taskstore"
)

// Front serves 2025-11-25 (and older) clients.
type Front struct {
	front.Deps
	store    store
	sessions *sessionTable // what each client session negotiated (sessions.go)
	held     *heldSessions // the sessions it holds in front of a stateless upstream (stateless.go)
	native   *nativeTasks  // the upstream's own tasks (native.go)
}

// New returns the 2025-11-25 front on deps and store, with the bounds of
// what clients without Authorization make it hold (Config.Anonymous).
func New(deps front.Deps, store store, anonymous core.AnonymousTasks) *Front {
	f := &Front{Deps: deps, store: store, sessions: newSessionTable(store, deps.Log)}
	f.native = &nativeTasks{store: store, up: deps.Up, log: deps.Log, sessions: f.sessions}
	f.held = &heldSessions{store: store, up: deps.Up, runner: deps.Runner, decider: deps.Decider,
		fallback: deps.Fallback, log: deps.Log, anonymous: anonymous, sessions: f.sessions, listTools: f.toolsListResult}
	return f
}

// store is what the 2025-11-25 front needs of the task store: its own
// part, and what it hands its parts (sessionStore, heldStore,
// native.Store).
type store interface {
	front.RenderStore // Get, Stamp, Options
	List(ctx context.Context, owner, cursor string, limit int) ([]taskstore.Listed, string, error)
	RequestCancel(ctx context.Context, owner, id, message string) (*taskstore.Task, error)
	AnswerInputs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (int, error)
	Watch(ctx context.Context, owner, id string) (*taskstore.Watch, error)
	MarkResultStream(ctx context.Context, owner, id string, ttl time.Duration) error
	ClearResultStream(ctx context.Context, owner, id string) error
	WatchSession(ctx context.Context, sessionID string) (*taskstore.Watch, error)
	MarkSessionFallback(ctx context.Context, id string) (bool, error)
	sessionStore // sessions.go
	heldStore    // stateless.go
	native.Store
}

// UpstreamHeader is the header to forward r with: MCP-Protocol-Version
// rewritten to the upstream's version for a session presented as
// 2025-11-25 in front of an older upstream (sessionTable.upstreamHeader).
func (f *Front) UpstreamHeader(r *http.Request) http.Header { return f.sessions.upstreamHeader(r) }

// cachedSession reports whether this replica's cache holds what session
// id negotiated (a session the gateway knows, not one it knows is absent).
func (f *Front) cachedSession(id string) bool { return f.sessions.cached(id) }

// recheckSession looks session id up as its next re-check would, and
// reports whether the session is still known.
func (f *Front) recheckSession(ctx context.Context, id string) bool {
	return f.sessions.recheck(ctx, id)
}

// ServeEmulatedSession handles a GET (the session's stream) or DELETE
// (its end) of a session the gateway holds (or, in front of a stateless
// upstream, one it does not know: 404), and reports whether it did
// (heldSessions.serveSession).
func (f *Front) ServeEmulatedSession(w http.ResponseWriter, r *http.Request) bool {
	return f.held.serveSession(w, r)
}
