package sse

// The client-facing side: the Streamable HTTP endpoint the upstream
// client reaches through Transport.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// ServeHTTP serves the Streamable HTTP endpoint at the SSE URL's path;
// any other path goes to the server's origin as it is (its OAuth
// metadata, say).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != b.url.Path && !(r.URL.Path == "" && b.url.Path == "/") {
		b.proxy(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost:
		b.serveMessage(w, r)
	case http.MethodGet:
		b.get(w, r)
	case http.MethodDelete:
		b.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func jsonError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorMessage(id, code, message))
}

func (b *Bridge) serveMessage(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxMessage)+1))
	if err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "cannot read the request body")
		return
	}
	if len(body) > b.opts.MaxMessage {
		jsonError(w, http.StatusRequestEntityTooLarge, nil, -32600, fmt.Sprintf("message larger than the %d bytes the HTTP+SSE bridge passes on", b.opts.MaxMessage))
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "Parse error: the HTTP+SSE bridge takes one JSON-RPC message per POST")
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
	case env.Method == "" && len(env.ID) > 0: // the client answers a server's request
		b.answer(w, r, s, body, env)
	case env.Method != "" && len(env.ID) == 0:
		b.notification(w, r, s, body, env)
	case env.Method != "":
		b.request(w, r, s, body, env)
	default:
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request")
	}
}

// session is r's session, touched; nil when unknown or ended.
func (b *Bridge) session(r *http.Request) *session {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	if s != nil {
		s.lastUsed = time.Now()
	}
	return s
}

// initialize opens an SSE session upstream and passes the client's own
// initialize to it (its capabilities, version and name reach the server).
func (b *Bridge) initialize(w http.ResponseWriter, r *http.Request, body []byte, env envelope) {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if len(env.Params) == 0 || env.Params[0] != '{' || json.Unmarshal(env.Params, &p) != nil {
		jsonError(w, http.StatusOK, env.ID, -32602, "Invalid params: initialize takes an object (MCP 2025-11-25, Lifecycle, \"Initialization\")")
		return
	}
	pr := upstream.PrincipalFrom(r.Context())
	b.mu.Lock()
	closed := b.closed
	var reason string
	var after time.Duration
	if !closed {
		reason, after = b.reserveLocked(pr.Key)
	}
	b.mu.Unlock()
	switch {
	case closed:
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, "the HTTP+SSE bridge is closed")
		return
	case reason != "":
		limit := b.opts.MaxSessions
		if reason == bridgesession.ReasonPerPrincipal {
			limit = b.opts.MaxSessionsPerPrincipal
		}
		b.log.Debug().Str("op", "sse").Str("reason", reason).Int("limit", limit).Msg("initialize refused")
		bridgesession.Refuse(w, env.ID, pr, reason, bridgesession.SessionMessage(reason, "HTTP+SSE sessions of the upstream", limit), after)
		return
	}
	s := &session{id: uuid.NewString(), header: passHeaders(r.Header), caps: p.Capabilities, lastUsed: time.Now(), principal: pr.Key}
	if s.caps == nil {
		s.caps = map[string]json.RawMessage{}
	}
	result, err := b.open(s, body, env)
	if err == nil && !mcpwire.IsObject(resultOf(result)) { // the server refused it: no session
		b.mu.Lock()
		b.endSessionLocked(s, "the server refused its initialize")
		b.mu.Unlock()
		s.stop()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(result)
		return
	}
	if err != nil {
		b.mu.Lock()
		b.endSessionLocked(s, "its initialize failed")
		b.mu.Unlock()
		if s.stop != nil {
			s.stop()
		}
		b.log.Error().Str("op", "sse").Err(err).Msg("cannot open an HTTP+SSE session upstream")
		jsonError(w, http.StatusOK, env.ID, -32603, "taskgate could not open an HTTP+SSE session with the upstream: "+err.Error())
		return
	}
	w.Header().Set("Mcp-Session-Id", s.id)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(result)
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
			if s.principal == principal {
				used = append(used, s.lastUsed)
			}
		}
	case b.owned >= b.opts.MaxSessions:
		reason = bridgesession.ReasonMaxSessions
		for _, s := range b.sessions {
			used = append(used, s.lastUsed)
		}
	default:
		b.owned++
		b.shares.TakeLocked(principal)
		return "", 0
	}
	return reason, bridgesession.IdleAfter(time.Now(), b.opts.SessionIdle, used)
}

