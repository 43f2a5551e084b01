package gateway

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// result answers tasks/result. A terminal task gets its outcome
// at once, as JSON. Otherwise the answer is an SSE stream that blocks until
// the task is terminal ("Result Retrieval": MUST block), carrying on the way
// the task's input requests as server→client requests and its progress as
// notifications, each with related-task _meta ("Input Required Status").
//
// It works on any replica: it wakes on store events (and re-reads on a slow
// timer, since pub/sub can drop messages), never on in-process state.
func (f *front2025) result(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string) {
	ctx := r.Context()
	watch, err := f.store.Watch(ctx, owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "result", id, era2025))
		return
	}
	defer watch.Close()
	t, err := f.store.Get(ctx, owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "result", id, era2025))
		return
	}
	if t.Status.Terminal() {
		f.logRetrieved(t, owner)
		mcpwire.WriteJSON(w, http.StatusOK, finalResponse(msg.ID, t))
		return
	}
	sse := mcpwire.NewWriter(w)
	resync := time.NewTicker(resyncInterval(f.store))
	defer resync.Stop()
	// Mark the stream open so progress comes here and not also on the GET
	// stream; the mark outlives two resyncs, then lapses by itself.
	markTTL := 2*resyncInterval(f.store) + time.Second
	_ = f.store.MarkResultStream(ctx, owner, id, markTTL)
	defer func() { _ = f.store.ClearResultStream(context.WithoutCancel(ctx), owner, id) }()
	sent := map[string]bool{} // input keys delivered on this stream
	seenTerminal := false     // the terminal status event has been read
	for {
		if t.Status.Terminal() {
			if !seenTerminal {
				// Pub/sub keeps publish order: messages the worker sent
				// before the outcome are still queued ahead of its event.
				if relayUntilTerminal(ctx, watch, sse) != nil {
					return
				}
			}
			f.logRetrieved(t, owner)
			_ = sse.Send(finalResponse(msg.ID, t))
			return
		}
		for _, key := range sortedInputKeys(t.InputRequests) {
			if sent[key] {
				continue
			}
			in := t.InputRequests[key]
			err := sse.Send(mcpwire.Request{JSONRPC: "2.0", ID: inputID(t.ID, key), Method: in.Method,
				Params: mcpwire.WithMeta(in.Params, relatedTaskKey, relatedTask(t.ID))})
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
				if err := sse.SendRaw([]byte(ev.Data)); err != nil {
					return
				}
			case <-resync.C:
				_ = f.store.MarkResultStream(ctx, owner, id, markTTL)
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
			if e := rpcError(err, era2025); e.Code != mcpwire.CodeInternalError {
				_ = sse.SendRaw(mcpwire.ErrorMessage(msg.ID, e))
				return
			}
		}
	}
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
	f.log.Info().Str("op", "retrieved").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", logOwner(owner)).
		Str("status", string(t.Status)).Msg("task result retrieved")
}

func sortedInputKeys(m map[string]taskstore.InputRequest) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
