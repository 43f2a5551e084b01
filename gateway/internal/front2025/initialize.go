package front2025

// initialize:
//
//	client ── initialize {protocolVersion, capabilities}
//	   gateway: drop capabilities.tasks (the upstream must not create
//	            client-side tasks through us); forward
//	upstream ── result {protocolVersion: V, capabilities}
//	   gateway: V is 2025-11-25, or the client asked 2025-11-25 and V is an
//	            older version the gateway can front (2025-06-18, 2025-03-26),
//	            and the upstream gave a session id:
//	              record {client 2025-11-25, upstream V, client caps} in Redis
//	              (every replica must know the session before the client
//	              does: invariant 9)
//	              present 2025-11-25 with capabilities.tasks
//	            else: the answer unchanged
//
// The session then speaks 2025-11-25 to the client and V to the upstream:
// UpstreamHeader rewrites MCP-Protocol-Version on its requests.
//
// A stateless 2026-07-28 upstream (the era probe says so) that gives no
// session of its own to the initialize: the gateway is the session
// (stateless.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// tasksCapability is the server capability the gateway adds: tasks/list,
// tasks/cancel and task-augmented tools/call (MCP 2025-11-25, Tasks,
// "Server Capabilities").
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

func (f *Front) initialize(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg.Params, &params); err != nil || params == nil {
		f.Up.Forward(w, r, msg, f.UpstreamHeader(r), "") // the upstream says what is wrong with it
		return
	}
	var asked string
	_ = json.Unmarshal(params["protocolVersion"], &asked)
	clientCaps := params["capabilities"]

	body := f.initializeBody(msg, params, asked)
	// The version of an initialize is negotiated in its body; a header
	// naming a version the upstream does not know would make it refuse
	// (MCP-Protocol-Version is for requests after initialization).
	header := upstreamside.IdentityHeader(r.Header, "Mcp-Protocol-Version")
	var a *upstreamside.Answer
	if era, err := f.Up.Era(r.Context(), core.ForwardedAuth(r)); err == nil && era.Stateless {
		// A stateless upstream: a session of its own only if it gives one
		// (a server of both eras may); else the gateway is the session
		// (stateless.go).
		if a = f.upstreamSession(r, msg, header, body); a == nil {
			f.held.initializeStateless(w, r, msg, params, asked)
			return
		}
	} else if a = f.Up.ForwardForRewrite(w, r, msg, header, body); a == nil {
		return
	}
	defer a.Close()
	s, out, ok := f.presentSession(r, a, asked, clientCaps)
	if !ok {
		a.Write(w, r, f.Log, nil)
		return
	}
	if err := f.sessions.record(r.Context(), s); err != nil {
		f.unrecorded(w, r, msg, a, s, err)
		return
	}
	f.Log.Debug().Str("op", "initialize").Str("client_version", s.ClientVersion).
		Str("upstream_version", s.UpstreamVersion).Msg("session recorded")
	a.Write(w, r, f.Log, out)
}

// initializeBody is the initialize request sent upstream: the client's
// capabilities.tasks dropped (the upstream must not create client-side
// tasks through the gateway), or, for a client without tasks that may get
// the fallback task tools, elicitation and sampling declared: it answers
// their questions with task_answer even without them, so the upstream must
// be willing to ask.
func (f *Front) initializeBody(msg *mcpwire.Message, params map[string]json.RawMessage, asked string) []byte {
	caps := params["capabilities"]
	switch stripped, ok := withoutTasks(caps); {
	case ok:
		caps = stripped
	case f.Fallback != nil && (asked == core.Version2025 || upstreamside.Frontable[asked]):
		asking, added := core.WithInputCaps(caps)
		if !added {
			return msg.Raw
		}
		caps = asking
	default:
		return msg.Raw
	}
	params["capabilities"] = caps
	if b, err := withParams(msg.Raw, params); err == nil {
		return b
	}
	return msg.Raw
}

// presentSession reads the upstream's initialize answer a: the session it
// makes (nil for one the gateway leaves alone) and the answer as the
// client sees it. ok is false when a goes to the client unchanged.
func (f *Front) presentSession(r *http.Request, a *upstreamside.Answer, asked string, clientCaps json.RawMessage) (s *sessionInfo, out json.RawMessage, ok bool) {
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	sid := a.Resp.Header.Get("Mcp-Session-Id")
	if a.Result == nil || json.Unmarshal(a.Result, &res) != nil || sid == "" {
		return nil, nil, false
	}
	var err error
	switch {
	case res.ProtocolVersion == core.Version2025 || (asked == core.Version2025 && upstreamside.Frontable[res.ProtocolVersion]):
		s = newSessionInfo(sid, core.Version2025, res.ProtocolVersion, clientCaps)
		out, err = present2025(a.Msg, a.Result, res.Capabilities, f.Fallback != nil && s.noTasks)
	case f.Fallback != nil && (upstreamside.Frontable[res.ProtocolVersion]):
		// An older client: recorded only for the fallback task tools, so
		// that every replica knows its capabilities and that it may see
		// them (fallback.go). Its version is left as it is.
		s = newSessionInfo(sid, res.ProtocolVersion, res.ProtocolVersion, clientCaps)
		out, err = presentListChanged(a.Msg, a.Result, res.Capabilities)
	default:
		return nil, nil, false
	}
	if err != nil {
		f.Log.Warn().Str("op", "initialize").Err(err).Msg("cannot add the gateway's capabilities; the session stays pass-through")
		return nil, nil, false
	}
	f.Decider.LearnServerCaps(r.Context(), res.Capabilities) // native tools need capabilities.tasks too
	return s, out, true
}

