package front2026

// The MRTR bridge. A 2026-07-28 client asks for input only through
// multi round-trip requests (SEP-2322): a result with resultType
// "input_required", inputRequests and a requestState, answered by retrying
// the call with inputResponses and the same requestState. A session
// upstream instead sends a server→client request on the call's stream and
// waits.
//
// When that happens during a plain tools/call (no task: the client did not
// declare the tasks extension, or a --sync rule), the gateway keeps the
// upstream call running in a worker, under a task that is never shown as
// one, and answers the client with an input_required round whose
// requestState names that task. The retry, on any replica, records the
// answers (the worker hands them upstream) and waits for the next round or
// the result. So elicitation is not lost between eras; it costs the client
// nothing it does not already do for a stateless server.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// bridgePrefix starts the requestState of a bridged call.
const bridgePrefix = "taskgate-bridge:"

// bridgedCall runs a 2026-07-28 client's plain tools/call on the owner
// session of a session upstream; input the upstream asks for turns the
// call into a bridged one. learn names the tool whose latency it teaches.
func (f *Front) bridgedCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq,
	target *upstreamside.Target, learn string) {
	ctx := r.Context()
	req := f.bridgedRequest(ctx, msg, target)
	// Input can reach the client only through a hidden task, which an
	// anonymous client may be refused.
	canBridge := core.AuthOwner(r) != "" || !f.anonymous.Disabled
	slot, e := f.Runner.Admit(ctx, core.Principal(r), runner.AdmitCall)
	if e != nil {
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	c := f.Runner.Hold(trace.SpanContextFromContext(ctx), target.Session, req, slot) // the slot admit reserved
	out := newBridgeOut(w, f.Up.KeepAliveFor(msg))
	defer out.stop()
	for {
		select {
		case <-out.beat:
			out.tick()
		case n := <-c.Notes:
			out.relay(n)
		case m := <-c.Requests:
			if !canBridge || !runner.ClientCan(mr.ClientCaps, m.Method) {
				_ = f.Up.Respond(context.WithoutCancel(ctx), target.Session, runner.Refusal(m))
				continue
			}
			j := &runner.Job{
				Sess:       target.Session,
				Req:        req,
				Call:       c,
				First:      m,
				Hidden:     true,
				ClientCaps: mr.ClientCaps,
				Client2026: &runner.Job2026{Target: target, Params: req.Params},
				Learn:      learn,
			}
			f.setOwner(j, r)
			f.bridge(w, r, msg, j, out.sse)
			return
		case res := <-c.Done:
			out.drain(c) // what the upstream sent before its answer comes first
			if errors.Is(res.Err, upstream.ErrSessionNotFound) {
				// The owner session is gone: reopen it and run the call there.
				t2, err := f.Up.ReopenTarget(ctx, core.SessionOwner(r), core.ForwardedAuth(r), mr.Version, target)
				if err != nil {
					f.fail(w, r, msg, out.sse, err)
					return
				}
				target = t2
				// The first call ended (its slot freed); this one is not refused midway.
				c = f.Runner.StartCall(f.Runner.Life(), target.Session, req, f.Runner.Count(c.Principal()))
				continue
			}
			if res.Err != nil {
				f.fail(w, r, msg, out.sse, res.Err)
				return
			}
			f.Decider.Observe(learn, time.Since(c.Started))
			f.Up.WriteSessionAnswer(w, out.sse, msg.ID, "tools/call", res.Resp)
			return
		case <-ctx.Done():
			// The client went away: on a session a dropped stream is not a
			// cancellation, so say it.
			f.Up.CancelOnSession(ctx, target, req.ID)
			c.Abort(errors.New("the client went away"))
			return
		}
	}
}

// bridgedRequest is the upstream tools/call of a bridged call: msg's
// params for a session upstream, without a 2025-11-25 params.task, which
// means nothing from this client (the server decides) and must not reach
// the upstream; the gateway asks for the upstream's own task of a native
// tool instead (nativeParams).
func (f *Front) bridgedRequest(ctx context.Context, msg *mcpwire.Message, target *upstreamside.Target) *jsonrpc.Request {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	params := upstreamside.SessionParams(msg.Params)
	if stripped, err := mcpwire.WithoutMember(params, "task"); err == nil && bytes.Contains(params, []byte(`"task"`)) {
		params = stripped
	}
	return &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: f.nativeParams(ctx, p.Name, params, target)}
}

// bridgeOut is the response stream of a bridged call while no input was
// asked: the call's progress, and keep-alive beats while it is quiet
// (internal/upstreamside/keepalive.go).
type bridgeOut struct {
	sse    *mcpwire.Writer
	ka     *upstreamside.Beats // nil: no beats
	ticker *time.Ticker
	beat   <-chan time.Time // nil: no beats
	quiet  bool             // nothing went to the client since the last tick
}

func newBridgeOut(w http.ResponseWriter, ka *upstreamside.Beats) *bridgeOut {
	o := &bridgeOut{sse: mcpwire.NewWriter(w), ka: ka, quiet: true}
	if ka != nil {
		o.ticker = time.NewTicker(ka.Every)
		o.beat = o.ticker.C
	}
	return o
}

func (o *bridgeOut) stop() {
	if o.ticker != nil {
		o.ticker.Stop()
	}
}

// tick beats when nothing went to the client since the last tick.
func (o *bridgeOut) tick() {
	if o.quiet {
		_ = o.ka.BeatOn(o.sse)
	}
	o.quiet = true
}

