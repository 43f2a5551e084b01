package upstreamside

// Forwarding to the upstream, in the upstream's era:
//
//	2025-11-25 or older client ─▶ forward: the bytes as received, the
//	                              answer relayed (relay.go)
//	2026-07-28 client, stateless upstream ─▶ forwardToStateless: the
//	                              request as received (minus the tasks
//	                              extension), the answer relayed
//	2026-07-28 client, session upstream   ─▶ forwardToSession: the request
//	                              as a session one on the owner session
//	                              (owner.go), the answer in the
//	                              2026-07-28 shape

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Side is everything that talks to the upstream on a client's
// behalf: the era probe, the owner sessions, and forwarding.
type Side struct {
	// client is the upstream client the Handler was built with.
	client *upstream.Client
	store  ownerStore // nil: no owner sessions (no store: plain pass-through)
	// observe records a forwarded tools/call's latency, learnTools what a
	// tools/list answer declared (the decider).
	observe    func(tool string, took time.Duration)
	learnTools func(ctx context.Context, result json.RawMessage)
	// learnServer records what an initialize result's capabilities say
	// of tasks (decider.learnServerCaps).
	learnServer func(ctx context.Context, caps json.RawMessage)
	log         zerolog.Logger
	KeepAlive   time.Duration // Config.KeepAlive; 0: off (keepalive.go)

	probe  eraProbe      // era.go
	owners ownerSessions // owner.go
	feeds  listenFeeds   // owner sessions' GET streams (listen.go)
	// discovery is this replica's own listing of the upstream's tools
	// into the decider's catalogue (catalog.go, ToolDeclared).
	discovery discovery
	catalogue *decide.Decider
}

// ownerStore is what the owner sessions need of the task store.
type ownerStore interface {
	GetOwnerSession(ctx context.Context, owner string) (*taskstore.OwnerSession, error)
	TouchOwnerSession(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	PutOwnerSession(ctx context.Context, owner string, next taskstore.OwnerSession, replaced string, ttl time.Duration) (*taskstore.OwnerSession, bool, error)
	// The channel an owner session's GET stream is shared on between
	// replicas (listen.go).
	PublishSession(ctx context.Context, sessionID string, msg []byte) error
	WatchSession(ctx context.Context, sessionID string) (*taskstore.Watch, error)
}

func New(client *upstream.Client, store *taskstore.Store, d *decide.Decider, keepAlive time.Duration, log zerolog.Logger) *Side {
	u := &Side{client: client, catalogue: d, observe: d.Observe, learnTools: d.LearnToolsList, learnServer: d.LearnServerCaps, log: log, KeepAlive: max(keepAlive, 0)}
	if store != nil {
		u.store = store
	}
	return u
}

// Forward relays msg to the upstream with header, and its answer back.
// For a tools/call whose latency is learned (learn, a tool name), the time
// from sending to the end of the answer is recorded (latency.go).
func (u *Side) Forward(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, header http.Header, learn string) {
	start := time.Now()
	ka := u.KeepAliveFor(msg)
	if ka != nil {
		// A keep-alive goes between the answer's bytes: they must be
		// plain, so the upstream is not asked for a compressed answer.
		header = IdentityHeader(header)
	}
	send := func() (*http.Response, error) {
		return u.client.Forward(obs.MethodCtx(r, msg), http.MethodPost, header, bytes.NewReader(msg.Raw))
	}
	if ka != nil {
		resp, started, err := awaitHeaders(w, r, ka, send)
		if started {
			u.answerStarted(w, r, msg, resp, err, learn, start, ka)
			return
		}
		if err == nil {
			u.relayAnswerKept(w, r, resp, msg.ID, learn, start, ka)
			return
		}
		u.ForwardFailed(w, r, msg, err)
		return
	}
	resp, err := send()
	if err != nil {
		u.ForwardFailed(w, r, msg, err)
		return
	}
	u.RelayRequest(w, r, resp, msg, learn, start)
}

// answerStarted writes the answer to msg on the stream a keep-alive
// opened: the upstream's (answerOnStream), or its failure as an event.
func (u *Side) answerStarted(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, resp *http.Response, err error,
	learn string, start time.Time, ka *Beats) {
	if err != nil {
		if r.Context().Err() == nil {
			e := core.RPCError(err, core.Era2025)
			u.log.Warn().Str("op", "forward").Str("method", msg.MethodName()).Msg(e.Message)
			_, _ = w.Write(mcpwire.AppendEvent(nil, nil, mcpwire.ErrorMessage(msg.ID, e)))
		}
		return
	}
	seen := answerOnStream(w, resp, msg.ID, ka)
	u.learnFrom(&seen, resp.StatusCode, learn, start)
}

// ForwardFailed answers a forwarded message whose upstream round trip
// failed.
func (u *Side) ForwardFailed(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, err error) {
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	e := core.RPCError(err, core.Era2025)
	u.log.Warn().Str("op", "forward").Str("method", msg.MethodName()).Msg(e.Message)
	if msg.Kind != mcpwire.KindRequest {
		// Nothing to answer with a JSON-RPC response; say it in HTTP.
		e.Status = http.StatusBadGateway
	}
	PassChallenge(w, err, e)
	mcpwire.WriteError(w, msg.ID, e)
}

// PassChallenge makes e, the answer to a request the gateway made for the
// Client, the upstream's 401 or 403 with its WWW-Authenticate challenges
// when that is what err is: the client's credentials were refused, and
// only the status and challenge start its authorization flow (MCP
// Authorization, "Authorization Server Discovery").
func PassChallenge(w http.ResponseWriter, err error, e *mcpwire.Error) {
	var se *upstream.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized && se.Status != http.StatusForbidden {
		return
	}
	e.Status = se.Status
	if len(se.Authenticate) > 0 {
		w.Header()["Www-Authenticate"] = se.Authenticate
	}
}

// FailHTTP answers a non-POST request whose upstream round trip failed.
func (u *Side) FailHTTP(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	e := core.RPCError(err, core.Era2025)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		e.Status = http.StatusRequestEntityTooLarge
	case errors.Is(err, upstream.ErrUnreachable):
		e.Status = http.StatusBadGateway
	}
	u.log.Warn().Str("op", "forward").Str("http_method", r.Method).Msg(e.Message)
	mcpwire.WriteError(w, nil, e)
}

