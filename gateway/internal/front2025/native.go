package front2025

// Upstream tools with tasks of their own, for 2025-11-25 clients (issue:
// "upstreams that already have tasks"): a tool whose tools/list entry
// declares execution.taskSupport is the upstream's to run as a task, unless
// a rule names it (then the gateway owns the task and holds the upstream's
// underneath: internal/runner/native.go). Its task-augmented tools/call passes
// through untouched (params.task included), and the upstream's
// CreateTaskResult reaches the client; the task is recorded in Redis under
// the calling owner, with the upstream session it lives on
// (PutUpstreamTask), so that tasks/get, tasks/result and tasks/cancel of
// that id, on any replica, go to the upstream on that session, tasks/list
// shows it among the owner's other tasks, and another owner's tasks/* of
// the id gets -32602 like any unknown id.
//
//	client ── tools/call {task} of a tool the upstream declares taskSupport for
//	gateway ── forwarded as it is ──▶ upstream: CreateTaskResult {task}
//	        checked (a malformed one: -32603, nothing recorded)
//	        ◀─ recorded: <prefix>:{owner}:ut:<taskId> (the task's ttl) ─ relayed
//	client ── tasks/get|result|cancel {taskId}, any replica
//	gateway: not a task of its own → recorded for this owner → forwarded on
//	         the task's upstream session
//
// A task whose upstream session is gone (the upstream answers 404 for it,
// or no longer knows the task while its record lives: it restarted) is
// failed, for good, with a status message that says so; it is never left
// "working".

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/native"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// nativeTasks is the upstream's own tasks for 2025-11-25 sessions: their
// tools/call passed through and recorded per owner (internal/native), their
// tasks/* forwarded on the task's upstream session, a lost one failed. It
// needs the store's upstream-task records, the upstream side and the
// front's session table.
type nativeTasks struct {
	store    native.Store
	up       *upstreamside.Side
	log      zerolog.Logger
	sessions *sessionTable
}

// passNativeTask forwards a task-augmented call of the upstream's own task
// tool, checks its CreateTaskResult and records the task it names.
func (n *nativeTasks) passNativeTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, tool string) {
	a := n.up.ForwardForRewrite(w, r, msg, upstreamside.IdentityHeader(n.sessions.upstreamHeader(r)), msg.Raw)
	if a == nil {
		return
	}
	defer a.Close()
	if a.Result == nil { // the upstream's JSON-RPC error: its to give
		a.Write(w, r, n.log, nil)
		return
	}
	t, raw, err := core.ParseCreateTaskResult(a.Result)
	if err != nil {
		e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, fmt.Sprintf(
			"the upstream answered the task-augmented tools/call of %q without a valid CreateTaskResult: %v; its answer: %s",
			tool, err, core.QuoteAnswer(a.Result)))
		n.log.Warn().Str("op", "native").Str("tool", tool).Msg(e.Message)
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	owner := core.OwnerOf(r)
	ttl, out := native.KeepFor(n.store, owner, t.TTL, a, "task")
	if out != nil { // the gateway keeps the task's record for less than the upstream said
		_ = json.Unmarshal(out, &struct {
			Task *json.RawMessage `json:"task"`
		}{&raw})
	}
	rec := taskstore.UpstreamTask{ID: t.TaskID, Owner: owner, Session: r.Header.Get("Mcp-Session-Id"),
		Protocol: taskstore.Protocol2025, Tool: tool, Task: raw}
	if err := native.Record(r.Context(), n.store, n.up, n.log, rec, ttl, n.sessions.upstreamHeader(r)); err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025)) // the upstream's task is cancelled
		return
	}
	a.Write(w, r, n.log, out)
}

// nativeHeader is the header of a request about rec sent on the upstream
// session the task lives on (the client may have opened another since).
func (n *nativeTasks) nativeHeader(r *http.Request, rec *taskstore.UpstreamTask) http.Header {
	h := n.sessions.upstreamHeader(r)
	if rec.Session == "" || rec.Session == h.Get("Mcp-Session-Id") {
		return h
	}
	out := h.Clone()
	out.Set("Mcp-Session-Id", rec.Session)
	return out
}

