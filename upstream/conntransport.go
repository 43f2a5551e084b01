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

// pconn is one connection. Its read buffer is taken from a pool when a
// response is to be read and given back once the response was read to its
// end with nothing after it, so neither an idle connection nor one whose
// request waits for the upstream's first byte holds one (a held task's
// call waits so for as long as the tool runs). A buffer still holding
// bytes stays with its connection (alive then refuses to reuse it). The
// write buffer is pooled too.
type pconn struct {
	conn   net.Conn
	br     *bufio.Reader // nil: no buffer taken (nothing buffered)
	key    string
	idleAt time.Time
}

const (
	connReadBuffer  = 1 << 10 // as NewTransport's ReadBufferSize
	connWriteBuffer = 2 << 10 // as NewTransport's WriteBufferSize
)

var (
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connWriteBuffer) }}
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connReadBuffer) }}
)

// reader is pc's read buffer, taken from the pool if it has none.
func (pc *pconn) reader() *bufio.Reader {
	if pc.br == nil {
		pc.br = readerPool.Get().(*bufio.Reader)
		pc.br.Reset(pc.conn)
	}
	return pc.br
}

// releaseReader gives pc's read buffer back to the pool if it holds
// nothing. Only the goroutine reading pc may call it, and only when no
// reader of a response (whose body reads through the buffer) will read
// again.
func (pc *pconn) releaseReader() {
	if pc.br != nil && pc.br.Buffered() == 0 {
		pc.br.Reset(nil)
		readerPool.Put(pc.br)
		pc.br = nil
	}
}

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
	if t.standard(req) {
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
		pc, reused, err := t.connect(ctx, req, key, addr, attempt == 0)
		if err != nil {
			return nil, err
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

// standard reports whether req goes through the fallback transport: to a
// proxy, or not http(s).
func (t *connTransport) standard(req *http.Request) bool {
	if p, err := http.ProxyFromEnvironment(req); p != nil || err != nil {
		return true
	}
	return req.URL.Scheme != "http" && req.URL.Scheme != "https"
}

// connect returns a connection for req: an idle one if idle may and one
// is left (reused), else a new one.
func (t *connTransport) connect(ctx context.Context, req *http.Request, key, addr string, idle bool) (pc *pconn, reused bool, err error) {
	if idle {
		// An idle connection the server closed meanwhile is dropped
		// before anything is written on it, so that no request needs
		// to be sent twice on its account.
		for pc = t.getIdle(key); pc != nil && !pc.alive(); pc = t.getIdle(key) {
			pc.conn.Close()
		}
		if pc != nil {
			return pc, true, nil
		}
	}
	pc, err = t.dial(ctx, req, key, addr)
	return pc, false, err
}

// start writes req, which must not be idempotent (it is never sent
// twice), and returns what reads its response, without reading: the
// caller may wait for the response apart (pending.await). ok false means
// req is not for this split: it goes through RoundTrip.
func (t *connTransport) start(req *http.Request) (p *pending, ok bool, err error) {
	if idempotent(req) || t.standard(req) {
		return nil, false, nil
	}
	if err := checkHeader(req.Header); err != nil {
		return nil, true, err
	}
	ctx := req.Context()
	key, addr := connKey(req)
	pc, reused, err := t.connect(ctx, req, key, addr, true)
	if err != nil {
		return nil, true, err
	}
	s, _, err := t.send(ctx, req, pc, reused)
	if err != nil {
		return nil, true, err
	}
	// What reads the response needs of the request only its method (and
	// Close, kept in s); its header and body need not live as long as the
	// call.
	s.req = methodOnly(req.Method)
	return &s, true, nil
}

// postOnly is the request a response to a POST is read for once the POST
// is written: http.ReadResponse looks only at its method.
var postOnly = &http.Request{Method: http.MethodPost}

// methodOnly is a request of method with nothing else, as postOnly.
func methodOnly(method string) *http.Request {
	if method == http.MethodPost {
		return postOnly
	}
	return &http.Request{Method: method}
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
	if pc.br != nil && pc.br.Buffered() > 0 {
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
	p, retry, err := t.send(ctx, req, pc, reused)
	if err != nil {
		return nil, retry, err
	}
	return p.receive()
}

// pending is a request written on its connection whose response is yet to
// be read.
type pending struct {
	t      *connTransport
	pc     *pconn
	ctx    context.Context
	stop   func() bool // stops the context.AfterFunc that closes pc
	req    *http.Request
	close  bool // req.Close: the connection is not reused after it
	reused bool
	body   *connBody // the response's body, once received (nil: none)
}

// send writes req on pc.
func (t *connTransport) send(ctx context.Context, req *http.Request, pc *pconn, reused bool) (p pending, retry bool, err error) {
	p = pending{t: t, pc: pc, ctx: ctx, req: req, close: req.Close, reused: reused}
	p.stop = context.AfterFunc(ctx, func() { pc.conn.Close() })
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(pc.conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	if err != nil {
		retry, err = p.fail(err, reused)
		return p, retry, err
	}
	return p, false, nil
}

// fail closes the connection of a request that failed; the error is the
// request context's cause if that ended.
func (p *pending) fail(err error, retry bool) (bool, error) {
	p.stop()
	p.pc.conn.Close()
	if p.ctx.Err() != nil {
		return false, context.Cause(p.ctx)
	}
	return retry, err
}

// receive reads the response headers; its body reads on from the
// connection.
func (p *pending) receive() (resp *http.Response, retry bool, err error) {
	pc, req := p.pc, p.req
	br := pc.reader()
	// Nothing read yet: a reused connection the server had closed fails
	// here with EOF or a reset, before any byte of a response.
	if _, err := br.Peek(1); err != nil {
		retry, err = p.fail(err, p.reused && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)))
		return nil, retry, err
	}
	for {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			_, err = p.fail(err, false)
			return nil, false, err
		}
		// 1xx informational responses precede the real one (101 is not
		// one of them, but a POST never switches protocols).
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	b := &connBody{t: p.t, pc: pc, ctx: p.ctx, stop: p.stop, body: resp.Body, keep: !resp.Close && !p.close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, false, nil
	}
	resp.Body = b
	p.body = b
	return resp, false, nil
}

// await calls then once pc has something to read, or has ended: on a new
// goroutine that waits with nothing of the caller's on its stack, so a
// call the upstream works on for long waits on the smallest goroutine
// stack there is (docs/BENCHMARKS.md, "Memory per held task") and the
// caller's goroutine, which wrote the request, ends. Nothing is read: then
// finds what it would have found reading at once. Where the socket cannot
// be watched without reading (TLS, see waitable), then runs at once, on
// this goroutine.
func (pc *pconn) await(then func()) {
	if !pc.waitable() {
		then()
		return
	}
	go awaitReadable(pc.conn, then)
}

// awaitReadable is the goroutine of await.
func awaitReadable(conn net.Conn, then func()) {
	waitReadable(conn)
	then()
}

// waitable reports whether await can wait for pc apart: a plain
// connection (a TLS one may hold decrypted bytes the socket does not
// show) on a system where a socket can be watched.
func (pc *pconn) waitable() bool {
	if _, ok := pc.conn.(*tls.Conn); ok {
		return false
	}
	_, ok := pc.conn.(syscall.Conn)
	return ok && canWait
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
	return &pconn{conn: conn, key: key}, nil
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

// empty reports whether reading b on needs bytes the connection has not
// sent yet: it has not ended, and its buffer holds nothing (the readers of
// the body between b and the buffer hold no bytes of their own).
func (b *connBody) empty() bool {
	return !b.done.Load() && b.pc.br != nil && b.pc.br.Buffered() == 0
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
		// Read to its end, by the goroutine calling finish: the buffer
		// is no longer read through.
		b.pc.releaseReader()
		b.t.putIdle(b.pc)
		return
	}
	b.pc.conn.Close()
}
