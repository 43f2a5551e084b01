package identity

// Sessions bound to their principal (docs/ARCHITECTURE.md invariant 11).
// With the gateway's own token validation (Config.Auth), a session id is
// not a credential: every session a client opens through the gateway (a
// stdio child, an HTTP+SSE session, a session passed through to the
// upstream, one the gateway holds itself) is bound at initialize, before
// the client learns its id, to the owner that opened it, in the store every
// replica reads. A request that names the session is served only for that
// owner; another principal, and an id with no binding, get what an unknown
// session gets (404), so the answer tells nothing about whether the id
// exists. The MCP security best practices ("Session Hijacking") say to bind
// session ids to the user this way. Without validation the session id stays
// the credential: the gateway cannot tell two tokens are one user.
//
//	initialize ─▶ route ─▶ (front, upstream) ─▶ answer with Mcp-Session-Id
//	                                   bindWriter: BindSession, then the header goes out
//	request with Mcp-Session-Id ─▶ SessionGuard.Allows: cache, else SessionBinding
//	                                   owner differs or none: 404, counted, logged (sampled)

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

const (
	// bindingTTL is how long an idle session's binding lives; every use
	// renews it (at most every bindingRecheck per replica).
	bindingTTL = 24 * time.Hour
	// bindingRecheck is how often a replica looks at a cached binding in
	// the store again: it renews the record, and notices one removed by
	// another replica's DELETE.
	bindingRecheck = 10 * time.Minute
	// bindingCacheSize bounds the cache: two generations of this many.
	bindingCacheSize = 1 << 14
)

// bindingStore is what the guard needs of the task store.
type bindingStore interface {
	BindSession(ctx context.Context, id, owner string, ttl time.Duration) error
	SessionBinding(ctx context.Context, id string, ttl time.Duration) (string, error)
	UnbindSession(ctx context.Context, id string) error
}

// SessionGuard binds sessions to their owners and checks every request
// that names one. Safe for concurrent use.
type SessionGuard struct {
	store   bindingStore
	metrics *obs.Metrics
	log     zerolog.Logger // sampled: a flood of attempts is not a flood of lines
	now     func() time.Time

	mu       sync.Mutex
	cur, old map[string]binding // two generations, as front2025's session cache
}

// binding is one cached session owner and when the store last confirmed it.
type binding struct {
	owner   string
	checked time.Time
}

// NewSessionGuard returns the guard of the sessions bound in store.
func NewSessionGuard(store bindingStore, m *obs.Metrics, log zerolog.Logger) *SessionGuard {
	m.RegisterSessionBinding()
	return &SessionGuard{store: store, metrics: m, now: time.Now, cur: map[string]binding{},
		log: log.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Second})}
}

// bind records that session sid is r's owner's. Called before the
// session's id reaches the client.
func (g *SessionGuard) bind(r *http.Request, sid string) error {
	owner := core.AuthOwner(r)
	if err := g.store.BindSession(r.Context(), sid, owner, bindingTTL); err != nil {
		return err
	}
	g.put(sid, binding{owner: owner, checked: g.now()})
	return nil
}

// Allows reports whether r may use the session it names (true for a
// request that names none). A refused request is answered here: 404 as
// for an unknown session, or 503 when the store cannot say and nothing is
// cached.
func (g *SessionGuard) Allows(w http.ResponseWriter, r *http.Request, id *mcpwire.Message) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return true
	}
	owner, err := g.ownerOf(r.Context(), sid)
	if err != nil {
		g.log.Warn().Str("op", "session").Err(err).Msg("cannot check whose session this is; request refused")
		mcpwire.WriteError(w, idOf(id), core.RPCError(err, core.Era2025))
		return false
	}
	asker := core.AuthOwner(r)
	if owner == asker {
		return true
	}
	reason := "unknown"
	if owner != "" {
		reason = "other_principal"
	}
	g.metrics.SessionRefusals.WithLabelValues(reason).Inc()
	ev := g.log.Info()
	if reason == "other_principal" {
		ev = g.log.Warn()
	}
	ev.Str("op", "session").Str("reason", reason).Str("owner", core.LogOwner(asker)).Str("remote", r.RemoteAddr).
		Str("http_method", r.Method).Msg("request refused: the session is not this principal's")
	unknownSession(w, r, id)
	return false
}

