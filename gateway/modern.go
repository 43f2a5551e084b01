package gateway

// The 2026-07-28 front: stateless requests (SEP-2575,
// ../shared/spec/sep-2575-stateless-mcp.md) on the same endpoint as the
// 2025-11-25 sessions, told apart per request (versioning-2026-07-28 "A
// dual-era server selects its behavior from how the client opens").
//
//	POST ──▶ isModern? ── no ──▶ legacy routing (initialize, sessions, …)
//	            │ yes
//	            ▼
//	         validateModern: MCP-Protocol-Version ≡ _meta protocolVersion,
//	            version served, clientCapabilities present, Mcp-Method ≡
//	            method, Mcp-Name ≡ params.name | uri | taskId
//	            ▼
//	         server/discover            → serveDiscover (discover.go)
//	         tools/call                 → serveModernToolsCall (tasks_modern.go)
//	         tasks/*                    → serveModernTasks
//	         subscriptions/listen       → serveListen
//	         initialize, ping, …        → -32601 (not in 2026-07-28)
//	         anything else              → forwardModern: to a modern upstream
//	                                      as is, or on the owner's held session
//	                                      of a legacy upstream (held.go)
//
// Errors a modern client gets carry the HTTP status the 2026-07-28
// transport prescribes (modernStatus): 400 for -32602, -32020, -32021,
// -32022 and a malformed request; 404 for -32601.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// MCP error codes of the 2026-07-28 schema (schema-2026-07-28.ts; the
// final schema wins over SEP prose). codeMissingCapability (-32021) is in
// tasks_modern.go.
const (
	codeHeaderMismatch     = -32020 // HTTP headers disagree with the body, or a required one is missing
	codeUnsupportedVersion = -32022 // data: {supported, requested}
)

// tasksExtension is the SEP-2663 extension identifier.
const tasksExtension = "io.modelcontextprotocol/tasks"

// modernVersion is the one stateless protocol version the gateway serves.
const modernVersion = "2026-07-28"

// Per-request _meta keys (RequestMetaObject) and the result's server identity.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
)

// modernReq is a validated 2026-07-28 request (SEP-2575 per-request _meta).
type modernReq struct {
	Version    string          // _meta protocolVersion
	ClientCaps json.RawMessage // _meta clientCapabilities, verbatim
	Tasks      bool            // clientCapabilities.extensions declares the tasks extension
}

// legacyOnly are the methods 2026-07-28 removed (SEP-2575 "Deprecated and
// Removed RPCs"): a modern request for one gets -32601. initialize is here:
// only an initialize without modern _meta selects the legacy era.
var legacyOnly = map[string]bool{
	"initialize":                       true,
	"notifications/initialized":        true,
	"ping":                             true,
	"logging/setLevel":                 true,
	"resources/subscribe":              true,
	"resources/unsubscribe":            true,
	"notifications/roots/list_changed": true,
}

// metaVersionKey is searched for in the raw params before any decoding, so
// legacy traffic pays one bytes.Contains, not a JSON decode.
var metaVersionKey = []byte(`"` + metaProtocolVersion + `"`)

// isModern reports whether msg is a 2026-07-28 (stateless) message. The rule:
//
//  1. only requests and notifications (a POSTed response or batch is legacy);
//  2. params._meta carries "io.modelcontextprotocol/protocolVersion" (any
//     value: an unsupported one is then answered -32022), whatever else the
//     request carries; or else
//  3. the request is not initialize, has no Mcp-Session-Id, and its
//     MCP-Protocol-Version header is 2026-07-28 or later (versions are dates,
//     so string order is age order); such a request without _meta is
//     answered -32602 rather than passed to the upstream unvalidated.
//
// Everything else (initialize, anything on a legacy session, older clients
// with no or an older header) is legacy and routed as before.
func isModern(r *http.Request, msg *message) bool {
	if msg.kind != kindRequest && msg.kind != kindNotification {
		return false
	}
	if bytes.Contains(msg.Params, metaVersionKey) {
		if _, ok := msg.requestMeta()[metaProtocolVersion]; ok {
			return true
		}
	}
	if msg.method() == "initialize" || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	return r.Header.Get("Mcp-Protocol-Version") >= modernVersion
}

