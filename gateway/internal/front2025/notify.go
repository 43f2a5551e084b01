package front2025

import (
	"context"
	"io"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// A session's GET stream carries the notifications of its tasks, which
// the runner publishes to the session from whichever replica changed the
// task (internal/runner/notify.go), merged with the upstream's own.

// relayMerged relays an upstream GET SSE stream (resp nil: a session the
// gateway holds itself, which has none) and interleaves the
// session's gateway messages between its events (never inside one).
func (f *Front) relayMerged(w http.ResponseWriter, r *http.Request, resp *http.Response, sessionID string) {
	if resp != nil {
		defer resp.Body.Close()
	}
	watch, err := f.store.WatchSession(r.Context(), sessionID)
	if err != nil {
		if resp == nil {
			mcpwire.WriteError(w, nil, core.RPCError(err, core.Era2025))
			return
		}
		f.Up.Relay(w, r, resp)
		return
	}
	defer watch.Close()
	if resp != nil {
		upstreamside.CopyResponseHeader(w, resp)
		w.WriteHeader(resp.StatusCode)
	} else { // a session the gateway holds: its own notifications alone
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}
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
	if resp != nil {
		go func() { readErr <- readEvents(resp.Body, events, r.Context()) }()
	}
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
			if _, err := w.Write(mcpwire.AppendEvent(nil, nil, []byte(ev.Data))); err != nil {
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

// readEvents splits an SSE body into whole events and sends them, bytes
// untouched, until the body ends.
func readEvents(body io.Reader, out chan<- []byte, ctx context.Context) error {
	sr := mcpwire.NewRawReader(body, upstreamside.MaxAnswerBytes)
	for {
		ev, err := sr.Next()
		if err != nil {
			return err
		}
		select {
		case out <- ev.Raw:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