// upstreamTask answers a tasks/* request of an id that is the upstream's
// own task, created by this owner, and reports whether it answered (a
// store failure is answered as one: retryable, not "not found").
func (n *nativeTasks) upstreamTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string) bool {
	rec, _, err := n.store.UpstreamTaskOwner(r.Context(), owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(n.log, err, "native", id, core.Era2025))
		return true
	}
	if rec == nil || rec.Protocol == taskstore.Protocol2026 {
		return false
	}
	n.nativeTaskRequest(w, r, msg, rec)
	return true
}

// nativeTaskRequest forwards tasks/get, tasks/result or tasks/cancel of
// the upstream's task rec on its session, and answers for a task the
// upstream lost.
func (n *nativeTasks) nativeTaskRequest(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, rec *taskstore.UpstreamTask) {
	method := msg.MethodName()
	if rec.Lost != "" {
		n.answerLost(w, msg, rec)
		return
	}
	header := n.nativeHeader(r, rec)
	stream := method == "tasks/result"
	if !stream {
		header = upstreamside.IdentityHeader(header) // read whole, to tell a lost task
	}
	start := time.Now()
	resp, err := n.up.Post(obs.MethodCtx(r, msg), header, bytes.NewReader(msg.Raw))
	if err != nil {
		n.up.ForwardFailed(w, r, msg, err)
		return
	}
	if resp.StatusCode == http.StatusNotFound && rec.Session != "" {
		resp.Body.Close()
		n.lost(r.Context(), rec, native.SessionLost)
		n.answerLost(w, msg, rec)
		return
	}
	if stream {
		// Streamed as it comes: its input requests must reach the client
		// before the upstream can answer.
		n.up.RelayRequest(w, r, resp, msg, "", start)
		return
	}
	if !upstreamside.Rewritable(resp) {
		n.up.Relay(w, r, resp)
		return
	}
	a, err := upstreamside.ReadAnswer(resp, msg.ID)
	if err != nil {
		n.up.ForwardFailed(w, r, msg, err)
		return
	}
	defer a.Close()
	if method == "tasks/get" && a.Result == nil && native.NotFoundError(a.Msg) {
		// The upstream no longer knows a task whose record (kept for the
		// ttl it gave) lives: it lost it. (Only tasks/get says so:
		// -32602 to tasks/cancel also refuses a task already terminal.)
		n.lost(r.Context(), rec, native.TaskLost)
		n.answerLost(w, msg, rec)
		return
	}
	a.Write(w, r, n.log, nil)
}

// lost marks rec failed for good, in the store (best effort: the next
// request finds out again) and in rec.
func (n *nativeTasks) lost(ctx context.Context, rec *taskstore.UpstreamTask, why string) {
	native.MarkLost(ctx, n.store, n.log, rec, why)
}

// answerLost answers tasks/* of an upstream task that was lost: tasks/get
// sees it failed, tasks/result its error, tasks/cancel that it is terminal.
func (n *nativeTasks) answerLost(w http.ResponseWriter, msg *mcpwire.Message, rec *taskstore.UpstreamTask) {
	switch msg.MethodName() {
	case "tasks/get":
		mcpwire.WriteResult(w, msg.ID, lostTask(rec))
	case "tasks/cancel":
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			"Cannot cancel task: already in terminal status 'failed'"))
	default:
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "Task "+rec.ID+" failed: "+rec.Lost))
	}
}

// lostTask is the 2025-11-25 Task of an upstream task that was lost: what
// the upstream last said of it, failed, with the reason.
func lostTask(rec *taskstore.UpstreamTask) map[string]any { return native.FailedRecord(rec, "ttl") }

// nativeListConcurrency bounds the upstream tasks/get a tasks/list page
// sends at once; nativeListTimeout bounds them all.
const (
	nativeListConcurrency = 8
	nativeListTimeout     = 5 * time.Second
)

