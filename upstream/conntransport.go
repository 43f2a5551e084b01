package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connTransport is the HTTP/1.1 RoundTripper of the client's own calls
// (post: Call, Respond, Notify, Initialize). Unlike *http.Transport it runs
// no goroutine per connection: net/http keeps a readLoop and a writeLoop
// goroutine on every connection, and a held task call holds its connection
// for as long as the tool runs, so those two goroutines (~16 KiB of stack)
// would be a large part of each held task's memory (docs/BENCHMARKS.md). Here
// the caller's goroutine writes the request and reads the response itself;
// cancellation closes the connection (context.AfterFunc).
//
// Requests that go through an HTTP proxy use fallback, the standard
// transport. Forward never comes here: it relays clients' traffic as is.
type connTransport struct {
	dialer      net.Dialer
	tlsConfig   *tls.Config // nil: Go's defaults
	handshake   time.Duration
	maxIdle     int
	idleTimeout time.Duration
	fallback    http.RoundTripper

	mu     sync.Mutex
	idle   map[string][]*pconn // by connKey, oldest first
	reaper *time.Timer         // closes expired idle connections; nil when none are idle
}

// pconn is one connection with its read buffer, which lives as long as the
// connection (a response is read through it, and what the server sent
// after a response stays in it). The write buffer is pooled.
type pconn struct {
	conn   net.Conn
	br     *bufio.Reader
	key    string
	idleAt time.Time
}

const (
	connReadBuffer  = 1 << 10 // as NewTransport's ReadBufferSize
	connWriteBuffer = 2 << 10 // as NewTransport's WriteBufferSize
)

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connWriteBuffer) }}

func newConnTransport(opts Options, fallback http.RoundTripper) *connTransport {
	dial := opts.dialTimeout()
	return &connTransport{
		dialer:      net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second},
		tlsConfig:   opts.TLSConfig,
		handshake:   dial,
		maxIdle:     opts.maxIdlePerHost(),
		idleTimeout: idleConnTimeout,
		fallback:    fallback,
		idle:        make(map[string][]*pconn),
	}
}

// connKey names the endpoint a connection is to: scheme and host:port.
func connKey(req *http.Request) (key, addr string) {
	host := req.URL.Hostname()
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	addr = net.JoinHostPort(host, port)
	return req.URL.Scheme + "://" + addr, addr
}

func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if p, err := http.ProxyFromEnvironment(req); p != nil || err != nil {
		return t.fallback.RoundTrip(req)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return t.fallback.RoundTrip(req)
	}
	if err := checkHeader(req.Header); err != nil {
		return nil, err
	}
	ctx := req.Context()
	key, addr := connKey(req)
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 0; ; attempt++ {
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r := *req
			r.Body = body
			req = &r
		}
		var pc *pconn
		reused := false
		if attempt == 0 {
			// An idle connection the server closed meanwhile is dropped
			// before anything is written on it, so that no request needs
			// to be sent twice on its account.
			for pc = t.getIdle(key); pc != nil && !pc.alive(); pc = t.getIdle(key) {
				pc.conn.Close()
			}
			reused = pc != nil
		}
		if pc == nil {
			var err error
			if pc, err = t.dial(ctx, req, key, addr); err != nil {
				return nil, err
			}
		}
		resp, retry, err := t.exchange(ctx, req, pc, reused)
		if err == nil {
			return resp, nil
		}
		if retry && replayable && idempotent(req) && attempt == 0 && ctx.Err() == nil {
			continue // a stale idle connection: once more on a fresh one
		}
		return nil, err
	}
}

// idempotent reports whether req may be sent twice (RFC 9110 §9.2.2). A
// POST may not: a tools/call the upstream received just as it closed the
// connection must not run again. alive has already screened the idle
// connection, so this matters only in the instant between that check and
// the write.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// alive reports whether an idle connection is still open: no stray bytes
// wait in its buffer, and a peek at the socket that cannot block finds
// neither an end of stream nor a reset (connCheck).
func (pc *pconn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false // an idle HTTP/1.1 connection has nothing to say
	}
	conn, tlsConn := pc.conn, false
	if tc, ok := conn.(*tls.Conn); ok {
		conn, tlsConn = tc.NetConn(), true
	}
	return connCheck(conn, tlsConn)
}

