package front2025

// tasks/get, tasks/list and tasks/cancel of a 2025-11-25 session (MCP
// 2025-11-25, Tasks), and what tasks/result returns for a terminal task
// (result.go streams the rest). The state is in the store, so
// every method works on any replica.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/front"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
// Unknown params are tolerated (the TypeScript SDK sends task:{ttl} on
// tasks/get), and related-task _meta is ignored: taskId is the source of
// truth ("Associating Task-Related Messages").
type taskIDParams struct {
	TaskID string  `json:"taskId"`
	Cursor *string `json:"cursor"`
}

func (f *Front) tasks(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, s *sessionInfo) {
	var p taskIDParams
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &p) != nil {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, msg.MethodName()+" params must be an object"))
		return
	}
	owner := core.OwnerOf(r)
	if msg.MethodName() == "tasks/list" {
		if !f.Polls.Admit(w, msg, f.Metrics, owner, "") { // internal/front/ratelimit.go
			return
		}
		f.list(w, r, msg, owner, p.Cursor, s)
		return
	}
	if p.TaskID == "" {
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams, msg.MethodName()+" needs params.taskId"))
		return
	}
	// An id the store does not have may be the upstream's own task,
	// created through this owner's pass-through call (native.go):
	// then the upstream answers, on the client's session.
	missing := func() bool { return f.native.upstreamTask(w, r, msg, owner, p.TaskID) }
	switch msg.MethodName() {
	case "tasks/get":
		f.GetTask(w, r, msg, f.store, front.Render2025Get, core.Era2025, owner, p.TaskID, missing)
	case "tasks/cancel":
		f.cancel(w, r, msg, owner, p.TaskID, missing)
	case "tasks/result":
		// Not watched first: the upstream's own task streams from it.
		if rec, _, err := f.store.UpstreamTaskOwner(r.Context(), owner, p.TaskID); err == nil && rec != nil && rec.Protocol != taskstore.Protocol2026 {
			f.native.nativeTaskRequest(w, r, msg, rec)
			return
		}
		f.resultStream(w, r, msg, owner, p.TaskID, nil, missing)
	}
}

// list answers tasks/list: the owner's tasks, the gateway's and the
// upstream's own (native.go; their state asked of the upstream)
// in one order, newest first, with one cursor.
func (f *Front) list(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner string, cursor *string, s *sessionInfo) {
	c := ""
	if cursor != nil {
		c = *cursor
	}
	page, next, err := f.store.List(r.Context(), owner, c, 0)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "list", "", core.Era2025))
		return
	}
	var recs []*taskstore.UpstreamTask
	for _, l := range page {
		if l.Upstream != nil {
			recs = append(recs, l.Upstream)
		}
	}
	var native []json.RawMessage
	if len(recs) > 0 {
		native = f.native.nativeStates(r, s, recs)
	}
	out := struct {
		Tasks      []any  `json:"tasks"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Tasks: make([]any, 0, len(page)), NextCursor: next}
	for _, l := range page {
		if l.Task != nil {
			out.Tasks = append(out.Tasks, core.ToTask2025(l.Task))
			continue
		}
		out.Tasks = append(out.Tasks, native[0])
		native = native[1:]
	}
	mcpwire.WriteResult(w, msg.ID, out)
}

// cancel moves the task to cancelled before answering ("Task
// Cancellation": MUST transition before sending the response); the worker,
// on whichever replica holds the call, hears the cancel event and aborts
// the upstream call. A terminal task is refused with -32602.
func (f *Front) cancel(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string, missing func() bool) {
	t, err := f.store.RequestCancel(r.Context(), owner, id, "The task was cancelled by request.")
	if errors.Is(err, taskstore.ErrNotFound) && missing() {
		return
	}
	if errors.Is(err, taskstore.ErrTerminal) {
		status := "terminal"
		if cur, gerr := f.store.Get(r.Context(), owner, id); gerr == nil {
			status = string(cur.Status)
		}
		mcpwire.WriteError(w, msg.ID, mcpwire.NewError(http.StatusOK, mcpwire.CodeInvalidParams,
			fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status)))
		return
	}
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "cancel", id, core.Era2025))
		return
	}
	f.Metrics.TaskFinished(t, taskstore.StatusCancelled, 0)
	f.Trace.LinkTask(r.Context(), t)
	f.Log.Info().Str("op", "cancelled").Str("task_id", id).Str("tool", t.Tool).Str("owner", core.LogOwner(owner)).
		Float64("duration_seconds", time.Since(t.CreatedAt).Seconds()).Msg("task cancelled")
	f.Runner.StatusChanged(r.Context(), t)
	mcpwire.WriteResult(w, msg.ID, core.ToTask2025(t))
}

// finalResponse is what tasks/result returns for a terminal task: exactly
// what the underlying call returned, a result or a JSON-RPC error, with
// related-task _meta on a result ("Result Retrieval").
func finalResponse(id json.RawMessage, t *taskstore.Task) mcpwire.Response {
	if len(t.Error) > 0 && len(t.Result) == 0 {
		return mcpwire.Response{JSONRPC: "2.0", ID: id, Error: t.Error}
	}
	res := t.Result
	if len(res) == 0 { // cancelled before any result: the spec leaves it open
		res = json.RawMessage(`{"content":[{"type":"text","text":"The task was cancelled before it produced a result."}],"isError":true}`)
		if t.Status != taskstore.StatusCancelled {
			res = json.RawMessage(`{"content":[],"isError":true}`)
		}
	}
	return mcpwire.Response{JSONRPC: "2.0", ID: id, Result: mcpwire.WithMeta(res, core.RelatedTaskKey, core.RelatedTask(t.ID))}
}
