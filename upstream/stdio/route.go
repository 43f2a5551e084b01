package stdio

// Messages from a child, routed to the clients they belong to.

import (
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
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
		if c != nil && c.proc == p {
			out, err := mcpwire.WithMember(msg, "id", c.origID)
			if err != nil {
				out = errorMessage(c.origID, -32603, "the upstream process sent a malformed response")
			}
			b.finishLocked(c, reply{msg: out})
		}
		b.mu.Unlock()
		if c == nil {
			b.log.Debug().Str("op", "stdio").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
		}
	case env.Method != "" && len(env.ID) > 0: // a request to the client
		b.childRequest(p, msg, env)
	case env.Method == "notifications/progress":
		b.progress(p, msg, env)
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
	return a.sess.streams.SendLocked(msg)
}

// childRequest sends a request of the child to the client it is for: the
// one call of its session in flight when that is a call a server asks for
// (mcpwire.CarriesUnrelated), else the session's GET stream, held until
// the client opens one (HoldAsk). It is refused only when no client can
// answer it, saying why.
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
	if need := capabilityOf[env.Method]; sess != nil && sess.caps != nil && sess.caps[need] == nil && need != "" {
		// No stream will ever carry it to a client that cannot answer it
		// (MCP 2025-11-25, Lifecycle, "Capability Negotiation").
		sess, why = nil, "its client did not declare the "+need+" capability"
	}
	var a *ask
	held := false
	if sess != nil {
		a = &ask{childID: env.ID, proc: p, sess: sess, call: c, method: env.Method}
		b.asks[key] = a
		if c == nil && sess.streams.NoneOpenLocked() {
			held, why = sess.streams.HoldLocked(&b.mu, b.opts.HoldAsk, key, a, out, func(h *bridgesession.Held[*ask], why string) {
				b.refuse(h.Key, h.Ask, h.Ask.proc, h.Ask.childID, h.Ask.method, why)
			})
		}
	}
	b.mu.Unlock()
	if held {
		b.log.Info().Str("op", "stdio").Str("method", env.Method).Str("session", sess.id).
			Msg("the upstream process asked before its client opened a stream; held until one opens")
		return
	}
	if why == "" && !b.deliver(a, out) {
		why = "the client's stream is not keeping up"
	}
	if why != "" {
		b.refuse(key, a, p, env.ID, env.Method, why)
	}
}

// capabilityOf is the client capability a request of the server needs.
var capabilityOf = map[string]string{"roots/list": "roots", "elicitation/create": "elicitation", "sampling/createMessage": "sampling"}

// refuse answers the child's request with an error saying why no client
// got it, and logs it.
func (b *Bridge) refuse(key string, a *ask, p *proc, childID json.RawMessage, method, why string) {
	if a != nil {
		b.mu.Lock()
		delete(b.asks, key)
		b.mu.Unlock()
	}
	b.log.Warn().Str("op", "stdio").Str("method", method).Msg("cannot relay the upstream process's request: " + why)
	_ = p.send(errorMessage(childID, -32603, "taskgate cannot relay "+method+": "+why))
}

// routeLocked picks whom a request of child p is for: the one call in
// flight of the session it serves, when that call is a tools/call,
// resources/read or prompts/get, else that session's GET stream (call nil).
// A stdio request names no call, and only such a call may carry one that
// names none (mcpwire.CarriesUnrelated):
// a tools/list or resources/list of the client's connect, in flight when
// the child asks for roots, would close its stream with its answer before
// the client answered. A shared child serves several sessions: a request
// is placed only when the calls in flight, or the sessions, name one; a
// wrong guess would show a question to the wrong client, so it says why
// not.
func (b *Bridge) routeLocked(p *proc) (*call, *session, string) {
	if s := p.sess; s != nil { // a session's own child
		if s.inflight == 1 {
			for _, c := range b.calls {
				if c.sess == s && mcpwire.CarriesUnrelated(c.method) {
					return c, s, ""
				}
			}
		}
		if s.ended {
			return nil, nil, "its client session ended"
		}
		return nil, s, "" // several calls, or none: the session's GET stream
	}
	var only *call
	n := 0
	var sess *session
	for _, c := range b.calls {
		if c.proc == p {
			only = c
			n++
			if sess == nil || sess == c.sess {
				sess = c.sess
			} else {
				sess = nil
				break
			}
		}
	}
	switch {
	case n == 1 && mcpwire.CarriesUnrelated(only.method):
		return only, only.sess, ""
	case n == 1:
		return nil, only.sess, "" // not a call a server asks for: its session's GET stream
	case n > 1 && sess != nil:
		return nil, sess, "" // all of one session's calls: its GET stream
	case n > 1:
		return nil, nil, "calls of several client sessions are in flight on the shared upstream process and a stdio request does not say which one it belongs to " +
			"(without --upstream-shared each client session has its own process)"
	}
	for _, s := range b.sessions {
		if s.proc == nil {
			if sess != nil {
				return nil, nil, "no call is in flight and several client sessions share the upstream process " +
					"(without --upstream-shared each client session has its own process)"
			}
			sess = s
		}
	}
	if sess == nil {
		return nil, nil, "no client session is open on the shared upstream process"
	}
	return nil, sess, ""
}

// answerFile hands call id of child p its answer, kept in a file
// (large.go); false: no such call.
func (b *Bridge) answerFile(p *proc, id []byte, a *bigAnswer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls[string(id)]
	if c == nil || c.proc != p {
		return false
	}
	b.finishLocked(c, reply{big: a})
	return true
}

// failCall fails call id of child p, whose answer cannot be passed on
// (over the limit, or malformed).
func (b *Bridge) failCall(p *proc, id []byte, err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls[string(id)]
	if c == nil || c.proc != p {
		return false
	}
	b.finishLocked(c, reply{msg: errorMessage(c.origID, -32603, "the upstream process's answer was dropped: "+err.Error())})
	return true
}

// progress delivers a progress notification of child p to the call whose
// token it names, with the client's own token. The call must be one p
// serves: a session's child never reaches another session's call.
func (b *Bridge) progress(p *proc, msg []byte, env envelope) {
	var params struct {
		Token json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(env.Params, &params)
	var tok string
	_ = json.Unmarshal(params.Token, &tok)
	b.mu.Lock()
	c := b.tokens[tok]
	b.mu.Unlock()
	if c == nil || c.proc != p {
		// A call already answered, a token the bridge never gave, or
		// another child's call.
		b.log.Debug().Str("op", "stdio").Msg("a progress notification for no call of this process; dropped")
		return
	}
	withTok, err := mcpwire.WithMember(env.Params, "progressToken", c.origToken)
	if err != nil {
		return
	}
	out, err := mcpwire.WithMember(msg, "params", withTok)
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
		s.streams.SendLocked(msg)
	}
}

func resultMessage(id, result json.RawMessage) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func errorMessage(id json.RawMessage, code int, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// exitedData marks the error of a call whose child exited under it: the
// bridge's answer, not the server's, which a gateway may count as a
// failure on the way and run a repeatable tool again (upstream.ExitedData
// is the same bytes; upstream.TransientAnswer reads it).
var exitedData = json.RawMessage(`{"taskgate":"upstream-process-exited"}`)

// exitedMessage is the error a call gets when its child exits under it.
func exitedMessage(id json.RawMessage, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": message, "data": exitedData}})
}
