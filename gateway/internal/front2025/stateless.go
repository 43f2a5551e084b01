package front2025

// 2025-11-25 (and 2025-06-18, 2025-03-26) clients in front of a stateless
// 2026-07-28 upstream: the gateway is the session (issue: "protocol
// bridging both ways"). A stateless upstream has no initialize and no
// sessions (SEP-2575), and asks for input with input_required results
// instead of server→client requests (SEP-2322), so these clients would
// get no tasks and no input. Instead:
//
//	initialize         answered by the gateway from the upstream's
//	                   server/discover (capabilities, instructions,
//	                   serverInfo), with a session id it issues and records
//	                   in Redis (any replica serves the session)
//	each request       sent as a 2026-07-28 stateless request: _meta with the
//	                   protocol version, the client's info and capabilities
//	                   (from the session record), MCP-Protocol-Version,
//	                   Mcp-Method and Mcp-Name headers
//	tools/call         run by the runner as a task (the gateway's, shown or
//	                   not): the upstream's input_required rounds become
//	                   server→client requests on the call's stream (a plain
//	                   call) or on tasks/result (a task), their answers the
//	                   retry's inputResponses
//	ping, notifications   answered here
//	logging/setLevel,  kept in the session's record and applied to every
//	resources/(un)subscribe  request made for it, and to its GET stream
//	                   (stateless_stream.go)
//	GET                the session's stream: what the upstream's
//	                   subscriptions/listen delivers (list changes, resource
//	                   updates, log messages), merged with the gateway's
//	                   notifications of its tasks
//	DELETE             the session forgotten, its GET streams ended

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// heldSessions is the gateway as the session of 2025-11-25 (and older)
// clients in front of a stateless upstream: their initialize, each
// request made stateless, their tools/call run by the runner, their GET
// stream and DELETE. It reads what each session negotiated from the
// front's session table, and the front's tools/list rewriting (listTools).
type heldSessions struct {
	store     heldStore
	up        *upstreamside.Side
	runner    *runner.Runner
	decider   *decide.Decider
	fallback  *fallback.Tools // nil: off
	log       zerolog.Logger
	anonymous core.AnonymousTasks // the caps of sessions opened without Authorization
	sessions  *sessionTable
	// listTools is Front.toolsListResult: the upstream's tools/list as a
	// session sees it.
	listTools func(ctx context.Context, s *sessionInfo, upstream json.RawMessage, withFallback bool) (json.RawMessage, error)
}

// heldStore is what heldSessions needs of the task store: the held
// sessions' records, calls and announcements, the anonymous caps, and the
// tasks its calls run as.
type heldStore interface {
	Options() taskstore.Options
	Get(ctx context.Context, owner, id string) (*taskstore.Task, error)
	Watch(ctx context.Context, owner, id string) (*taskstore.Watch, error)
	RequestCancel(ctx context.Context, owner, id, message string) (*taskstore.Task, error)
	GetSession(ctx context.Context, id string) (*taskstore.Session, error)
	WatchSession(ctx context.Context, sessionID string) (*taskstore.Watch, error)
	PublishSession(ctx context.Context, sessionID string, msg []byte) error
	SetSessionLogLevel(ctx context.Context, id, level string) (bool, error)
	SessionLogLevel(ctx context.Context, id string) (string, error)
	SubscribeSession(ctx context.Context, id, uri string, on bool, max int) (bool, error)
	SetSessionCall(ctx context.Context, id, reqID, taskID string) error
	ClearSessionCall(ctx context.Context, id, reqID, taskID string) error
	SessionCall(ctx context.Context, id, reqID string) (string, error)
	AnnounceSession(ctx context.Context, id string, what taskstore.Status) error
	ReserveAnonymous(ctx context.Context, id, addr string, expiry time.Time, max, perAddr int) error
	ReleaseAnonymous(ctx context.Context, id, addr string) error
}

// emulated reports whether the gateway holds s itself, in front of a
// stateless upstream. Safe on nil.
func (s *sessionInfo) emulated() bool { return s != nil && s.UpstreamVersion == core.Version2026 }

