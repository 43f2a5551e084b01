package front2026

// A POST, told apart (IsStateless) and routed (Serve):
//
//	POST ──▶ IsStateless? ── no ──▶ the 2025-11-25 front, or pass-through
//	            │ yes
//	            ▼
//	         validate: MCP-Protocol-Version ≡ _meta protocolVersion,
//	            version served, clientCapabilities present, Mcp-Method ≡
//	            method, Mcp-Name ≡ params.name | uri | taskId
//	            ▼
//	         server/discover            → discover (discover.go)
//	         tools/call                 → toolsCall (call.go)
//	         tasks/*                    → tasks (tasks.go)
//	         subscriptions/listen       → listen (listen.go)
//	         initialize, ping, …        → -32601 (not in 2026-07-28)
//	         anything else              → forward: to a stateless upstream
//	                                      as is, or on the owner session of
//	                                      a session upstream
//
// Errors a 2026-07-28 client gets carry the HTTP status its transport
// prescribes (mcpwire.StatelessStatus): 400 for -32602, -32020, -32021,
// -32022 and a malformed request; 404 for -32601.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// removedIn2026 are the methods 2026-07-28 removed (SEP-2575 "Deprecated and
// Removed RPCs"): a 2026-07-28 request for one gets -32601. initialize is
// here: only an initialize without 2026-07-28 _meta selects the session era.
var removedIn2026 = map[string]bool{
	"initialize":                       true,
	"notifications/initialized":        true,
	"ping":                             true,
	"logging/setLevel":                 true,
	"resources/subscribe":              true,
	"resources/unsubscribe":            true,
	"notifications/roots/list_changed": true,
}

// metaVersionKey is searched for in the raw params before any decoding, so
// session traffic pays one bytes.Contains, not a JSON decode.
var metaVersionKey = []byte(`"` + core.MetaProtocolVersion + `"`)

// IsStateless reports whether msg is a 2026-07-28 (stateless) message. The
// rule:
//
//  1. only requests and notifications (a POSTed response or batch is not);
//  2. params._meta carries "io.modelcontextprotocol/protocolVersion" (any
//     value: an unsupported one is then answered -32022), whatever else the
//     request carries; or else
//  3. the request is not initialize, has no Mcp-Session-Id, and its
//     MCP-Protocol-Version header is 2026-07-28 or later (versions are dates,
//     so string order is age order); such a request without _meta is
//     answered -32602 rather than passed to the upstream unvalidated.
//
// Everything else (initialize, anything on a session, older clients with no
// or an older header) goes to the 2025-11-25 front or passes through.
func IsStateless(r *http.Request, msg *mcpwire.Message) bool {
	if msg.Kind != mcpwire.KindRequest && msg.Kind != mcpwire.KindNotification {
		return false
	}
	if bytes.Contains(msg.Params, metaVersionKey) {
		if _, ok := msg.Meta()[core.MetaProtocolVersion]; ok {
			return true
		}
	}
	if msg.MethodName() == "initialize" || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	return r.Header.Get("Mcp-Protocol-Version") >= core.Version2026
}

// Serve validates a 2026-07-28 message and routes it.
func (f *Front) Serve(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	mr, e := f.validate(r, msg)
	if e != nil {
		f.Log.Debug().Str("op", "validate").Str("method", msg.MethodName()).Int("code", e.Code).Msg(e.Message)
		if msg.Kind == mcpwire.KindNotification {
			msg.ID = nil
		}
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	if msg.Kind == mcpwire.KindNotification {
		f.notification(w, r, msg)
		return
	}
	switch method := msg.MethodName(); method {
	case "server/discover":
		f.discover(w, r, msg, mr)
	case "tools/call":
		f.toolsCall(w, r, msg, mr)
	case "tools/list":
		f.toolsList(w, r, msg, mr)
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		f.tasks(w, r, msg, mr)
	case "subscriptions/listen":
		f.listen(w, r, msg, mr)
	default:
		if removedIn2026[method] {
			core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusNotFound, mcpwire.CodeMethodNotFound,
				"Method not found: "+method+" is not part of protocol version "+mr.Version))
			return
		}
		f.forward(w, r, msg, mr, "")
	}
}

