package bridgesession

// The peer's requests (elicitation, sampling, roots) sent to a client
// under a bridge id only that client's session may answer.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// Ask is a request of peer Peer sent to a client, awaiting its answer.
type Ask[S comparable, P comparable, R any] struct {
	PeerID json.RawMessage // the peer's id for it
	Peer   P
	Sess   S              // only this session may answer it
	Call   *Call[S, P, R] // the call it was sent on; nil: a GET stream
	Method string
}

// CapabilityOf is the client capability a request of the server needs.
var CapabilityOf = map[string]string{"roots/list": "roots", "elicitation/create": "elicitation", "sampling/createMessage": "sampling"}

// Route says where a peer's request goes: session Sess (zero: none, and
// Why says why), on call Call (nil: the session's GET stream).
type Route[S comparable, P comparable, R any] struct {
	Sess S
	Call *Call[S, P, R]
	Why  string
}

// Relay sends request msg of peer p (its id and method in env) where
// route (under the bridge's mutex) says: the call's stream, else the
// session's GET streams, held until the client opens one (for hold at
// most). It is refused (Refuse) when no client can answer it, saying why:
// the route's reason, a client that did not declare the capability it
// needs (MCP 2025-11-25, Lifecycle, "Capability Negotiation"), more than
// maxAsks of the session's asks unanswered (0: no cap).
func (t *Table[S, P, R]) Relay(p P, id json.RawMessage, method string, msg []byte, hold time.Duration, maxAsks int,
	route func() Route[S, P, R]) {
	key := strconv.Quote(t.cfg.Prefix + "-ask-" + uuid.NewString())
	out, err := mcpwire.WithMember(msg, "id", json.RawMessage(key))
	if err != nil {
		return
	}
	var zero S
	t.cfg.Mu.Lock()
	rt := route()
	s, why := rt.Sess, rt.Why
	var a *Ask[S, P, R]
	held := false
	if s != zero {
		core := s.core()
		need := CapabilityOf[method]
		switch {
		case core.Ended:
			why = "its client session ended"
		case need != "" && core.Caps != nil && core.Caps[need] == nil:
			why = "its client did not declare the " + need + " capability"
		case maxAsks > 0 && core.Asks >= maxAsks:
			why = fmt.Sprintf("%d requests of the server already wait for the client's answer", maxAsks)
		default:
			a = &Ask[S, P, R]{PeerID: id, Peer: p, Sess: s, Call: rt.Call, Method: method}
			t.asks[key] = a
			core.Asks++
			if a.Call == nil && core.Streams.NoneOpenLocked() {
				held, why = core.Streams.HoldLocked(t.cfg.Mu, hold, key, a, out, func(h *Held[*Ask[S, P, R]], why string) {
					t.Refuse(h.Key, h.Ask, h.Ask.Peer, h.Ask.PeerID, h.Ask.Method, why)
				})
			}
		}
	}
	t.cfg.Mu.Unlock()
	if held {
		t.cfg.Log.Info().Str("op", t.cfg.Op).Str("method", method).
			Msg("the upstream asked before its client opened a stream; held until one opens")
		return
	}
	if why == "" && !t.Deliver(a, out) {
		why = "the client's stream is not keeping up"
	}
	if why != "" {
		t.Refuse(key, a, p, id, method, why)
	}
}

// Deliver sends msg to where ask a went (its call's stream, else its
// session's GET streams), never blocking; it reports whether any took it.
func (t *Table[S, P, R]) Deliver(a *Ask[S, P, R], msg []byte) bool {
	if a.Call != nil {
		select {
		case a.Call.Out <- msg:
			return true
		default:
			return false
		}
	}
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	return a.Sess.core().Streams.SendLocked(msg)
}

// Refuse answers peer p's request (peerID, method) with an error saying why
// no client got it, and logs it; ask a (under key) is forgotten.
func (t *Table[S, P, R]) Refuse(key string, a *Ask[S, P, R], p P, peerID json.RawMessage, method, why string) {
	t.cfg.Mu.Lock()
	defer t.cfg.Mu.Unlock()
	if a != nil {
		t.forgetAskLocked(key, a)
	}
	t.cfg.Log.Warn().Str("op", t.cfg.Op).Str("method", method).Msg("cannot relay the upstream's request: " + why)
	t.cfg.SendLocked(p, ErrorMessage(peerID, mcpwire.CodeInternalError, "taskgate cannot relay "+method+": "+why))
}

func (t *Table[S, P, R]) forgetAskLocked(key string, a *Ask[S, P, R]) {
	if t.asks[key] == a {
		delete(t.asks, key)
		a.Sess.core().Asks--
	}
}

// Answer takes the ask that the client of session s answers with body (its
// id the bridge's), and returns it with the answer under the peer's id;
// nil when s was asked no such thing.
func (t *Table[S, P, R]) Answer(s S, id json.RawMessage, body []byte) (*Ask[S, P, R], []byte, error) {
	t.cfg.Mu.Lock()
	a := t.asks[string(id)]
	if a != nil && a.Sess != s {
		a = nil // asked of another session: not this one's to answer
	}
	if a != nil {
		t.forgetAskLocked(string(id), a)
	}
	t.cfg.Mu.Unlock()
	if a == nil {
		return nil, nil, nil
	}
	out, err := mcpwire.WithMember(body, "id", a.PeerID)
	return a, out, err
}

// PeerCancelled passes peer p's withdrawal of one of its requests
// (notifications/cancelled msg, params its params) to the client it was
// sent to, under the id that client knows.
func (t *Table[S, P, R]) PeerCancelled(p P, msg, params []byte) {
	var pp struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(params, &pp)
	t.cfg.Mu.Lock()
	var key string
	var a *Ask[S, P, R]
	for k, x := range t.asks {
		if x.Peer == p && mcpwire.SameID(x.PeerID, pp.RequestID) {
			key, a = k, x
			break
		}
	}
	if a != nil {
		t.forgetAskLocked(key, a)
	}
	t.cfg.Mu.Unlock()
	if a == nil {
		return // nothing the clients know of
	}
	np, err := mcpwire.WithMember(params, "requestId", json.RawMessage(key))
	if err != nil {
		return
	}
	if out, err := mcpwire.WithMember(msg, "params", np); err == nil {
		t.Deliver(a, out)
	}
}

// EndSessionLocked forgets the asks of session s; with msg non-empty, each
// is refused to its peer with that message (the session ended before its
// client answered).
func (t *Table[S, P, R]) EndSessionLocked(s S, msg string) {
	for k, a := range t.asks {
		if a.Sess == s {
			t.forgetAskLocked(k, a)
			if msg != "" {
				t.cfg.SendLocked(a.Peer, ErrorMessage(a.PeerID, mcpwire.CodeInternalError, msg))
			}
		}
	}
}
