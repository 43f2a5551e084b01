package front2025

// The fallback task tools (internal/fallback) for session clients: a recorded
// session whose client declared no capabilities.tasks, of any version the
// gateway records (2025-11-25, and 2025-06-18 and 2025-03-26 while the
// tools are on). Its owner is the usual one (core.OwnerOf): its Authorization,
// else its session.
//
//	tools/call of a task candidate, no params.task
//	   run upstream on the client's session, wait up to the hybrid wait:
//	     answered in time → the answer, as for a plain call
//	     still running, or the upstream asks for input →
//	        task created (protocol "fallback"), its worker started;
//	        the session marked in Redis; the first time, the answer is an
//	        SSE stream: notifications/tools/list_changed, then the result
//	        naming the task
//	tools/list: the fallback tools appended to the first page once the
//	   session is marked
//	task_result: the tasks/result stream (result.go) with a
//	   deadline; input requests the client declared a capability for are
//	   sent on it as server→client requests, answered by POSTed responses
//	   (input.go) on any replica

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/fallback"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// fallbackToolsCall serves a tools/call of a fallback client when it is
// the fallback tools' to serve: a call of one of them, or of a task
// candidate. It reports whether it answered.
func (f *Front) fallbackToolsCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, p *core.CallParams) bool {
	if p.Name == "" || p.Task != nil {
		return false // the usual path says what is wrong, or serves the task
	}
	s, err := f.sessions.sessionErr(r)
	if err != nil && f.Fallback.Is(p.Name) {
		// The store cannot say whose session this is: a fallback tool
		// cannot be served, and must not reach the upstream as unknown.
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return true
	}
	if s == nil || !s.noTasks {
		return false
	}
	if f.Fallback.Is(p.Name) {
		if _, listed := f.Decider.ToolInfo(r.Context(), p.Name); !listed { // the upstream's own tool is never hidden
			f.fallbackTool(w, r, msg, s, p)
			return true
		}
	}
	c := f.Decider.DecideCall(r.Context(), p.Name, policy.ClientFallback)
	if c.Mode != policy.Auto {
		return false
	}
	f.fallbackCall(w, r, msg, s, p.Name, c.Decision, c.Learn)
	return true
}

// fallbackTool serves one of the fallback tools for session s.
func (f *Front) fallbackTool(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, p *core.CallParams) {
	a, problem := f.Fallback.ParseArgs(p.Name, p.Arguments)
	if problem != "" {
		mcpwire.WriteResult(w, msg.ID, fallback.BadArgs(p.Name, problem))
		return
	}
	owner := core.OwnerOf(r)
	if p.Name != f.Fallback.ResultName() {
		res, e := f.Fallback.Serve(r.Context(), owner, p.Name, a, core.Era2025)
		if e != nil {
			mcpwire.WriteError(w, msg.ID, e)
			return
		}
		mcpwire.WriteResult(w, msg.ID, res)
		return
	}
	f.resultStream(w, r, msg, owner, a.TaskID, &streamOpts{
		wait: a.Wait,
		relay: func(method string) bool {
			return len(s.ClientCaps) > 0 && runner.ClientCan(s.ClientCaps, method)
		},
		final:  fallback.Outcome,
		status: f.Fallback.StatusResult,
		failed: func(err error) (json.RawMessage, *mcpwire.Error) {
			return f.Fallback.StoreFailure(err, "result", a.TaskID, core.Era2025)
		},
	}, nil)
}

// fallbackCall runs a task candidate of a fallback client: answered as a
// plain call if it ends within the hybrid wait, else a task the client
// follows with the fallback tools.
func (f *Front) fallbackCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, tool string, d policy.Decision, learn string) {
	slot, e := f.Runner.Admit(r.Context(), core.Principal(r), runner.AdmitCall)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	j := &runner.Job{
		Slot:  slot, // HoldHybrid's call takes it
		Owner: core.OwnerOf(r),
		Sess:  &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: core.ForwardedAuth(r)},
		Req:   &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: msg.Params},
		Learn: learn,
		// clientCaps nil: every input request is kept in the task, for
		// task_status and task_answer when the client cannot be asked.
	}
	res, ok := f.HoldHybrid(r, j, d)
	switch {
	case !ok:
	case res == nil: // still running, or asking for input
		f.startFallbackTask(w, r, msg, j, s, tool, d)
	default:
		if res.Err == nil {
			f.Decider.Observe(j.Learn, time.Since(j.Call.Started))
		}
		f.WriteCallResult(w, msg, *res, core.Era2025)
	}
}

// startFallbackTask makes the held call j.call a task and answers with
// the result that names it. A task the store cannot create leaves the
// call a plain one, answered when it ends.
func (f *Front) startFallbackTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job, s *sessionInfo, tool string, d policy.Decision) {
	ctx := context.WithoutCancel(r.Context())
	if err := f.Runner.Launch(ctx, j, runner.LaunchSpec{Proto: taskstore.ProtocolFallback, Tool: tool, TTL: decide.TaskTTL(d, 0, j.Owner), Poll: d.PollInterval}); err != nil {
		f.Log.Warn().Str("op", "fallback.Tools").Str("tool", tool).Err(err).Msg("no task for a long call; it stays a plain call")
		f.WriteCallResult(w, msg, f.Runner.WaitPlain(r, j), core.Era2025)
		return
	}
	decl, _ := f.Decider.ToolInfo(ctx, tool)
	if j.First != nil {
		f.Fallback.AwaitQuestion(ctx, j.Task)
	}
	result := f.Fallback.Started(j.Task, decl.Output, j.First != nil)
	first, err := f.store.MarkSessionFallback(ctx, s.ID)
	if err != nil {
		f.Log.Warn().Str("op", "fallback.Tools").Err(err).Msg("cannot mark the session; its tools/list may lack the fallback.Tools tools")
	}
	if !first {
		mcpwire.WriteResult(w, msg.ID, result)
		return
	}
	// The fallback tools appear for this session now: say so first, on
	// the same stream, so a client that re-lists finds them.
	sse := mcpwire.NewWriter(w)
	_ = sse.SendRaw(mcpwire.Notification("notifications/tools/list_changed", nil))
	_ = sse.Send(mcpwire.Response{JSONRPC: "2.0", ID: msg.ID, Result: result})
}

// fallbackListed reports whether session s's tools/list shows the
// fallback tools: once it had a fallback task (read from Redis, so any
// replica agrees).
func (f *Front) fallbackListed(ctx context.Context, s *sessionInfo) bool {
	if f.Fallback == nil || s == nil || !s.noTasks {
		return false
	}
	rec, err := f.store.GetSession(ctx, s.ID)
	if err != nil {
		if !errors.Is(err, taskstore.ErrNoSession) && ctx.Err() == nil {
			f.Log.Warn().Str("op", "tools/list").Err(err).Msg("cannot tell whether the session has fallback.Tools tasks")
		}
		return false
	}
	return rec.Fallback
}
