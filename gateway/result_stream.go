package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// serveTaskResult answers tasks/result. A terminal task gets its outcome
// at once, as JSON. Otherwise the answer is an SSE stream that blocks until
// the task is terminal ("Result Retrieval": MUST block), carrying on the way
// the task's input requests as server→client requests and its progress as
// notifications, each with related-task _meta ("Input Required Status").
//
// It works on any replica: it wakes on store events (and re-reads on a slow
// timer, since pub/sub can drop messages), never on in-process state.
func (h *Handler) serveTaskResult(w http.ResponseWriter, r *http.Request, msg *message, owner, id string) {
	ctx := r.Context()
	watch, err := h.store.Watch(ctx, owner, id)
	if err != nil {
		writeRPCError(w, msg.ID, h.taskError(err, "result", id))
		return
	}
	defer watch.Close()
	t, err := h.store.Get(ctx, owner, id)
	if err != nil {
		writeRPCError(w, msg.ID, h.taskError(err, "result", id))
		return
	}
	if t.Status.Terminal() {
		h.logRetrieved(t, owner)
		writeJSON(w, http.StatusOK, finalResponse(msg.ID, t))
		return
	}
	sse := newSSEWriter(w)
	resync := time.NewTicker(h.resyncInterval())
	defer resync.Stop()
	// Mark the stream open so progress comes here and not also on the GET
	// stream; the mark outlives two resyncs, then lapses by itself.
	markTTL := 2*h.resyncInterval() + time.Second
	_ = h.store.MarkResultStream(ctx, owner, id, markTTL)
	defer func() { _ = h.store.ClearResultStream(context.WithoutCancel(ctx), owner, id) }()
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
			h.logRetrieved(t, owner)
			_ = sse.send(finalResponse(msg.ID, t))
			return
		}
		for _, key := range sortedInputKeys(t.InputRequests) {
			if sent[key] {
				continue
			}
			in := t.InputRequests[key]
			err := sse.send(rpcRequest{JSONRPC: "2.0", ID: inputID(t.ID, key), Method: in.Method,
				Params: withMeta(in.Params, relatedTaskKey, relatedTask(t.ID))})
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
				if err := sse.sendRaw(ev.Data); err != nil {
					return
				}
			case <-resync.C:
				_ = h.store.MarkResultStream(ctx, owner, id, markTTL)
				reread = true
			}
		}
		next, err := h.store.Get(ctx, owner, id)
		switch {
		case err == nil:
			t = next
		case ctx.Err() != nil:
			return
		default:
			// The store is briefly unavailable or the task expired mid-wait:
			// keep waiting on the former, end with the error on the latter.
			if e := rpcError(err); e.Code != codeInternalError {
				_ = sse.send(rpcResponse{JSONRPC: "2.0", ID: msg.ID, Error: mustJSON(e)})
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
func relayUntilTerminal(ctx context.Context, w *taskstore.Watch, sse *sseWriter) error {
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
				if err := sse.sendRaw(ev.Data); err != nil {
					return err
				}
			}
		}
	}
}

func (h *Handler) resyncInterval() time.Duration {
	if d := h.store.Options().ResyncInterval; d > 0 {
		return d
	}
	return 5 * time.Second
}

func (h *Handler) logRetrieved(t *taskstore.Task, owner string) {
	h.log.Info().Str("op", "retrieved").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", shortOwner(owner)).
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

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// sseWriter writes JSON-RPC messages as SSE events, each flushed at once.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	started bool
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f}
}

func (s *sseWriter) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.sendRaw(string(data))
}

// sendRaw writes one event whose data is the JSON message data.
func (s *sseWriter) sendRaw(data string) error {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
	}
	buf := make([]byte, 0, len(data)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}
