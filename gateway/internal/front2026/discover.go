package front2026

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
)

// discoverTTL is the ttlMs of a DiscoverResult the gateway builds: the
// capabilities of a session upstream change only when it is redeployed.
const discoverTTL = 5 * time.Minute

// discover answers server/discover (SEP-2575, "Discovery for Server
// Capabilities"):
//
//	stateless upstream: the client's discover is forwarded; its result
//	                    gains extensions["io.modelcontextprotocol/tasks"]
//	                    and the gateway's supportedVersions
//	session upstream:   built from the initialize result of the owner
//	                    session (internal/upstreamside/owner.go): capabilities (without
//	                    the session-only tasks and logging ones) plus the
//	                    extension, instructions, serverInfo in _meta;
//	                    nothing is initialized per discover
func (f *Front) discover(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	auth := core.ForwardedAuth(r)
	for attempt := 0; ; attempt++ {
		era, err := f.Up.Era(r.Context(), auth)
		if err != nil {
			f.Up.StatelessFailure(w, r, msg, err)
			return
		}
		if !era.Stateless {
			f.discoverSession(w, r, msg)
			return
		}
		resp, contradicted, err := f.Up.PostStateless(r.WithContext(obs.MethodCtx(r, msg)), upstreamside.WithoutTasksExtension(msg, mr.declaresTasks()), false)
		if err != nil {
			f.Up.StatelessFailure(w, r, msg, err)
			return
		}
		if contradicted && attempt == 0 {
			resp.Body.Close()
			f.Up.ForgetEra(era)
			continue
		}
		f.discoverStateless(w, r, msg, resp)
		return
	}
}

// discoverStateless relays a stateless upstream's DiscoverResult with the
// extension and the gateway's versions added; anything else as it is.
func (f *Front) discoverStateless(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, resp *http.Response) {
	a := f.Up.StatelessAnswer(w, r, msg, resp)
	if a == nil {
		return
	}
	defer a.Close()
	if a.Result == nil {
		a.Write(w, r, f.Log, nil)
		return
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(a.Result, &res) != nil || res == nil {
		a.Write(w, r, f.Log, nil)
		return
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res["capabilities"], &caps)
	res["capabilities"] = mcpwire.MustMarshal(withTasksExtension(caps))
	res["supportedVersions"] = mcpwire.MustMarshal(f.Up.SupportedVersions())
	core.SetDefault(res, "resultType", `"complete"`)
	core.SetDefault(res, "ttlMs", "0")
	core.SetDefault(res, "cacheScope", `"private"`)
	out, err := mcpwire.WithMember(a.Msg, "result", mcpwire.MustMarshal(res))
	if err != nil {
		out = nil
	}
	a.Write(w, r, f.Log, out)
}

// discoverSession builds the DiscoverResult of a session upstream from
// the initialize result of the owner session.
func (f *Front) discoverSession(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	sess, err := f.Up.OwnerSession(r.Context(), core.SessionOwner(r), core.ForwardedAuth(r))
	if err != nil {
		f.Up.StatelessFailure(w, r, msg, err)
		return
	}
	var init struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage            `json:"serverInfo"`
		Instructions    string                     `json:"instructions"`
	}
	_ = json.Unmarshal(sess.Init, &init)
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
		"supportedVersions": f.Up.SupportedVersions(sess.ProtocolVersion),
		"capabilities":      withTasksExtension(init.Capabilities),
		"ttlMs":             discoverTTL.Milliseconds(),
		"cacheScope":        scope,
	}
	if init.Instructions != "" {
		res["instructions"] = init.Instructions
	}
	if mcpwire.IsObject(init.ServerInfo) {
		res["_meta"] = map[string]json.RawMessage{core.MetaServerInfo: init.ServerInfo}
	}
	mcpwire.WriteResult(w, msg.ID, res)
}

// withTasksExtension returns server capabilities with the tasks extension
// added to extensions (SEP-2663, "Capability Negotiation").
func withTasksExtension(caps map[string]json.RawMessage) map[string]json.RawMessage {
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(caps["extensions"], &ext)
	if ext == nil {
		ext = map[string]json.RawMessage{}
	}
	ext[core.TasksExtension] = json.RawMessage("{}")
	caps["extensions"] = mcpwire.MustMarshal(ext)
	return caps
}
