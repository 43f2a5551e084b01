package stdio

// The client-facing side: the Streamable HTTP endpoint the upstream
// client reaches through Transport.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// ServeHTTP serves the Streamable HTTP endpoint (any path).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.st != nil {
		b.serveStateless(w, r)
		return
	}
	if b.forward(w, r) { // a session whose child runs on another replica (replicas.go)
		return
	}
	switch r.Method {
	case http.MethodPost:
		b.post(w, r)
	case http.MethodGet:
		b.get(w, r)
	case http.MethodDelete:
		b.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// exitedError is jsonError for a call the child could not take because it
// exited (exitedMessage: a gateway may run a repeatable tool again).
func exitedError(w http.ResponseWriter, status int, id json.RawMessage, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(exitedMessage(id, message))
}

func jsonError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorMessage(id, code, message))
}

func (b *Bridge) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxMessage)+1))
	if err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "cannot read the request body")
		return
	}
	if len(body) > b.opts.MaxMessage {
		jsonError(w, http.StatusRequestEntityTooLarge, nil, -32600, "message larger than the upstream process accepts")
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "Parse error: the stdio bridge takes one JSON-RPC message per POST")
		return
	}
	if env.Method == "initialize" {
		b.initialize(w, r, body, env)
		return
	}
	s := b.session(r)
	if s == nil {
		if r.Header.Get("Mcp-Session-Id") == "" {
			jsonError(w, http.StatusBadRequest, env.ID, -32600, "Bad Request: Mcp-Session-Id is required (initialize first)")
		} else {
			jsonError(w, http.StatusNotFound, env.ID, -32001, "Session not found")
		}
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // the client answers a child's request
		b.answer(w, s, body, env)
	case env.Method != "" && len(env.ID) == 0: // a notification
		b.notification(w, s, body, env)
	case env.Method == "ping":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resultMessage(env.ID, json.RawMessage(`{}`)))
	case env.Method != "":
		b.request(w, r, s, body, env)
	default:
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request")
	}
}

// session is r's session, touched; nil when unknown. A shared child keeps
// no state per client session, so a session another replica's bridge
// opened (the client's requests spread over replicas) is adopted: it is
// served here as if opened here. A session's own child lives on one
// replica: elsewhere the session is unknown.
func (b *Bridge) session(r *http.Request) *session {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	switch {
	case s != nil:
		s.lastUsed = time.Now()
	case b.opts.Shared && !b.closed && len(id) <= 128:
		// Adopted sessions do not count against --max-sessions (made-up
		// ids must not lock clients out); they are bounded on their own,
		// the least recently used idle one making room.
		if b.adopted >= b.opts.MaxSessions && !b.evictAdoptedLocked() {
			return nil
		}
		s = &session{id: id, adopted: true, lastUsed: time.Now()}
		b.sessions[id] = s
		b.adopted++
	}
	return s
}

// evictAdoptedLocked ends the least recently used adopted session with no
// call in flight; false if there is none.
func (b *Bridge) evictAdoptedLocked() bool {
	var lru *session
	for _, s := range b.sessions {
		if s.adopted && s.inflight == 0 && (lru == nil || s.lastUsed.Before(lru.lastUsed)) {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	b.endSessionLocked(lru)
	return true
}

// initialize opens a session: by a child of its own, initialized with the
// client's own params (what it can do, its version, its name), or, when
// Shared, answered from the shared child's initialize result.
func (b *Bridge) initialize(w http.ResponseWriter, r *http.Request, body []byte, env envelope) {
	p := upstream.PrincipalFrom(r.Context())
	b.mu.Lock()
	reason, after := b.reserveLocked(p.Key)
	shared, down := b.shared, b.down
	b.mu.Unlock()
	if reason != "" {
		limit := b.opts.MaxSessions
		if reason == bridgesession.ReasonPerPrincipal {
			limit = b.opts.MaxSessionsPerPrincipal
		}
		b.log.Debug().Str("op", "stdio").Str("reason", reason).Int("limit", limit).Msg("initialize refused")
		bridgesession.Refuse(w, env.ID, p, reason, bridgesession.SessionMessage(reason, "sessions of the stdio server", limit), after)
		return
	}
	opened := false
	defer func() {
		if !opened {
			b.mu.Lock()
			b.owned--
			b.shares.GiveLocked(p.Key)
			b.mu.Unlock()
		}
	}()
	s := &session{id: uuid.NewString(), lastUsed: time.Now(), principal: p.Key}
	result, err := b.childFor(s, body, shared, down)
	if err != nil {
		r := &refusal{status: http.StatusOK, code: -32603}
		errors.As(err, &r)
		jsonError(w, r.status, env.ID, r.code, err.Error())
		return
	}
	if err := b.recordSession(s.id); err != nil { // for the other replicas (replicas.go)
		if s.proc != nil {
			go b.stopProc(s.proc, "its session could not be recorded")
		}
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, err.Error())
		return
	}
	b.mu.Lock()
	if b.closed {
		s.ended = true
		s.streams.DropHeldLocked()
		b.mu.Unlock()
		if s.proc != nil {
			go b.stopProc(s.proc, "the gateway shut down")
		}
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, "the upstream process is stopped")
		return
	}
	b.sessions[s.id] = s
	opened = true
	b.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", s.id)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resultMessage(env.ID, result))
}

