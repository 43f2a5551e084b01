package gateway

// A 2026-07-28 client in front of a legacy (session) upstream (DESIGN.md
// "The upstream side"): the gateway holds one upstream session per owner.
//
//	modern request ─▶ heldSession(owner): this replica's cache (re-checked
//	                  with Redis every heldRecheck, which renews the record),
//	                  else the store's record <prefix>:{o}:held, else
//	                  initialize upstream and record it (compare-and-swap:
//	                  of replicas racing, one session wins; losers close theirs)
//	               ─▶ the request as a legacy one on that session: modern
//	                  _meta keys stripped, the gateway's own request id,
//	                  MCP-Protocol-Version = the session's version
//	upstream 404   ─▶ reopen: swap the forgotten session for a new one (or
//	                  take the one another replica already swapped in), retry
//	answer         ─▶ the modern shape: resultType "complete", ttlMs and
//	                  cacheScope on cacheable results, progress as SSE events
//
// The session is initialized declaring elicitation (form), sampling and
// roots, so the upstream may ask for input: a task's worker relays it to the
// client (tasks_modern.go). A plain forwarded call has no way to (2026-07-28
// has no server→client requests, only MRTR results), so such a request is
// refused upstream at once and nothing hangs.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

const (
	// heldTTL is how long an unused held session's record lives in Redis;
	// every use renews it (at most every heldRecheck per replica). The
	// upstream may forget the session sooner: then it is reopened.
	heldTTL = 24 * time.Hour
	// heldRecheck is how often a replica re-reads an owner's held session:
	// renewing its record, and noticing one another replica swapped in.
	heldRecheck = 5 * time.Minute
	// heldCacheSize bounds the in-process cache of held sessions.
	heldCacheSize = 4096
	// heldInitTimeout bounds opening a held session (initialize, record).
	heldInitTimeout = 30 * time.Second
)

// heldInitParams is the initialize the gateway opens a held session with:
// the newest legacy version (the upstream may choose an older one) and the
// client capabilities needed to relay input to a modern client's task.
var heldInitParams = mustJSON(map[string]any{
	"protocolVersion": legacyVersion,
	"capabilities": map[string]any{
		"elicitation": map[string]any{"form": map[string]any{}},
		"sampling":    map[string]any{},
		"roots":       map[string]any{},
	},
	"clientInfo": gatewayInfo,
})

// heldCache is a replica's copy of the held sessions it used, and the
// opens in flight (one per owner at a time).
type heldCache struct {
	mu      sync.Mutex
	m       map[string]heldEntry
	flights map[string]*heldFlight
}

type heldEntry struct {
	rec     *taskstore.HeldSession
	checked time.Time
}

type heldFlight struct {
	done chan struct{}
	rec  *taskstore.HeldSession
	err  error
}

func (c *heldCache) get(owner string) (heldEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[owner]
	return e, ok
}

func (c *heldCache) put(owner string, rec *taskstore.HeldSession, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || (len(c.m) >= heldCacheSize && c.m[owner].rec == nil) {
		c.m = make(map[string]heldEntry) // start over rather than grow
	}
	c.m[owner] = heldEntry{rec: rec, checked: now}
}

// do runs open for owner unless one is in flight, whose outcome it then
// shares. open runs on its own context: a caller that goes away does not
// leave a half-opened session behind.
func (c *heldCache) do(ctx context.Context, owner string, open func() (*taskstore.HeldSession, error)) (*taskstore.HeldSession, error) {
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
		c.flights = make(map[string]*heldFlight)
	}
	f := &heldFlight{done: make(chan struct{})}
	c.flights[owner] = f
	c.mu.Unlock()
	f.rec, f.err = open()
	c.mu.Lock()
	delete(c.flights, owner)
	c.mu.Unlock()
	close(f.done)
	return f.rec, f.err
}

// heldSession returns owner's held session on the legacy upstream, opening
// one if the owner has none. auth is sent with the initialize.
func (h *Handler) heldSession(ctx context.Context, owner string, auth http.Header) (*taskstore.HeldSession, error) {
	e, ok := h.modern.held.get(owner)
	if ok && time.Since(e.checked) < heldRecheck {
		return e.rec, nil
	}
	return h.modern.held.do(ctx, owner, func() (*taskstore.HeldSession, error) {
		return h.loadHeld(ctx, owner, auth, "", e.rec)
	})
}

// reopenHeld replaces owner's held session stale, which the upstream
// forgot, unless another caller (on any replica) already has: the record
// in Redis then names the new one.
func (h *Handler) reopenHeld(ctx context.Context, owner string, auth http.Header, stale string) (*taskstore.HeldSession, error) {
	return h.modern.held.do(ctx, owner, func() (*taskstore.HeldSession, error) {
		return h.loadHeld(ctx, owner, auth, stale, nil)
	})
}