// statelessVersions are the versions the gateway presents to a client of a
// stateless upstream; anything else asked gets 2025-11-25.
var statelessVersions = map[string]bool{core.Version2025: true, "2025-06-18": true, "2025-03-26": true}

// initializeStateless answers initialize for a stateless upstream.
func (h *heldSessions) initializeStateless(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, params map[string]json.RawMessage, asked string) {
	version := asked
	if !statelessVersions[version] {
		version = core.Version2025
	}
	if len(params["capabilities"])+len(params["clientInfo"]) > maxSessionRecord {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			fmt.Sprintf("initialize: capabilities and clientInfo take more than %d bytes", maxSessionRecord)))
		return
	}
	clientCaps, _ := withoutTasks(params["capabilities"])
	clientInfo := params["clientInfo"]
	if len(clientInfo) == 0 {
		clientInfo = json.RawMessage(`{"name":"unknown","version":"0"}`)
	}
	sess := statelessSession(r)
	discover := mcpwire.MustMarshal(map[string]any{"_meta": statelessMeta(clientInfo, clientCaps)})
	resp, ok := callFor(h.up, w, r, msg, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "server/discover", Params: discover}, nil)
	if !ok {
		return
	}
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		Instructions string                     `json:"instructions"`
		Meta         map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(resp.Result, &res)
	caps := map[string]json.RawMessage{}
	for k, v := range res.Capabilities {
		switch k {
		case "extensions", "tasks": // the upstream's extensions and tasks are not this session's
		default:
			// logging and resources.subscribe as the upstream declares
			// them: the gateway turns logging/setLevel and
			// resources/subscribe into its per-request log level and
			// listen filter (stateless_stream.go).
			caps[k] = v
		}
	}
	if version == core.Version2025 {
		caps["tasks"] = tasksCapability
	}
	serverInfo := res.Meta[core.MetaServerInfo]
	if len(serverInfo) == 0 {
		serverInfo = upstreamside.GatewayInfo
	}
	out := map[string]any{"protocolVersion": version, "capabilities": caps, "serverInfo": serverInfo}
	if res.Instructions != "" {
		out["instructions"] = res.Instructions
	}
	s := newSessionInfo(uuid.NewString(), version, core.Version2026, params["capabilities"])
	s.ClientInfo, s.Principal = clientInfo, core.AuthOwner(r)
	if s.Principal == "" {
		s.Addr = core.ClientAddr(r)
		// Anyone can open such a session: it counts against the anonymous
		// caps for its first idle lifetime, so one address cannot make
		// Redis hold sessions without end.
		err := core.ReserveAnonymous(context.WithoutCancel(r.Context()), h.store, h.anonymous, anonSessionSlot(s.ID), s.Addr, anonymousSessionTTL)
		if err != nil {
			h.log.Warn().Str("op", "initialize").Err(err).Msg("anonymous session refused")
			mcpwire.WriteError(w, msg.ID, anonymousSessionRefused(err))
			return
		}
	}
	if err := h.sessions.record(r.Context(), s); err != nil {
		if s.Principal == "" {
			h.releaseAnonymous(r, s)
		}
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return
	}
	h.log.Info().Str("op", "initialize").Str("version", version).Msg("session held by the gateway in front of a stateless upstream")
	w.Header().Set("Mcp-Session-Id", s.ID)
	mcpwire.WriteResult(w, msg.ID, out)
}

// callFor sends req upstream (up) on sess for the client's msg and returns the
// response when it is a result; a failure or the upstream's JSON-RPC
// error is answered to the client under msg's id (ok false).
// onNote, when set, gets the upstream's notifications on the way.
func callFor(up *upstreamside.Side, w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, sess *upstream.Session, req *jsonrpc.Request,
	onNote func(*jsonrpc.Request)) (resp *jsonrpc.Response, ok bool) {
	resp, err := up.Call(obs.MethodCtx(r, msg), sess, req, upstream.CallOptions{OnNotification: onNote})
	if err != nil {
		up.ForwardFailed(w, r, msg, err)
		return nil, false
	}
	if resp.Error != nil {
		mcpwire.WriteJSON(w, http.StatusOK, mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Error: mcpwire.MustMarshal(resp.Error)})
		return nil, false
	}
	return resp, true
}

