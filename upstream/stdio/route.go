package stdio

// Messages from a child, routed to the clients they belong to.

import (
	"encoding/json"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

type envelope = bridgesession.Envelope

// dispatch routes one message of child p (the reader goroutine).
func (b *Bridge) dispatch(p *proc, msg []byte) {
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // a response
		if !b.calls.Respond(p, env.ID, msg) {
			b.log.Debug().Str("op", "stdio").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
		}
	case env.Method != "" && len(env.ID) > 0: // a request to the client
		b.childRequest(p, msg, env)
	case env.Method == "notifications/progress":
		b.calls.Progress(p, msg, env.Params)
	case env.Method == "notifications/cancelled":
		b.calls.PeerCancelled(p, msg, env.Params)
	case env.Method != "":
		b.broadcast(p, msg, env.Method)
	}
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
	b.calls.Relay(p, env.ID, env.Method, msg, b.opts.HoldAsk, 0, func() bridgesession.Route[*session, *proc, reply] {
		c, s, why := b.routeLocked(p)
		return bridgesession.Route[*session, *proc, reply]{Sess: s, Call: c, Why: why}
	})
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
		if c := b.calls.CarrierLocked(s); c != nil {
			return c, s, ""
		}
		if s.Ended {
			return nil, nil, "its client session ended"
		}
		return nil, s, "" // several calls, or none: the session's GET stream
	}
	calls := b.calls.CallsOfPeerLocked(p)
	n := len(calls)
	var sess *session
	for _, c := range calls {
		if sess == nil || sess == c.Sess {
			sess = c.Sess
		} else {
			sess = nil
			break
		}
	}
	switch {
	case n == 1 && mcpwire.CarriesUnrelated(calls[0].Method):
		return calls[0], calls[0].Sess, ""
	case n == 1:
		return nil, calls[0].Sess, "" // not a call a server asks for: its session's GET stream
	case n > 1 && sess != nil:
		return nil, sess, "" // all of one session's calls: its GET stream
	case n > 1:
		return nil, nil, "calls of several client sessions are in flight on the shared upstream process and a stdio request does not say which one it belongs to " +
			"(with --upstream-scope session each client session has its own process)"
	}
	for _, s := range b.sessions {
		if s.proc == p || (s.proc == nil && p.principal == "") { // the sessions p serves
			if sess != nil {
				return nil, nil, "no call is in flight and several client sessions share the upstream process " +
					"(with --upstream-scope session each client session has its own process)"
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
	return b.calls.FinishPeer(p, id, func(*call) reply { return reply{big: a} })
}

// failCall fails call id of child p, whose answer cannot be passed on
// (over the limit, or malformed).
func (b *Bridge) failCall(p *proc, id []byte, err error) bool {
	return b.calls.FinishPeer(p, id, func(c *call) reply {
		return reply{msg: errorMessage(c.OrigID, -32603, "the upstream process's answer was dropped: "+err.Error())}
	})
}

// broadcast sends a notification of child p to every GET stream of the
// sessions it serves (list_changed, resource updates, log messages). A log
// message of a session's own child while its one call in flight is a
// tools/call, resources/read or prompts/get goes on that call's stream, as
// an HTTP server sends the log of a request on its answer (a stdio message
// names no request, but the child serves this one client, and this one
// call; MCP 2025-11-25, Transports, "Sending Messages to the Server": the
// server may send notifications before its response).
func (b *Bridge) broadcast(p *proc, msg []byte, method string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := p.sess; s != nil && method == "notifications/message" {
		if c := b.calls.CarrierLocked(s); c != nil {
			select {
			case c.Out <- msg:
				return
			default: // a full stream: its GET streams, as any other
			}
		}
	}
	for _, s := range b.sessions {
		if s.proc != nil && s.proc != p {
			continue
		}
		s.Streams.SendLocked(msg)
	}
}

var (
	resultMessage = bridgesession.ResultMessage
	errorMessage  = bridgesession.ErrorMessage
	jsonError     = bridgesession.JSONError
)

// exitedData marks the error of a call whose child exited under it: the
// bridge's answer, not the server's, which a gateway may count as a
// failure on the way and run a repeatable tool again (upstream.ExitedData
// is the same bytes; upstream.TransientAnswer reads it).
var exitedData = json.RawMessage(`{"taskgate":"upstream-process-exited"}`)

// exitedMessage is the error a call gets when its child exits under it.
func exitedMessage(id json.RawMessage, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": message, "data": exitedData}})
}
