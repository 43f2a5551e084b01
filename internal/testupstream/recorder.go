package testupstream

import (
	"context"
	"fmt"
	"sync"
)

// EventKind says what happened to a tool call.
type EventKind string

const (
	// Called: the tool handler was entered. A legacy client that answers an
	// elicitation produces one Called; a modern client that retries with
	// inputResponses produces one per round.
	Called EventKind = "called"
	// Completed: the handler returned a result (including isError results
	// and input_required rounds).
	Completed EventKind = "completed"
	// Failed: the handler returned an error (a JSON-RPC error on the wire).
	Failed EventKind = "failed"
	// Cancelled: the handler's context ended before it finished — the
	// upstream saw the cancellation (notifications/cancelled, a closed
	// request, or a deleted session).
	Cancelled EventKind = "cancelled"
)

// Event is one thing that happened to a tool call.
type Event struct {
	Tool string
	Kind EventKind
	// Session is the Mcp-Session-Id of the call ("" when stateless).
	Session string
}

// Recorder collects [Event]s. The zero value is ready to use; it is safe for
// concurrent use.
type Recorder struct {
	// Echo, if set, hears of every event as it is recorded (the stdio
	// test server prints them on stderr, for a test in another process).
	Echo func(Event)

	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed and replaced on every record
}

// Add records e as if the upstream had: for a test that learns the events
// of a server in another process.
func (r *Recorder) Add(e Event) { r.record(e) }

func (r *Recorder) record(e Event) {
	if r == nil {
		return
	}
	if r.Echo != nil {
		r.Echo(e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Events returns a copy of everything recorded so far, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Count returns how many events of kind were recorded for tool ("" = any tool).
func (r *Recorder) Count(tool string, kind EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked(tool, kind)
}

func (r *Recorder) countLocked(tool string, kind EventKind) int {
	n := 0
	for _, e := range r.events {
		if (tool == "" || e.Tool == tool) && e.Kind == kind {
			n++
		}
	}
	return n
}

// WaitFor blocks until at least n events of kind were recorded for tool
// ("" = any tool), or ctx ends.
func (r *Recorder) WaitFor(ctx context.Context, tool string, kind EventKind, n int) error {
	for {
		r.mu.Lock()
		if r.countLocked(tool, kind) >= n {
			r.mu.Unlock()
			return nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("testupstream: waiting for %d %s %q events (have %d): %w",
				n, kind, tool, r.Count(tool, kind), ctx.Err())
		}
	}
}