// maxSessionRecord bounds what a session the gateway holds keeps of its
// client (capabilities and clientInfo, verbatim, for 24 h).
const maxSessionRecord = 64 << 10

// statelessMeta is the per-request _meta of a 2026-07-28 request made for
// a client: the protocol version, its info and its capabilities.
func statelessMeta(clientInfo, clientCaps json.RawMessage) map[string]json.RawMessage {
	if len(clientCaps) == 0 || string(clientCaps) == "null" {
		clientCaps = json.RawMessage(`{}`)
	}
	return map[string]json.RawMessage{
		core.MetaProtocolVersion: json.RawMessage(`"` + core.Version2026 + `"`),
		core.MetaClientInfo:      clientInfo,
		core.MetaClientCaps:      clientCaps,
	}
}

// statelessParams returns params as a 2026-07-28 request's for session s:
// _meta gains the protocol version, the client's info and capabilities,
// and the log level the client set, if any (other _meta keys, a
// progressToken say, are kept).
func statelessParams(params json.RawMessage, s *sessionInfo, level string) json.RawMessage {
	p := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if json.Unmarshal(params, &p) != nil || p == nil {
			return params
		}
	}
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(p["_meta"], &meta)
	caps, _ := withoutTasks(s.ClientCaps)
	for k, v := range statelessMeta(s.ClientInfo, caps) {
		meta[k] = v
	}
	if level != "" {
		meta[core.MetaLogLevel] = mcpwire.MustMarshal(level)
	}
	p["_meta"] = mcpwire.MustMarshal(meta)
	return mcpwire.MustMarshal(p)
}

// statelessSession is the upstream side of a request of r to a stateless
// upstream: no session, 2026-07-28, the client's Authorization.
func statelessSession(r *http.Request) *upstream.Session {
	return &upstream.Session{ProtocolVersion: core.Version2026, Header: core.ForwardedAuth(r)}
}

// serveEmulated serves a message of a session the gateway holds in front
// of a stateless upstream, and reports whether it did (else the 2025-11-25
// front goes on: tasks/*, the answers to input requests).
func (h *heldSessions) serveEmulated(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo) bool {
	if !s.ownedBy(r) {
		writeSessionNotFound(w)
		return true
	}
	switch msg.Kind {
	case mcpwire.KindNotification:
		// initialized, roots/list_changed: nothing upstream to tell (no
		// session there); cancelled: the plain call's task is cancelled.
		if msg.MethodName() == "notifications/cancelled" {
			h.cancelPlainCall(r, msg, s)
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case mcpwire.KindResponse:
		if core.IsInputID(msg.ID) {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case mcpwire.KindRequest:
	default:
		return false
	}
	switch method := msg.MethodName(); method {
	case "ping":
		mcpwire.WriteResult(w, msg.ID, json.RawMessage(`{}`))
	case "logging/setLevel":
		h.setLogLevel(w, r, msg, s)
	case "resources/subscribe", "resources/unsubscribe":
		h.subscribe(w, r, msg, s, method == "resources/subscribe")
	case "initialize":
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusBadRequest, mcpwire.CodeInvalidRequest, "the session is already initialized"))
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		if s.tasks2025() {
			return false
		}
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound, "Method not found: "+method))
	case "tools/call":
		h.emulatedCall(w, r, msg, s)
	default:
		h.emulatedForward(w, r, msg, s)
	}
	return true
}

