package stdio

// The client-facing side: the Streamable HTTP endpoint the upstream
// client reaches through Transport.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// ServeHTTP serves the Streamable HTTP endpoint (any path).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.st != nil {
		b.serveStateless(w, r)
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

func jsonError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorMessage(id, code, message))
}

func (b *Bridge) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(b.opts.MaxLine)+1))
	if err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "cannot read the request body")
		return
	}
	if len(body) > b.opts.MaxLine {
		jsonError(w, http.StatusRequestEntityTooLarge, nil, -32600, "message larger than the upstream process accepts")
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		jsonError(w, http.StatusBadRequest, nil, -32700, "Parse error: the stdio bridge takes one JSON-RPC message per POST")
		return
	}
	if env.Method == "initialize" {
		b.initialize(w, body, env)
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
// served here as if opened here. With PerSession a session lives where its
// child runs.
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
	case !b.opts.PerSession && !b.closed && len(id) <= 128:
		// Adopted sessions do not count against --max-sessions (made-up
		// ids must not lock clients out); they are bounded on their own,
		// the least recently used idle one making room.
		if b.adopted >= b.opts.MaxSessions && !b.evictAdoptedLocked() {
			return nil
		}
		s = &session{id: id, adopted: true, streams: map[chan []byte]struct{}{}, lastUsed: time.Now()}
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

// initialize opens a session: answered from the shared child's initialize
// result, or (PerSession) by a child of its own initialized with the
// client's own params.
func (b *Bridge) initialize(w http.ResponseWriter, body []byte, env envelope) {
	b.mu.Lock()
	full := b.owned >= b.opts.MaxSessions
	if !full {
		b.owned++ // reserved now: concurrent initializes never pass the cap
	}
	shared, down := b.shared, b.down
	b.mu.Unlock()
	if full {
		jsonError(w, http.StatusOK, env.ID, -32603, fmt.Sprintf("too many sessions on the upstream process (--max-sessions %d)", b.opts.MaxSessions))
		return
	}
	opened := false
	defer func() {
		if !opened {
			b.mu.Lock()
			b.owned--
			b.mu.Unlock()
		}
	}()
	s := &session{id: uuid.NewString(), streams: map[chan []byte]struct{}{}, lastUsed: time.Now()}
	var p *proc
	if b.opts.PerSession {
		var params struct {
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(body, &params)
		if len(params.Params) == 0 {
			params.Params = initParams
		}
		var err error
		if p, err = b.spawn(params.Params); err != nil {
			jsonError(w, http.StatusOK, env.ID, -32603, "cannot start the upstream process for this session: "+err.Error())
			return
		}
		s.proc = p
	} else if p = shared; p == nil {
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, "the upstream process is not running: "+down.Error())
		return
	}
	var asked struct {
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &asked)
	result := p.init
	if v := asked.Params.ProtocolVersion; !b.opts.PerSession && frontable[v] && v < p.version {
		// The child speaks a newer version; the client gets the one it
		// asked for, which the child's messages also satisfy.
		result, _ = mcpwire.WithMember(result, "protocolVersion", json.RawMessage(strconv.Quote(v)))
	}
	b.mu.Lock()
	if b.closed {
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
		jsonError(w, http.StatusServiceUnavailable, env.ID, -32603, "the upstream process is not running: "+down.Error())
		return
	}
	n := strconv.FormatUint(b.seq.Add(1), 10)
	c := &call{key: strconv.Quote("taskgate-stdio-" + n), origID: env.ID, sess: s, proc: p, started: time.Now(),
		out: make(chan []byte, 64), final: make(chan []byte, 1)}
	out, err := mcpwire.WithMember(body, "id", json.RawMessage(c.key))
	if err == nil {
		out, err = b.withToken(out, env.Params, c, n)
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
			err = errors.New("the upstream process is not running (it is being restarted)")
		}
		jsonError(w, http.StatusBadGateway, env.ID, -32603, err.Error())
		return
	}
	sse := mcpwire.NewWriter(w)
	for {
		select {
		case m := <-c.out:
			if sse.SendRaw(m) != nil {
				b.cancel(c, "the client went away")
				return
			}
		case m := <-c.final:
			for drained := false; !drained; { // what came before the answer goes first
				select {
				case x := <-c.out:
					_ = sse.SendRaw(x)
				default:
					drained = true
				}
			}
			_ = sse.SendRaw(m)
			return
		case <-r.Context().Done():
			b.cancel(c, "the client went away")
			return
		}
	}
}

// withToken replaces the request's _meta.progressToken with a bridge token
// (the sessions' tokens would collide on one child).
func (b *Bridge) withToken(msg, params json.RawMessage, c *call, n string) (json.RawMessage, error) {
	meta := mcpwire.Meta(params)
	tok, ok := meta["progressToken"]
	if !ok {
		return msg, nil
	}
	c.origToken, c.token = tok, "taskgate-stdio-"+n
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
	if !b.drop(c) {
		return
	}
	msg := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": json.RawMessage(c.key), "reason": reason}})
	_ = c.proc.send(msg)
	c.final <- errorMessage(c.origID, -32603, "the request was cancelled: "+reason)
}

// get serves a session's stream of the child's notifications.
func (b *Bridge) get(w http.ResponseWriter, r *http.Request) {
	s := b.session(r)
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	ch := make(chan []byte, 64)
	b.mu.Lock()
	if s.streams == nil { // ended meanwhile
		b.mu.Unlock()
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	s.streams[ch] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if s.streams != nil {
			delete(s.streams, ch)
		}
		b.mu.Unlock()
	}()
	sse := mcpwire.NewWriter(w)
	_ = sse.Comment("stream open")
	for {
		select {
		case m, ok := <-ch:
			if !ok || sse.SendRaw(m) != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// delete ends a session: its calls in flight are cancelled, its own child
// (PerSession) stopped.
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