// relay sends a progress notification of the call: it is request-scoped,
// so it may go on the response stream. Other notifications are dropped.
func (o *bridgeOut) relay(n *jsonrpc.Request) {
	if n.Method != "notifications/progress" {
		return
	}
	_ = o.sse.Send(mcpwire.Request{JSONRPC: "2.0", Method: n.Method, Params: n.Params})
	o.quiet = false
	if o.ka != nil {
		o.ka.Upstream = true
	}
}

// drain relays what the call sent before its answer.
func (o *bridgeOut) drain(c *runner.InflightCall) {
	for {
		select {
		case n := <-c.Notes:
			o.relay(n)
		default:
			return
		}
	}
}

// bridge turns the running call j into a hidden task and answers the first
// input_required round.
func (f *Front) bridge(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job, sse *mcpwire.Writer) {
	p, _ := core.DecodeCall(msg.Params)
	if err := f.launch(r, j, p.Name, f.defaultTTL(j.Owner), 0); err != nil {
		j.Call.Abort(err)
		f.fail(w, r, msg, sse, err)
		return
	}
	f.answerRound(w, r, msg, j.Owner, j.Task.ID, nil, sse)
}

// continueBridge is the client's retry of a bridged call: it records the
// inputResponses for the hidden task and answers the next round.
func (f *Front) continueBridge(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, taskID string, responses map[string]json.RawMessage) {
	owner := core.Owner2026(r, taskID)
	if e := core.CheckInputResponses(len(responses), "tools/call"); e != nil {
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	answers := make(map[string]json.RawMessage, len(responses))
	answered := make(map[string]bool, len(responses))
	for k, v := range responses {
		answers[k] = mcpwire.MustMarshal(core.InputAnswer{Result: v})
		answered[k] = true
	}
	if len(answers) > 0 {
		if _, err := f.store.AnswerInputs(r.Context(), owner, taskID, answers); err != nil && !errors.Is(err, taskstore.ErrTerminal) {
			e := core.RPCError(err, core.Era2026)
			if e.Code == mcpwire.CodeInvalidParams {
				e = mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "requestState is unknown or expired: call the tool again without it")
			}
			core.WriteStatelessError(w, msg.ID, e)
			return
		}
	}
	f.answerRound(w, r, msg, owner, taskID, answered, mcpwire.NewWriter(w))
}

// answerRound waits until the hidden task has input requests the client
// has not just answered, or has ended, and answers accordingly: another
// input_required round with the same requestState, or the call's outcome.
func (f *Front) answerRound(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, taskID string,
	answered map[string]bool, sse *mcpwire.Writer) {
	t, err := f.waitRound(r.Context(), owner, taskID, answered)
	if err != nil {
		f.fail(w, r, msg, sse, err)
		return
	}
	out, ended := outcomeResponse(msg.ID, t)
	if !ended {
		out = mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: mcpwire.MustMarshal(map[string]any{
			"resultType":    "input_required",
			"inputRequests": pendingInputs(t, answered),
			"requestState":  bridgePrefix + t.ID,
		})}
	}
	writeRound(w, sse, out)
}

// waitRound waits until the held call's task has input requests the
// client has not just answered, or has ended.
func (f *Front) waitRound(ctx context.Context, owner, taskID string, answered map[string]bool) (*taskstore.Task, error) {
	return f.store.WaitFor(ctx, owner, taskID, func(t *taskstore.Task) bool {
		if t.Status.Terminal() {
			return true
		}
		for k := range t.InputRequests {
			if !answered[k] {
				return true
			}
		}
		return false
	})
}

// outcomeResponse is the answer to the call of a held call's task that
// ended (ended reports whether it did): its result, or its error.
func outcomeResponse(id json.RawMessage, t *taskstore.Task) (out mcpwire.Response, ended bool) {
	switch t.Status {
	case taskstore.StatusCompleted:
		return mcpwire.Response{JSONRPC: "2.0", ID: id, Result: core.StatelessResult("tools/call", t.Result)}, true
	case taskstore.StatusFailed, taskstore.StatusCancelled:
		e := t.Error
		if len(e) == 0 {
			e = core.InternalError(t.StatusMessage)
		}
		return mcpwire.Response{JSONRPC: "2.0", ID: id, Error: e}, true
	}
	return mcpwire.Response{}, false
}

// pendingInputs are t's input requests the client has not just answered.
func pendingInputs(t *taskstore.Task, answered map[string]bool) map[string]taskstore.InputRequest {
	pending := make(map[string]taskstore.InputRequest, len(t.InputRequests))
	for k, in := range t.InputRequests {
		if !answered[k] {
			pending[k] = in
		}
	}
	return pending
}

// writeRound sends a round's answer: on sse if a stream was started.
func writeRound(w http.ResponseWriter, sse *mcpwire.Writer, out mcpwire.Response) {
	if sse.Started() {
		_ = sse.Send(out)
		return
	}
	mcpwire.WriteJSON(w, http.StatusOK, out)
}

// bridgeState returns the hidden task id a retried tools/call continues,
// if its requestState is one the gateway issued.
func bridgeState(p *core.CallParams) (taskID string, responses map[string]json.RawMessage, ok bool) {
	state, responses, ok := p.Retry(bridgePrefix)
	id := strings.TrimPrefix(state, bridgePrefix)
	return id, responses, ok && id != ""
}

// fail answers a bridged call that failed: an error event on its stream
// once one was started (a keep-alive or progress went out), else a plain
// error answer.
func (f *Front) fail(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, sse *mcpwire.Writer, err error) {
	if !sse.Started() {
		f.Up.StatelessFailure(w, r, msg, err)
		return
	}
	if r.Context().Err() == nil {
		_ = sse.SendRaw(mcpwire.ErrorMessage(msg.ID, core.RPCError(err, core.Era2026)))
	}
}
