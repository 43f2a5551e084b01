package upstreamside

// Owner sessions: a 2026-07-28 client in front of a session upstream
// (docs/ARCHITECTURE.md, "The upstream side"). The client has no session,
// so the gateway opens one upstream session per owner and shares it, through
// the store, with every replica.
//
//	request        ─▶ ownerSession(owner): this replica's cache (re-checked
//	                  with Redis every ownerRecheck, which renews the record),
//	                  else the store's record <prefix>:{o}:held, else
//	                  initialize upstream and record it (compare-and-swap:
//	                  of replicas racing, one session wins; losers close theirs)
//	               ─▶ the request as a session one on that session:
//	                  2026-07-28 _meta keys stripped, the gateway's own
//	                  request id, MCP-Protocol-Version = the session's version
//	upstream 404   ─▶ reopen: swap the forgotten session for a new one (or
//	                  take the one another replica already swapped in), retry
//	answer         ─▶ the 2026-07-28 shape: resultType "complete", ttlMs and
//	                  cacheScope on cacheable results, progress as SSE events
//	                  (forward.go)
//
// The session is initialized declaring elicitation (form), sampling and
// roots, so the upstream may ask for input: a task's worker relays it to the
// Client (internal/runner/input.go), and a plain call becomes a bridged call
// (internal/front2026/bridge.go).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

const (
	// ownerSessionTTL is how long an unused owner session's record lives in Redis;
	// Every use renews it (at most every ownerRecheck per replica). The
	// Upstream may forget the session sooner: then it is reopened.
	ownerSessionTTL = 24 * time.Hour
	// ownerRecheck is how often a replica re-reads an owner's owner session:
	// renewing its record, and noticing one another replica swapped in.
	ownerRecheck = 5 * time.Minute
	// ownerCacheSize bounds the in-process cache of owner sessions.
	ownerCacheSize = 4096
	// ownerInitTimeout bounds opening a owner session (initialize, record).
	ownerInitTimeout = 30 * time.Second
)

// ownerInitParams is the initialize the gateway opens a owner session with:
// the newest session version (the upstream may choose an older one) and
// the client capabilities needed to relay input to a 2026-07-28 client.
var ownerInitParams = mcpwire.MustMarshal(map[string]any{
	"protocolVersion": core.Version2025,
	"capabilities": map[string]any{
		"elicitation": map[string]any{"form": map[string]any{}},
		"sampling":    map[string]any{},
		"roots":       map[string]any{},
	},
	"clientInfo": GatewayInfo,
})

// ownerSessions is a replica's copy of the owner sessions it used, and the
// opens in flight (one per owner at a time).
type ownerSessions struct {
	mu      sync.Mutex
	m       map[string]ownerEntry
	flights map[string]*ownerFlight
}

type ownerEntry struct {
	rec     *taskstore.OwnerSession
	checked time.Time
}

type ownerFlight struct {
	done chan struct{}
	rec  *taskstore.OwnerSession
	err  error
}

func (c *ownerSessions) get(owner string) (ownerEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[owner]
	return e, ok
}

func (c *ownerSessions) put(owner string, rec *taskstore.OwnerSession, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || (len(c.m) >= ownerCacheSize && c.m[owner].rec == nil) {
		c.m = make(map[string]ownerEntry) // start over rather than grow
	}
	c.m[owner] = ownerEntry{rec: rec, checked: now}
}

// do runs open for owner unless one is in flight, whose outcome it then
// shares. open runs on its own context: a caller that goes away does not
// leave a half-opened session behind.
func (c *ownerSessions) do(ctx context.Context, owner string, open func() (*taskstore.OwnerSession, error)) (*taskstore.OwnerSession, error) {
	c.mu.Lock()
	if f := c.flights[owner]; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.rec, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.flights == nil {
		c.flights = make(map[string]*ownerFlight)
	}
	f := &ownerFlight{done: make(chan struct{})}
	c.flights[owner] = f
	c.mu.Unlock()
	f.rec, f.err = open()
	c.mu.Lock()
	delete(c.flights, owner)
	c.mu.Unlock()
	close(f.done)
	return f.rec, f.err
}

// OwnerSession returns owner's session on the session upstream, opening
// one if the owner has none. auth is sent with the initialize.
func (u *Side) OwnerSession(ctx context.Context, owner string, auth http.Header) (*taskstore.OwnerSession, error) {
	e, ok := u.owners.get(owner)
	if ok && time.Since(e.checked) < ownerRecheck {
		return e.rec, nil
	}
	return u.owners.do(ctx, owner, func() (*taskstore.OwnerSession, error) {
		return u.loadOwnerSession(ctx, owner, auth, "", e.rec)
	})
}

// reopenOwnerSession replaces owner's session stale, which the upstream
// forgot, unless another caller (on any replica) already has: the record
// in Redis then names the new one.
func (u *Side) reopenOwnerSession(ctx context.Context, owner string, auth http.Header, stale string) (*taskstore.OwnerSession, error) {
	return u.owners.do(ctx, owner, func() (*taskstore.OwnerSession, error) {
		return u.loadOwnerSession(ctx, owner, auth, stale, nil)
	})
}

// loadOwnerSession reads owner's record, and opens a session when there is none or
// it is stale. cached is this replica's last copy, served while Redis is
// unreachable.
func (u *Side) loadOwnerSession(ctx context.Context, owner string, auth http.Header, stale string, cached *taskstore.OwnerSession) (*taskstore.OwnerSession, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ownerInitTimeout)
	defer cancel()
	rec, err := u.store.GetOwnerSession(ctx, owner)
	switch {
	case err == nil && rec.SessionID != stale:
		if _, terr := u.store.TouchOwnerSession(ctx, owner, ownerSessionTTL); terr != nil {
			u.log.Warn().Str("op", "owner_session").Err(terr).Msg("cannot renew the owner session record; will retry")
		}
		u.owners.put(owner, rec, time.Now())
		return rec, nil
	case err == nil, errors.Is(err, taskstore.ErrNoSession):
	default:
		if cached != nil && cached.SessionID != stale {
			u.log.Warn().Str("op", "owner_session").Err(err).Msg("cannot re-read the owner session; using this replica's copy")
			return cached, nil
		}
		return nil, err
	}

	sess, init, err := u.client.Initialize(ctx, auth, ownerInitParams)
	if err != nil {
		var se *upstream.StatusError
		var pe *upstream.ProtocolError
		var we *jsonrpc.Error
		if (errors.As(err, &se) && refusesEra(se.Status)) || errors.As(err, &pe) || errors.As(err, &we) {
			u.ForgetEra(nil) // initialize refused: perhaps no longer a session server
		}
		return nil, err
	}
	if u.learnServer != nil {
		u.learnServer(ctx, init.Capabilities)
	}
	next := &taskstore.OwnerSession{SessionID: sess.ID, ProtocolVersion: sess.ProtocolVersion, Init: init.Raw, CreatedAt: time.Now()}
	if sess.ID == "" {
		// A session upstream that gave no session id: nothing to share or reopen.
		u.owners.put(owner, next, time.Now())
		return next, nil
	}
	won, mine, err := u.store.PutOwnerSession(ctx, owner, *next, stale, ownerSessionTTL)
	if err != nil || !mine {
		if cerr := u.client.CloseSession(ctx, sess); cerr != nil {
			u.log.Debug().Str("op", "owner_session").Err(cerr).Msg("cannot close the unused upstream session")
		}
		if err != nil {
			return nil, err
		}
	}
	if mine {
		u.log.Info().Str("op", "owner_session").Str("owner", core.LogOwner(owner)).Str("upstream_version", won.ProtocolVersion).
			Bool("reopened", stale != "").Msg("owner session opened upstream for 2026-07-28 clients")
	}
	u.owners.put(owner, won, time.Now())
	return won, nil
}

// Target is how the gateway calls the upstream for a 2026-07-28
// Client.
type Target struct {
	Session   *upstream.Session // the session to call on (an owner session for a session upstream)
	Stateless bool              // the upstream speaks 2026-07-28 (MRTR); else server→client requests
}

// Target resolves the upstream target of a 2026-07-28 client's request:
// owner is core.SessionOwner(r), auth the client's credentials to send
// (core.ForwardedAuth(r)), version the client's protocol version ("" for
// 2026-07-28). For a session upstream it opens or reuses the owner's
// session. It does not depend on the client's request staying open:
// workers call it too.
func (u *Side) Target(ctx context.Context, owner string, auth http.Header, version string) (*Target, error) {
	era, err := u.Era(ctx, auth)
	if err != nil {
		return nil, err
	}
	if era.Stateless {
		if version == "" {
			version = core.Version2026
		}
		return &Target{Session: &upstream.Session{ProtocolVersion: version, Header: auth}, Stateless: true}, nil
	}
	rec, err := u.OwnerSession(ctx, owner, auth)
	if err != nil {
		return nil, err
	}
	return ownerTarget(rec, auth), nil
}

func ownerTarget(rec *taskstore.OwnerSession, auth http.Header) *Target {
	return &Target{Session: &upstream.Session{ID: rec.SessionID, ProtocolVersion: rec.ProtocolVersion, Header: auth}}
}

// ReopenTarget replaces an owner session the upstream forgot
// (upstream.ErrSessionNotFound, HTTP 404) and returns the new target.
// Replicas that see the same 404 end up on one new session.
func (u *Side) ReopenTarget(ctx context.Context, owner string, auth http.Header, version string, stale *Target) (*Target, error) {
	if stale == nil || stale.Stateless || stale.Session == nil || stale.Session.ID == "" {
		return u.Target(ctx, owner, auth, version)
	}
	rec, err := u.reopenOwnerSession(ctx, owner, auth, stale.Session.ID)
	if err != nil {
		return nil, err
	}
	return ownerTarget(rec, auth), nil
}

// ParamsFor turns a 2026-07-28 client's tools/call params into the params
// to send to target: for a stateless upstream, the tasks extension is taken
// out of the client's capabilities (the gateway is the tasks server); for a
// session one, the 2026-07-28 _meta keys are taken out altogether.
func ParamsFor(params json.RawMessage, target *Target) json.RawMessage {
	if target != nil && target.Stateless {
		out, _ := stripTasksExtension(params)
		return out
	}
	return SessionParams(params)
}

// statelessMetaKeys are the per-request _meta keys a session upstream does
// not know (RequestMetaObject); progressToken and other keys stay.
var statelessMetaKeys = []string{core.MetaProtocolVersion, core.MetaClientInfo, core.MetaClientCaps, core.MetaLogLevel}

// SessionParams returns params without the 2026-07-28 _meta keys (and
// without _meta if nothing else was in it).
func SessionParams(params json.RawMessage) json.RawMessage {
	return WithoutMetaKeys(params, statelessMetaKeys...)
}

// WithoutMetaKeys is params without _meta's keys (and without _meta when
// nothing else is left in it); params unchanged when it has none of them.
func WithoutMetaKeys(params json.RawMessage, keys ...string) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta == nil {
		return params
	}
	n := len(meta)
	for _, k := range keys {
		delete(meta, k)
	}
	if len(meta) == n {
		return params
	}
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		p["_meta"] = mcpwire.MustMarshal(meta)
	}
	return mcpwire.MustMarshal(p)
}