// loadHeld reads owner's record, and opens a session when there is none or
// it is stale. cached is this replica's last copy, served while Redis is
// unreachable.
func (h *Handler) loadHeld(ctx context.Context, owner string, auth http.Header, stale string, cached *taskstore.HeldSession) (*taskstore.HeldSession, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heldInitTimeout)
	defer cancel()
	rec, err := h.store.GetHeldSession(ctx, owner)
	switch {
	case err == nil && rec.SessionID != stale:
		if _, terr := h.store.TouchHeldSession(ctx, owner, heldTTL); terr != nil {
			h.log.Warn().Str("op", "held_session").Err(terr).Msg("cannot renew the held session record; will retry")
		}
		h.modern.held.put(owner, rec, time.Now())
		return rec, nil
	case err == nil, errors.Is(err, taskstore.ErrNoSession):
	default:
		if cached != nil && cached.SessionID != stale {
			h.log.Warn().Str("op", "held_session").Err(err).Msg("cannot re-read the held session; using this replica's copy")
			return cached, nil
		}
		return nil, err
	}

	sess, init, err := h.up.Initialize(ctx, auth, heldInitParams)
	if err != nil {
		var se *upstream.StatusError
		var pe *upstream.ProtocolError
		var we *jsonrpc.Error
		if (errors.As(err, &se) && refusesEra(se.Status)) || errors.As(err, &pe) || errors.As(err, &we) {
			h.forgetEra(nil) // initialize refused: perhaps no longer a legacy server
		}
		return nil, err
	}
	next := &taskstore.HeldSession{SessionID: sess.ID, ProtocolVersion: sess.ProtocolVersion, Init: init.Raw, CreatedAt: time.Now()}
	if sess.ID == "" {
		// A legacy upstream without sessions: nothing to share or reopen.
		h.modern.held.put(owner, next, time.Now())
		return next, nil
	}
	won, mine, err := h.store.PutHeldSession(ctx, owner, *next, stale, heldTTL)
	if err != nil || !mine {
		if cerr := h.up.CloseSession(ctx, sess); cerr != nil {
			h.log.Debug().Str("op", "held_session").Err(cerr).Msg("cannot close the unused upstream session")
		}
		if err != nil {
			return nil, err
		}
	}
	if mine {
		h.log.Info().Str("op", "held_session").Str("owner", shortOwner(owner)).Str("upstream_version", won.ProtocolVersion).
			Bool("reopened", stale != "").Msg("upstream session opened for sessionless clients")
	}
	h.modern.held.put(owner, won, time.Now())
	return won, nil
}

// modernTarget is how the gateway calls the upstream for a modern client.
type modernTarget struct {
	Session *upstream.Session // the session to call on (a gateway-held one for a legacy upstream)
	Modern  bool              // the upstream speaks 2026-07-28 (MRTR); else legacy server→client requests
}

// modernUpstream resolves the upstream target for a modern client's
// request: owner is ownerOf(r), auth the client's credentials to send
// (forwardedAuth(r)). For a legacy upstream it opens or reuses the owner's
// gateway-held session. It does not depend on the client's request staying
// open: workers call it too. mr may be nil.
func (h *Handler) modernUpstream(ctx context.Context, owner string, auth http.Header, mr *modernReq) (*modernTarget, error) {
	era, err := h.upstreamEra(ctx, auth)
	if err != nil {
		return nil, err
	}
	if era.modern {
		v := modernVersion
		if mr != nil && mr.Version != "" {
			v = mr.Version
		}
		return &modernTarget{Session: &upstream.Session{ProtocolVersion: v, Header: auth}, Modern: true}, nil
	}
	held, err := h.heldSession(ctx, owner, auth)
	if err != nil {
		return nil, err
	}
	return heldTarget(held, auth), nil
}

func heldTarget(held *taskstore.HeldSession, auth http.Header) *modernTarget {
	return &modernTarget{Session: &upstream.Session{ID: held.SessionID, ProtocolVersion: held.ProtocolVersion, Header: auth}}
}

// reopenModern replaces a gateway-held upstream session the upstream forgot
// (upstream.ErrSessionNotFound, HTTP 404) and returns the new target.
// Replicas that see the same 404 end up on one new session.
func (h *Handler) reopenModern(ctx context.Context, owner string, auth http.Header, mr *modernReq, stale *modernTarget) (*modernTarget, error) {
	if stale == nil || stale.Modern || stale.Session == nil || stale.Session.ID == "" {
		return h.modernUpstream(ctx, owner, auth, mr)
	}
	held, err := h.reopenHeld(ctx, owner, auth, stale.Session.ID)
	if err != nil {
		return nil, err
	}
	return heldTarget(held, auth), nil
}

// upstreamCallParams turns a modern client's tools/call params into the
// params to send to target: for a modern upstream, the tasks extension is
// taken out of the client's capabilities (the gateway is the tasks server);
// for a legacy one, the modern _meta keys are taken out altogether.
func (h *Handler) upstreamCallParams(params json.RawMessage, target *modernTarget) json.RawMessage {
	if target != nil && target.Modern {
		out, _ := stripTasksExtension(params)
		return out
	}
	return legacyParams(params)
}