// requestMeta returns params._meta as raw members (nil when absent or not
// an object).
func requestMeta(params json.RawMessage) map[string]json.RawMessage {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta
}

// serveModern validates a modern message and routes it.
func (h *Handler) serveModern(w http.ResponseWriter, r *http.Request, msg *message) {
	mr, e := h.validateModern(r, msg)
	if e != nil {
		h.log.Debug().Str("op", "validate").Str("method", msg.method()).Int("code", e.Code).Msg(e.Message)
		if msg.kind == kindNotification {
			msg.ID = nil
		}
		writeModernError(w, msg.ID, e)
		return
	}
	if msg.kind == kindNotification {
		h.modernNotification(w, r, msg)
		return
	}
	switch method := msg.method(); method {
	case "server/discover":
		h.serveDiscover(w, r, msg, mr)
	case "tools/call":
		h.serveModernToolsCall(w, r, msg, mr)
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		h.serveModernTasks(w, r, msg, mr)
	case "subscriptions/listen":
		h.serveListen(w, r, msg, mr)
	default:
		if legacyOnly[method] {
			writeModernError(w, msg.ID, newRPCErr(http.StatusNotFound, codeMethodNotFound,
				"Method not found: "+method+" is not part of protocol version "+mr.Version))
			return
		}
		h.forwardModern(w, r, msg, mr)
	}
}

// validateModern checks a modern message against the 2026-07-28 rules
// (streamable-http-2026-07-28 "Server Validation", SEP-2575 "Per-Request
// Metadata Schema").
func (h *Handler) validateModern(r *http.Request, msg *message) (*modernReq, *rpcErr) {
	bad := func(code int, text string) (*modernReq, *rpcErr) {
		return nil, newRPCErr(http.StatusBadRequest, code, text)
	}
	// Decoded once per message, shared with isModern and serveModernTasks
	// (fastpath.go); absent or null params leave p zero.
	p, err := msg.modernParams()
	if err != nil {
		return bad(codeInvalidParams, "Invalid params: params must be an object, with an object _meta and string name, uri, taskId")
	}
	header := r.Header.Get("Mcp-Protocol-Version")
	var version string
	rawVersion, hasVersion := p.Meta[metaProtocolVersion]
	if hasVersion && !plainString(rawVersion, &version) && json.Unmarshal(rawVersion, &version) != nil {
		return bad(codeInvalidParams, "Invalid params: _meta "+metaProtocolVersion+" must be a string")
	}
	notification := msg.kind == kindNotification
	switch {
	case !notification && header == "":
		return bad(codeHeaderMismatch, "Header mismatch: the MCP-Protocol-Version header is required")
	case !notification && !hasVersion:
		return bad(codeInvalidParams, "Invalid params: _meta "+metaProtocolVersion+" is required")
	case hasVersion && header != "" && header != version:
		return bad(codeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header value '"+header+
			"' does not match body value '"+version+"'")
	}
	if version == "" {
		version = header
	}
	if version != modernVersion {
		e := newRPCErr(http.StatusBadRequest, codeUnsupportedVersion, "Unsupported protocol version: "+version)
		e.Data = mustJSON(map[string]any{"supported": h.supportedVersions(), "requested": version})
		return nil, e
	}
	mr := &modernReq{Version: version}
	if !notification {
		caps, ok := p.Meta[metaClientCaps]
		if !ok || !isObject(caps) {
			return bad(codeInvalidParams, "Invalid params: _meta "+metaClientCaps+" is required and must be an object")
		}
		if info, ok := p.Meta[metaClientInfo]; ok && !isObject(info) {
			return bad(codeInvalidParams, "Invalid params: _meta "+metaClientInfo+" must be an object")
		}
		mr.ClientCaps = caps
		mr.Tasks = declaresTasks(caps)
	}
	// Mcp-Method on every request; Mcp-Name where the body has the name.
	method := msg.method()
	hm := r.Header.Values("Mcp-Method")
	switch {
	case len(hm) == 0 && !notification:
		return bad(codeHeaderMismatch, "Header mismatch: the Mcp-Method header is required")
	case len(hm) > 1 || (len(hm) == 1 && hm[0] != method):
		return bad(codeHeaderMismatch, "Header mismatch: Mcp-Method header value '"+strings.Join(hm, ", ")+
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
		// ext-tasks-spec "Routing Headers": clients MUST send it; checked
		// when sent, so a client that forgets still reaches its task.
		body = p.TaskID
	}
	hn := r.Header.Values("Mcp-Name")
	if body != nil && *body != "" {
		switch {
		case len(hn) == 0 && required:
			return bad(codeHeaderMismatch, "Header mismatch: the Mcp-Name header is required for "+method)
		case len(hn) > 1:
			return bad(codeHeaderMismatch, "Header mismatch: more than one Mcp-Name header")
		case len(hn) == 1:
			name, ok := decodeHeaderValue(hn[0])
			if !ok {
				return bad(codeHeaderMismatch, "Header mismatch: the Mcp-Name header has invalid characters or Base64")
			}
			if name != *body {
				return bad(codeHeaderMismatch, "Header mismatch: Mcp-Name header value '"+hn[0]+
					"' does not match body value '"+*body+"'")
			}
		}
	}
	return mr, nil
}

// decodeHeaderValue decodes an Mcp-Name or Mcp-Param-* value: the
// =?base64?…?= sentinel form is decoded (UTF-8), a plain value is taken as
// is ("Value Encoding"). It reports false for control characters, bad
// Base64 or non-UTF-8. A plain non-ASCII value is tolerated (go-sdk
// v1.8.0 clients send names unencoded) and compared as is.
func decodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "", false
		}
	}
	return v, true
}