// ownerOf is the owner session sid is bound to ("" for none): cached, or
// from the store (which renews it) when the cache has none or it is due
// for a recheck. A recheck that fails keeps the cached owner.
func (g *SessionGuard) ownerOf(ctx context.Context, sid string) (string, error) {
	now := g.now()
	b, ok := g.get(sid)
	if ok && now.Sub(b.checked) < bindingRecheck {
		return b.owner, nil
	}
	owner, err := g.store.SessionBinding(ctx, sid, bindingTTL)
	switch {
	case err != nil && ok:
		return b.owner, nil
	case err != nil:
		return "", err
	case owner == "":
		g.drop(sid)
	default:
		g.put(sid, binding{owner: owner, checked: now})
	}
	return owner, nil
}

// Ended removes the binding of the session r ended, once its owner's
// DELETE (which Allows let through) was answered with status, a success.
func (g *SessionGuard) Ended(r *http.Request, status int) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" || status < 200 || status > 299 {
		return
	}
	g.drop(sid)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if err := g.store.UnbindSession(ctx, sid); err != nil {
		g.log.Warn().Str("op", "session").Err(err).Msg("an ended session's binding stays until it expires")
	}
}

// unknownSession answers as the session bridges and the SDKs' session
// servers answer an id they do not know: 404, with a JSON-RPC error for a
// POST (MCP 2025-11-25, Streamable HTTP, "Session Management": the client
// then starts a new session with initialize).
func unknownSession(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	if r.Method != http.MethodPost {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	mcpwire.WriteError(w, idOf(msg), mcpwire.NewError(http.StatusNotFound, mcpwire.CodeSessionNotFound, "Session not found"))
}

func idOf(msg *mcpwire.Message) json.RawMessage {
	if msg == nil {
		return nil
	}
	return msg.ID
}

func (g *SessionGuard) get(sid string) (binding, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b, ok := g.cur[sid]; ok {
		return b, true
	}
	b, ok := g.old[sid]
	return b, ok
}

func (g *SessionGuard) put(sid string, b binding) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.old, sid)
	if len(g.cur) >= bindingCacheSize {
		g.old, g.cur = g.cur, make(map[string]binding, bindingCacheSize/4)
	}
	g.cur[sid] = b
}

func (g *SessionGuard) drop(sid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.cur, sid)
	delete(g.old, sid)
}

// BindInitialize returns w binding the session r's initialize (msg)
// opens to r's owner before the answer's Mcp-Session-Id goes out
// (bindWriter).
func (g *SessionGuard) BindInitialize(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) http.ResponseWriter {
	return &bindWriter{ResponseWriter: w, msg: msg, bind: func(sid string) error { return g.bind(r, sid) }}
}

// bindWriter binds the session an initialize answer opens before its
// Mcp-Session-Id header goes out: every replica knows whose session it is
// before the client does. A session that cannot be bound is not handed
// out: the client gets the store's error instead, and the upstream's
// session is left to its idle timeout.
type bindWriter struct {
	http.ResponseWriter
	bind   func(sid string) error
	msg    *mcpwire.Message
	wrote  bool
	failed bool
}

func (b *bindWriter) WriteHeader(code int) {
	if b.wrote {
		return
	}
	b.wrote = true
	sid := b.Header().Get("Mcp-Session-Id")
	if sid == "" || code < 200 || code > 299 {
		b.ResponseWriter.WriteHeader(code)
		return
	}
	if err := b.bind(sid); err != nil {
		b.failed = true
		h := b.Header()
		for _, k := range []string{"Mcp-Session-Id", "Content-Type", "Content-Length", "Content-Encoding"} {
			h.Del(k)
		}
		if errors.Is(err, context.Canceled) {
			b.ResponseWriter.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mcpwire.WriteError(b.ResponseWriter, idOf(b.msg), core.RPCError(err, core.Era2025))
		return
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bindWriter) Write(p []byte) (int, error) {
	if !b.wrote {
		b.WriteHeader(http.StatusOK)
	}
	if b.failed {
		return len(p), nil // the answer of a session that was not handed out
	}
	return b.ResponseWriter.Write(p)
}

func (b *bindWriter) Flush() {
	if !b.wrote {
		b.WriteHeader(http.StatusOK)
	}
	if f, ok := b.ResponseWriter.(http.Flusher); ok && !b.failed {
		f.Flush()
	}
}

func (b *bindWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }
