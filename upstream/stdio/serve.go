package stdio

// The client-facing side: the Streamable HTTP endpoint the upstream
// client reaches through Transport.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// ServeHTTP serves the Streamable HTTP endpoint (any path).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.st != nil && (b.opts.Shared || r.Header.Get("Mcp-Session-Id") == "") {
		b.st.serve(w, r) // a 2026-07-28 request, or a 2025-11-25 client's initialize
		return
	}
	if b.forward(w, r) { // a session whose child runs on another replica (replicas.go)
		return
	}
	bridgesession.ServeMethods(w, r, b.session, &b.mu, b.post, b.delete)
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

func (b *Bridge) post(w http.ResponseWriter, r *http.Request) {
	body, env, ok := bridgesession.ReadPost(w, r, b.opts.MaxMessage, "message larger than the upstream process accepts", "the stdio bridge")
	if !ok {
		return
	}
	bridgesession.Dispatch(w, r, body, env, bridgesession.Post[*session]{
		Initialize: b.initialize,
		Session:    b.session,
		Answer: func(w http.ResponseWriter, _ *http.Request, s *session, body []byte, env envelope) {
			b.answer(w, s, body, env)
		},
		Notification: func(w http.ResponseWriter, _ *http.Request, s *session, body []byte, env envelope) {
			b.notification(w, s, body, env)
		},
		Request:     b.request,
		AnswersPing: true, // not passed to the child
	})
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
		s.LastUsed = time.Now()
	case b.opts.Shared && !b.closed && len(id) <= 128:
		// Adopted sessions do not count against --max-sessions (made-up
		// ids must not lock clients out); they are bounded on their own,
		// the least recently used idle one making room.
		if b.adopted >= b.opts.MaxSessions && !b.evictAdoptedLocked() {
			return nil
		}
		s = &session{id: id, adopted: true}
		s.LastUsed = time.Now()
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
		if s.adopted && s.Inflight == 0 && (lru == nil || s.LastUsed.Before(lru.LastUsed)) {
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
	if hopped(r.Context()) && r.Header.Get("Mcp-Session-Id") != "" {
		// A hop by session id carries no principal: the session it would
		// open would count in nobody's share. The sender serves an
		// initialize itself (hopTo); a principal's is sent without the id.
		jsonError(w, http.StatusBadRequest, env.ID, -32600, "Invalid Request: an initialize is not sent on as a request of another session")
		return
	}
	p := upstream.PrincipalFrom(r.Context())
	if b.forwardPrincipal(w, r, p.Key, body) { // the principal's child runs on another replica (principal.go)
		return
	}
	b.mu.Lock()
	pc, first, reason, after := b.reserveLocked(p.Key)
	shared, down := b.shared, b.down
	b.mu.Unlock()
	if reason != "" {
		bridgesession.RefuseSession(w, b.log, bridgesession.Limits{MaxSessions: b.opts.MaxSessions, PerPrincipal: b.opts.MaxSessionsPerPrincipal,
			What: "sessions of the stdio server", Op: "stdio"}, env.ID, p, reason, after)
		return
	}
	opened := false
	defer func() {
		if !opened {
			b.mu.Lock()
			if pc != nil {
				if stop := b.fleet.leavePrincipalLocked(pc); stop != nil {
					go stopProc(stop, "its principal's first session was not opened")
				}
			} else {
				b.owned--
				b.shares.GiveLocked(p.Key)
				b.fleet.wakeWarm()
			}
			b.mu.Unlock()
		}
	}()
	s := &session{id: uuid.NewString(), principal: p.Key}
	s.LastUsed = time.Now()
	result, err := b.childFor(s, body, shared, down, pc, first)
	if err != nil {
		r := &refusal{status: http.StatusOK, code: -32603}
		errors.As(err, &r)
		jsonError(w, r.status, env.ID, r.code, err.Error())
		return
	}
	if first {
		b.recordPrincipal(b.rep.Load(), p.Key) // claimed already, unless hopped here: its later sessions on other replicas hop here (replicas.go)
	}
	if err := b.recordSession(s.id); err != nil { // for the other replicas (replicas.go)
		if s.proc != nil && s.pc == nil {
			go stopProc(s.proc, "its session could not be recorded")
		}
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, err.Error())
		return
	}
	b.mu.Lock()
	if b.closed {
		s.Ended = true
		s.Streams.DropHeldLocked()
		b.mu.Unlock()
		if s.proc != nil && s.pc == nil {
			go stopProc(s.proc, "the gateway shut down")
		}
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, "the upstream process is stopped")
		return
	}
	if b.fleet.childGoneLocked(s) { // lifecycle.go
		s.Ended = true
		s.Streams.DropHeldLocked()
		b.sessionEnded(s) // its record goes (replicas.go)
		b.mu.Unlock()
		b.log.Warn().Str("op", "stdio").Str("session", s.id).Bool("principal", s.pc != nil).
			Msg("the upstream process given to a new session exited before the session opened; its initialize was refused (its client initializes again)")
		jsonError(w, http.StatusOK, env.ID, -32603, "taskgate could not start the stdio server for this session: its upstream process exited as the session opened; initialize again")
		return
	}
	if s.pc != nil { // its principal's child now: it may have been replaced meanwhile (respawn.go)
		s.proc, s.respawn = s.pc.proc, s.pc.respawn
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
//
// With PerPrincipal, a session of a principal with a child here joins it
// (pc), counted under the share only; the first starts one (first),
// counted under --max-sessions too, which bounds the children.
func (b *Bridge) reserveLocked(principal string) (pc *principalChild, first bool, reason string, after time.Duration) {
	var used []time.Time
	perPrincipal := b.fleet.perPrincipal(principal)
	switch {
	case b.shares.FullLocked(principal, b.opts.MaxSessionsPerPrincipal):
		reason = bridgesession.ReasonPerPrincipal
		for _, s := range b.sessions {
			if !s.adopted && s.principal == principal {
				used = append(used, s.LastUsed)
			}
		}
	case b.owned >= b.opts.MaxSessions && !(perPrincipal && b.fleet.principals[principal] != nil):
		reason = bridgesession.ReasonMaxSessions
		for _, s := range b.sessions {
			if !s.adopted {
				used = append(used, s.LastUsed)
			}
		}
	case perPrincipal:
		pc, first = b.fleet.joinPrincipalLocked(principal)
		return pc, first, "", 0
	default:
		b.owned++
		b.shares.TakeLocked(principal)
		return nil, false, "", 0
	}
	return nil, false, reason, bridgesession.IdleAfter(time.Now(), b.opts.SessionIdle, used)
}

// procOf is the child serving s, or nil while it is down.
func (b *Bridge) procOf(s *session) *proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.proc != nil { // replaced when the session outlives its child (respawn.go)
		return s.proc
	}
	return b.shared
}

