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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
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
	st       *statelessSide // set when the child speaks 2026-07-28 (stateless.go)

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
	if stateless, err := b.startStateless(); err != nil {
		return nil, err
	} else if stateless {
		return b, nil
	}
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

// Ready reports whether a request can be served now: the shared child is
// running (with PerSession: the bridge is open).
func (b *Bridge) Ready(context.Context) error {
	if b.st != nil {
		return b.st.ready()
	}
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