// emulatedForward sends a request to the stateless upstream and answers
// with its response (tools/list rewritten as for any 2025-11-25 session).
func (h *heldSessions) emulatedForward(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo) {
	resp, ok := callFor(h.up, w, r, msg, statelessSession(r),
		&jsonrpc.Request{ID: core.NewUpstreamID(), Method: msg.MethodName(), Params: statelessParams(msg.Params, s, h.logLevelOf(r.Context(), s))},
		func(n *jsonrpc.Request) { // its log messages: to the session's GET stream
			if n.Method == "notifications/message" {
				_ = h.store.PublishSession(context.WithoutCancel(r.Context()), s.ID, mcpwire.Notification(n.Method, n.Params))
			}
		})
	if !ok {
		return
	}
	out := mcpwire.Response{JSONRPC: "2.0", ID: msg.ID}
	if core.IsInputRequired(resp) {
		// MRTR on prompts/get or resources/read: the gateway drives input
		// rounds for tools/call only.
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError,
			"the upstream asked for input to answer "+msg.MethodName()+"; taskgate relays the upstream's questions only during tools/call"))
		return
	}
	out.Result = withoutResultType(resp.Result)
	if msg.MethodName() == "tools/list" {
		if rewritten, err := h.listTools(r.Context(), s, out.Result, false); err == nil && rewritten != nil {
			out.Result = rewritten
		}
	}
	mcpwire.WriteJSON(w, http.StatusOK, out)
}

// withoutResultType drops the 2026-07-28 resultType a 2025-11-25 client
// does not know.
func withoutResultType(result json.RawMessage) json.RawMessage {
	if out, err := mcpwire.WithoutMember(result, "resultType"); err == nil {
		return out
	}
	return result
}

// emulatedCall runs a tools/call of a session the gateway holds: a task
// (task-augmented, 2025-11-25 session), or a plain call whose input rounds
// go to the client as server→client requests on the call's stream; both
// are the runner's, whose MRTR loop drives the stateless upstream.
func (h *heldSessions) emulatedCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo) {
	p, err := core.DecodeCall(msg.Params)
	if err != nil || p.Name == "" {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object with a tool name"))
		return
	}
	d, learn, ok := h.negotiateEmulated(w, r, msg, s, p)
	if !ok {
		return
	}
	ttl, params, e := core.TaskCall(p)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	params = statelessParams(params, s, h.logLevelOf(r.Context(), s))
	kind := runner.AdmitTask
	if p.Task == nil {
		kind = runner.AdmitCall // a plain call, held under a hidden task
	}
	slot, e := h.runner.Admit(r.Context(), core.Principal(r), kind)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	j := emulatedJob(r, s, params, learn, p.Task == nil)
	j.Slot = slot
	ttl = decide.TaskTTL(d, ttl, j.Owner)
	if core.AuthOwner(r) == "" {
		// Without Authorization the session is anyone's to open (the
		// gateway mints it): its tasks live, and are counted, as an
		// anonymous client's are.
		if ttl <= 0 || ttl > core.AnonymousTTL {
			ttl = core.AnonymousTTL
		}
		j.Id, j.Addr = uuid.NewString(), core.ClientAddr(r)
	}
	l := runner.LaunchSpec{Proto: taskstore.Protocol2025, Tool: p.Name, TTL: ttl, Poll: d.PollInterval}
	if p.Task == nil {
		h.emulatedPlainCall(w, r, msg, s, j, l)
		return
	}
	if err := h.runner.Launch(r.Context(), j, l); err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return
	}
	mcpwire.WriteResult(w, msg.ID, map[string]any{"task": core.ToTask2025(j.Task)})
}

// negotiateEmulated decides the call p ("Tool-Level Negotiation"): -32601
// for a plain call of a tool that requires a task, and for a task the tool
// does not support. false: it answered so.
func (h *heldSessions) negotiateEmulated(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, p *core.CallParams) (policy.Decision, string, bool) {
	kind := policy.ClientOlder
	if s.tasks2025() {
		kind = policy.Client2025
	}
	decl, listed := h.up.ToolDeclared(r.Context(), statelessSession(r), p.Name) // a client may call without listing
	c := h.decider.DecideDeclared(r.Context(), p.Name, decl, listed, kind)
	d, learn := c.Decision, c.Learn
	if p.Task != nil && !s.tasks2025() {
		p.Task = nil // an older client's stray param
	}
	switch {
	case p.Task == nil && d.TaskSupport == policy.TaskSupportRequired && s.tasks2025() && !(h.fallback != nil && s.noTasks):
		// (With the fallback tools a client without tasks sees such a
		// tool as "optional": its plain call runs, held as any plain call.)
		mcpwire.WriteError(w, msg.ID, errNeedsTask(p.Name))
		return d, learn, false
	case p.Task != nil && !d.TaskSupport.AllowsTask():
		mcpwire.WriteError(w, msg.ID, errNoTask(p.Name))
		return d, learn, false
	}
	return d, learn, true
}

