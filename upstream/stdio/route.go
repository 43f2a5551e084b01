package stdio

// Messages from a child, routed to the clients they belong to.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// dispatch routes one message of child p (the reader goroutine).
func (b *Bridge) dispatch(p *proc, msg []byte) {
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // a response
		b.mu.Lock()
		c := b.calls[string(env.ID)]
		if c != nil {
			b.endCallLocked(c)
		}
		b.mu.Unlock()
		if c == nil {
			b.log.Debug().Str("op", "stdio").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
			return
		}
		out, err := mcpwire.WithMember(msg, "id", c.origID)
		if err != nil {
			out = errorMessage(c.origID, -32603, "the upstream process sent a malformed response")
		}
		c.final <- out
	case env.Method != "" && len(env.ID) > 0: // a request to the client
		b.childRequest(p, msg, env)
	case env.Method == "notifications/progress":
		b.progress(msg, env)
	case env.Method == "notifications/cancelled":
		b.childCancelled(p, msg, env)
	case env.Method != "":
		b.broadcast(p, msg)
	}
}

// childCancelled passes the child's withdrawal of one of its requests to
// the client it was sent to, under the id that client knows.
func (b *Bridge) childCancelled(p *proc, msg []byte, env envelope) {
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(env.Params, &params)
	b.mu.Lock()
	var key string
	var a *ask
	for k, x := range b.asks {
		if x.proc == p && mcpwire.SameID(x.childID, params.RequestID) {
			key, a = k, x
			break
		}
	}
	if a != nil {
		delete(b.asks, key)
	}
	b.mu.Unlock()
	if a == nil {
		return // nothing the clients know of
	}
	np, err := mcpwire.WithMember(env.Params, "requestId", json.RawMessage(key))
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", np)
	if err != nil {
		return
	}
	b.deliver(a, out)
}

// deliver sends msg to where ask a went (its call's stream, else its
// session's GET streams), never blocking; it reports whether any took it.
func (b *Bridge) deliver(a *ask, msg []byte) bool {
	if a.call != nil {
		select {
		case a.call.out <- msg:
			return true
		default:
			return false
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	took := false
	for ch := range a.sess.streams {
		select {
		case ch <- msg:
			took = true
		default:
		}
	}
	return took
}

// childRequest sends a request of the child to the client whose call is
// in flight on it, or refuses it when no single call or session can be
// named (stdio messages say nothing of the request they belong to).
func (b *Bridge) childRequest(p *proc, msg []byte, env envelope) {
	if env.Method == "ping" {
		_ = p.send(resultMessage(env.ID, json.RawMessage(`{}`)))
		return
	}
	key := strconv.Quote("taskgate-stdio-ask-" + uuid.NewString())
	out, err := mcpwire.WithMember(msg, "id", json.RawMessage(key))
	if err != nil {
		return
	}
	b.mu.Lock()
	c, sess, why := b.routeLocked(p)
	var a *ask
	if sess != nil {
		a = &ask{childID: env.ID, proc: p, sess: sess, call: c}
		b.asks[key] = a
		if c == nil && len(sess.streams) == 0 {
			why = "no call is in flight and the session has no stream open to ask on"
		}
	}
	b.mu.Unlock()
	if why == "" && !b.deliver(a, out) {
		why = "the client's stream is not keeping up"
	}
	if why != "" {
		if a != nil {
			b.mu.Lock()
			delete(b.asks, key)
			b.mu.Unlock()
		}
		b.log.Warn().Str("op", "stdio").Str("method", env.Method).Msg("cannot relay the upstream process's request: " + why)
		_ = p.send(errorMessage(env.ID, -32603, "taskgate cannot relay "+env.Method+": "+why))
	}
}

// routeLocked picks whom a request of child p is for: its one call in
// flight; with none, its one session's GET streams. With several calls in
// flight it cannot tell which one asked, and a wrong guess would show a
// question to the wrong client: it says why not.
func (b *Bridge) routeLocked(p *proc) (*call, *session, string) {
	var only *call
	n := 0
	for _, c := range b.calls {
		if c.proc == p {
			only = c
			n++
		}
	}
	switch {
	case n == 1:
		return only, only.sess, ""
	case n > 1:
		return nil, nil, fmt.Sprintf("%d calls are in flight on the upstream process and a stdio request does not say which one it belongs to "+
			"(--upstream-per-session gives each client session its own process)", n)
	}
	var sess *session
	for _, s := range b.sessions {
		if s.proc == p || (s.proc == nil && p == b.shared) {
			if sess != nil {
				return nil, nil, "no call is in flight and several client sessions share the upstream process"
			}
			sess = s
		}
	}
	if sess == nil {
		return nil, nil, "no client session is open"
	}
	return nil, sess, ""
}

// progress delivers a progress notification to the call whose token it
// names, with the client's own token.
func (b *Bridge) progress(msg []byte, env envelope) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(env.Params, &p)
	var tok string
	_ = json.Unmarshal(p.Token, &tok)
	b.mu.Lock()
	c := b.tokens[tok]
	b.mu.Unlock()
	if c == nil {
		return // a call already answered, or a token the bridge never gave
	}
	params, err := mcpwire.WithMember(env.Params, "progressToken", c.origToken)
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", params)
	if err != nil {
		return
	}
	select {
	case c.out <- out:
	default: // progress is best effort; never stall the child's stream
	}
}

// broadcast sends a notification of child p to every GET stream of the
// sessions it serves (list_changed, resource updates, log messages).
func (b *Bridge) broadcast(p *proc, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		if s.proc != nil && s.proc != p {
			continue
		}
		for ch := range s.streams {
			select {
			case ch <- msg:
			default:
			}
		}
	}
}

func resultMessage(id, result json.RawMessage) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func errorMessage(id json.RawMessage, code int, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}