// declaresTasks reports whether client capabilities declare the tasks
// extension (ext-tasks-spec "Capability Negotiation").
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
	ext, ok := c.Extensions[tasksExtension]
	return ok && isObject(ext)
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// modernStatus is the HTTP status of a JSON-RPC error for a 2026-07-28
// client (SEP-2575; streamable-http-2026-07-28): 404 for an unknown method,
// 400 for a request the server rejects as malformed, else 200.
func modernStatus(code int) int {
	switch code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case codeParseError, codeInvalidRequest, codeInvalidParams, codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// writeModernError writes e for a modern client: an e built with status
// 200 (or none) gets the status its code calls for.
func writeModernError(w http.ResponseWriter, id json.RawMessage, e *rpcErr) {
	if e.status == 0 || e.status == http.StatusOK {
		c := *e
		c.status = modernStatus(e.Code)
		e = &c
	}
	writeRPCError(w, id, e)
}

// modernNotification takes a modern client's notification. 2026-07-28
// defines none over HTTP (cancellation is closing the stream): a modern
// upstream gets it as is; for a legacy upstream it is accepted and dropped,
// as there is no request it could refer to there.
func (h *Handler) modernNotification(w http.ResponseWriter, r *http.Request, msg *message) {
	era, err := h.upstreamEra(r.Context(), forwardedAuth(r))
	if err == nil && era.modern {
		h.forwardToModern(w, r, msg, nil, era)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// forwardModern relays a modern request the gateway does not handle itself
// to the upstream by era and writes the answer back in the modern shape.
func (h *Handler) forwardModern(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	era, err := h.upstreamEra(r.Context(), forwardedAuth(r))
	switch {
	case err != nil:
		if r.Context().Err() == nil {
			e := rpcError(err)
			h.log.Warn().Str("op", "forward").Str("method", msg.method()).Msg(e.Message)
			writeModernError(w, msg.ID, e)
		}
	case era.modern:
		h.forwardToModern(w, r, msg, mr, era)
	default:
		h.forwardToLegacy(w, r, msg, mr)
	}
}

// plainString sets *s to the JSON string raw when it is quoted printable
// ASCII without escapes, which json.Unmarshal would decode to the same
// bytes, and reports whether it did.
func plainString(raw json.RawMessage, s *string) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	*s = string(raw[1 : len(raw)-1])
	return true
}
