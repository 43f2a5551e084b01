package gateway

// The upstream's era, and server/discover (SEP-2575 "Discovery for Server
// Capabilities"; DiscoverResult in schema-2026-07-28.ts).
//
// The era is a property of the upstream, not of a request
// (versioning-2026-07-28 "Backward Compatibility"): the first modern request
// probes with server/discover at 2026-07-28, and the answer is kept for the
// life of the process. A DiscoverResult listing 2026-07-28 means a modern
// upstream; any other answer the upstream gives (a JSON-RPC error such as
// -32022 without 2026-07-28, -32601, an HTTP 4xx without one) means a legacy
// one. No answer (unreachable, 5xx, 401) decides nothing and is retried by
// the next request. When a later answer contradicts the era (a modern
// request refused the way a legacy server refuses, an initialize refused),
// the era is forgotten and probed again.
//
// server/discover itself:
//
//	modern upstream: the client's discover is forwarded; its result gains
//	                 extensions["io.modelcontextprotocol/tasks"] and the
//	                 gateway's supportedVersions
//	legacy upstream: built from the initialize result of the owner's held
//	                 session (held.go): capabilities (without the legacy
//	                 tasks and logging ones) plus the extension, instructions,
//	                 serverInfo in _meta; nothing is initialized per discover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/upstream"
)

const (
	// eraProbeTimeout bounds the server/discover probe.
	eraProbeTimeout = 10 * time.Second
	// discoverTTL is the ttlMs of a DiscoverResult the gateway builds: the
	// capabilities of a legacy upstream change only when it is redeployed.
	discoverTTL = 5 * time.Minute
)

// gatewayInfo is the Implementation the gateway names itself with upstream.
var gatewayInfo = json.RawMessage(`{"name":"taskgate","version":"1.0.0"}`)

// modernFront is the Handler's state for the 2026-07-28 front. The zero
// value is ready to use.
type modernFront struct {
	mu        sync.Mutex
	era       *upstreamEra  // nil until probed
	detecting chan struct{} // closed when the probe in flight ends
	held      heldCache     // held.go
}

// upstreamEra is what the probe learned.
type upstreamEra struct {
	modern   bool
	versions []string // a modern upstream's supportedVersions
}

// upstreamEra returns the upstream's era, probing once per process (one
// probe at a time; concurrent callers wait for it). auth is sent with the
// probe, for upstreams that want credentials on every request.
func (h *Handler) upstreamEra(ctx context.Context, auth http.Header) (*upstreamEra, error) {
	f := &h.modern
	for {
		f.mu.Lock()
		if f.era != nil {
			era := f.era
			f.mu.Unlock()
			return era, nil
		}
		if ch := f.detecting; ch != nil {
			f.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		f.detecting = ch
		f.mu.Unlock()

		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eraProbeTimeout)
		era, err := h.probeEra(pctx, auth)
		cancel()
		f.mu.Lock()
		if err == nil {
			f.era = era
		}
		f.detecting = nil
		close(ch)
		f.mu.Unlock()
		if err != nil {
			h.log.Warn().Str("op", "era").Err(err).Msg("cannot tell the upstream's protocol era; will probe again")
			return nil, err
		}
		h.log.Info().Str("op", "era").Bool("modern", era.modern).Strs("versions", era.versions).Msg("upstream era detected")
		return era, nil
	}
}

// forgetEra drops the known era, if it is still the one the caller used
// (was; nil: whatever it is), so the next request probes again.
func (h *Handler) forgetEra(was *upstreamEra) {
	f := &h.modern
	f.mu.Lock()
	if f.era == was || was == nil {
		f.era = nil
	}
	f.mu.Unlock()
	h.log.Info().Str("op", "era").Msg("the upstream answered unlike its era; probing again")
}

// knownEra is the era if probed, else nil.
func (h *Handler) knownEra() *upstreamEra {
	f := &h.modern
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.era
}

