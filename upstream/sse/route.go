package sse

// Messages from a server's SSE stream, routed to the client session and
// call they belong to.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

type call struct {
	key       string          // bridge id, as JSON
	origID    json.RawMessage // the client's id
	method    string          // the client's method (serverRequest: mcpwire.CarriesUnrelated)
	origToken json.RawMessage // the client's progressToken, nil if none
	token     string          // the bridge's token for it
	sess      *session
	started   time.Time
	out       chan []byte // requests and progress for the call's stream
	final     chan []byte // its response (or an error), exactly one
}

// ask is a request of the server sent to a client, awaiting its answer.
type ask struct {
	upID   json.RawMessage // the server's id
	sess   *session        // only this session may answer it
	call   *call           // the call it was sent on; nil: a GET stream
	method string
}

// resultOf is the result member of a JSON-RPC response; nil if none.
func resultOf(msg []byte) json.RawMessage {
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(msg, &r)
	return r.Result
}

// dispatchData routes the data of one message event of s's stream: a
// JSON-RPC message, or a batch of them (MCP 2024-11-05 allows batches).
func (b *Bridge) dispatchData(s *session, data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(data, &batch) != nil {
			b.malformed(s, data)
			return
		}
		for _, m := range batch {
			b.dispatch(s, m)
		}
		return
	}
	b.dispatch(s, data)
}

func (b *Bridge) malformed(s *session, data []byte) {
	b.log.Warn().Str("op", "sse").Str("session", s.id).Str("data", truncate(string(data))).
		Msg("the server sent an SSE message event whose data is not a JSON-RPC message; dropped")
}

// dispatch routes one message of s's server.
func (b *Bridge) dispatch(s *session, msg []byte) {
	var env envelope
	if json.Unmarshal(msg, &env) != nil || !mcpwire.IsObject(msg) {
		b.malformed(s, msg)
		return
	}
	switch {
	case env.Method == "" && len(env.ID) > 0: // a response
		b.mu.Lock()
		c := b.calls[string(env.ID)]
		if c != nil && c.sess == s {
			out, err := mcpwire.WithMember(msg, "id", c.origID)
			if err != nil {
				out = errorMessage(c.origID, -32603, "the upstream sent a malformed response")
			}
			b.finishLocked(c, out)
		}
		b.mu.Unlock()
		if c == nil || c.sess != s {
			b.log.Debug().Str("op", "sse").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
		}
	case env.Method != "" && len(env.ID) > 0:
		b.serverRequest(s, msg, env)
	case env.Method == "notifications/progress":
		b.progress(s, msg, env)
	case env.Method == "notifications/cancelled":
		b.serverCancelled(s, msg, env)
	case env.Method != "":
		b.broadcast(s, msg)
	default:
		b.malformed(s, msg)
	}
}

// capabilityOf is the client capability a request of the server needs.
var capabilityOf = map[string]string{"roots/list": "roots", "elicitation/create": "elicitation", "sampling/createMessage": "sampling"}

