package gateway

// initialize: the gateway becomes the 2025-11-25 task receiver of the
// session ("Capabilities", ../shared/spec/tasks-2025-11-25.mdx).
//
//	client ── initialize {protocolVersion, capabilities}
//	   gateway: drop capabilities.tasks (the upstream must not create
//	            client-side tasks through us); forward
//	upstream ── result {protocolVersion: V, capabilities}
//	   gateway: V is 2025-11-25, or the client asked 2025-11-25 and V is an
//	            older version the gateway can front (2025-06-18, 2025-03-26),
//	            and the upstream gave a session id:
//	              record {client 2025-11-25, upstream V, client caps} in Redis
//	              (every replica must know the session before the client does)
//	              present 2025-11-25 with capabilities.tasks
//	            else: the answer unchanged
//
// The session then speaks 2025-11-25 to the client and V to the upstream:
// upstreamHeader rewrites MCP-Protocol-Version on its requests.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/taskgate/taskgate/upstream"
)

// tasksCapability is the server capability the gateway adds: tasks/list,
// tasks/cancel and task-augmented tools/call ("Server Capabilities").
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// frontable are the upstream versions presented as 2025-11-25 to a client
// that asks for it, so older servers gain tasks too. Their messages are a
// subset of 2025-11-25's for everything the gateway relays unchanged.
var frontable = map[string]bool{"2025-06-18": true, "2025-03-26": true}

func (h *Handler) serveInitialize(w http.ResponseWriter, r *http.Request, msg *message) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg.Params, &params); err != nil || params == nil {
		h.forward(w, r, msg) // the upstream says what is wrong with it
		return
	}
	var asked string
	_ = json.Unmarshal(params["protocolVersion"], &asked)
	clientCaps := params["capabilities"]

	body := msg.raw
	if stripped, ok := withoutTasks(clientCaps); ok {
		params["capabilities"] = stripped
		if b, err := withParams(msg.raw, params); err == nil {
			body = b
		}
	}
	// The version of an initialize is negotiated in its body; a header
	// naming a version the upstream does not know would make it refuse
	// (MCP-Protocol-Version is for requests after initialization).
	header := identityHeader(r.Header, "Mcp-Protocol-Version")
	a := h.forwardForRewrite(w, r, msg, header, body)
	if a == nil {
		return
	}
	defer a.close()

	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	sid := a.resp.Header.Get("Mcp-Session-Id")
	if a.result == nil || json.Unmarshal(a.result, &res) != nil || sid == "" ||
		!(res.ProtocolVersion == legacyVersion || (asked == legacyVersion && frontable[res.ProtocolVersion])) {
		a.write(w, r, h, nil)
		return
	}
	out, err := presentLegacy(a.msg, a.result, res.Capabilities)
	if err != nil {
		h.log.Warn().Str("op", "initialize").Err(err).Msg("cannot add the tasks capability; the session stays pass-through")
		a.write(w, r, h, nil)
		return
	}
	s := newSessionInfo(sid, legacyVersion, res.ProtocolVersion, clientCaps)
	if err := h.recordSession(r.Context(), s); err != nil {
		e := rpcError(err)
		h.log.Warn().Str("op", "initialize").Err(err).Msg(e.Message)
		h.closeOrphan(r, s)
		writeRPCError(w, msg.ID, e) // without the session header: the session is not usable
		return
	}
	h.log.Debug().Str("op", "initialize").Str("client_version", s.ClientVersion).
		Str("upstream_version", s.UpstreamVersion).Msg("session recorded")
	a.write(w, r, h, out)
}

// presentLegacy returns the response message with protocolVersion
// 2025-11-25 and capabilities.tasks set in its result.
func presentLegacy(msg, result, caps json.RawMessage) (json.RawMessage, error) {
	if len(caps) == 0 || string(caps) == "null" {
		caps = json.RawMessage("{}")
	}
	caps, err := withMember(caps, "tasks", tasksCapability)
	if err != nil {
		return nil, err
	}
	if result, err = withMember(result, "capabilities", caps); err != nil {
		return nil, err
	}
	if result, err = withMember(result, "protocolVersion", json.RawMessage(`"`+legacyVersion+`"`)); err != nil {
		return nil, err
	}
	return withMember(msg, "result", result)
}

// withoutTasks returns caps without its tasks member, and whether there was
// one to drop.
func withoutTasks(caps json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(caps, &m) != nil || m == nil {
		return caps, false
	}
	if _, ok := m["tasks"]; !ok {
		return caps, false
	}
	delete(m, "tasks")
	out, err := json.Marshal(m)
	if err != nil {
		return caps, false
	}
	return out, true
}

// withParams returns the JSON-RPC message raw with its params replaced.
func withParams(raw []byte, params map[string]json.RawMessage) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return withMember(raw, "params", p)
}

// closeOrphan ends the upstream session of an initialize the gateway could
// not record, best effort: the client never learns its id.
func (h *Handler) closeOrphan(r *http.Request, s *sessionInfo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
	defer cancel()
	header := http.Header{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		header["Authorization"] = v
	}
	if err := h.up.CloseSession(ctx, &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: header}); err != nil {
		h.log.Debug().Str("op", "initialize").Err(err).Msg("cannot close the unrecorded upstream session")
	}
}
