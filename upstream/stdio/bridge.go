// Package stdio fronts an MCP server that runs as a child process over
// stdio (MCP 2025-11-25, Transports, "stdio") as if it were a session
// server over Streamable HTTP, so that the rest of taskgate (the upstream
// client, both fronts, the runner) works unchanged. The Bridge is an
// http.Handler; Transport hands it the upstream client's requests in
// process, with no socket.
//
// One child serves every client session (or, with PerSession, one child
// per session):
//
//	client request        its id rewritten to a bridge id, and its
//	                      _meta.progressToken to a bridge token, so that the
//	                      sessions sharing the child never collide; the answer
//	                      comes back on the request's SSE stream with the
//	                      client's id
//	child request         (elicitation, sampling, roots) sent on the stream
//	                      of the one call in flight on the child, under a
//	                      bridge id only that call's session may answer; the
//	                      answer goes back with the child's id. With several
//	                      calls in flight it is refused: stdio does not say
//	                      which call asked
//	child notification    progress to the call whose token it names;
//	                      anything else to every session's GET stream
//	cancel, DELETE,       notifications/cancelled to the child
//	client gone
//
// The child is initialized by the bridge once, declaring elicitation,
// sampling and roots; each client session's initialize is answered from
// that result. A child that exits fails its calls in flight with a
// JSON-RPC error naming its exit status and is restarted with backoff.
package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Options configure a Bridge.
type Options struct {
	// Command is the child's argv (SplitCommand); Command[0] is looked up
	// in PATH.
	Command []string
	// Env adds KEY=VALUE entries to the gateway's environment for the child.
	Env []string
	// Dir is the child's working directory; empty: the gateway's.
	Dir string
	// MaxLine bounds a line the child writes, and a message sent to it.
	// Zero means 4 MiB.
	MaxLine int
	// PerSession gives each client session a child of its own.
	PerSession bool
	// MaxSessions bounds the sessions (each a child with PerSession); an
	// initialize beyond it is refused. Zero means DefaultMaxSessions.
	MaxSessions int
	// SessionIdle ends a session with no call in flight and no request for
	// this long (its child stopped, with PerSession). Zero means
	// DefaultSessionIdle.
	SessionIdle time.Duration
	// InitTimeout bounds the child's answer to initialize. Zero: 30 s.
	InitTimeout time.Duration
	// Logger gets the child's stderr and the bridge's events.
	Logger zerolog.Logger
}

// Defaults of Options.
const (
	DefaultMaxSessions = 1000
	DefaultSessionIdle = 30 * time.Minute
	defaultMaxLine     = 4 << 20
	backoffMin         = 100 * time.Millisecond
	backoffMax         = 30 * time.Second
	// stableAfter: a child that lived this long restarts from backoffMin.
	stableAfter = 10 * time.Second
)