// serverRequest sends a request of the server to its session's client:
// the session's one call in flight when that is a call a server asks for
// (mcpwire.CarriesUnrelated: tools/call, resources/read, prompts/get),
// else its GET stream, held until the client opens one (HoldAsk). The
// 2024-11-05 transport does not say which call a request belongs to; a
// session with several calls in flight gets it on its GET stream, and so
// does one whose only call is of another kind (a tools/list of the
// client's connect would close its stream with its answer before the
// client answered). It is refused only when no client can answer it,
// saying why.
func (b *Bridge) serverRequest(s *session, msg []byte, env envelope) {
	if env.Method == "ping" {
		b.postAsync(s, resultMessage(env.ID, json.RawMessage(`{}`)))
		return
	}
	key := strconv.Quote("taskgate-sse-ask-" + uuid.NewString())
	out, err := mcpwire.WithMember(msg, "id", json.RawMessage(key))
	if err != nil {
		return
	}
	b.mu.Lock()
	var a *ask
	why, held := "", false
	need := capabilityOf[env.Method]
	switch {
	case s.ended:
		why = "its client session ended"
	case need != "" && s.caps[need] == nil:
		// No stream will ever carry it to a client that cannot answer it
		// (MCP 2025-11-25, Lifecycle, "Capability Negotiation").
		why = "its client did not declare the " + need + " capability"
	case s.asks >= maxAsks:
		why = fmt.Sprintf("%d requests of the server already wait for the client's answer", maxAsks)
	default:
		a = &ask{upID: env.ID, sess: s, method: env.Method}
		if s.inflight == 1 {
			for _, c := range b.calls {
				if c.sess == s && mcpwire.CarriesUnrelated(c.method) {
					a.call = c
				}
			}
		}
		b.asks[key] = a
		s.asks++
		if a.call == nil && s.streams.NoneOpenLocked() {
			held, why = s.streams.HoldLocked(&b.mu, b.opts.HoldAsk, key, a, out, func(h *bridgesession.Held[*ask], why string) {
				b.refuse(s, h.Key, h.Ask, h.Ask.upID, h.Ask.method, why)
			})
		}
	}
	b.mu.Unlock()
	if held {
		b.log.Info().Str("op", "sse").Str("method", env.Method).Str("session", s.id).
			Msg("the upstream asked before its client opened a stream; held until one opens")
		return
	}
	if why == "" && !b.deliver(a, out) {
		why = "the client's stream is not keeping up"
	}
	if why != "" {
		b.refuse(s, key, a, env.ID, env.Method, why)
	}
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

// refuse answers the server's request with an error saying why no client
// got it, and logs it.
func (b *Bridge) refuse(s *session, key string, a *ask, upID json.RawMessage, method, why string) {
	if a != nil {
		b.mu.Lock()
		b.forgetAskLocked(key, a)
		b.mu.Unlock()
	}
	b.log.Warn().Str("op", "sse").Str("method", method).Msg("cannot relay the upstream's request: " + why)
	b.postAsync(s, errorMessage(upID, -32603, "taskgate cannot relay "+method+": "+why))
}

func (b *Bridge) forgetAskLocked(key string, a *ask) {
	if b.asks[key] == a {
		delete(b.asks, key)
		a.sess.asks--
	}
}

// serverCancelled passes the server's withdrawal of one of its requests
// to the client it was sent to, under the id that client knows.
func (b *Bridge) serverCancelled(s *session, msg []byte, env envelope) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(env.Params, &p)
	b.mu.Lock()
	var key string
	var a *ask
	for k, x := range b.asks {
		if x.sess == s && mcpwire.SameID(x.upID, p.RequestID) {
			key, a = k, x
			break
		}
	}
	if a != nil {
		b.forgetAskLocked(key, a)
	}
	b.mu.Unlock()
	if a == nil {
		return // nothing the client knows of
	}
	np, err := mcpwire.WithMember(env.Params, "requestId", json.RawMessage(key))
	if err != nil {
		return
	}
	if out, err := mcpwire.WithMember(msg, "params", np); err == nil {
		b.deliver(a, out)
	}
}

// progress delivers a progress notification to the call of s whose token
// it names, with the client's own token.
func (b *Bridge) progress(s *session, msg []byte, env envelope) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(env.Params, &p)
	var tok string
	_ = json.Unmarshal(p.Token, &tok)
	b.mu.Lock()
	c := b.tokens[tok]
	b.mu.Unlock()
	if c == nil || c.sess != s {
		b.log.Debug().Str("op", "sse").Msg("a progress notification for no call of this session; dropped")
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
	default: // progress is best effort; never stall the stream's reader
	}
}

// broadcast sends a notification of s's server to s's GET streams
// (list_changed, resource updates, log messages).
func (b *Bridge) broadcast(s *session, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.streams.SendLocked(msg)
}

// finishLocked ends call c with its reply: the one place a reply is sent,
// under b.mu, by whoever takes c out of b.calls.
func (b *Bridge) finishLocked(c *call, msg []byte) {
	b.endCallLocked(c)
	c.final <- msg // never blocks: one reply per call, in a buffer of one
}

// endCallLocked forgets call c, and refuses the server's requests sent on
// it that were not answered.
func (b *Bridge) endCallLocked(c *call) {
	delete(b.calls, c.key)
	delete(b.tokens, c.token)
	c.sess.inflight--
	c.sess.lastUsed = time.Now()
	for k, a := range b.asks {
		if a.call == c {
			b.forgetAskLocked(k, a)
			b.postAsyncLocked(c.sess, errorMessage(a.upID, -32603, "the client's call ended before it answered"))
		}
	}
}

func resultMessage(id, result json.RawMessage) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func errorMessage(id json.RawMessage, code int, message string) []byte {
	return mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}
