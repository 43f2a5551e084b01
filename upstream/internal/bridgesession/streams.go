// Package bridgesession is what the two local bridges, upstream/stdio and
// upstream/sse, share about the client sessions they serve as Streamable
// HTTP, whatever the back end (a child's pipes, an HTTP+SSE session):
//
//	streams.go  a session's GET streams, the server's requests held until
//	            one opens (HoldAsk), the endpoint's methods (ServeMethods:
//	            GET and DELETE of a session, POST)
//	calls.go    the call table (Table): the client's requests in flight,
//	            their ids and progress tokens rewritten to the bridge's,
//	            their replies (FinishLocked, the one place a reply is sent),
//	            cancellation and the end of a call; a session's Core; the
//	            POST reading, its routing (Dispatch) and the JSON-RPC
//	            errors both bridges answer with
//	asks.go     the server's requests sent to a client (Relay: to the one
//	            call in flight that may carry them, else the GET streams),
//	            their answers and withdrawals
//	reap.go     the reaper of idle sessions
//	shares.go   the count of sessions per principal, and the refusal of
//	            a session over a limit (RefuseSession)
//
// Nothing here has a lock of its own: the bridge's mutex guards it, under
// which the methods named ...Locked are called; the others (and Serve, and
// a held request's timer) take that mutex themselves (it is passed in).
package bridgesession

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

const (
	// StreamBuffer is the messages a GET stream buffers; a send to a full
	// stream is dropped, never waited for.
	StreamBuffer = 64
	// MaxHeld bounds the requests held per session (below StreamBuffer,
	// so that a stream that opens takes them all).
	MaxHeld = 32
)

// Held is a request of the server waiting for its session's client to
// open a GET stream: the bridge's id for it (Key), where it came from
// (Ask), the message to send.
type Held[A any] struct {
	Key   string
	Ask   A
	msg   []byte
	timer *time.Timer
}

// Streams is one session's GET streams and the server's requests held for
// them. Its zero value is a session with none; once closed (CloseLocked)
// it takes no stream again.
type Streams[A any] struct {
	open   map[chan []byte]struct{}
	held   []*Held[A]
	closed bool
}

// NoneOpenLocked reports whether no GET stream is open.
func (s *Streams[A]) NoneOpenLocked() bool { return len(s.open) == 0 }

// HeldLocked is the number of requests held.
func (s *Streams[A]) HeldLocked() int { return len(s.held) }

// SendLocked sends msg to every open GET stream, never blocking (a full
// stream misses it); it reports whether any took it.
func (s *Streams[A]) SendLocked(msg []byte) bool {
	took := false
	for ch := range s.open {
		select {
		case ch <- msg:
			took = true
		default:
		}
	}
	return took
}

// openLocked registers a new stream and sends it the requests held until
// now; nil when the session has ended.
func (s *Streams[A]) openLocked() chan []byte {
	if s.closed {
		return nil
	}
	ch := make(chan []byte, StreamBuffer)
	if s.open == nil {
		s.open = map[chan []byte]struct{}{}
	}
	s.open[ch] = struct{}{}
	s.releaseHeldLocked(ch)
	return ch
}

// closeStreamLocked forgets stream ch (the client left it).
func (s *Streams[A]) closeStreamLocked(ch chan []byte) {
	delete(s.open, ch)
}

// Serve is the GET handler of the session whose Streams s is: a stream of
// the server's notifications and requests, the requests held until now
// first, until the client leaves or the session ends (which closes it).
// mu is the bridge's mutex, which guards s.
func (s *Streams[A]) Serve(w http.ResponseWriter, r *http.Request, mu sync.Locker) {
	mu.Lock()
	ch := s.openLocked()
	mu.Unlock()
	if ch == nil { // ended meanwhile
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	defer func() {
		mu.Lock()
		s.closeStreamLocked(ch)
		mu.Unlock()
	}()
	sse := mcpwire.NewWriter(w)
	_ = sse.Comment("stream open")
	sse.Pump(ch, r.Context().Done())
}

// ServeMethods answers a request to a bridge's Streamable HTTP endpoint
// by its method: POST, a message (post); GET, the stream of r's session
// (Serve; mu is the bridge's mutex); DELETE, the end of r's session (del);
// any other, 405 with Allow. session is the bridge's lookup of r's
// session: GET and DELETE of none (the zero S) are answered 404.
func ServeMethods[S Session[A], A any](w http.ResponseWriter, r *http.Request, session func(*http.Request) S, mu sync.Locker,
	post http.HandlerFunc, del func(http.ResponseWriter, S)) {
	switch r.Method {
	case http.MethodPost:
		post(w, r)
	case http.MethodGet, http.MethodDelete:
		var none S
		s := session(r)
		switch {
		case s == none:
			http.Error(w, "session not found", http.StatusNotFound)
		case r.Method == http.MethodGet:
			s.core().Streams.Serve(w, r, mu) // first what the peer asked before it opened
		default:
			del(w, s)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// HoldLocked keeps the server's request msg (key, a) until the client
// opens a GET stream, for d at most; it reports whether it was held, or
// why not. When d passes first, the request is dropped, under mu (the
// bridge's mutex), and refuse called with why, without mu.
func (s *Streams[A]) HoldLocked(mu sync.Locker, d time.Duration, key string, a A, msg []byte, refuse func(h *Held[A], why string)) (bool, string) {
	if len(s.held) >= MaxHeld {
		return false, fmt.Sprintf("%d requests already wait for the client to open a stream", MaxHeld)
	}
	h := &Held[A]{Key: key, Ask: a, msg: msg}
	h.timer = time.AfterFunc(d, func() {
		mu.Lock()
		found := s.unholdLocked(h)
		mu.Unlock()
		if found {
			refuse(h, fmt.Sprintf("the client opened no stream to receive it within %s (a GET on its session)", d))
		}
	})
	s.held = append(s.held, h)
	return true, ""
}

// unholdLocked takes h out of the held requests; false if it is not
// there any more (sent, or dropped).
func (s *Streams[A]) unholdLocked(h *Held[A]) bool {
	for i, x := range s.held {
		if x == h {
			s.held = append(s.held[:i], s.held[i+1:]...)
			return true
		}
	}
	return false
}

// releaseHeldLocked sends the held requests to stream ch, which just
// opened.
func (s *Streams[A]) releaseHeldLocked(ch chan []byte) {
	for len(s.held) > 0 {
		h := s.held[0]
		select {
		case ch <- h.msg:
		default:
			return // the rest wait for the stream to drain, or their time
		}
		h.timer.Stop()
		s.held = s.held[1:]
	}
}

// DropHeldLocked forgets the held requests (their asks are refused by the
// caller).
func (s *Streams[A]) DropHeldLocked() {
	for _, h := range s.held {
		h.timer.Stop()
	}
	s.held = nil
}

// CloseLocked ends the session's streams: the held requests are dropped
// (DropHeldLocked), every open GET stream closes, and none opens again.
func (s *Streams[A]) CloseLocked() {
	s.DropHeldLocked()
	for ch := range s.open {
		close(ch)
	}
	s.open = nil
	s.closed = true
}