// answer hands the client's answer to a child's request back to the child.
func (b *Bridge) answer(w http.ResponseWriter, s *session, body []byte, env envelope) {
	a, out, err := b.calls.Answer(s, env.ID, body)
	if a == nil {
		jsonError(w, http.StatusNotFound, nil, -32600, "no request of the upstream process has this id")
		return
	}
	if err == nil {
		err = a.Peer.send(out)
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
		if c, out := b.calls.ClientCancelled(s, body, env.Params); c != nil {
			_ = c.Peer.send(out)
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
	defer b.fleet.markRerunnable(r, s, env)() // respawn.go
	b.fleet.awaitChild(r.Context(), s)
	p := b.procOf(s)
	if p == nil {
		b.mu.Lock()
		down := b.down
		b.mu.Unlock()
		exitedError(w, http.StatusServiceUnavailable, env.ID, "the upstream process is not running: "+down.Error())
		return
	}
	c, err := b.send(s, p, body, env)
	if err != nil {
		if errors.Is(err, errInvalid) {
			jsonError(w, http.StatusBadRequest, env.ID, -32600, err.Error())
			return
		}
		if !p.alive() {
			exitedError(w, http.StatusBadGateway, env.ID, "the upstream process is not running (it is being restarted)")
			return
		}
		jsonError(w, http.StatusBadGateway, env.ID, -32603, err.Error())
		return
	}
	b.calls.Stream(w, r, c)
}

// errInvalid marks a request whose id or progress token cannot be
// rewritten.
var errInvalid = errors.New("Invalid Request")

// send sends a client's request of session s to child p under a bridge id
// (and bridge progress token) and returns its call.
func (b *Bridge) send(s *session, p *proc, body []byte, env envelope) (*call, error) {
	c := b.calls.NewCall(s, p, env.ID, env.Method)
	out, err := b.calls.Prepare(c, body, env.Params)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, err)
	}
	b.calls.Add(c)
	if err := p.send(out); err != nil {
		b.calls.Drop(c)
		return nil, err
	}
	return c, nil
}

// delete ends a session: its calls in flight are cancelled, its own child
// stopped.
func (b *Bridge) delete(w http.ResponseWriter, s *session) {
	calls := b.calls.CallsOf(s)
	b.mu.Lock()
	b.endSessionLocked(s)
	p, pc := s.proc, s.pc
	b.mu.Unlock()
	for _, c := range calls {
		b.calls.Cancel(c, "the session ended")
	}
	if p != nil && pc == nil { // a principal's child stops with its last session (endSessionLocked)
		go stopProc(p, "its session ended")
	}
	w.WriteHeader(http.StatusOK)
}
