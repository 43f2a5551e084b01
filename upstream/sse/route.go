package sse

// Messages from a server's SSE stream, routed to the client session and
// call they belong to.

import (
	"bytes"
	"encoding/json"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream/internal/bridgesession"
)

// call is a client request in flight on its session's server
// (bridgesession.Table; the peer is the session).
type call = bridgesession.Call[*session, *session, []byte]

// ask is a request of the server sent to a client, awaiting its answer.
type ask = bridgesession.Ask[*session, *session, []byte]

// callTable is the bridge's calls, asks and progress tokens.
type callTable = bridgesession.Table[*session, *session, []byte]

// newCallTable is the bridge's call table: ids "taskgate-sse-N", POSTed to
// the session's endpoint.
func (b *Bridge) newCallTable() *callTable {
	return bridgesession.NewTable[*session](bridgesession.Config[*session, []byte]{
		Prefix: "taskgate-sse", Mu: &b.mu, Log: b.log, Op: "sse",
		Reply:      func(msg []byte) []byte { return msg },
		Message:    func(msg []byte) []byte { return msg },
		SendLocked: b.postAsyncLocked,
	})
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
		if !b.calls.Respond(s, env.ID, msg) {
			b.log.Debug().Str("op", "sse").Str("id", string(env.ID)).Msg("a response to no call in flight; dropped")
		}
	case env.Method != "" && len(env.ID) > 0:
		b.serverRequest(s, msg, env)
	case env.Method == "notifications/progress":
		b.calls.Progress(s, msg, env.Params)
	case env.Method == "notifications/cancelled":
		b.calls.PeerCancelled(s, msg, env.Params)
	case env.Method != "":
		b.broadcast(s, msg)
	default:
		b.malformed(s, msg)
	}
}

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
	b.calls.Relay(s, env.ID, env.Method, msg, b.opts.HoldAsk, maxAsks, func() bridgesession.Route[*session, *session, []byte] {
		return bridgesession.Route[*session, *session, []byte]{Sess: s, Call: b.calls.CarrierLocked(s)}
	})
}

// broadcast sends a notification of s's server to s's GET streams
// (list_changed, resource updates, log messages).
func (b *Bridge) broadcast(s *session, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.Streams.SendLocked(msg)
}

var (
	resultMessage = bridgesession.ResultMessage
	errorMessage  = bridgesession.ErrorMessage
	jsonError     = bridgesession.JSONError
)