// StatelessFailure answers a 2026-07-28 request whose upstream side
// failed.
func (u *Side) StatelessFailure(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, err error) {
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	e := core.RPCError(err, core.Era2026)
	u.log.Warn().Str("op", "forward").Str("method", msg.MethodName()).Msg(e.Message)
	PassChallenge(w, err, e)
	mcpwire.WriteError(w, msg.ID, e)
}

// statelessHeader is the header a 2026-07-28 request is forwarded with:
// the client's, without the session and resumption headers, and with an
// Mcp-Name (already checked against the body) that was Base64-encoded
// needlessly sent plain: upstreams that compare it without decoding
// (go-sdk v1.8.0) then accept it too.
func statelessHeader(r *http.Request) http.Header {
	out := make(http.Header, len(r.Header))
	for k, vv := range r.Header {
		out[k] = vv
	}
	delete(out, "Mcp-Session-Id")
	delete(out, "Last-Event-Id")
	if v := out["Mcp-Name"]; len(v) == 1 && strings.HasPrefix(v[0], "=?base64?") {
		if name, ok := core.DecodeHeaderValue(v[0]); ok && upstream.HeaderValue(name) == name {
			out["Mcp-Name"] = []string{name}
		}
	}
	return out
}

// PostStateless forwards body to a stateless upstream with the client's
// headers. A 400, 404 or 405 answer is read (it is small) to see whether
// it is a stateless server's error or the refusal of a server that is not
// one (contradicted); either way the response returned can still be
// relayed.
func (u *Side) PostStateless(r *http.Request, body []byte, identity bool) (resp *http.Response, contradicted bool, err error) {
	header := statelessHeader(r)
	if identity {
		delete(header, "Accept-Encoding") // see forward: keep-alives need plain bytes
	}
	resp, err = u.client.Forward(r.Context(), http.MethodPost, header, bytes.NewReader(body))
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
	return resp, !isStatelessError(data), nil
}

