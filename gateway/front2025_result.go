package gateway

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
// (front2025_fallback.go) instead of tasks/result.
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
func (f *front2025) resultStream(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string, o *streamOpts, missing func() bool) {
	ctx := r.Context()
	fail := func(err error) {
		if missing != nil && errors.Is(err, taskstore.ErrNotFound) && missing() {
			return
		}
		if o == nil {
			mcpwire.WriteError(w, msg.ID, core.TaskError(f.log, err, "result", id, core.Era2025))
			return
		}
		res, e := o.failed(err)
		if e != nil {
			mcpwire.WriteError(w, msg.ID, e)
			return
		}
		mcpwire.WriteResult(w, msg.ID, res)
	}
	final := func(t *taskstore.Task) mcpwire.Response {
		if o == nil {
			return finalResponse(msg.ID, t)
		}
		return mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: o.final(t)}
	}
	watch, err := f.store.Watch(ctx, owner, id)
	if err != nil {
		fail(err)
		return
	}
	defer watch.Close()
	t, err := f.store.Get(ctx, owner, id)
	if err != nil {
		fail(err)
		return
	}
	f.trace.linkTask(ctx, t)
	if t.Status.Terminal() {
		f.logRetrieved(t, owner)
		mcpwire.WriteJSON(w, http.StatusOK, final(t))
		return
	}
	var deadline <-chan time.Time
	if o != nil {
		if o.wait <= 0 || unrelayed(t, o.relay) {
			mcpwire.WriteResult(w, msg.ID, o.status(t))
			return
		}
		timer := time.NewTimer(o.wait)
		defer timer.Stop()
		deadline = timer.C
	}
	sse := mcpwire.NewWriter(w)
	resync := time.NewTicker(core.ResyncInterval(f.store))
	defer resync.Stop()
	// Mark the stream open so progress comes here and not also on the GET
	// stream; the mark outlives two resyncs, then lapses by itself.
	markTTL := 2*core.ResyncInterval(f.store) + time.Second
	if o == nil {
		_ = f.store.MarkResultStream(ctx, owner, id, markTTL)
		defer func() { _ = f.store.ClearResultStream(context.WithoutCancel(ctx), owner, id) }()
	}
	sent := map[string]bool{} // input keys delivered on this stream
	seenTerminal := false     // the terminal status event has been read
	expired := false          // o's wait ended while a question sent here was open
	for {
		if expired && !t.Status.Terminal() && !awaiting(t, sent) {
			_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: o.status(t)})
			return
		}
		if t.Status.Terminal() {
			if !seenTerminal && o == nil {
				// Pub/sub keeps publish order: messages the worker sent
				// before the outcome are still queued ahead of its event.
				if relayUntilTerminal(ctx, watch, sse) != nil {
					return
				}
			}
			f.logRetrieved(t, owner)
			_ = sse.Send(final(t))
			return
		}
		if o != nil && unrelayed(t, o.relay) {
			_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: o.status(t)})
			return
		}
		for _, key := range core.SortedInputKeys(t.InputRequests) {
			if sent[key] {
				continue
			}
			in := t.InputRequests[key]
			err := sse.Send(mcpwire.Request{JSONRPC: "2.0", ID: core.InputID(t.ID, key), Method: in.Method,
				Params: mcpwire.WithMeta(in.Params, core.RelatedTaskKey, relatedTask(t.ID))})
			if err != nil {
				return
			}
			sent[key] = true
		}
		// Wait for a change; relay the task's messages (progress) as they
		// come, in order, before re-reading its state.
		reread := false
		for !reread {
			select {
			case <-ctx.Done():
				return
			case <-deadline:
				if next, err := f.store.Get(ctx, owner, id); err == nil {
					t = next
				}
				if !t.Status.Terminal() && awaiting(t, sent) {
					// A question asked on this stream is still open: the user
					// may be answering it. End once it is answered, so that it
					// is never shown (or asked) twice.
					expired, deadline, reread = true, nil, true
					break
				}
				if t.Status.Terminal() {
					_ = sse.Send(final(t))
				} else {
					_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: o.status(t)})
				}
				return
			case ev, ok := <-watch.C:
				if !ok {
					return
				}
				if ev.Kind == taskstore.EventProgress {
					continue // the progress itself follows as a message
				}
				if ev.Kind != taskstore.EventMessage {
					seenTerminal = ev.Kind == taskstore.EventStatus && ev.Status.Terminal()
					reread = true
					break
				}
				if o != nil {
					continue // progress of a call already answered: not the client's to see
				}
				if err := sse.SendRaw([]byte(ev.Data)); err != nil {
					return
				}
			case <-resync.C:
				if o == nil {
					_ = f.store.MarkResultStream(ctx, owner, id, markTTL)
				} else {
					_ = sse.Comment("waiting") // a keep-alive for idle-timeout proxies
				}
				reread = true
			}
		}
		next, err := f.store.Get(ctx, owner, id)
		switch {
		case err == nil:
			t = next
		case ctx.Err() != nil:
			return
		default:
			// The store is briefly unavailable or the task expired mid-wait:
			// keep waiting on the former, end with the error on the latter.
			if e := core.RPCError(err, core.Era2025); e.Code != mcpwire.CodeInternalError {
				if o != nil {
					res, _ := o.failed(err)
					_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: res})
					return
				}
				_ = sse.SendRaw(mcpwire.ErrorMessage(msg.ID, e))
				return
			}
		}
	}
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

func (f *front2025) logRetrieved(t *taskstore.Task, owner string) {
	f.log.Info().Str("op", "retrieved").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(owner)).
		Str("status", string(t.Status)).Msg("task result retrieved")
}
