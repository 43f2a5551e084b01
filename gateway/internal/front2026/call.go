package front2026

// A 2026-07-28 client's tools/call. With the tasks extension declared
// (SEP-2663) the gateway, not the client, decides per call whether it
// becomes a task: sync (forwarded), task (created at once), or auto (run,
// and a task only if it is still running after the hybrid wait).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// missingTasksCapability is the -32021 error naming the tasks extension.
func missingTasksCapability(why string) *mcpwire.Error {
	e := mcpwire.NewError(http.StatusOK, mcpwire.CodeMissingCapability, "Missing required client capability: "+why)
	e.Data = mcpwire.MustMarshal(map[string]any{"requiredCapabilities": map[string]any{
		"extensions": map[string]any{core.TasksExtension: map[string]any{}}}})
	return e
}

// callMode is what a tools/call of a 2026-07-28 client becomes
// (docs/ARCHITECTURE.md, "How a tools/call is decided").
type callMode int

const (
	modeSync callMode = iota
	modeTask
	modeAuto
	modeRefuse // required task, client without the extension: -32021
)

// decideCall decides a 2026-07-28 client's tools/call (decider.decide) and
// maps the decision to what the gateway does; the Decision carries the
// hybrid wait, ttl and pollInterval, learn the name the call's latency is
// recorded under.
func (f *Front) decideCall(ctx context.Context, tool string, mr *statelessReq) (callMode, decide.Call) {
	client := policy.Client2026
	switch {
	case f.fallbackClient(mr):
		client = policy.ClientFallback // Auto or Sync
	case !mr.Tasks:
		client = policy.Client2026NoTasks
	}
	c := f.Decider.DecideCall(ctx, tool, client)
	switch c.Mode {
	case policy.Task:
		return modeTask, c
	case policy.Auto:
		return modeAuto, c
	case policy.TaskRequired: // only without the extension: with it, Decide says Task
		return modeRefuse, c
	}
	return modeSync, c
}

// toolsCall decides a 2026-07-28 tools/call: forwarded, a task, or "auto"
// (hybrid): run, and become a task only if it takes long.
func (f *Front) toolsCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, mr *statelessReq) {
	p, err := core.DecodeCall(msg.Params) // once: what follows reads p
	if err != nil || p.Name == "" {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object with a tool name"))
		return
	}
	if state, responses, ok := p.Retry(mrtrPrefix); ok {
		f.continueMRTR(w, r, msg, p.Name, state, responses) // mrtr.go
		return
	}
	if id, responses, ok := bridgeState(p); ok {
		f.continueBridge(w, r, msg, id, responses)
		return
	}
	if f.fallbackTool(w, r, msg, mr, p) {
		return
	}
	mode, c := f.decideCall(r.Context(), p.Name, mr)
	if f.native2026(r, mr, c) {
		// The upstream's own tasks extension: its call, its task
		// (native.go).
		f.passNative2026(w, r, msg, p.Name)
		return
	}
	d, learn := c.Decision, c.Learn
	anon := core.AuthOwner(r) == ""
	if anon && f.anonymous.Disabled {
		switch mode {
		case modeAuto:
			mode = modeSync // a plain call it can still make
		case modeTask:
			core.WriteStatelessError(w, msg.ID, errNoAnonymousTasks)
			return
		}
	}
	switch mode {
	case modeSync:
		f.forward(w, r, msg, mr, learn)
		return
	case modeRefuse:
		core.WriteStatelessError(w, msg.ID, missingTasksCapability(fmt.Sprintf("tool %q runs only as a task", p.Name)))
		return
	}
	// A 2025-11-25 params.task means nothing here (the server decides) and
	// must not reach the upstream.
	params, err := p.WithoutTask()
	if err != nil {
		core.WriteStatelessError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object"))
		return
	}
	target, err := f.Up.Target(r.Context(), core.SessionOwner(r), core.ForwardedAuth(r), mr.Version)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2026))
		return
	}
	kind := runner.AdmitCall
	if mode == modeTask {
		kind = runner.AdmitTask
	}
	slot, e := f.Runner.Admit(r.Context(), core.Principal(r), kind)
	if e != nil {
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	upParams := f.nativeParams(r.Context(), p.Name, upstreamside.ParamsFor(params, target), target)
	if f.fallbackClient(mr) && target.Stateless {
		upParams = withAskableClient(upParams) // the agent answers with task_answer
	}
	j := &runner.Job{
		Sess:       target.Session,
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: upParams},
		ClientCaps: mr.ClientCaps,
		Client2026: &runner.Job2026{Target: target, Params: upParams},
		Learn:      learn,
		Fallback:   f.fallbackClient(mr),
		Slot:       slot, // the task's worker's, or HoldHybrid's call's
	}
	if j.Fallback {
		j.CallerCaps = mr.ClientCaps
		j.ClientCaps = nil // every input request kept, for task_status and task_answer
	}
	f.setOwner(j, r)
	if mode == modeTask {
		f.startTask(w, r, msg, j, p.Name, d)
		return
	}
	f.hybrid(w, r, msg, j, p.Name, d)
}

