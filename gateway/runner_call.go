package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/upstream"
)

// callResult is how an in-flight call ended: the upstream's response (a
// result or a JSON-RPC error), or why there is none.
type callResult struct {
	resp *jsonrpc.Response
	err  error
}

// inflightCall is one upstream request the runner holds. Its goroutine
// belongs to the runner; abort ends it.
type inflightCall struct {
	requests chan *jsonrpc.Request // server→client requests (session upstream)
	notes    chan *jsonrpc.Request // notifications
	done     chan callResult
	ctx      context.Context
	abort    context.CancelCauseFunc
	started  time.Time // when the request was sent
	// wake, once a worker holds the call, is called after each send on
	// requests, notes and done (a dormant worker has no goroutine to
	// receive them: runner_worker.go).
	wake atomic.Pointer[func()]
}

// poke calls the holder's wake, if any.
func (c *inflightCall) poke() {
	if f := c.wake.Load(); f != nil {
		(*f)()
	}
}

// errStopping is the cause when the gateway itself shuts down.
var errStopping = errors.New("the gateway replica running the task stopped")

// hold starts req on sess for a front, in the slot admit reserved, on the
// runner's lifetime: a hybrid or bridged call, which may become a task.
func (rn *runner) hold(parent trace.SpanContext, sess *upstream.Session, req *jsonrpc.Request) *inflightCall {
	ctx := rn.ctx
	if parent.IsValid() { // the call's client span is a child of the request's
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	return rn.startCall(ctx, sess, req, true)
}

// startCall sends req on sess in a goroutine the runner owns. It is the one
// place in-flight calls are started, and counted (--max-inflight):
// reserved says the caller reserved the call's slot already (admit);
// otherwise the call is counted without a limit check (count). The slot is
// given back when the call's goroutine ends.
func (rn *runner) startCall(parent context.Context, sess *upstream.Session, req *jsonrpc.Request, reserved bool) *inflightCall {
	ctx, abort := context.WithCancelCause(parent)
	c := &inflightCall{
		requests: make(chan *jsonrpc.Request, 8),
		notes:    make(chan *jsonrpc.Request, 8),
		done:     make(chan callResult, 1),
		ctx:      ctx,
		abort:    abort,
		started:  time.Now(),
	}
	if !reserved {
		rn.count()
	}
	// Every request of the call, now or later, carries its principal's
	// freshest token (credentials.go).
	sess = rn.creds.bind(sess)
	// The encoding's deep stack stays on this goroutine, the request's
	// writing on the call's first goroutine, which ends once it is written
	// (upstream.Client.CallAsync): the answer is waited for on a goroutine
	// of the smallest stack, for as long as the task runs.
	body, name, _ := upstream.Encode(req) // on error, Call encodes and says so
	rn.wg.Add(1)
	go rn.callUpstream(ctx, sess, req, upstream.CallOptions{
		Body: body, Name: name,
		OnRequest: func(m *jsonrpc.Request) {
			select {
			case c.requests <- m:
				c.poke()
			case <-ctx.Done():
			}
		},
		OnNotification: func(n *jsonrpc.Request) {
			select {
			case c.notes <- n:
				c.poke()
			default: // progress is best effort; never stall the stream
			}
		},
	}, func(resp *jsonrpc.Response, err error) {
		defer rn.wg.Done()
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause // say why we aborted, not just "context canceled"
		}
		// The call is no longer in flight once it returned: free its slot
		// before anyone hears of the result, so that whoever answers the
		// client (and the client's next call) sees the count already down.
		rn.unreserve()
		c.done <- callResult{resp, err}
		c.poke()
	})
	return c
}

// waitPlain waits for the held call of j as a plain call, when it could
// not become a task; input its upstream asks for meanwhile is refused.
func (rn *runner) waitPlain(r *http.Request, j *job) callResult {
	ctx := context.WithoutCancel(r.Context())
	if j.first != nil {
		_ = rn.up.Respond(ctx, j.sess, refusal(j.first))
	}
	for {
		select {
		case m := <-j.call.requests:
			_ = rn.up.Respond(ctx, j.sess, refusal(m))
		case res := <-j.call.done:
			return res
		case <-r.Context().Done():
			j.call.abort(errors.New("the client went away"))
			return <-j.call.done
		}
	}
}
