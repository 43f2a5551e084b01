package front2025

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// resultStream answers tasks/result. A terminal task gets its outcome
// at once, as JSON. Otherwise the answer is an SSE stream that blocks until
// the task is terminal ("Result Retrieval": MUST block), carrying on the way
// the task's input requests as server→client requests and its progress as
// notifications, each with related-task _meta ("Input Required Status").
//
// It works on any replica: it wakes on store events (and re-reads on a slow
// timer, since pub/sub can drop messages), never on in-process state.

// streamOpts make resultStream serve the fallback tool task_result
// (fallback.go) instead of tasks/result.
type streamOpts struct {
	wait   time.Duration                           // then answer with the status
	relay  func(method string) bool                // the input requests sent on the stream
	final  func(t *taskstore.Task) json.RawMessage // the result once terminal
	status func(t *taskstore.Task) json.RawMessage // the result when wait ends, or input is needed that relay does not send
	failed func(err error) (json.RawMessage, *mcpwire.Error)
}

// resultStream is result, or with o the fallback task_result: no progress
// relayed (the call it belonged to was answered), the input requests relay
// allows sent, and a deadline.
//
// missing, when set, may serve an id the store does not have (an
// upstream's own task) and reports whether it did.
func (f *Front) resultStream(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string, o *streamOpts, missing func() bool) {
	rs := &resultWait{f: f, w: w, ctx: r.Context(), msg: msg, owner: owner, id: id, o: o, missing: missing}
	watch, err := f.store.Watch(rs.ctx, owner, id)
	if err != nil {
		rs.fail(err)
		return
	}
	defer watch.Close()
	rs.watch = watch
	if rs.t, err = f.store.Get(rs.ctx, owner, id); err != nil {
		rs.fail(err)
		return
	}
	f.Trace.LinkTask(rs.ctx, rs.t)
	if rs.answeredAtOnce() {
		return
	}
	if o != nil {
		timer := time.NewTimer(o.wait)
		defer timer.Stop()
		rs.deadline = timer.C
	}
	rs.sse = mcpwire.NewWriter(w)
	rs.resync = time.NewTicker(core.ResyncInterval(f.store))
	defer rs.resync.Stop()
	// Mark the stream open so progress comes here and not also on the GET
	// stream; the mark outlives two resyncs, then lapses by itself.
	rs.markTTL = 2*core.ResyncInterval(f.store) + time.Second
	if o == nil {
		_ = f.store.MarkResultStream(rs.ctx, owner, id, rs.markTTL)
		defer func() { _ = f.store.ClearResultStream(context.WithoutCancel(rs.ctx), owner, id) }()
	}
	rs.sent = map[string]bool{}
	for !rs.ended() && rs.askInputs() && rs.awaitChange() && rs.reread() {
		// each step sends what is due and reports whether the stream goes on
	}
}

// resultWait is one resultStream between its steps.
type resultWait struct {
	f         *Front
	w         http.ResponseWriter
	ctx       context.Context
	msg       *mcpwire.Message
	owner, id string
	o         *streamOpts
	missing   func() bool

	watch    *taskstore.Watch
	t        *taskstore.Task // the task as last read
	sse      *mcpwire.Writer
	resync   *time.Ticker
	markTTL  time.Duration
	deadline <-chan time.Time // o's wait; nil without o, or once expired

	sent         map[string]bool // input keys delivered on this stream
	seenTerminal bool            // the terminal status event has been read
	expired      bool            // o's wait ended while a question sent here was open
}

// fail answers an error before the stream opened.
func (rs *resultWait) fail(err error) {
	if rs.missing != nil && errors.Is(err, taskstore.ErrNotFound) && rs.missing() {
		return
	}
	if rs.o == nil {
		mcpwire.WriteError(rs.w, rs.msg.ID, core.TaskError(rs.f.Log, err, "result", rs.id, core.Era2025))
		return
	}
	res, e := rs.o.failed(err)
	if e != nil {
		mcpwire.WriteError(rs.w, rs.msg.ID, e)
		return
	}
	mcpwire.WriteResult(rs.w, rs.msg.ID, res)
}

// final is the answer once t is terminal.
func (rs *resultWait) final(t *taskstore.Task) mcpwire.Response {
	if rs.o == nil {
		return finalResponse(rs.msg.ID, t)
	}
	return mcpwire.Response{JSONRPC: "2.0", ID: rs.msg.ID, Result: rs.o.final(t)}
}

// status is the fallback answer with the task's status.
func (rs *resultWait) status() mcpwire.Response {
	return mcpwire.Response{JSONRPC: "2.0", ID: rs.msg.ID, Result: rs.o.status(rs.t)}
}

// answeredAtOnce answers as JSON, with no stream, a task already terminal,
// or for o a wait of zero or input that o does not relay; it reports
// whether it did.
func (rs *resultWait) answeredAtOnce() bool {
	switch {
	case rs.t.Status.Terminal():
		rs.f.logRetrieved(rs.t, rs.owner)
		mcpwire.WriteJSON(rs.w, http.StatusOK, rs.final(rs.t))
		return true
	case rs.o != nil && (rs.o.wait <= 0 || unrelayed(rs.t, rs.o.relay)):
		mcpwire.WriteResult(rs.w, rs.msg.ID, rs.o.status(rs.t))
		return true
	}
	return false
}

