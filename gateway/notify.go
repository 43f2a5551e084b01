package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/taskgate/taskgate/taskstore"
)

// Notifications a 2025-11-25 client gets on its session's GET stream,
// from whichever replica changed the task to whichever holds the stream:
//   - notifications/tasks/status with the full Task on each status change
//     ("Task Status Notification"; best effort: clients must not rely on it);
//   - notifications/progress, with related-task _meta, while no tasks/result
//     stream is open for the task.

// notifyStatusByID re-reads the job's task and notifies its session.
func (h *Handler) notifyStatusByID(ctx context.Context, j *job) {
	t, err := h.store.Get(ctx, j.owner, j.task.ID)
	if err != nil {
		return
	}
	h.notifyStatus(ctx, t)
}

// notifyStatus publishes notifications/tasks/status for t to its session.
func (h *Handler) notifyStatus(ctx context.Context, t *taskstore.Task) {
	if t.Flavour != taskstore.FlavourLegacy || t.Upstream.SessionID == "" {
		return
	}
	params, _ := json.Marshal(toLegacyTask(t))
	msg, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: "notifications/tasks/status", Params: params})
	_ = h.store.PublishSession(ctx, t.Upstream.SessionID, msg)
}

// relayProgress sends a progress notification, with related-task _meta, to
// the task's open tasks/result streams (on whichever replica), or to the
// session's GET stream when none is open. Each notification is its own
// message, so none is merged away and the order is the upstream's.
func (h *Handler) relayProgress(ctx context.Context, j *job, params json.RawMessage) {
	if j.task.Flavour != taskstore.FlavourLegacy {
		return
	}
	msg, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: "notifications/progress",
		Params: withMeta(params, relatedTaskKey, relatedTask(j.task.ID))})
	if open, err := h.store.ResultStreamOpen(ctx, j.owner, j.task.ID); err == nil && open || j.sess.ID == "" {
		_ = h.store.PublishTask(ctx, j.owner, j.task.ID, msg)
		return
	}
	_ = h.store.PublishSession(ctx, j.sess.ID, msg)
}

// relayMerged relays an upstream GET SSE stream and interleaves the
// session's gateway messages between its events (never inside one).
func (h *Handler) relayMerged(w http.ResponseWriter, r *http.Request, resp *http.Response, sessionID string) {
	defer resp.Body.Close()
	watch, err := h.store.WatchSession(r.Context(), sessionID)
	if err != nil {
		h.relay(w, r, resp)
		return
	}
	defer watch.Close()
	copyResponseHeader(w, resp)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()

	notes := watch.C
	events := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- readEvents(resp.Body, events, r.Context()) }()
	for {
		select {
		case ev := <-events:
			if _, err := w.Write(ev); err != nil {
				return
			}
			flush()
		case ev, ok := <-notes:
			if !ok {
				notes = nil // store closed: relay the upstream alone
				continue
			}
			if ev.Kind != taskstore.EventMessage {
				continue
			}
			if _, err := io.WriteString(w, "event: message\ndata: "+ev.Data+"\n\n"); err != nil {
				return
			}
			flush()
		case <-readErr:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// readEvents splits an SSE body into whole events (each ending with a
// blank line) and sends them, bytes untouched, until the body ends.
func readEvents(body io.Reader, out chan<- []byte, ctx context.Context) error {
	br := bufio.NewReaderSize(body, 16<<10)
	var ev bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			ev.Write(line)
			continue
		}
		ev.Write(line)
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 { // blank line: event complete
			select {
			case out <- bytes.Clone(ev.Bytes()):
			case <-ctx.Done():
				return ctx.Err()
			}
			ev.Reset()
		}
	}
}