// emulatedJob is the job of a call on session s to the stateless upstream;
// plain: a call without params.task, held under a hidden task.
func emulatedJob(r *http.Request, s *sessionInfo, params json.RawMessage, learn string, plain bool) *runner.Job {
	sess := statelessSession(r)
	j := &runner.Job{
		Owner:      core.OwnerOf(r),
		Sess:       sess,
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params},
		ClientCaps: s.ClientCaps,
		Client2026: &runner.Job2026{Target: &upstreamside.Target{Session: sess, Stateless: true}, Params: params},
		Learn:      learn,
		// Its notifications go to the session the gateway holds.
		ClientSession: s.ID,
	}
	if plain {
		// A plain call: the task is the gateway's alone (not listed, no
		// status notifications: no session to send them to), and the
		// call's stream carries its progress, its questions and, last,
		// its outcome.
		j.Hidden, j.ClientSession = true, ""
	}
	return j
}

// emulatedPlainCall launches the hidden task of a plain call and answers
// on the call's stream as the task goes (plainCallStream).
func (h *heldSessions) emulatedPlainCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, j *runner.Job, l runner.LaunchSpec) {
	var (
		untrack func()
		watch   *taskstore.Watch
		err     error
	)
	l.BeforeStart = func() {
		// Recorded before anything else: a notifications/cancelled the
		// client sends at once finds the call.
		untrack = h.trackPlainCall(r, msg, s, j.Task.ID)
		// Watched before the worker starts: its first progress is not
		// lost.
		watch, err = h.store.Watch(r.Context(), j.Owner, j.Task.ID)
	}
	if lerr := h.runner.Launch(r.Context(), j, l); lerr != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(lerr, core.Era2025))
		return
	}
	defer untrack()
	if err != nil {
		h.abandonCall(j.Owner, j.Task.ID, "the gateway could not follow the call: "+err.Error())
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return
	}
	defer watch.Close()
	h.plainCallStream(w, r, msg, j.Owner, j.Task.ID, watch)
}

// plainCallStream answers a plain call held under a task: the upstream's
// progress as it comes, its questions as server→client requests (their
// answers come back as POSTed responses, on any replica), a comment now
// and then while nothing else is sent, and the outcome as the call's
// response. A client that goes away cancels the call.
func (h *heldSessions) plainCallStream(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string, watch *taskstore.Watch) {
	ctx := r.Context()
	sse := mcpwire.NewWriter(w)
	tick := time.NewTicker(core.ResyncInterval(h.store))
	defer tick.Stop()
	sent := map[string]bool{}
	for {
		t, err := h.store.Get(ctx, owner, id)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			h.abandonCall(owner, id, clientLeft)
			return
		default:
			if e := core.RPCError(err, core.Era2025); e.Code != mcpwire.CodeInternalError || !sse.Started() {
				_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Error: mcpwire.MustMarshal(e)})
				return
			}
		}
		if t != nil && t.Status.Terminal() {
			// Messages the worker sent before the outcome come first.
			if relayUntilTerminal(ctx, watch, sse) != nil {
				return
			}
			_ = sse.Send(plainOutcome(msg.ID, t))
			return
		}
		if t != nil {
			for _, key := range core.SortedInputKeys(t.InputRequests) {
				if sent[key] {
					continue
				}
				in := t.InputRequests[key]
				if err := sse.Send(mcpwire.Request{JSONRPC: "2.0", ID: core.InputID(t.ID, key), Method: in.Method, Params: in.Params}); err != nil {
					h.abandonCall(owner, id, clientLeft)
					return
				}
				sent[key] = true
			}
		}
		for reread := false; !reread; {
			select {
			case <-ctx.Done():
				h.abandonCall(owner, id, clientLeft)
				return
			case ev, ok := <-watch.C:
				if !ok {
					return
				}
				switch ev.Kind {
				case taskstore.EventProgress:
				case taskstore.EventMessage:
					if err := sse.SendRaw([]byte(ev.Data)); err != nil {
						h.abandonCall(owner, id, clientLeft)
						return
					}
				default:
					reread = true
				}
			case <-tick.C:
				_ = sse.Comment("working") // a keep-alive for idle-timeout proxies
				reread = true
			}
		}
	}
}

