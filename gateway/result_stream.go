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
	var lastProgress string
	for {
		if t.Status.Terminal() {
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
		if p := string(t.Progress); p != "" && p != lastProgress {
			lastProgress = p
			if err := sse.send(progressNotification(t)); err != nil {
				return
			}
		}
		if !waitChange(ctx, watch, resync.C, func() { _ = h.store.MarkResultStream(ctx, owner, id, markTTL) }) {
			return
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

// waitChange blocks until the task may have changed: an event, the resync
// timer, or the end of ctx (false).
func waitChange(ctx context.Context, w *taskstore.Watch, resync <-chan time.Time, onTick func()) bool {
	select {
	case <-ctx.Done():
		return false
	case _, ok := <-w.C:
		return ok
	case <-resync:
		onTick()
		return true
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

// progressNotification relays the task's latest upstream progress with
// related-task _meta ("Task Progress Notifications": the progressToken of
// the original request stays valid for the task's lifetime).
func progressNotification(t *taskstore.Task) rpcRequest {
	return rpcRequest{JSONRPC: "2.0", Method: "notifications/progress",
		Params: withMeta(t.Progress, relatedTaskKey, relatedTask(t.ID))}
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
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
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