// clientCaps are what the bridge declares for the shared child: every
// kind of request it may send, since some client may answer it.
var initParams = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"taskgate","version":"1.0.0"}}`)

// frontable are the versions a client may negotiate with the bridge.
var frontable = map[string]bool{"2025-11-25": true, "2025-06-18": true, "2025-03-26": true}

// Bridge serves Streamable HTTP on top of the child(ren).
type Bridge struct {
	opts Options
	log  zerolog.Logger
	seq  atomic.Uint64

	mu       sync.Mutex
	shared   *proc   // the running shared child; nil while down or with PerSession
	down     error   // why the shared child is not running
	procs    []*proc // every running child, for Close
	sessions map[string]*session
	calls    map[string]*call // bridge request id (JSON) → call in flight
	asks     map[string]*ask  // bridge id (JSON) of a child's request → where it came from
	tokens   map[string]*call // bridge progress token → its call
	owned    int              // sessions opened here (initialize), and those being opened
	adopted  int              // sessions adopted from other replicas
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

type session struct {
	id       string
	proc     *proc                    // PerSession: its own child
	adopted  bool                     // opened by another replica's bridge (session)
	streams  map[chan []byte]struct{} // open GET streams
	inflight int
	lastUsed time.Time
}

type call struct {
	key       string          // bridge id, as JSON
	origID    json.RawMessage // the client's id
	origToken json.RawMessage // the client's progressToken, nil if none
	token     string          // the bridge's token for it
	sess      *session
	proc      *proc
	started   time.Time
	out       chan []byte // requests and progress for the call's stream
	final     chan []byte // its response, exactly one
}

// ask is a request of the child sent to a client, awaiting its answer.
type ask struct {
	childID json.RawMessage
	proc    *proc
	sess    *session // only this session may answer it
	call    *call    // the call it was sent on; nil: a session's GET stream
}

// Start checks that the command can run, starts the shared child (unless
// PerSession) and its supervisor, and returns the Bridge. A command that
// is not found or not executable is an error; a child that starts but
// fails its handshake is restarted like one that exited.
func Start(opts Options) (*Bridge, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("stdio: no command")
	}
	name := opts.Command[0]
	if opts.Dir != "" && strings.ContainsRune(name, '/') && !filepath.IsAbs(name) {
		name = filepath.Join(opts.Dir, name) // exec resolves it in Dir too
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("cannot run %q: %v", opts.Command[0], unwrapExec(errors.Unwrap(err)))
	}
	opts.Command = append([]string{path}, opts.Command[1:]...)
	if opts.MaxLine <= 0 {
		opts.MaxLine = defaultMaxLine
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 30 * time.Second
	}
	b := &Bridge{opts: opts, log: opts.Logger.With().Str("upstream_command", opts.Command[0]).Logger(),
		sessions: map[string]*session{}, calls: map[string]*call{}, asks: map[string]*ask{}, tokens: map[string]*call{},
		stop: make(chan struct{}), down: errors.New("the upstream process is starting")}
	if !opts.PerSession {
		p, err := b.spawn(initParams)
		if err != nil && p == nil {
			return nil, err
		}
		if err == nil {
			b.shared, b.down = p, nil // ready when Start returns
		}
		b.wg.Add(1)
		go b.supervise(p, err)
	}
	b.wg.Add(1)
	go b.reap()
	return b, nil
}

// spawn starts a child and initializes it with params. A child that
// started but failed its handshake is stopped and returned with the error.
func (b *Bridge) spawn(params json.RawMessage) (*proc, error) {
	p, err := startProc(procOptions{argv: b.opts.Command, env: b.opts.Env, dir: b.opts.Dir,
		maxLine: b.opts.MaxLine, log: b.log, dispatch: b.dispatch})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed { // Close took its list of children already
		b.mu.Unlock()
		p.kill("the gateway shut down")
		<-p.exited
		return p, errors.New("the bridge is closed")
	}
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	go func() { <-p.exited; b.forget(p) }()
	if err := p.handshake(params, b.opts.InitTimeout); err != nil {
		p.kill("its initialize failed")
		<-p.exited
		return p, err
	}
	b.log.Info().Str("op", "stdio").Int("pid", p.cmd.Process.Pid).Str("protocol_version", p.version).Msg("upstream process ready")
	return p, nil
}

// supervise keeps the shared child running: when it exits, its calls fail
// and it is started again after a jittered, capped backoff.
func (b *Bridge) supervise(p *proc, err error) {
	defer b.wg.Done()
	backoff := backoffMin
	for {
		var started time.Time
		if err == nil {
			started = time.Now()
			b.mu.Lock()
			b.shared, b.down = p, nil
			b.mu.Unlock()
			select {
			case <-p.exited:
				err = p.exitErr
			case <-b.stop:
				return
			}
		}
		b.mu.Lock()
		b.shared, b.down = nil, err
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return
		}
		if !started.IsZero() && time.Since(started) > stableAfter {
			backoff = backoffMin
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		b.log.Warn().Str("op", "stdio").Err(err).Float64("restart_in_seconds", wait.Seconds()).Msg("upstream process down; restarting it")
		select {
		case <-time.After(wait):
		case <-b.stop:
			return
		}
		backoff = min(2*backoff, backoffMax)
		p, err = b.spawn(initParams)
		if err != nil && p == nil {
			b.mu.Lock()
			b.down = err
			b.mu.Unlock()
		}
	}
}

// forget fails the calls of a child that exited, ends its sessions
// (PerSession) and drops it.
func (b *Bridge) forget(p *proc) {
	b.mu.Lock()
	var failed []*call
	for k, c := range b.calls {
		if c.proc == p {
			failed = append(failed, c)
			delete(b.calls, k)
			delete(b.tokens, c.token)
			c.sess.inflight--
		}
	}
	for k, a := range b.asks {
		if a.proc == p {
			delete(b.asks, k)
		}
	}
	for _, s := range b.sessions {
		if s.proc == p {
			b.endSessionLocked(s)
		}
	}
	for i, q := range b.procs {
		if q == p {
			b.procs = append(b.procs[:i], b.procs[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	for _, c := range failed {
		c.final <- errorMessage(c.origID, -32603, p.exitErr.Error())
	}
	if len(failed) > 0 {
		b.log.Warn().Str("op", "stdio").Int("failed_calls", len(failed)).Err(p.exitErr).Msg("calls in flight on the upstream process failed")
	}
}

// Ready reports whether a request can be served now: the shared child is
// running (with PerSession: the bridge is open).
func (b *Bridge) Ready(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return errors.New("the upstream process is stopped")
	case b.opts.PerSession, b.shared != nil && b.shared.alive():
		return nil
	case b.shared != nil:
		return errors.New("upstream process down: it is exiting")
	}
	return fmt.Errorf("upstream process down: %v", b.down)
}

// Close stops every child: stdin closed and SIGTERM at once, SIGKILL once
// ctx ends. Call it after the gateway drained its held calls.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	procs := append([]*proc(nil), b.procs...)
	b.mu.Unlock()
	close(b.stop)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(ctx, "the gateway shut down") }()
	}
	wg.Wait()
	b.wg.Wait()
	return nil
}

// reap ends sessions idle for SessionIdle.
func (b *Bridge) reap() {
	defer b.wg.Done()
	every := min(max(b.opts.SessionIdle/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			var stops []*proc
			b.mu.Lock()
			for _, s := range b.sessions {
				if s.inflight == 0 && now.Sub(s.lastUsed) > b.opts.SessionIdle {
					if s.proc != nil {
						stops = append(stops, s.proc)
					}
					b.endSessionLocked(s)
				}
			}
			b.mu.Unlock()
			for _, p := range stops {
				go b.stopProc(p, "its session was idle")
			}
		}
	}
}

func (b *Bridge) stopProc(p *proc, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.stop(ctx, why)
}

// endSessionLocked drops session s, closing its GET streams and
// refusing the child's requests only it could answer.
func (b *Bridge) endSessionLocked(s *session) {
	if b.sessions[s.id] != s {
		return
	}
	delete(b.sessions, s.id)
	if s.adopted {
		b.adopted--
	} else {
		b.owned--
	}
	for ch := range s.streams {
		close(ch)
	}
	s.streams = nil
	for k, a := range b.asks {
		if a.sess == s {
			delete(b.asks, k)
			_ = a.proc.send(errorMessage(a.childID, -32603, "the client session ended before it answered"))
		}
	}
}

// endCallLocked forgets call c, and refuses the child's requests sent on
// it that were not answered.
func (b *Bridge) endCallLocked(c *call) {
	delete(b.calls, c.key)
	delete(b.tokens, c.token)
	c.sess.inflight--
	c.sess.lastUsed = time.Now()
	for k, a := range b.asks {
		if a.call == c {
			delete(b.asks, k)
			_ = a.proc.send(errorMessage(a.childID, -32603, "the client's call ended before it answered"))
		}
	}
}

// ---------------------------------------------------------------------------
// Messages from the child.

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// dispatch routes one message of child p (the reader goroutine).
func (b *Bridge) dispatch(p *proc, msg []byte) {
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // a response
		b.mu.Lock()
		c := b.calls[string(env.ID)]
		if c != nil {
			b.endCallLocked(c)
		}
		b.mu.Unlock()
		if c == nil {
			b.log.Debug().Str("op", "stdio").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
			return
		}
		out, err := mcpwire.WithMember(msg, "id", c.origID)
		if err != nil {
			out = errorMessage(c.origID, -32603, "the upstream process sent a malformed response")
		}
		c.final <- out
	case env.Method != "" && len(env.ID) > 0: // a request to the client
		b.childRequest(p, msg, env)
	case env.Method == "notifications/progress":
		b.progress(msg, env)
	case env.Method == "notifications/cancelled":
		b.childCancelled(p, msg, env)
	case env.Method != "":
		b.broadcast(p, msg)
	}
}

// childCancelled passes the child's withdrawal of one of its requests to
// the client it was sent to, under the id that client knows.
func (b *Bridge) childCancelled(p *proc, msg []byte, env envelope) {
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(env.Params, &params)
	b.mu.Lock()
	var key string
	var a *ask
	for k, x := range b.asks {
		if x.proc == p && mcpwire.SameID(x.childID, params.RequestID) {
			key, a = k, x
			break
		}
	}
	if a != nil {
		delete(b.asks, key)
	}
	b.mu.Unlock()
	if a == nil {
		return // nothing the clients know of
	}
	np, err := mcpwire.WithMember(env.Params, "requestId", json.RawMessage(key))
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", np)
	if err != nil {
		return
	}
	b.deliver(a, out)
}

// deliver sends msg to where ask a went (its call's stream, else its
// session's GET streams), never blocking; it reports whether any took it.
func (b *Bridge) deliver(a *ask, msg []byte) bool {
	if a.call != nil {
		select {
		case a.call.out <- msg:
			return true
		default:
			return false
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	took := false
	for ch := range a.sess.streams {
		select {
		case ch <- msg:
			took = true
		default:
		}
	}
	return took
}

// childRequest sends a request of the child to the client whose call is
// in flight on it, or refuses it when no single call or session can be
// named (stdio messages say nothing of the request they belong to).
func (b *Bridge) childRequest(p *proc, msg []byte, env envelope) {
	if env.Method == "ping" {
		_ = p.send(resultMessage(env.ID, json.RawMessage(`{}`)))
		return
	}
	key := strconv.Quote("taskgate-stdio-ask-" + uuid.NewString())
	out, err := mcpwire.WithMember(msg, "id", json.RawMessage(key))
	if err != nil {
		return
	}
	b.mu.Lock()
	c, sess, why := b.routeLocked(p)
	var a *ask
	if sess != nil {
		a = &ask{childID: env.ID, proc: p, sess: sess, call: c}
		b.asks[key] = a
		if c == nil && len(sess.streams) == 0 {
			why = "no call is in flight and the session has no stream open to ask on"
		}
	}
	b.mu.Unlock()
	if why == "" && !b.deliver(a, out) {
		why = "the client's stream is not keeping up"
	}
	if why != "" {
		if a != nil {
			b.mu.Lock()
			delete(b.asks, key)
			b.mu.Unlock()
		}
		b.log.Warn().Str("op", "stdio").Str("method", env.Method).Msg("cannot relay the upstream process's request: " + why)
		_ = p.send(errorMessage(env.ID, -32603, "taskgate cannot relay "+env.Method+": "+why))
	}
}

// routeLocked picks whom a request of child p is for: its one call in
// flight; with none, its one session's GET streams. With several calls in
// flight it cannot tell which one asked, and a wrong guess would show a
// question to the wrong client: it says why not.
func (b *Bridge) routeLocked(p *proc) (*call, *session, string) {
	var only *call
	n := 0
	for _, c := range b.calls {
		if c.proc == p {
			only = c
			n++
		}
	}
	switch {
	case n == 1:
		return only, only.sess, ""
	case n > 1:
		return nil, nil, fmt.Sprintf("%d calls are in flight on the upstream process and a stdio request does not say which one it belongs to "+
			"(--upstream-per-session gives each client session its own process)", n)
	}
	var sess *session
	for _, s := range b.sessions {
		if s.proc == p || (s.proc == nil && p == b.shared) {
			if sess != nil {
				return nil, nil, "no call is in flight and several client sessions share the upstream process"
			}
			sess = s
		}
	}
	if sess == nil {
		return nil, nil, "no client session is open"
	}
	return nil, sess, ""
}

// progress delivers a progress notification to the call whose token it
// names, with the client's own token.
func (b *Bridge) progress(msg []byte, env envelope) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(env.Params, &p)
	var tok string
	_ = json.Unmarshal(p.Token, &tok)
	b.mu.Lock()
	c := b.tokens[tok]
	b.mu.Unlock()
	if c == nil {
		return // a call already answered, or a token the bridge never gave
	}
	params, err := mcpwire.WithMember(env.Params, "progressToken", c.origToken)
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", params)
	if err != nil {
		return
	}
	select {
	case c.out <- out:
	default: // progress is best effort; never stall the child's stream
	}
}

// broadcast sends a notification of child p to every GET stream of the
// sessions it serves (list_changed, resource updates, log messages).
func (b *Bridge) broadcast(p *proc, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		if s.proc != nil && s.proc != p {
			continue
		}
		for ch := range s.streams {
			select {
			case ch <- msg:
			default:
			}
		}
	}
}

func resultMessage(id, result json.RawMessage) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func errorMessage(id json.RawMessage, code int, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// ---------------------------------------------------------------------------
// Requests from the upstream client.

// ServeHTTP serves the Streamable HTTP endpoint (any path).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