// plainOutcome is the response to a plain call whose task ended: the
// result as the upstream gave it (no task _meta, no 2026-07-28
// resultType), or the error.
func plainOutcome(id json.RawMessage, t *taskstore.Task) mcpwire.Response {
	if len(t.Error) > 0 && len(t.Result) == 0 {
		return mcpwire.Response{JSONRPC: "2.0", ID: id, Error: t.Error}
	}
	if len(t.Result) == 0 {
		return mcpwire.Response{JSONRPC: "2.0", ID: id, Error: core.InternalError(t.StatusMessage)}
	}
	return mcpwire.Response{JSONRPC: "2.0", ID: id, Result: withoutResultType(runner.WithoutRelatedTask(t.Result))}
}

// clientLeft is why a plain call's task is cancelled when its client went
// away before the upstream answered.
const clientLeft = "the client's call ended before the upstream answered"

// abandonCall cancels a plain call's task whose client went away: its
// worker cancels the upstream call, and the task does not wait for
// answers nobody will send.
func (h *heldSessions) abandonCall(owner, id, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), core.StoreTimeout)
	defer cancel()
	if _, err := h.store.RequestCancel(ctx, owner, id, why); err == nil {
		h.log.Info().Str("op", "cancelled").Str("task_id", id).Str("owner", core.LogOwner(owner)).Msg(why)
	}
}

// unknownStatelessSession answers 404 for a session id the gateway does
// not know (ended, expired, or never issued) in front of a stateless
// upstream, which has no sessions of its own: the client must initialize
// again (Streamable HTTP, "Session Management"). It reports whether it
// answered.
func (h *heldSessions) unknownStatelessSession(w http.ResponseWriter, r *http.Request) bool {
	era, err := h.up.Era(r.Context(), core.ForwardedAuth(r))
	if err != nil || !era.Stateless {
		return false
	}
	writeSessionNotFound(w)
	return true
}

// writeSessionNotFound answers a request of a session the gateway does not
// hold for this client: 404, initialize again.
func writeSessionNotFound(w http.ResponseWriter) {
	mcpwire.WriteError(w, nil, mcpwire.NewError(http.StatusNotFound, mcpwire.CodeSessionNotFound, "Session not found: initialize again"))
}

// ownedBy reports whether r comes from the principal that opened the
// session (the same Authorization, or none for both): a session id alone
// is not a credential.
func (s *sessionInfo) ownedBy(r *http.Request) bool { return s.Principal == core.AuthOwner(r) }

// serveSession (Front.ServeEmulatedSession) handles a GET (the session's stream) or DELETE
// (its end) of a session the gateway holds (or, in front of a stateless
// upstream, one it does not know: 404), and reports whether it did.
func (h *heldSessions) serveSession(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Mcp-Session-Id") == "" {
		return false
	}
	s, err := h.sessions.sessionErr(r)
	if s == nil && err == nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
		return h.unknownStatelessSession(w, r)
	}
	if !s.emulated() {
		return false
	}
	if !s.ownedBy(r) {
		writeSessionNotFound(w)
		return true
	}
	switch r.Method {
	case http.MethodDelete:
		h.sessions.forget(r)
		h.announce(r, s.ID, taskstore.SessionEnded) // its GET streams, on any replica
		if s.Principal == "" {
			h.releaseAnonymous(r, s)
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		// The session's stream: what the upstream's subscriptions/listen
		// delivers (SEP-2575: it replaces the GET stream), merged with
		// what the gateway itself sends (its tasks' status and progress).
		h.emulatedStream(w, r, s)
	default:
		return false
	}
	return true
}