// reserveLocked counts a session being opened for principal (under both
// --max-sessions-per-principal and --max-sessions: concurrent initializes
// never pass either), or names the limit that refuses it and when a
// session it waits for idles out.
func (b *Bridge) reserveLocked(principal string) (reason string, after time.Duration) {
	var used []time.Time
	switch {
	case b.shares.FullLocked(principal, b.opts.MaxSessionsPerPrincipal):
		reason = bridgesession.ReasonPerPrincipal
		for _, s := range b.sessions {
			if !s.adopted && s.principal == principal {
				used = append(used, s.lastUsed)
			}
		}
	case b.owned >= b.opts.MaxSessions:
		reason = bridgesession.ReasonMaxSessions
		for _, s := range b.sessions {
			if !s.adopted {
				used = append(used, s.lastUsed)
			}
		}
	default:
		b.owned++
		b.shares.TakeLocked(principal)
		return "", 0
	}
	return reason, bridgesession.IdleAfter(time.Now(), b.opts.SessionIdle, used)
}

// procOf is the child serving s, or nil while it is down.
func (b *Bridge) procOf(s *session) *proc {
	if s.proc != nil {
		return s.proc
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shared
}

// answer hands the client's answer to a child's request back to the child.
func (b *Bridge) answer(w http.ResponseWriter, s *session, body []byte, env envelope) {
	b.mu.Lock()
	a := b.asks[string(env.ID)]
	if a != nil && a.sess != s {
		a = nil // asked of another session: not this one's to answer
	}
	if a != nil {
		delete(b.asks, string(env.ID))
	}
	b.mu.Unlock()
	if a == nil {
		jsonError(w, http.StatusNotFound, nil, -32600, "no request of the upstream process has this id")
		return
	}
	out, err := mcpwire.WithMember(body, "id", a.childID)
	if err == nil {
		err = a.proc.send(out)
	}
	if err != nil {
		jsonError(w, http.StatusBadGateway, nil, -32603, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// notification passes a client notification to the child: initialized is
// the bridge's own business, a cancellation names the bridge's id.
func (b *Bridge) notification(w http.ResponseWriter, s *session, body []byte, env envelope) {
	switch env.Method {
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
		return
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(env.Params, &p)
		b.mu.Lock()
		var c *call
		for _, x := range b.calls {
			if x.sess == s && mcpwire.SameID(x.origID, p.RequestID) {
				c = x
				break
			}
		}
		b.mu.Unlock()
		if c != nil {
			params, _ := mcpwire.WithMember(env.Params, "requestId", json.RawMessage(c.key))
			out, _ := mcpwire.WithMember(body, "params", params)
			_ = c.proc.send(out)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	p := b.procOf(s)
	if p == nil {
		jsonError(w, http.StatusServiceUnavailable, nil, -32603, "the upstream process is not running")
		return
	}
	if err := p.send(body); err != nil {
		jsonError(w, http.StatusBadGateway, nil, -32603, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// request sends a client request to the child and streams what belongs to
// it (the child's requests, progress) until its response.
func (b *Bridge) request(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	p := b.procOf(s)
	if p == nil {
		b.mu.Lock()
		down := b.down
		b.mu.Unlock()
		exitedError(w, http.StatusServiceUnavailable, env.ID, "the upstream process is not running: "+down.Error())
		return
	}
	n := strconv.FormatUint(b.seq.Add(1), 10)
	c := &call{key: strconv.Quote("taskgate-stdio-" + n), origID: env.ID, method: env.Method, sess: s, proc: p, started: time.Now(),
		out: make(chan []byte, 64), final: make(chan reply, 1)}
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.key))
	if err == nil {
		out, err = b.withToken(out, env.Params, c)
	}
	if err != nil {
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request: "+err.Error())
		return
	}
	b.mu.Lock()
	b.calls[c.key] = c
	if c.token != "" {
		b.tokens[c.token] = c
	}
	s.inflight++
	b.mu.Unlock()
	if err := p.send(out); err != nil {
		b.drop(c)
		if !p.alive() {
			exitedError(w, http.StatusBadGateway, env.ID, "the upstream process is not running (it is being restarted)")
			return
		}
		jsonError(w, http.StatusBadGateway, env.ID, -32603, err.Error())
		return
	}
	b.stream(w, r, c)
}

// stream writes what belongs to call c on its SSE answer until its reply.
func (b *Bridge) stream(w http.ResponseWriter, r *http.Request, c *call) {
	defer func() { // a reply that came as the client left: its file closed
		select {
		case rp := <-c.final:
			rp.big.release()
		default:
		}
	}()
	sse := mcpwire.NewWriter(w)
	for {
		select {
		case m := <-c.out:
			if sse.SendRaw(m) != nil {
				b.cancel(c, "the client went away")
				return
			}
		case rp := <-c.final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.out:
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			if rp.big != nil {
				if err := rp.big.writeTo(w, sse.Started(), c.origID); err != nil {
					b.log.Debug().Str("op", "stdio").Err(err).Msg("a large answer did not reach its client")
				}
				return
			}
			_ = sse.SendRaw(rp.msg)
			return
		case <-r.Context().Done():
			b.cancel(c, "the client went away")
			return
		}
	}
}

// withToken replaces the request's _meta.progressToken with a bridge token
// (the sessions' tokens would collide on one child). The token is random:
// a child cannot guess the token of a call it does not serve (progress is
// also checked against the child that sent it, Bridge.progress).
func (b *Bridge) withToken(msg, params json.RawMessage, c *call) (json.RawMessage, error) {
	meta := mcpwire.Meta(params)
	tok, ok := meta["progressToken"]
	if !ok {
		return msg, nil
	}
	c.origToken, c.token = tok, "taskgate-stdio-progress-"+uuid.NewString()
	params = mcpwire.WithMeta(params, "progressToken", c.token)
	return mcpwire.WithMember(msg, "params", params)
}

// drop forgets call c without an answer.
func (b *Bridge) drop(c *call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[c.key] != c {
		return false
	}
	b.endCallLocked(c)
	return true
}

// cancel tells the child that the client gave up on call c.
func (b *Bridge) cancel(c *call, reason string) {
	b.mu.Lock()
	if b.calls[c.key] != c {
		b.mu.Unlock()
		return
	}
	b.finishLocked(c, reply{msg: errorMessage(c.origID, -32603, "the request was cancelled: "+reason)})
	b.mu.Unlock()
	msg := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": json.RawMessage(c.key), "reason": reason}})
	_ = c.proc.send(msg)
}

// get serves a session's stream of the child's notifications.
func (b *Bridge) get(w http.ResponseWriter, r *http.Request) {
	s := b.session(r)
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	s.streams.Serve(w, r, &b.mu) // first what the child asked before it opened
}

// delete ends a session: its calls in flight are cancelled, its own child
// stopped.
func (b *Bridge) delete(w http.ResponseWriter, r *http.Request) {
	s := b.session(r)
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	b.mu.Lock()
	var calls []*call
	for _, c := range b.calls {
		if c.sess == s {
			calls = append(calls, c)
		}
	}
	b.endSessionLocked(s)
	b.mu.Unlock()
	sort.Slice(calls, func(i, j int) bool { return calls[i].started.Before(calls[j].started) })
	for _, c := range calls {
		b.cancel(c, "the session ended")
	}
	if s.proc != nil {
		go b.stopProc(s.proc, "its session ended")
	}
	w.WriteHeader(http.StatusOK)
}