// startTask creates the task, with the ttl and pollInterval of d,
// starts its worker and answers the flat CreateTaskResult, only once the
// task is durable ("Task Creation").
func (f *Front) startTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job, tool string, d policy.Decision) {
	ttl := decide.TaskTTL(d, f.defaultTTL(j.Owner), j.Owner)
	if err := f.launch(r, j, tool, ttl, d.PollInterval); err != nil {
		if j.Call != nil && (errors.Is(err, taskstore.ErrTooManyAnonymous) || errors.Is(err, taskstore.ErrTooManyFromAddress)) {
			// A call already running is not killed for want of a task:
			// it answers when it ends, as a plain call.
			f.finishPlain(w, r, msg, j)
			return
		}
		if j.Call != nil {
			j.Call.Abort(err)
		}
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2026))
		return
	}
	if j.Fallback {
		mcpwire.WriteResult(w, msg.ID, f.fallbackStarted(r, j, tool))
		return
	}
	mcpwire.WriteResult(w, msg.ID, core.ToTask2026(j.Task, "task", false))
}

// finishPlain answers a hybrid call that could not become a task when it
// ends; input its upstream asks for meanwhile is refused (a 2026-07-28
// client can be asked only through a task).
func (f *Front) finishPlain(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job) {
	res := f.Runner.WaitPlain(r, j)
	if r.Context().Err() == nil {
		f.WriteCallResult(w, msg, res, core.Era2026)
	}
}

// errNoAnonymousTasks refuses a task to a client without Authorization
// when Config.Anonymous.Disabled.
var errNoAnonymousTasks = mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError,
	"this gateway runs tasks only for clients that send Authorization (--allow-anonymous-tasks=false)")

// setOwner makes the owner of j's task, to be: the client's Authorization,
// else the task itself, whose id is minted now (core.AnonOwner).
func (f *Front) setOwner(j *runner.Job, r *http.Request) {
	if j.Owner = core.AuthOwner(r); j.Owner == "" {
		j.Id = uuid.NewString()
		j.Owner = core.AnonOwner(j.Id)
		j.Addr = core.ClientAddr(r)
	}
}

// launch makes j an extension task (or a fallback tools' one) and starts
// its worker (runner.launch).
func (f *Front) launch(r *http.Request, j *runner.Job, tool string, ttl, poll time.Duration) error {
	proto := taskstore.Protocol2026
	if j.Fallback {
		proto = taskstore.ProtocolFallback
	}
	return f.Runner.Launch(context.WithoutCancel(r.Context()), j, runner.LaunchSpec{Proto: proto, Tool: tool, TTL: ttl, Poll: poll})
}

// defaultTTL is the ttl of an extension task (the client asks for none):
// the store's default, shorter for an anonymous owner.
func (f *Front) defaultTTL(owner string) time.Duration {
	if core.IsAnonymous(owner) && f.store.Options().DefaultTTL > core.AnonymousTTL {
		return core.AnonymousTTL
	}
	return 0
}

// hybrid starts the upstream call and waits up to the hybrid budget
// (d.HybridWait). An answer in time goes back as it is, with no task and
// no store write, and teaches the tool's latency; so does an MRTR
// input_required round, which teaches nothing (SEP-2663: MRTR rounds SHOULD
// resolve before the task exists; the client's retry is decided afresh). A
// call still running, or a session upstream asking for input, becomes a
// task.
func (f *Front) hybrid(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, j *runner.Job, tool string, d policy.Decision) {
	res, ok := f.HoldHybrid(r, j, d)
	switch {
	case !ok:
		return // the client went away
	case res == nil && j.First != nil && !j.Fallback && j.Client2026 != nil && !j.Client2026.Target.Stateless &&
		runner.ClientCan(j.ClientCaps, j.First.Method):
		// A session upstream asked for input within the wait: MRTR
		// rounds first, the task only once a round runs past the wait
		// (mrtr.go).
		f.mrtrFirstRound(w, r, msg, j, tool, d)
	case res == nil: // still running, or asking for input
		f.startTask(w, r, msg, j, tool, d)
	case j.Fallback && core.IsInputRequired(res.Resp) && !canAnswer(j.CallerCaps, res.Resp.Result):
		// A fallback client that cannot answer this round itself answers
		// it through the task (task_status, task_answer): the worker
		// takes the round as the call's first result.
		j.Call.Done <- *res
		f.startTask(w, r, msg, j, tool, d)
	default:
		if res.Err == nil && !core.IsInputRequired(res.Resp) {
			f.Decider.Observe(j.Learn, time.Since(j.Call.Started))
		}
		f.WriteCallResult(w, msg, *res, core.Era2026)
	}
}

// nativeParams returns the params of a call the gateway holds of tool on
// target: task-augmented when tool is a session upstream's own task tool
// (it declared execution.taskSupport), so that the runner holds the
// upstream's task (internal/runner/native.go): the 2026-07-28 client sees the
// gateway's task, or the result, whatever the upstream requires.
func (f *Front) nativeParams(ctx context.Context, tool string, params json.RawMessage, target *upstreamside.Target) json.RawMessage {
	if target.Stateless {
		return params
	}
	decl, _ := f.Up.ToolDeclared(ctx, target.Session, tool)
	if !f.Decider.UpstreamSupport(ctx, decl).AllowsTask() {
		return params
	}
	if out, err := runner.WithUpstreamTask(params, 0); err == nil {
		return out
	}
	return params
}