// probeEra sends server/discover at 2026-07-28 and classifies the answer.
func (h *Handler) probeEra(ctx context.Context, auth http.Header) (*upstreamEra, error) {
	params := mustJSON(map[string]any{"_meta": map[string]any{
		metaProtocolVersion: modernVersion,
		metaClientInfo:      gatewayInfo,
		metaClientCaps:      map[string]any{},
	}})
	sess := &upstream.Session{ProtocolVersion: modernVersion, Header: auth}
	resp, err := h.up.Call(ctx, sess, &jsonrpc.Request{ID: newUpstreamID(), Method: "server/discover", Params: params}, upstream.CallOptions{})
	if err != nil {
		var se *upstream.StatusError
		if errors.As(err, &se) && refusesEra(se.Status) {
			return &upstreamEra{}, nil // a 4xx without a JSON-RPC error: not a modern server
		}
		return nil, err
	}
	if resp.Error != nil {
		return &upstreamEra{}, nil
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(resp.Result, &res) != nil || !slices.Contains(res.SupportedVersions, modernVersion) {
		return &upstreamEra{}, nil
	}
	return &upstreamEra{modern: true, versions: res.SupportedVersions}, nil
}

// refusesEra reports whether an HTTP status without a JSON-RPC body says
// "I do not speak this" (versus "not now" or "who are you").
func refusesEra(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// supportedVersions are the versions the gateway serves, newest first:
// 2026-07-28 statelessly, and through initialize the legacy versions the
// upstream takes (2025-11-25 at least, which the gateway presents in front
// of 2025-06-18 and 2025-03-26 upstreams too). extra adds versions known to
// work (the version of a held session).
func (h *Handler) supportedVersions(extra ...string) []string {
	vs := []string{modernVersion}
	era := h.knownEra()
	switch {
	case era != nil && era.modern:
		for _, v := range era.versions {
			if v < modernVersion {
				vs = append(vs, v)
			}
			if frontable[v] {
				vs = append(vs, legacyVersion)
			}
		}
	default:
		vs = append(vs, legacyVersion)
	}
	vs = append(vs, extra...)
	slices.Sort(vs)
	vs = slices.Compact(vs)
	slices.Reverse(vs)
	return vs
}

// serveDiscover answers server/discover.
func (h *Handler) serveDiscover(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	auth := forwardedAuth(r)
	for attempt := 0; ; attempt++ {
		era, err := h.upstreamEra(r.Context(), auth)
		if err != nil {
			h.modernFailure(w, r, msg, err)
			return
		}
		if !era.modern {
			h.discoverLegacy(w, r, msg)
			return
		}
		resp, contradicted, err := h.postModern(r.WithContext(methodCtx(r, msg)), withoutTasksExtension(msg, mr))
		if err != nil {
			h.modernFailure(w, r, msg, err)
			return
		}
		if contradicted && attempt == 0 {
			resp.Body.Close()
			h.forgetEra(era)
			continue
		}
		h.discoverModern(w, r, msg, resp)
		return
	}
}

// discoverModern relays a modern upstream's DiscoverResult with the
// extension and the gateway's versions added; anything else as it is.
func (h *Handler) discoverModern(w http.ResponseWriter, r *http.Request, msg *message, resp *http.Response) {
	if !rewritable(resp) {
		h.relay(w, r, resp)
		return
	}
	a, err := readAnswer(resp, msg.ID)
	if err != nil {
		h.modernFailure(w, r, msg, err)
		return
	}
	defer a.close()
	if a.result == nil {
		a.write(w, r, h, nil)
		return
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(a.result, &res) != nil || res == nil {
		a.write(w, r, h, nil)
		return
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res["capabilities"], &caps)
	res["capabilities"] = mustJSON(withTasksExtension(caps))
	res["supportedVersions"] = mustJSON(h.supportedVersions())
	setDefault(res, "resultType", `"complete"`)
	setDefault(res, "ttlMs", "0")
	setDefault(res, "cacheScope", `"private"`)
	out, err := withMember(a.msg, "result", mustJSON(res))
	if err != nil {
		out = nil
	}
	a.write(w, r, h, out)
}

// discoverLegacy builds the DiscoverResult of a legacy upstream from the
// initialize result of the owner's held session.
func (h *Handler) discoverLegacy(w http.ResponseWriter, r *http.Request, msg *message) {
	held, err := h.heldSession(r.Context(), ownerOf(r), forwardedAuth(r))
	if err != nil {
		h.modernFailure(w, r, msg, err)
		return
	}
	var init struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage            `json:"serverInfo"`
		Instructions    string                     `json:"instructions"`
	}
	_ = json.Unmarshal(held.Init, &init)
	// The upstream's own tasks are not relayed (the gateway is the tasks
	// server), and its logging is session-wide, not per request.
	delete(init.Capabilities, "tasks")
	delete(init.Capabilities, "logging")
	scope := "public"
	if r.Header.Get("Authorization") != "" {
		scope = "private" // what this upstream offers may depend on who asks
	}
	res := map[string]any{
		"resultType":        "complete",
		"supportedVersions": h.supportedVersions(held.ProtocolVersion),
		"capabilities":      withTasksExtension(init.Capabilities),
		"ttlMs":             discoverTTL.Milliseconds(),
		"cacheScope":        scope,
	}
	if init.Instructions != "" {
		res["instructions"] = init.Instructions
	}
	if isObject(init.ServerInfo) {
		res["_meta"] = map[string]json.RawMessage{metaServerInfo: init.ServerInfo}
	}
	writeResult(w, msg.ID, res)
}

// withTasksExtension returns server capabilities with the tasks extension
// added to extensions (ext-tasks-spec "Capability Negotiation").
func withTasksExtension(caps map[string]json.RawMessage) map[string]json.RawMessage {
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(caps["extensions"], &ext)
	if ext == nil {
		ext = map[string]json.RawMessage{}
	}
	ext[tasksExtension] = json.RawMessage("{}")
	caps["extensions"] = mustJSON(ext)
	return caps
}

func setDefault(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

// modernFailure answers a modern request whose upstream side failed.
func (h *Handler) modernFailure(w http.ResponseWriter, r *http.Request, msg *message, err error) {
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	e := modernRPCError(err)
	h.log.Warn().Str("op", "forward").Str("method", msg.method()).Msg(e.Message)
	writeModernError(w, msg.ID, e)
}

// modernRPCError is rpcError, except that an upstream's HTTP 4xx without a
// JSON-RPC answer (how a legacy server refuses a request it cannot handle,
// or credentials it does not accept) keeps its status.
func modernRPCError(err error) *rpcErr {
	var se *upstream.StatusError
	if errors.As(err, &se) && se.Status >= 400 && se.Status < 500 {
		return newRPCErr(se.Status, codeInvalidRequest, "Invalid Request: "+se.Error())
	}
	return rpcError(err)
}

// modernUpstreamHeader is the header a modern request is forwarded with:
// the client's, without the legacy session and resumption headers, and with
// an Mcp-Name (already checked against the body) that was Base64-encoded
// needlessly sent plain: upstreams that compare it without decoding
// (go-sdk v1.8.0) then accept it too.
func modernUpstreamHeader(r *http.Request) http.Header {
	out := make(http.Header, len(r.Header))
	for k, vv := range r.Header {
		out[k] = vv
	}
	delete(out, "Mcp-Session-Id")
	delete(out, "Last-Event-Id")
	if v := out["Mcp-Name"]; len(v) == 1 && strings.HasPrefix(v[0], "=?base64?") {
		if name, ok := decodeHeaderValue(v[0]); ok && upstream.HeaderValue(name) == name {
			out["Mcp-Name"] = []string{name}
		}
	}
	return out
}

// postModern forwards body to a modern upstream with the client's headers.
// A 400, 404 or 405 answer is read (it is small) to see whether it is a
// modern server's error or the refusal of a server that is not modern
// (contradicted); either way the response returned can still be relayed.
func (h *Handler) postModern(r *http.Request, body []byte) (resp *http.Response, contradicted bool, err error) {
	resp, err = h.up.Forward(r.Context(), http.MethodPost, modernUpstreamHeader(r), bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
	default:
		return resp, false, nil
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	return resp, !isModernError(data), nil
}

// isModernError reports whether body is a JSON-RPC error a 2026-07-28
// server would send: any JSON-RPC error, except an unsupported-version
// error that does not list 2026-07-28 (a legacy server's answer).
func isModernError(body []byte) bool {
	var m struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return false
	}
	return m.Error.Code != codeUnsupportedVersion || slices.Contains(m.Error.Data.Supported, modernVersion)
}

// forwardToModern relays a modern message to a modern upstream and its
// answer back untouched (streams flushed as they come). If the upstream
// refuses it the way a legacy server would, the era is probed again and
// the message sent by the new era, once; era is the one the caller used
// (nil: do not probe again).
func (h *Handler) forwardToModern(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq, era *upstreamEra) {
	start := time.Now()
	resp, contradicted, err := h.postModern(r.WithContext(methodCtx(r, msg)), withoutTasksExtension(msg, mr))
	if err != nil {
		if msg.kind == kindNotification && r.Context().Err() == nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		h.modernFailure(w, r, msg, err)
		return
	}
	if contradicted && era != nil {
		resp.Body.Close()
		h.forgetEra(era)
		era, err := h.upstreamEra(r.Context(), forwardedAuth(r))
		switch {
		case err != nil:
			h.modernFailure(w, r, msg, err)
		case era.modern:
			h.forwardToModern(w, r, msg, mr, nil)
		case msg.kind == kindNotification:
			w.WriteHeader(http.StatusAccepted)
		default:
			h.forwardToLegacy(w, r, msg, mr)
		}
		return
	}
	switch {
	case msg.learn != "":
		h.relayRequest(w, r, resp, msg, start)
	case msg.method() == "tools/list" && h.store != nil && rewritable(resp):
		// Read whole, to learn the tools' declarations (toolslist.go).
		a, err := readAnswer(resp, msg.ID)
		if err != nil {
			if r.Context().Err() == nil {
				h.modernFailure(w, r, msg, err)
			}
			return
		}
		defer a.close()
		h.learnToolsList(r.Context(), a.result)
		a.write(w, r, h, nil)
	default:
		h.relayRequest(w, r, resp, msg, start)
	}
}

// withoutTasksExtension returns msg's body with the tasks extension taken
// out of the client capabilities: the gateway is the client's tasks
// server, so an upstream that has tasks of its own must not create them.
func withoutTasksExtension(msg *message, mr *modernReq) []byte {
	if mr == nil || !mr.Tasks {
		return msg.raw
	}
	params, ok := stripTasksExtension(msg.Params)
	if !ok {
		return msg.raw
	}
	out, err := withMember(msg.raw, "params", params)
	if err != nil {
		return msg.raw
	}
	return out
}

// stripTasksExtension removes extensions[tasks] from params._meta's client
// capabilities; it reports whether it changed anything.
func stripTasksExtension(params json.RawMessage) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta == nil {
		return params, false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(meta[metaClientCaps], &caps) != nil || caps == nil {
		return params, false
	}
	var ext map[string]json.RawMessage
	if json.Unmarshal(caps["extensions"], &ext) != nil || ext == nil {
		return params, false
	}
	if _, ok := ext[tasksExtension]; !ok {
		return params, false
	}
	delete(ext, tasksExtension)
	if len(ext) == 0 {
		delete(caps, "extensions")
	} else {
		caps["extensions"] = mustJSON(ext)
	}
	meta[metaClientCaps] = mustJSON(caps)
	p["_meta"] = mustJSON(meta)
	return mustJSON(p), true
}
