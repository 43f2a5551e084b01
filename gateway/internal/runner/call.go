package runner

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

// CallResult is how an in-flight call ended: the upstream's response (a
// result or a JSON-RPC error), or why there is none.
type CallResult struct {
	Resp *jsonrpc.Response
	Err  error
}

// InflightCall is one upstream request the runner holds. Its goroutine
// belongs to the runner; abort ends it.
type InflightCall struct {
	Requests chan *jsonrpc.Request // server→client requests (session upstream)
	Notes    chan *jsonrpc.Request // notifications
	Done     chan CallResult
	ctx      context.Context
	Abort    context.CancelCauseFunc
	Started  time.Time // when the request was sent
	slot     *Slot     // its place under --max-inflight, freed when the call returns
	// wake, once a worker holds the call, is called after each send on
	// Requests, notes and done (a dormant worker has no goroutine to
	// receive them: worker.go).
	wake atomic.Pointer[func()]
}

// poke calls the holder's wake, if any.
func (c *InflightCall) poke() {
	if f := c.wake.Load(); f != nil {
		(*f)()
	}
}

// errStopping is the cause when the gateway itself shuts down.
var errStopping = errors.New("the gateway replica running the task stopped")

// Hold starts req on sess for a front, in the slot admit reserved, on the
// runner's lifetime: a hybrid or bridged call, which may become a task.
func (rn *Runner) Hold(parent trace.SpanContext, sess *upstream.Session, req *jsonrpc.Request, slot *Slot) *InflightCall {
	ctx := rn.ctx
	if parent.IsValid() { // the call's client span is a child of the request's
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	return rn.StartCall(ctx, sess, req, slot)
}

// StartCall sends req on sess in a goroutine the runner owns, in slot (a
// slot from Admit, or from Count for a call that is not refused). It is
// the one place in-flight calls are started; the slot is freed when the
// call's goroutine ends.
func (rn *Runner) StartCall(parent context.Context, sess *upstream.Session, req *jsonrpc.Request, slot *Slot) *InflightCall {
	ctx, abort := context.WithCancelCause(parent)
	c := &InflightCall{
		Requests: make(chan *jsonrpc.Request, 8),
		Notes:    make(chan *jsonrpc.Request, 8),
		Done:     make(chan CallResult, 1),
		ctx:      ctx,
		Abort:    abort,
		Started:  time.Now(),
		slot:     slot,
	}
	// Every request of the call, now or later, carries its principal's
	// freshest token (internal/identity/credentials.go).
	if rn.Creds != nil {
		sess = rn.Creds.Bind(sess)
	}
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
			case c.Requests <- m:
				c.poke()
			case <-ctx.Done():
			}
		},
		OnNotification: func(n *jsonrpc.Request) {
			select {
			case c.Notes <- n:
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
		slot.free()
		c.Done <- CallResult{resp, err}
		c.poke()
	})
	return c
}

// Principal is whose share the call counts in.
func (c *InflightCall) Principal() string { return c.slot.principal }

// WaitPlain waits for the held call of j as a plain call, when it could
// not become a task; input its upstream asks for meanwhile is refused.
func (rn *Runner) WaitPlain(r *http.Request, j *Job) CallResult {
	ctx := context.WithoutCancel(r.Context())
	if j.First != nil {
		_ = rn.Up.Respond(ctx, j.Sess, Refusal(j.First))
	}
	for {
		select {
		case m := <-j.Call.Requests:
			_ = rn.Up.Respond(ctx, j.Sess, Refusal(m))
		case res := <-j.Call.Done:
			return res
		case <-r.Context().Done():
			j.Call.Abort(errors.New("the client went away"))
			return <-j.Call.Done
		}
	}
}