// ended sends the stream's last message when the task as last read calls
// for one, and reports whether it did.
func (rs *resultWait) ended() bool {
	t := rs.t
	switch {
	case rs.expired && !t.Status.Terminal() && !awaiting(t, rs.sent):
		_ = rs.sse.Send(rs.status())
		return true
	case t.Status.Terminal():
		if !rs.seenTerminal && rs.o == nil {
			// Pub/sub keeps publish order: messages the worker sent
			// before the outcome are still queued ahead of its event.
			if relayUntilTerminal(rs.ctx, rs.watch, rs.sse) != nil {
				return true
			}
		}
		rs.f.logRetrieved(t, rs.owner)
		_ = rs.sse.Send(rs.final(t))
		return true
	case rs.o != nil && unrelayed(t, rs.o.relay):
		_ = rs.sse.Send(rs.status())
		return true
	}
	return false
}

// askInputs sends the task's input requests not yet sent on this stream;
// false: the stream broke.
func (rs *resultWait) askInputs() bool {
	t := rs.t
	for _, key := range core.SortedInputKeys(t.InputRequests) {
		if rs.sent[key] {
			continue
		}
		in := t.InputRequests[key]
		err := rs.sse.Send(mcpwire.Request{JSONRPC: "2.0", ID: core.InputID(t.ID, key), Method: in.Method,
			Params: mcpwire.WithMeta(in.Params, core.RelatedTaskKey, core.RelatedTask(t.ID))})
		if err != nil {
			return false
		}
		rs.sent[key] = true
	}
	return true
}

// awaitChange waits for a change of the task, relaying its messages
// (progress) as they come, in order; true: re-read it, false: the stream
// ended.
func (rs *resultWait) awaitChange() bool {
	for {
		select {
		case <-rs.ctx.Done():
			return false
		case <-rs.deadline:
			return rs.waitEnded()
		case ev, ok := <-rs.watch.C:
			if !ok {
				return false
			}
			if ev.Kind == taskstore.EventProgress {
				continue // the progress itself follows as a message
			}
			if ev.Kind != taskstore.EventMessage {
				rs.seenTerminal = ev.Kind == taskstore.EventStatus && ev.Status.Terminal()
				return true
			}
			if rs.o != nil {
				continue // progress of a call already answered: not the client's to see
			}
			if err := rs.sse.SendRaw([]byte(ev.Data)); err != nil {
				return false
			}
		case <-rs.resync.C:
			if rs.o == nil {
				_ = rs.f.store.MarkResultStream(rs.ctx, rs.owner, rs.id, rs.markTTL)
			} else {
				_ = rs.sse.Comment("waiting") // a keep-alive for idle-timeout proxies
			}
			return true
		}
	}
}

// waitEnded handles the end of o's wait: the answer now, unless a question
// asked on this stream is still open (true: keep waiting).
func (rs *resultWait) waitEnded() bool {
	if next, err := rs.f.store.Get(rs.ctx, rs.owner, rs.id); err == nil {
		rs.t = next
	}
	if !rs.t.Status.Terminal() && awaiting(rs.t, rs.sent) {
		// A question asked on this stream is still open: the user may be
		// answering it. End once it is answered, so that it is never
		// shown (or asked) twice.
		rs.expired, rs.deadline = true, nil
		return true
	}
	if rs.t.Status.Terminal() {
		_ = rs.sse.Send(rs.final(rs.t))
	} else {
		_ = rs.sse.Send(rs.status())
	}
	return false
}

// reread reads the task again after a change; false: the stream ended.
func (rs *resultWait) reread() bool {
	next, err := rs.f.store.Get(rs.ctx, rs.owner, rs.id)
	switch {
	case err == nil:
		rs.t = next
	case rs.ctx.Err() != nil:
		return false
	default:
		// The store is briefly unavailable or the task expired mid-wait:
		// keep waiting on the former, end with the error on the latter.
		if e := core.RPCError(err, core.Era2025); e.Code != mcpwire.CodeInternalError {
			if rs.o != nil {
				res, _ := rs.o.failed(err)
				_ = rs.sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: rs.msg.ID, Result: res})
				return false
			}
			_ = rs.sse.SendRaw(mcpwire.ErrorMessage(rs.msg.ID, e))
			return false
		}
	}
	return true
}

// awaiting reports whether a question sent on this stream is still open.
func awaiting(t *taskstore.Task, sent map[string]bool) bool {
	for key := range t.InputRequests {
		if sent[key] {
			return true
		}
	}
	return false
}

// unrelayed reports whether t waits for input of which some cannot be sent
// on the stream (relay says no): the client must then answer another way.
func unrelayed(t *taskstore.Task, relay func(string) bool) bool {
	if t.Status != taskstore.StatusInputRequired {
		return false
	}
	for _, in := range t.InputRequests {
		if !relay(in.Method) {
			return true
		}
	}
	return false
}

// terminalGrace bounds how long a tasks/result stream that found its task
// terminal waits for the messages published before the outcome.
const terminalGrace = 250 * time.Millisecond

// relayUntilTerminal relays queued task messages until the terminal status
// event arrives, or terminalGrace passes (the event was lost).
func relayUntilTerminal(ctx context.Context, w *taskstore.Watch, sse *mcpwire.Writer) error {
	grace := time.NewTimer(terminalGrace)
	defer grace.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-grace.C:
			return nil
		case ev, ok := <-w.C:
			switch {
			case !ok, ev.Kind == taskstore.EventStatus && ev.Status.Terminal():
				return nil
			case ev.Kind == taskstore.EventMessage:
				if err := sse.SendRaw([]byte(ev.Data)); err != nil {
					return err
				}
			}
		}
	}
}

func (f *Front) logRetrieved(t *taskstore.Task, owner string) {
	f.Log.Info().Str("op", "retrieved").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(owner)).
		Str("status", string(t.Status)).Msg("task result retrieved")
}