// unrecorded answers an initialize whose session s could not be recorded
// (err): a session for the fallback tools only stays a plain session, as
// without them; a 2025-11-25 session is closed upstream and refused.
func (f *Front) unrecorded(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, a *upstreamside.Answer, s *sessionInfo, err error) {
	e := core.RPCError(err, core.Era2025)
	f.Log.Warn().Str("op", "initialize").Err(err).Msg(e.Message)
	if !s.tasks2025() {
		a.Write(w, r, f.Log, nil) // pass-through
		return
	}
	f.closeOrphan(r, s)
	mcpwire.WriteError(w, msg.ID, e) // without the session header: the session is not usable
}

// present2025 returns the response message with protocolVersion
// 2025-11-25 and capabilities.tasks set in its result, and
// capabilities.tools.listChanged when the session may see the fallback
// task tools appear.
func present2025(msg, result, caps json.RawMessage, listChanged bool) (json.RawMessage, error) {
	if len(caps) == 0 || string(caps) == "null" {
		caps = json.RawMessage("{}")
	}
	caps, err := mcpwire.WithMember(caps, "tasks", tasksCapability)
	if err != nil {
		return nil, err
	}
	if listChanged {
		if caps, err = withToolsListChanged(caps); err != nil {
			return nil, err
		}
	}
	if result, err = mcpwire.WithMember(result, "capabilities", caps); err != nil {
		return nil, err
	}
	if result, err = mcpwire.WithMember(result, "protocolVersion", json.RawMessage(`"`+core.Version2025+`"`)); err != nil {
		return nil, err
	}
	return mcpwire.WithMember(msg, "result", result)
}

// presentListChanged returns the response message with
// capabilities.tools.listChanged set in its result.
func presentListChanged(msg, result, caps json.RawMessage) (json.RawMessage, error) {
	if len(caps) == 0 || string(caps) == "null" {
		caps = json.RawMessage("{}")
	}
	caps, err := withToolsListChanged(caps)
	if err != nil {
		return nil, err
	}
	if result, err = mcpwire.WithMember(result, "capabilities", caps); err != nil {
		return nil, err
	}
	return mcpwire.WithMember(msg, "result", result)
}

// withToolsListChanged sets tools.listChanged in server capabilities caps:
// the gateway sends notifications/tools/list_changed when the fallback
// tools appear (MCP 2025-11-25, Tools, "Capabilities").
func withToolsListChanged(caps json.RawMessage) (json.RawMessage, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(caps, &c); err != nil || c == nil {
		return nil, errors.New("capabilities is not an object")
	}
	tools := c["tools"]
	if len(tools) == 0 || string(tools) == "null" {
		tools = json.RawMessage("{}")
	}
	tools, err := mcpwire.WithMember(tools, "listChanged", json.RawMessage("true"))
	if err != nil {
		return nil, err
	}
	return mcpwire.WithMember(caps, "tools", tools)
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
	return mcpwire.WithMember(raw, "params", p)
}

// closeOrphan ends the upstream session of an initialize the gateway could
// not record, best effort: the client never learns its id.
func (f *Front) closeOrphan(r *http.Request, s *sessionInfo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), core.StoreTimeout)
	defer cancel()
	header := http.Header{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		header["Authorization"] = v
	}
	if err := f.Up.CloseSession(ctx, &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: header}); err != nil {
		f.Log.Debug().Str("op", "initialize").Err(err).Msg("cannot close the unrecorded upstream session")
	}
}

// upstreamSession sends initialize to a stateless upstream and returns its
// answer if it opened a session (a server of both eras), else nil.
func (f *Front) upstreamSession(r *http.Request, msg *mcpwire.Message, header http.Header, body []byte) *upstreamside.Answer {
	resp, err := f.Up.Post(obs.MethodCtx(r, msg), header, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	if resp.Header.Get("Mcp-Session-Id") == "" || !upstreamside.Rewritable(resp) {
		resp.Body.Close()
		return nil
	}
	a, err := upstreamside.ReadAnswer(resp, msg.ID)
	if err != nil || a.Result == nil {
		if a != nil {
			a.Close()
		}
		return nil
	}
	return a
}
