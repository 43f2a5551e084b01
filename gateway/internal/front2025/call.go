package front2025

// A 2025-11-25 client's tools/call: passed through, or a task when the
// client asks for one with params.task and the tool's taskSupport allows
// it (MCP 2025-11-25, Tasks, "Creating Tasks", "Tool-Level Negotiation").

import (
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/runner"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// toolsCall decides a tools/call: plain pass-through, or a task. Its
// params are decoded here once, and carried in that form.
func (f *Front) toolsCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) {
	p, perr := core.DecodeCall(msg.Params)
	if f.Fallback != nil && perr == nil && f.fallbackToolsCall(w, r, msg, p) {
		return
	}
	s, serr := f.sessions.sessionErr(r)
	if serr != nil && perr == nil && p.Task != nil {
		// This replica cannot look the session up (the store is down): a
		// plain call passes through; a task-augmented one cannot be served.
		mcpwire.WriteError(w, msg.ID, core.RPCError(serr, core.Era2025))
		return
	}
	if !s.tasks2025() {
		f.callWithoutTasks(w, r, msg, p.Name)
		return
	}
	if perr != nil || p.Name == "" {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object with a tool name"))
		return
	}
	// A client may call without listing the tools first: the upstream's
	// declaration is looked up (internal/upstreamside/catalog.go) before anything is decided.
	decl, listed := f.Up.ToolDeclared(r.Context(), &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: core.ForwardedAuth(r)}, p.Name)
	c := f.Decider.DecideDeclared(r.Context(), p.Name, decl, listed, policy.Client2025)
	if p.Task != nil && c.Native && !c.Ruled {
		// The upstream's own task tool, which no rule names: its task,
		// not the gateway's (native.go).
		f.native.passNativeTask(w, r, msg, p.Name)
		return
	}
	// "Tool-Level Negotiation": -32601 both for a task the tool does not
	// support and for a plain call of a tool that requires one.
	if p.Task == nil {
		f.plainCall(w, r, msg, s, p.Name, c)
		return
	}
	if !c.TaskSupport.AllowsTask() {
		mcpwire.WriteError(w, msg.ID, errNoTask(p.Name))
		return
	}
	f.startTask(w, r, msg, s, p, c)
}

// callWithoutTasks passes an older client's tools/call through: no tasks,
// but the call still teaches latency.
func (f *Front) callWithoutTasks(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, tool string) {
	learn := ""
	if tool != "" {
		if _, listed := f.Decider.ToolInfo(r.Context(), tool); listed {
			learn = tool
		}
	}
	f.Up.Forward(w, r, msg, f.UpstreamHeader(r), learn)
}

// plainCall serves a tools/call without params.task: refused for a tool
// that requires a task, else passed through (or, for a tool the upstream
// runs only as a task, waited on through its task).
func (f *Front) plainCall(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, tool string, c decide.Call) {
	if c.TaskSupport == policy.TaskSupportRequired {
		mcpwire.WriteError(w, msg.ID, errNeedsTask(tool))
		return
	}
	if c.Upstream == policy.TaskSupportRequired {
		// A rule made a tool the upstream runs only as a task a plain
		// one: the gateway waits on the upstream's task for the client.
		f.native.callThroughNativeTask(w, r, msg, s, tool)
		return
	}
	f.Up.Forward(w, r, msg, f.UpstreamHeader(r), c.Learn)
}

// startTask makes a task-augmented tools/call the gateway's task and
// answers its CreateTaskResult once the task is stored.
func (f *Front) startTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo, p *core.CallParams, c decide.Call) {
	ttl, params, e := core.TaskCall(p)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	owner := core.OwnerOf(r)
	ttl = decide.TaskTTL(c.Decision, ttl, owner)
	if c.Upstream.AllowsTask() {
		// A rule took the upstream's task tool over: the gateway's task
		// holds the upstream's (internal/runner/native.go).
		var err error
		if params, err = runner.WithUpstreamTask(params, ttl); err != nil {
			mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, "tools/call params must be an object"))
			return
		}
	}
	slot, e := f.Runner.Admit(r.Context(), core.Principal(r), runner.AdmitTask)
	if e != nil {
		mcpwire.WriteError(w, msg.ID, e)
		return
	}
	j := &runner.Job{
		Owner:      owner,
		Sess:       &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: core.ForwardedAuth(r)},
		Req:        &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tools/call", Params: params},
		ClientCaps: s.ClientCaps,
		Learn:      c.Learn,
		Slot:       slot,
	}
	if err := f.Runner.Launch(r.Context(), j, runner.LaunchSpec{Proto: taskstore.Protocol2025, Tool: p.Name, TTL: ttl, Poll: c.PollInterval}); err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2025))
		return
	}
	mcpwire.WriteResult(w, msg.ID, map[string]any{"task": core.ToTask2025(j.Task)})
}

// "Tool-Level Negotiation": -32601 both for a plain call of a tool that
// requires a task and for a task the tool does not support.
func errNeedsTask(tool string) *mcpwire.Error {
	return mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound,
		fmt.Sprintf("tool %q must be called as a task (execution.taskSupport is \"required\"): add params.task", tool))
}

func errNoTask(tool string) *mcpwire.Error {
	return mcpwire.NewError(http.StatusOK, mcpwire.CodeMethodNotFound,
		fmt.Sprintf("tool %q does not support task-augmented calls (no execution.taskSupport)", tool))
}