// open connects s and sends it the client's initialize, returning the
// server's answer with the client's id. s is in b.sessions once it
// returns without error.
func (b *Bridge) open(s *session, body []byte, env envelope) ([]byte, error) {
	rd, stream, err := b.connect(s)
	if err != nil {
		return nil, err
	}
	c := b.newCall(s, env)
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.key))
	if err != nil {
		stream.Close()
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		stream.Close()
		return nil, errors.New("the gateway is shutting down")
	}
	b.sessions[s.id] = s
	b.calls[c.key] = c
	s.inflight++
	b.wg.Add(1)
	b.mu.Unlock()
	go b.read(s, rd, stream)
	if err := b.post(s, nil, out); err != nil {
		b.drop(c)
		return nil, err
	}
	select {
	case msg := <-c.final:
		b.mu.Lock()
		ended := s.ended
		b.mu.Unlock()
		if ended { // the stream ended first; msg says why
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal(msg, &e)
			return nil, errors.New(e.Error.Message)
		}
		return msg, nil
	case <-time.After(b.opts.InitTimeout):
		b.drop(c)
		return nil, fmt.Errorf("the server did not answer initialize within %s", b.opts.InitTimeout)
	}
}

// newCall is a call of session s for the client's request env.
func (b *Bridge) newCall(s *session, env envelope) *call {
	n := strconv.FormatUint(b.seq.Add(1), 10)
	return &call{key: strconv.Quote("taskgate-sse-" + n), origID: env.ID, method: env.Method, sess: s, started: time.Now(),
		out: make(chan []byte, 64), final: make(chan []byte, 1)}
}

// request POSTs a client request to the server and streams what belongs
// to it (the server's requests, progress) until its answer.
func (b *Bridge) request(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	c := b.newCall(s, env)
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.key))
	if err == nil {
		out, err = b.withToken(out, env.Params, c)
	}
	if err != nil {
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request: "+err.Error())
		return
	}
	b.mu.Lock()
	switch {
	case s.ended:
		b.mu.Unlock()
		jsonError(w, http.StatusNotFound, env.ID, -32001, "Session not found")
		return
	case s.inflight >= b.opts.MaxPending:
		b.mu.Unlock()
		jsonError(w, http.StatusOK, env.ID, -32603, fmt.Sprintf("taskgate refused the request: %d requests of this session are already in flight on the HTTP+SSE upstream", b.opts.MaxPending))
		return
	}
	b.calls[c.key] = c
	if c.token != "" {
		b.tokens[c.token] = c
	}
	s.inflight++
	b.mu.Unlock()
	if err := b.post(s, passHeaders(r.Header), out); err != nil {
		b.drop(c)
		if errors.Is(err, errGone) {
			b.lost(s, err.Error())
			jsonError(w, http.StatusNotFound, env.ID, -32001, "Session not found")
			return
		}
		jsonError(w, http.StatusBadGateway, env.ID, -32603, err.Error())
		return
	}
	b.stream(w, r, c)
}

// stream writes what belongs to call c on its SSE answer until its reply.
func (b *Bridge) stream(w http.ResponseWriter, r *http.Request, c *call) {
	sse := mcpwire.NewWriter(w)
	for {
		select {
		case m := <-c.out:
			if sse.SendRaw(m) != nil {
				b.cancel(c, "the client went away")
				return
			}
		case msg := <-c.final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.out:
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			_ = sse.SendRaw(msg)
			return
		case <-r.Context().Done():
			b.cancel(c, "the client went away")
			return
		}
	}
}