// checkHeader refuses what net/http's transport refuses and req.Write
// would send as is: a header name that is not a token, a value with a
// line break or NUL (header injection).
func checkHeader(h http.Header) error {
	for k, vv := range h {
		if k == "" {
			return errors.New("net/http: invalid header field name \"\"")
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
				return fmt.Errorf("net/http: invalid header field name %q", k)
			}
		}
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// exchange writes req on pc and reads the response headers. retry says the
// failure happened before the server could have seen the request (pc was
// reused and the server had closed it).
func (t *connTransport) exchange(ctx context.Context, req *http.Request, pc *pconn, reused bool) (resp *http.Response, retry bool, err error) {
	stop := context.AfterFunc(ctx, func() { pc.conn.Close() })
	fail := func(err error, retry bool) (*http.Response, bool, error) {
		stop()
		pc.conn.Close()
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, retry, err
	}
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(pc.conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	if err != nil {
		return fail(err, reused)
	}
	// Nothing read yet: a reused connection the server had closed fails
	// here with EOF or a reset, before any byte of a response.
	if _, err := pc.br.Peek(1); err != nil {
		return fail(err, reused && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)))
	}
	for {
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			return fail(err, false)
		}
		// 1xx informational responses precede the real one (101 is not
		// one of them, but a POST never switches protocols).
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	b := &connBody{t: t, pc: pc, ctx: ctx, stop: stop, body: resp.Body, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, false, nil
	}
	resp.Body = b
	return resp, false, nil
}

// dial opens a connection to addr, with TLS for https.
func (t *connTransport) dial(ctx context.Context, req *http.Request, key, addr string) (*pconn, error) {
	conn, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		var cfg *tls.Config
		if t.tlsConfig != nil {
			cfg = t.tlsConfig.Clone()
		} else {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.handshake)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return &pconn{conn: conn, br: bufio.NewReaderSize(conn, connReadBuffer), key: key}, nil
}

// getIdle takes the most recently used idle connection to key, closing
// those idle for longer than idleTimeout.
func (t *connTransport) getIdle(key string) *pconn {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[key]
	conns = t.expireLocked(conns, now)
	var pc *pconn
	if n := len(conns); n > 0 {
		pc = conns[n-1]
		conns[n-1] = nil
		conns = conns[:n-1]
	}
	if len(conns) == 0 {
		delete(t.idle, key)
	} else {
		t.idle[key] = conns
	}
	return pc
}

// putIdle keeps pc for the next request to its endpoint, unless the pool
// is full.
func (t *connTransport) putIdle(pc *pconn) {
	now := time.Now()
	pc.idleAt = now
	t.mu.Lock()
	conns := t.expireLocked(t.idle[pc.key], now)
	if len(conns) >= t.maxIdle {
		t.idle[pc.key] = conns
		t.mu.Unlock()
		pc.conn.Close()
		return
	}
	t.idle[pc.key] = append(conns, pc)
	if t.reaper == nil {
		t.reaper = time.AfterFunc(t.idleTimeout, t.reap)
	}
	t.mu.Unlock()
}

// reap closes the idle connections that expired, so a quiet gateway does
// not keep connections the upstream has long closed, and schedules itself
// for the next expiry while any remain. Between requests this is the only
// goroutine, and only while it runs.
func (t *connTransport) reap() {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var next time.Time
	for key, conns := range t.idle {
		conns = t.expireLocked(conns, now)
		if len(conns) == 0 {
			delete(t.idle, key)
			continue
		}
		t.idle[key] = conns
		if exp := conns[0].idleAt.Add(t.idleTimeout); next.IsZero() || exp.Before(next) {
			next = exp
		}
	}
	if next.IsZero() {
		t.reaper = nil
		return
	}
	t.reaper = time.AfterFunc(max(next.Sub(now), time.Second), t.reap)
}

// expireLocked closes the connections at the front of conns (the oldest)
// that have been idle too long, and returns the rest.
func (t *connTransport) expireLocked(conns []*pconn, now time.Time) []*pconn {
	i := 0
	for i < len(conns) && now.Sub(conns[i].idleAt) > t.idleTimeout {
		conns[i].conn.Close()
		conns[i] = nil
		i++
	}
	if i == 0 {
		return conns
	}
	return append(conns[:0], conns[i:]...)
}

// CloseIdleConnections closes every idle connection (http.Client calls it
// through this method; tests do).
func (t *connTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*pconn)
	t.mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			pc.conn.Close()
		}
	}
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// connBody is a response body read straight off its connection. Read to
// its end, the connection goes back to the idle pool if the server keeps it
// open; closed before, the connection is closed. Close may be called while
// another goroutine reads (drainStream does).
type connBody struct {
	t    *connTransport
	pc   *pconn
	ctx  context.Context
	stop func() bool
	body io.ReadCloser // http.ReadResponse's, reading pc.br
	keep bool          // the connection may be reused after the body
	done atomic.Bool
	eof  atomic.Bool
}

var errBodyClosed = errors.New("upstream: read on closed response body")

func (b *connBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		if b.eof.Load() {
			return 0, io.EOF
		}
		return 0, errBodyClosed
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		b.finish(b.keep)
	case err != nil:
		b.finish(false)
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		}
	}
	return n, err
}

func (b *connBody) Close() error {
	b.finish(false)
	return nil
}

// finish releases the connection once: to the idle pool when reuse is
// allowed and the request's context did not close it, else closed.
func (b *connBody) finish(reuse bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	stopped := b.stop()
	if reuse && stopped && b.ctx.Err() == nil {
		b.t.putIdle(b.pc)
		return
	}
	b.pc.conn.Close()
}
