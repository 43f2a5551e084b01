package sse

// The client-facing side: the Streamable HTTP endpoint the upstream
// client reaches through Transport.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	bridgesession.ServeMethods(w, r, b.session, &b.mu, b.serveMessage, b.delete)
}

type envelope = bridgesession.Envelope

func (b *Bridge) serveMessage(w http.ResponseWriter, r *http.Request) {
	body, env, ok := bridgesession.ReadPost(w, r, b.opts.MaxMessage, fmt.Sprintf("message larger than the %d bytes the HTTP+SSE bridge passes on", b.opts.MaxMessage), "the HTTP+SSE bridge")
	if !ok {
		return
	}
	bridgesession.Dispatch(w, r, body, env, bridgesession.Post[*session]{
		Initialize:   b.initialize,
		Session:      b.session,
		Answer:       b.answer,
		Notification: b.notification,
		Request:      b.request, // a ping too: the server answers it
	})
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
		s.LastUsed = time.Now()
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
		bridgesession.RefuseSession(w, b.log, bridgesession.Limits{MaxSessions: b.opts.MaxSessions, PerPrincipal: b.opts.MaxSessionsPerPrincipal,
			What: "HTTP+SSE sessions of the upstream", Op: "sse"}, env.ID, pr, reason, after)
		return
	}
	s := &session{id: uuid.NewString(), header: passHeaders(r.Header), principal: pr.Key}
	s.Caps, s.LastUsed = p.Capabilities, time.Now()
	if s.Caps == nil {
		s.Caps = map[string]json.RawMessage{}
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
				used = append(used, s.LastUsed)
			}
		}
	case b.owned >= b.opts.MaxSessions:
		reason = bridgesession.ReasonMaxSessions
		for _, s := range b.sessions {
			used = append(used, s.LastUsed)
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
	c := b.calls.NewCall(s, s, env.ID, env.Method)
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.Key))
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
	b.calls.AddLocked(c)
	b.wg.Add(1)
	b.mu.Unlock()
	go b.read(s, rd, stream)
	if err := b.post(s, nil, out); err != nil {
		b.calls.Drop(c)
		return nil, err
	}
	select {
	case msg := <-c.Final:
		b.mu.Lock()
		ended := s.Ended
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
		b.calls.Drop(c)
		return nil, fmt.Errorf("the server did not answer initialize within %s", b.opts.InitTimeout)
	}
}

// request POSTs a client request to the server and streams what belongs
// to it (the server's requests, progress) until its answer.
func (b *Bridge) request(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	c := b.calls.NewCall(s, s, env.ID, env.Method)
	out, err := b.calls.Prepare(c, body, env.Params)
	if err != nil {
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request: "+err.Error())
		return
	}
	b.mu.Lock()
	switch {
	case s.Ended:
		b.mu.Unlock()
		jsonError(w, http.StatusNotFound, env.ID, -32001, "Session not found")
		return
	case s.Inflight >= b.opts.MaxPending:
		b.mu.Unlock()
		jsonError(w, http.StatusOK, env.ID, -32603, fmt.Sprintf("taskgate refused the request: %d requests of this session are already in flight on the HTTP+SSE upstream", b.opts.MaxPending))
		return
	}
	b.calls.AddLocked(c)
	b.mu.Unlock()
	if err := b.post(s, passHeaders(r.Header), out); err != nil {
		b.calls.Drop(c)
		if errors.Is(err, errGone) {
			b.lost(s, err.Error())
			jsonError(w, http.StatusNotFound, env.ID, -32001, "Session not found")
			return
		}
		jsonError(w, http.StatusBadGateway, env.ID, -32603, err.Error())
		return
	}
	b.calls.Stream(w, r, c)
}

// answer POSTs the client's answer to a server's request, with the
// server's id.
func (b *Bridge) answer(w http.ResponseWriter, r *http.Request, s *session, body []byte, env envelope) {
	a, out, err := b.calls.Answer(s, env.ID, body)
	if a == nil {
		jsonError(w, http.StatusNotFound, nil, -32600, "no request of the upstream has this id")
		return
	}
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
		c, out := b.calls.ClientCancelled(s, body, env.Params)
		if c == nil {
			w.WriteHeader(http.StatusAccepted) // answered already: nothing to cancel
			return
		}
		body = out
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

// cancelMessage fails call c, if still in flight, and returns the
// cancellation to send the server; nil when there is none to send.
func (b *Bridge) cancelMessage(c *call, reason string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if msg := b.calls.CancelLocked(c, reason); msg != nil && !c.Sess.Ended {
		return msg
	}
	return nil
}

// delete ends a session: its calls in flight are cancelled, its SSE
// stream closed (which ends the server's session).
func (b *Bridge) delete(w http.ResponseWriter, s *session) {
	for _, c := range b.calls.CallsOf(s) { // before the stream closes, which ends the server's session
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