// isStatelessError reports whether body is a JSON-RPC error a 2026-07-28
// server would send: any JSON-RPC error, except an unsupported-version
// error that does not list 2026-07-28 (a session server's answer).
func isStatelessError(body []byte) bool {
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
	return m.Error.Code != mcpwire.CodeUnsupportedVersion || slices.Contains(m.Error.Data.Supported, core.Version2026)
}

// ForwardToStateless relays a 2026-07-28 message to a stateless upstream
// and its answer back untouched (streams flushed as they come). It reports
// false, having answered nothing, when the upstream refused it the way a
// session server would and recheck is set: the era is then forgotten, for
// the caller to send the message by the era probed anew. stripTasks: the
// Client declared the tasks extension (WithoutTasksExtension). learn names
// a tools/call whose latency is learned.
func (u *Side) ForwardToStateless(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, stripTasks bool,
	era *upstreamEra, recheck bool, learn string) bool {
	start := time.Now()
	var contradicted bool
	ka := u.KeepAliveFor(msg)
	send := func() (resp *http.Response, err error) {
		resp, contradicted, err = u.PostStateless(r.WithContext(obs.MethodCtx(r, msg)), WithoutTasksExtension(msg, stripTasks), ka != nil)
		return resp, err
	}
	var resp *http.Response
	var err error
	if ka != nil {
		var started bool
		if resp, started, err = awaitHeaders(w, r, ka, send); started {
			// The client's stream is open: whatever came is its answer
			// (the era is rechecked by the next request).
			u.answerStarted(w, r, msg, resp, err, learn, start, ka)
			return true
		}
	} else {
		resp, err = send()
	}
	if err != nil {
		if msg.Kind == mcpwire.KindNotification && r.Context().Err() == nil {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		u.StatelessFailure(w, r, msg, err)
		return true
	}
	if contradicted && recheck {
		resp.Body.Close()
		u.ForgetEra(era)
		return false
	}
	if learn == "" && msg.MethodName() == "tools/list" && u.store != nil && Rewritable(resp) {
		// Read whole, to learn the tools' declarations (catalog.go).
		a, err := ReadAnswer(resp, msg.ID)
		if err != nil {
			u.StatelessFailure(w, r, msg, err)
			return true
		}
		defer a.Close()
		u.learnTools(r.Context(), a.Result)
		a.Write(w, r, u.log, nil)
		return true
	}
	if msg.Kind != mcpwire.KindRequest {
		u.Relay(w, r, resp)
		return true
	}
	u.relayAnswerKept(w, r, resp, msg.ID, learn, start, ka)
	return true
}

// WithoutTasksExtension returns msg's body with the tasks extension taken
// out of the client capabilities: the gateway is the client's tasks
// server, so an upstream that has tasks of its own must not create them.
// strip false (the client declared no tasks extension): msg as it is.
func WithoutTasksExtension(msg *mcpwire.Message, strip bool) []byte {
	if !strip {
		return msg.Raw
	}
	params, ok := stripTasksExtension(msg.Params)
	if !ok {
		return msg.Raw
	}
	out, err := mcpwire.WithMember(msg.Raw, "params", params)
	if err != nil {
		return msg.Raw
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
	if json.Unmarshal(meta[core.MetaClientCaps], &caps) != nil || caps == nil {
		return params, false
	}
	var ext map[string]json.RawMessage
	if json.Unmarshal(caps["extensions"], &ext) != nil || ext == nil {
		return params, false
	}
	if _, ok := ext[core.TasksExtension]; !ok {
		return params, false
	}
	delete(ext, core.TasksExtension)
	if len(ext) == 0 {
		delete(caps, "extensions")
	} else {
		caps["extensions"] = mcpwire.MustMarshal(ext)
	}
	meta[core.MetaClientCaps] = mcpwire.MustMarshal(caps)
	p["_meta"] = mcpwire.MustMarshal(meta)
	return mcpwire.MustMarshal(p), true
}

// ForwardToSession sends a 2026-07-28 request (not a tools/call: those
// are bridged, internal/front2026/bridge.go) as a session one on the owner session
// and answers it in the 2026-07-28 shape. Progress the upstream sends on
// the way goes to the client as SSE events; its requests for input are
// refused (there is no way to ask a 2026-07-28 client outside MRTR and
// Tasks). The client going away cancels the upstream request
// (notifications/cancelled: on a session, a dropped stream is not a
// cancellation).
func (u *Side) ForwardToSession(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, target *Target, version string) {
	ctx := r.Context()
	owner, auth := core.SessionOwner(r), core.ForwardedAuth(r)
	method := msg.MethodName()
	req := &jsonrpc.Request{ID: core.NewUpstreamID(), Method: method}
	if len(msg.Params) > 0 {
		req.Params = SessionParams(msg.Params)
	}
	sse := mcpwire.NewWriter(w)
	opts := upstream.CallOptions{
		OnRequest: func(m *jsonrpc.Request) {
			_ = u.client.Respond(context.WithoutCancel(ctx), target.Session, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
				Code: mcpwire.CodeMethodNotFound,
				Message: "taskgate cannot relay " + m.Method + " to a " + core.Version2026 +
					" client during a plain call (only during a task: the client declares " + core.TasksExtension + ")"}})
			u.log.Info().Str("op", "refused").Str("method", m.Method).Str("owner", core.LogOwner(owner)).
				Msg("input request during a plain call of a 2026-07-28 client refused upstream")
		},
		OnNotification: func(n *jsonrpc.Request) {
			if n.Method == "notifications/progress" { // request-scoped: may go on the response stream
				_ = sse.Send(mcpwire.Request{JSONRPC: "2.0", Method: n.Method, Params: n.Params})
			}
		},
	}
	resp, err := u.client.Call(ctx, target.Session, req, opts)
	if errors.Is(err, upstream.ErrSessionNotFound) {
		if target, err = u.ReopenTarget(ctx, owner, auth, version, target); err == nil {
			resp, err = u.client.Call(ctx, target.Session, req, opts)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			u.CancelOnSession(ctx, target, req.ID)
			return
		}
		if sse.Started() {
			_ = sse.SendRaw(mcpwire.ErrorMessage(msg.ID, core.RPCError(err, core.Era2026)))
			return
		}
		u.StatelessFailure(w, r, msg, err)
		return
	}
	if method == "tools/list" && resp.Error == nil {
		u.learnTools(ctx, resp.Result)
	}
	u.WriteSessionAnswer(w, sse, msg.ID, method, resp)
}