// validate checks a 2026-07-28 message against the rules of MCP
// 2026-07-28, Streamable HTTP transport, "Server Validation", and SEP-2575,
// "Per-Request Metadata Schema".
func (f *Front) validate(r *http.Request, msg *mcpwire.Message) (*statelessReq, *mcpwire.Error) {
	bad := func(code int, text string) (*statelessReq, *mcpwire.Error) {
		return nil, mcpwire.NewError(http.StatusBadRequest, code, text)
	}
	// Decoded once per message, shared with isStateless and tasks; absent
	// or null params leave p zero.
	p, err := msg.RoutingParams()
	if err != nil {
		return bad(mcpwire.CodeInvalidParams, "Invalid params: params must be an object, with an object _meta and string name, uri, taskId")
	}
	header := r.Header.Get("Mcp-Protocol-Version")
	var version string
	rawVersion, hasVersion := p.Meta[core.MetaProtocolVersion]
	if hasVersion && !mcpwire.PlainString(rawVersion, &version) && json.Unmarshal(rawVersion, &version) != nil {
		return bad(mcpwire.CodeInvalidParams, "Invalid params: _meta "+core.MetaProtocolVersion+" must be a string")
	}
	notification := msg.Kind == mcpwire.KindNotification
	switch {
	case !notification && header == "":
		return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: the MCP-Protocol-Version header is required")
	case !notification && !hasVersion:
		return bad(mcpwire.CodeInvalidParams, "Invalid params: _meta "+core.MetaProtocolVersion+" is required")
	case hasVersion && header != "" && header != version:
		return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header value '"+header+
			"' does not match body value '"+version+"'")
	}
	if version == "" {
		version = header
	}
	if version != core.Version2026 {
		e := mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeUnsupportedVersion, "Unsupported protocol version: "+version)
		e.Data = mcpwire.MustMarshal(map[string]any{"supported": f.Up.SupportedVersions(), "requested": version})
		return nil, e
	}
	mr := &statelessReq{Version: version}
	if !notification {
		caps, ok := p.Meta[core.MetaClientCaps]
		if !ok || !mcpwire.IsObject(caps) {
			return bad(mcpwire.CodeInvalidParams, "Invalid params: _meta "+core.MetaClientCaps+" is required and must be an object")
		}
		if info, ok := p.Meta[core.MetaClientInfo]; ok && !mcpwire.IsObject(info) {
			return bad(mcpwire.CodeInvalidParams, "Invalid params: _meta "+core.MetaClientInfo+" must be an object")
		}
		mr.ClientCaps = caps
		mr.Tasks = declaresTasks(caps)
	}
	// Mcp-Method on every request; Mcp-Name where the body has the name.
	method := msg.MethodName()
	hm := r.Header.Values("Mcp-Method")
	switch {
	case len(hm) == 0 && !notification:
		return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: the Mcp-Method header is required")
	case len(hm) > 1 || (len(hm) == 1 && hm[0] != method):
		return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: Mcp-Method header value '"+strings.Join(hm, ", ")+
			"' does not match body value '"+method+"'")
	}
	var body *string
	required := false
	switch method {
	case "tools/call", "prompts/get":
		body, required = p.Name, true
	case "resources/read":
		body, required = p.URI, true
	case "tasks/get", "tasks/update", "tasks/cancel":
		// SEP-2663, "Routing Headers": clients MUST send it; checked
		// when sent, so a client that forgets still reaches its task.
		body = p.TaskID
	}
	hn := r.Header.Values("Mcp-Name")
	if body != nil && *body != "" {
		switch {
		case len(hn) == 0 && required:
			return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: the Mcp-Name header is required for "+method)
		case len(hn) > 1:
			return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: more than one Mcp-Name header")
		case len(hn) == 1:
			name, ok := core.DecodeHeaderValue(hn[0])
			if !ok {
				return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: the Mcp-Name header has invalid characters or Base64")
			}
			if name != *body {
				return bad(mcpwire.CodeHeaderMismatch, "Header mismatch: Mcp-Name header value '"+hn[0]+
					"' does not match body value '"+*body+"'")
			}
		}
	}
	return mr, nil
}

// declaresTasks reports whether client capabilities declare the tasks
// extension (SEP-2663, "Capability Negotiation").
func declaresTasks(caps json.RawMessage) bool {
	// A client sends the same capabilities on every request: the last
	// answer is remembered for those exact bytes (a pure function of them).
	if last := lastCaps.Load(); last != nil && last.caps == string(caps) {
		return last.tasks
	}
	tasks := declaresTasksDecode(caps)
	if len(caps) <= 4096 {
		lastCaps.Store(&capsAnswer{caps: string(caps), tasks: tasks})
	}
	return tasks
}

type capsAnswer struct {
	caps  string
	tasks bool
}

var lastCaps atomic.Pointer[capsAnswer]

func declaresTasksDecode(caps json.RawMessage) bool {
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	ext, ok := c.Extensions[core.TasksExtension]
	return ok && mcpwire.IsObject(ext)
}

// notification takes a 2026-07-28 client's notification. 2026-07-28
// defines none over HTTP (cancellation is closing the stream): a stateless
// upstream gets it as is; for a session upstream it is accepted and
// dropped, as there is no request it could refer to there.
func (f *Front) notification(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	for recheck := true; ; recheck = false {
		era, err := f.Up.Era(r.Context(), core.ForwardedAuth(r))
		if err != nil || !era.Stateless {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if f.Up.ForwardToStateless(w, r, msg, false, era, recheck, "") {
			return
		}
	}
}