// modernMetaKeys are the per-request _meta keys a legacy upstream does not
// know (RequestMetaObject); progressToken and other keys stay.
var modernMetaKeys = []string{metaProtocolVersion, metaClientInfo, metaClientCaps, metaLogLevel}

// legacyParams returns params without the modern _meta keys (and without
// _meta if nothing else was in it).
func legacyParams(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta == nil {
		return params
	}
	for _, k := range modernMetaKeys {
		delete(meta, k)
	}
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		p["_meta"] = mustJSON(meta)
	}
	return mustJSON(p)
}

// forwardToLegacy sends a modern request as a legacy one on the owner's
// held session and answers it in the modern shape. Progress the upstream
// sends on the way goes to the client as SSE events; its requests for
// input are refused (there is no way to ask a 2026-07-28 client outside
// MRTR and tasks). The client going away cancels the upstream request
// (notifications/cancelled: on a session, a dropped stream is not a
// cancellation).
func (h *Handler) forwardToLegacy(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	ctx := r.Context()
	owner, auth := ownerOf(r), forwardedAuth(r)
	target, err := h.modernUpstream(ctx, owner, auth, mr)
	if err != nil {
		h.modernFailure(w, r, msg, err)
		return
	}
	method := msg.method()
	req := &jsonrpc.Request{ID: newUpstreamID(), Method: method}
	if len(msg.Params) > 0 {
		req.Params = legacyParams(msg.Params)
	}
	if method == "tools/call" && h.store != nil {
		h.forwardLegacyToolCall(w, r, msg, mr, target, req) // input becomes MRTR rounds (bridge.go)
		return
	}
	sse := newSSEWriter(w)
	opts := upstream.CallOptions{
		OnRequest: func(m *jsonrpc.Request) {
			_ = h.up.Respond(context.WithoutCancel(ctx), target.Session, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
				Code: codeMethodNotFound,
				Message: "taskgate cannot relay " + m.Method + " to a " + modernVersion +
					" client during a plain call (only during a task: the client declares " + tasksExtension + ")"}})
			h.log.Info().Str("op", "refused").Str("method", m.Method).Str("owner", shortOwner(owner)).
				Msg("input request during a plain call of a modern client refused upstream")
		},
		OnNotification: func(n *jsonrpc.Request) {
			if n.Method == "notifications/progress" { // request-scoped: may go on the response stream
				_ = sse.send(rpcRequest{JSONRPC: "2.0", Method: n.Method, Params: n.Params})
			}
		},
	}
	resp, err := h.up.Call(ctx, target.Session, req, opts)
	if errors.Is(err, upstream.ErrSessionNotFound) {
		if target, err = h.reopenModern(ctx, owner, auth, mr, target); err == nil {
			resp, err = h.up.Call(ctx, target.Session, req, opts)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_ = h.up.Cancel(cctx, target.Session, req.ID, "the client closed the request")
			cancel()
			return
		}
		if sse.started {
			e := modernRPCError(err)
			_ = sse.send(rpcResponse{JSONRPC: "2.0", ID: msg.ID, Error: mustJSON(e)})
			return
		}
		h.modernFailure(w, r, msg, err)
		return
	}
	if method == "tools/list" && resp.Error == nil {
		h.learnToolsList(ctx, resp.Result)
	}
	out, status := modernResponse(msg.ID, method, resp)
	if sse.started {
		_ = sse.sendRaw(string(out))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(int64(len(out))))
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// cacheable are the methods whose 2026-07-28 results are CacheableResults
// (ttlMs and cacheScope required; schema-2026-07-28.ts).
var cacheable = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// modernResponse renders a legacy upstream's response for a modern client,
// with the client's id, and the HTTP status to send it with.
func modernResponse(id json.RawMessage, method string, resp *jsonrpc.Response) (json.RawMessage, int) {
	if resp.Error != nil {
		var we *jsonrpc.Error
		if !errors.As(resp.Error, &we) {
			we = &jsonrpc.Error{Code: codeInternalError, Message: resp.Error.Error()}
		}
		if we.Code == -32002 {
			// "Resource not found" was -32002 up to 2025-11-25; -32602 since.
			c := *we
			c.Code = codeInvalidParams
			we = &c
		}
		return mustJSON(rpcResponse{JSONRPC: "2.0", ID: id, Error: mustJSON(we)}), modernStatus(int(we.Code))
	}
	return mustJSON(rpcResponse{JSONRPC: "2.0", ID: id, Result: modernResult(method, resp.Result)}), http.StatusOK
}

// modernResult adds what a 2026-07-28 result must carry and a legacy one
// lacks: resultType (Result: "Servers implementing this protocol version
// MUST include this field"), and for a CacheableResult ttlMs and cacheScope
// (0 and "private": the gateway knows nothing about how long it stays valid
// or whom it is for).
func modernResult(method string, result json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m == nil {
		return result
	}
	setDefault(m, "resultType", `"complete"`)
	if cacheable[method] {
		setDefault(m, "ttlMs", "0")
		setDefault(m, "cacheScope", `"private"`)
	}
	return mustJSON(m)
}