// CancelOnSession tells a session upstream that the client of request id
// went away (notifications/cancelled), best effort.
func (u *Side) CancelOnSession(ctx context.Context, target *Target, id jsonrpc.ID) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), core.StoreTimeout)
	_ = u.client.Cancel(cctx, target.Session, id, "the client closed the request")
	cancel()
}

// WriteSessionAnswer writes a session upstream's response to a 2026-07-28
// Client's request id: on sse if a stream was started, else as JSON.
func (u *Side) WriteSessionAnswer(w http.ResponseWriter, sse *mcpwire.Writer, id json.RawMessage, method string, resp *jsonrpc.Response) {
	out, status := statelessResponse(id, method, resp)
	if sse.Started() {
		_ = sse.SendRaw(out)
		return
	}
	mcpwire.WriteBody(w, status, "application/json", out)
}

// statelessResponse renders a session upstream's response for a
// 2026-07-28 client, with the client's id, and the HTTP status to send it
// with.
func statelessResponse(id json.RawMessage, method string, resp *jsonrpc.Response) (json.RawMessage, int) {
	if resp.Error != nil {
		var we *jsonrpc.Error
		if !errors.As(resp.Error, &we) {
			we = &jsonrpc.Error{Code: mcpwire.CodeInternalError, Message: resp.Error.Error()}
		}
		if we.Code == -32002 {
			// "Resource not found" was -32002 up to 2025-11-25; -32602 since.
			c := *we
			c.Code = mcpwire.CodeInvalidParams
			we = &c
		}
		return mcpwire.MustMarshal(mcpwire.Response{JSONRPC: "2.0", ID: id, Error: mcpwire.MustMarshal(we)}), mcpwire.StatelessStatus(int(we.Code))
	}
	return mcpwire.MustMarshal(mcpwire.Response{JSONRPC: "2.0", ID: id, Result: core.StatelessResult(method, resp.Result)}), http.StatusOK
}