// nativeStates asks the upstream for the current state of each upstream
// task on a tasks/list page, on its session. A task the upstream lost is
// marked so; one it cannot tell about now (unreachable, slow) is shown as
// last known.
func (n *nativeTasks) nativeStates(r *http.Request, s *sessionInfo, recs []*taskstore.UpstreamTask) []json.RawMessage {
	out := make([]json.RawMessage, len(recs))
	sem := make(chan struct{}, nativeListConcurrency)
	// One deadline for the page: an upstream that hangs costs the list
	// nativeListTimeout, not that per task; what is not known by then is
	// shown as last known.
	ctx, cancel := context.WithTimeout(r.Context(), nativeListTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, rec := range recs {
		if rec.Lost != "" {
			out[i] = mcpwire.MustMarshal(lostTask(rec))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			out[i] = n.nativeState(ctx, r, s, rec)
		}()
	}
	wg.Wait()
	return out
}

func (n *nativeTasks) nativeState(ctx context.Context, r *http.Request, s *sessionInfo, rec *taskstore.UpstreamTask) json.RawMessage {
	if ctx.Err() != nil {
		return lastKnown(rec)
	}
	sess := &upstream.Session{ID: rec.Session, Header: core.ForwardedAuth(r)}
	if s != nil {
		sess.ProtocolVersion = s.UpstreamVersion
		if sess.ID == "" {
			sess.ID = s.ID
		}
	}
	resp, err := n.up.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/get",
		Params: mcpwire.MustMarshal(map[string]string{"taskId": rec.ID})}, upstream.CallOptions{})
	switch {
	case errors.Is(err, upstream.ErrSessionNotFound) && rec.Session != "":
		n.lost(r.Context(), rec, native.SessionLost)
	case err == nil && resp.Error != nil && core.NotFoundWire(resp.Error):
		n.lost(r.Context(), rec, native.TaskLost)
	case err == nil && resp.Error == nil:
		var t struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(resp.Result, &t) == nil && t.TaskID == rec.ID {
			return resp.Result
		}
	}
	return lastKnown(rec)
}

// lastKnown is what the gateway knows of an upstream task without asking:
// failed if it was lost, else its CreateTaskResult's task.
func lastKnown(rec *taskstore.UpstreamTask) json.RawMessage {
	if rec.Lost != "" {
		return mcpwire.MustMarshal(lostTask(rec))
	}
	if len(rec.Task) > 0 {
		return rec.Task
	}
	return mcpwire.MustMarshal(map[string]any{"taskId": rec.ID, "status": string(taskstore.StatusWorking),
		"createdAt": core.WireTime(rec.Recorded), "lastUpdatedAt": core.WireTime(rec.Recorded), "ttl": nil})
}

// foreignUpstreamTask answers -32602 for tasks/get|result|cancel, from a
// session the gateway serves no tasks for, of an upstream task another
// owner's call created; it reports whether it answered (else the request
// is relayed as it is).
func (n *nativeTasks) foreignUpstreamTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) bool {
	if msg.MethodName() == "tasks/list" {
		return false
	}
	var p taskIDParams
	if json.Unmarshal(msg.Params, &p) != nil || p.TaskID == "" {
		return false
	}
	mine, anyone, err := n.store.UpstreamTaskOwner(r.Context(), core.OwnerOf(r), p.TaskID)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(n.log, err, "native", p.TaskID, core.Era2025))
		return true
	}
	if anyone && mine == nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(taskstore.ErrNotFound, core.Era2025)) // as for any unknown id
		return true
	}
	return false
}

// callThroughNativeTask answers a plain tools/call of a tool the upstream
// runs only as a task (taskSupport "required") where a rule made it a sync
// tool: the gateway creates the upstream's task, then relays tasks/result
// of it to the client under the call's own id, so its input requests reach
// the client on the call's stream and its answer is the call's. A client
// that goes away before the answer cancels the upstream's task.
func (n *nativeTasks) callThroughNativeTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, tool string) {
	params, err := runner.WithUpstreamTask(msg.Params, 0)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object"))
		return
	}
	sess := &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: core.ForwardedAuth(r)}
	resp, ok := callFor(n.up, w, r, msg, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params}, nil)
	if !ok {
		return
	}
	if !runner.HasMember(resp.Result, "task") { // run as a plain call after all: the answer
		mcpwire.WriteJSON(w, http.StatusOK, mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: resp.Result})
		return
	}
	t, _, err := core.ParseCreateTaskResult(resp.Result)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, fmt.Sprintf(
			"the upstream answered the task-augmented tools/call of %q without a valid CreateTaskResult: %v; its answer: %s",
			tool, err, core.QuoteAnswer(resp.Result))))
		return
	}
	body := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "method": "tasks/result",
		"params": map[string]string{"taskId": t.TaskID}})
	result, perr := mcpwire.Parse(body)
	if perr != nil {
		mcpwire.WriteError(w, msg.ID, perr)
		return
	}
	header := n.sessions.upstreamHeader(r)
	n.up.Forward(w, r, result, header, tool)
	if r.Context().Err() != nil {
		native.Cancel(context.WithoutCancel(r.Context()), n.up, t.TaskID, taskstore.Protocol2025, header)
	}
}