// withToken replaces the request's _meta.progressToken with a bridge
// token, by which the server's progress finds its call.
func (b *Bridge) withToken(msg, params json.RawMessage, c *call) (json.RawMessage, error) {
	tok, ok := mcpwire.Meta(params)["progressToken"]
	if !ok {
		return msg, nil
	}
	c.origToken, c.token = tok, "taskgate-sse-progress-"+uuid.NewString()
	params = mcpwire.WithMeta(params, "progressToken", c.token)
	return mcpwire.WithMember(msg, "params", params)
}

// answer POSTs the client's answer to a server's request, with the
// server's id.
func (b *Bridge) answer(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	b.mu.Lock()
	a := b.asks[string(env.ID)]
	if a != nil && a.sess != s {
		a = nil // asked of another session: not this one's to answer
	}
	if a != nil {
		b.forgetAskLocked(string(env.ID), a)
	}
	b.mu.Unlock()
	if a == nil {
		jsonError(w, http.StatusNotFound, nil, -32600, "no request of the upstream has this id")
		return
	}
	out, err := mcpwire.WithMember(body, "id", a.upID)
	if err == nil {
		err = b.post(s, passHeaders(r.Header), out)
	}
	if err != nil {
		jsonError(w, http.StatusBadGateway, nil, -32603, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// notification POSTs a client notification to the server; a cancellation
// names the bridge's id of the call.
func (b *Bridge) notification(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	if env.Method == "notifications/cancelled" {
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
		if c == nil {
			w.WriteHeader(http.StatusAccepted) // answered already: nothing to cancel
			return
		}
		params, _ := mcpwire.WithMember(env.Params, "requestId", json.RawMessage(c.key))
		body, _ = mcpwire.WithMember(body, "params", params)
	}
	if err := b.post(s, passHeaders(r.Header), body); err != nil {
		if errors.Is(err, errGone) {
			b.lost(s, err.Error())
			jsonError(w, http.StatusNotFound, nil, -32001, "Session not found")
			return
		}
		jsonError(w, http.StatusBadGateway, nil, -32603, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// drop forgets call c without an answer.
func (b *Bridge) drop(c *call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[c.key] == c {
		b.endCallLocked(c)
	}
}

// cancel tells the server that the client gave up on call c.
func (b *Bridge) cancel(c *call, reason string) {
	if msg := b.cancelMessage(c, reason); msg != nil {
		b.postAsync(c.sess, msg)
	}
}

// cancelMessage fails call c, if still in flight, and returns the
// cancellation to send the server; nil when there is none to send.
func (b *Bridge) cancelMessage(c *call, reason string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[c.key] != c {
		return nil
	}
	b.finishLocked(c, errorMessage(c.origID, -32603, "the request was cancelled: "+reason))
	if c.sess.ended {
		return nil
	}
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": json.RawMessage(c.key), "reason": reason}})
}

// get serves a session's stream of the server's notifications and
// requests.
func (b *Bridge) get(w http.ResponseWriter, r *http.Request) {
	s := b.session(r)
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	s.streams.Serve(w, r, &b.mu) // first what the server asked before it opened
}

// delete ends a session: its calls in flight are cancelled, its SSE
// stream closed (which ends the server's session).
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
	b.mu.Unlock()
	for _, c := range calls { // before the stream closes, which ends the server's session
		if msg := b.cancelMessage(c, "the session ended"); msg != nil {
			_ = b.post(s, nil, msg)
		}
	}
	b.mu.Lock()
	b.endSessionLocked(s, "its client ended it")
	b.mu.Unlock()
	s.stop()
	w.WriteHeader(http.StatusOK)
}

// proxy sends a request for another path of the server's origin there as
// it is (OAuth metadata, an authorization server's endpoints).
func (b *Bridge) proxy(w http.ResponseWriter, r *http.Request) {
	u := *r.URL
	u.Scheme, u.Host = b.url.Scheme, b.url.Host
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vv := range resp.Header {
		w.Header()[k] = vv
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
