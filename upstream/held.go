package upstream

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// CallAsync is Call for a call that may be held for long (a tool the
// upstream works on for minutes): done receives what Call would have
// returned. The request is written on the calling goroutine; its answer is
// then waited for on a new goroutine that waits for the connection with
// nothing else on its stack, and goes on reading when it has something to
// read (each wait between the events of an SSE answer is such a new
// goroutine too). So a held call costs one goroutine with the smallest
// stack the runtime has, not the deep stack of whatever started it, and
// none of the request's encoding, headers and body
// (docs/BENCHMARKS.md, "Memory per held task"). done runs on that
// goroutine, or on the calling one before CallAsync returns where the
// answer cannot be waited for so (a TLS upstream, Options.Transport, an
// HTTP proxy, a request that failed at once).
func (c *Client) CallAsync(ctx context.Context, s *Session, req *jsonrpc.Request, opts CallOptions, done func(*jsonrpc.Response, error)) {
	ct, ok := c.own.(*connTransport)
	if !ok {
		done(c.Call(ctx, s, req, opts))
		return
	}
	body, err := encodeCall(req, opts)
	if err != nil {
		done(nil, err)
		return
	}
	opts.Body = nil // written once; the wait keeps only the callbacks
	hreq, span, err := c.newPost(ctx, s, req.Method, opts.Name, body)
	if err != nil {
		done(nil, err)
		return
	}
	observe := c.observe.Load()
	var start time.Time
	if observe != nil {
		start = time.Now()
	}
	p, split, err := ct.start(hreq)
	if !split { // as Call
		resp, err := c.roundTrip(c.own, hreq, req.Method)
		endSpan(span, resp, err)
		if err != nil {
			done(nil, err)
			return
		}
		done(c.answer(ctx, s, resp, req.ID, opts))
		return
	}
	method, id := req.Method, req.ID
	if err != nil {
		_, err = c.observed(observe, hreq, method, start, nil, err)
		endSpan(span, nil, err)
		done(nil, err)
		return
	}
	p.pc.await(func() {
		resp, _, err := p.receive()
		resp, err = c.observed(observe, hreq, method, start, resp, err)
		endSpan(span, resp, err)
		if err != nil {
			done(nil, err)
			return
		}
		c.answerAsync(ctx, s, resp, p, id, opts, done)
	})
}

// answerAsync is answer for CallAsync: an SSE answer is read event by
// event, each wait for the next one on a goroutine of its own, without
// the SSE reader's buffer (heldStream).
func (c *Client) answerAsync(ctx context.Context, s *Session, resp *http.Response, p *pending, id jsonrpc.ID, opts CallOptions, done func(*jsonrpc.Response, error)) {
	if resp.StatusCode < 200 || resp.StatusCode >= 300 || mediaType(resp) != "text/event-stream" || p.body == nil || !p.pc.waitable() {
		done(c.answer(ctx, s, resp, id, opts))
		return
	}
	st := &heldStream{c: c, ctx: ctx, s: s, id: id, opts: opts, body: resp.Body, conn: p.body,
		sr: mcpwire.NewReader(resp.Body, maxEventBytes), done: done}
	st.sr.Yield = true // a keep-alive comment is waited past apart too
	st.read()
}

// heldStream is the SSE answer of a CallAsync being read.
type heldStream struct {
	c    *Client
	ctx  context.Context
	s    *Session
	id   jsonrpc.ID
	opts CallOptions
	body io.ReadCloser // the response's (conn, maybe in a spanBody)
	conn *connBody
	sr   *mcpwire.Reader
	done func(*jsonrpc.Response, error)
}

// read reads events until the answer, or until the next one must be
// waited for: then a new goroutine waits and reads on (woken), and this one
// returns.
func (st *heldStream) read() {
	for {
		if st.sr.Buffered() == 0 && st.conn.empty() {
			st.sr.Release() // the body has not ended: nothing is lost
			st.conn.pc.await(st.woken)
			return
		}
		if st.event() {
			return
		}
	}
}

// woken reads on once the connection has something: an event, at least
// begun, or the stream's end.
func (st *heldStream) woken() {
	if !st.event() {
		st.read()
	}
}

// event reads one event and acts on it; true: the call is over, done has
// been called.
func (st *heldStream) event() bool {
	r, err, end := st.c.nextEvent(st.ctx, st.s, st.sr, st.id, st.opts)
	if !end {
		return false
	}
	if err == nil {
		drainStream(st.body)
	}
	st.body.Close()
	st.done(r, err)
	return true
}
