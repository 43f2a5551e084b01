// Package sse fronts an MCP server on the HTTP+SSE transport (MCP
// 2024-11-05, Transports, "HTTP with SSE"; replaced by Streamable HTTP in
// 2025-03-26) as if it were a session server over Streamable HTTP, so that
// the rest of taskgate (the upstream client, both fronts, the runner)
// works unchanged. The Bridge is an http.Handler; Transport hands it the
// upstream client's requests in process, with no socket.
//
// Each client session gets an upstream SSE session of its own: the
// client's initialize opens a GET stream on the server's URL, whose first
// event, "endpoint", names where to POST (same origin only), and is then
// POSTed there. From then on:
//
//	client request        its id rewritten to a bridge id, and its
//	                      _meta.progressToken to a bridge token, POSTed to
//	                      the endpoint; the answer, read from the session's
//	                      SSE stream, comes back on the request's own SSE
//	                      answer with the client's id
//	server request        (elicitation, sampling, roots) sent on the stream
//	                      of the session's one call in flight when it is a
//	                      tools/call, resources/read or prompts/get
//	                      (mcpwire.CarriesUnrelated), else on the session's
//	                      GET stream (held until the client opens one, for
//	                      HoldAsk), under a bridge id only that session
//	                      may answer; the answer is POSTed back with the
//	                      server's id (route.go)
//	server notification   progress to the call whose token it names;
//	                      anything else to the session's GET streams
//	cancel, DELETE,       notifications/cancelled to the server; DELETE
//	client gone           also closes the SSE stream, which ends the
//	                      server's session
//
// The 2024-11-05 transport has no resumption: a lost SSE stream ends that
// upstream session for good. Its calls in flight fail, and the client's
// next request gets 404 (MCP 2025-11-25, Transports, "Session Management"),
// which is what a restarted server shows: the client initializes again and
// gets a new SSE session.
//
// A session's GET streams, the server's requests held for one, the GET
// handler and the idle-session reaper are upstream/internal/bridgesession,
// which upstream/stdio shares; the bridge's mutex guards them.
package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// Options configure a Bridge.
type Options struct {
	// URL is the server's SSE endpoint: a GET there opens a session.
	URL string
	// Transport carries the GET streams and the POSTs (redirects are not
	// followed). Nil: http.DefaultTransport.
	Transport http.RoundTripper
	// MaxMessage bounds an event of a server's stream, and a message sent
	// to it. A larger event ends its session (what follows it cannot be
	// told apart from it). Zero means DefaultMaxMessage.
	MaxMessage int
	// MaxSessions bounds the sessions (each an SSE stream upstream); an
	// initialize beyond it is refused. Zero means DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerPrincipal bounds the sessions of one principal
	// (upstream.Principal on the initialize's context; a request without
	// one counts for nobody), so that one client cannot take them all.
	// Zero means half of MaxSessions (at least 1); negative: no cap.
	MaxSessionsPerPrincipal int
	// SessionIdle ends a session with no call in flight and no request for
	// this long (its SSE stream closed). Zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// MaxPending bounds a session's calls in flight; one more is refused.
	// Zero means DefaultMaxPending.
	MaxPending int
	// InitTimeout bounds opening a session: the stream's endpoint event,
	// and the server's answer to initialize. Zero: 30 s.
	InitTimeout time.Duration
	// HoldAsk bounds how long a request of the server waits for its
	// session's client to open a GET stream. Zero: DefaultHoldAsk.
	HoldAsk time.Duration
	// Logger gets the bridge's events.
	Logger zerolog.Logger
}

// Defaults of Options.
const (
	// DefaultMaxSessions: a session costs an open connection and a
	// goroutine, not a process.
	DefaultMaxSessions = 1000
	DefaultSessionIdle = 30 * time.Minute
	DefaultMaxMessage  = 64 << 20
	DefaultMaxPending  = 256
	DefaultHoldAsk     = 30 * time.Second
	// maxAsks bounds the requests of a server sent per session and not
	// yet answered (bridgesession.MaxHeld those held for a GET stream).
	maxAsks = 256
	// postTimeout bounds one POST to a server's endpoint: it only hands a
	// message over (the answer comes on the stream).
	postTimeout = 30 * time.Second
)

// Bridge serves Streamable HTTP on top of a server's HTTP+SSE sessions.
type Bridge struct {
	opts Options
	url  *url.URL
	rt   http.RoundTripper
	log  zerolog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	calls    *callTable           // calls in flight, the server's requests sent to clients, progress tokens
	owned    int                  // sessions open, and those being opened
	shares   bridgesession.Shares // owned per principal (--max-sessions-per-principal)
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// New checks the options and returns a Bridge; it opens no connection
// until a client initializes.
func New(opts Options) (*Bridge, error) {
	u, err := upstream.ParseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.MaxSessionsPerPrincipal == 0 {
		opts.MaxSessionsPerPrincipal = bridgesession.DefaultShare(opts.MaxSessions)
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 30 * time.Second
	}
	if opts.HoldAsk <= 0 {
		opts.HoldAsk = DefaultHoldAsk
	}
	b := &Bridge{opts: opts, url: u, rt: opts.Transport, log: opts.Logger.With().Str("upstream", u.Redacted()).Logger(),
		sessions: map[string]*session{}, stop: make(chan struct{})}
	b.calls = b.newCallTable()
	b.wg.Add(1)
	go b.reap()
	return b, nil
}

// URL is the server's SSE endpoint, as given.
func (b *Bridge) URL() string { return b.opts.URL }

// Transport returns an http.RoundTripper that serves each request with the
// Bridge in process. Give the upstream client the server's own URL with
// it: requests to the SSE endpoint's path are MCP, any other path (OAuth
// metadata) goes to the server's origin as it is.
func (b *Bridge) Transport() http.RoundTripper { return upstream.InProcessTransport(b) }

// Ready reports whether a request can be served now.
func (b *Bridge) Ready(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("the HTTP+SSE bridge is closed")
	}
	return nil
}

// Close ends every session (its calls in flight fail, its SSE stream
// closes). Call it after the gateway drained its held calls.
func (b *Bridge) Close(context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	var ended []*session
	for _, s := range b.sessions {
		b.endSessionLocked(s, "the gateway shut down")
		ended = append(ended, s)
	}
	b.mu.Unlock()
	for _, s := range ended {
		s.stop()
	}
	close(b.stop)
	b.wg.Wait()
	return nil
}

// reap ends sessions idle for SessionIdle.
func (b *Bridge) reap() {
	defer b.wg.Done()
	bridgesession.Reap(b.stop, b.opts.SessionIdle, func(now time.Time) {
		var idle []*session
		b.mu.Lock()
		for _, s := range b.sessions {
			if s.Inflight == 0 && now.Sub(s.LastUsed) > b.opts.SessionIdle {
				b.endSessionLocked(s, fmt.Sprintf("it was idle for %s", b.opts.SessionIdle))
				idle = append(idle, s)
			}
		}
		b.mu.Unlock()
		for _, s := range idle {
			s.stop()
		}
	})
}
