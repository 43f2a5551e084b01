package front2026

// Upstreams with 2026-07-28 tasks of their own, for 2026-07-28 clients
// (issue: "upstreams that already have tasks", the pass-through cell): a
// stateless upstream that declares the tasks extension in server/discover
// may answer any tools/call of a client that declares it with a task
// (SEP-2663, "Capability Negotiation": the server decides per request).
// When no rule names the tool, the call goes to it as it is, the client's
// extension kept; a CreateTaskResult in its answer is checked and the task
// recorded for the owner (PutUpstreamTask), so that tasks/get, tasks/update
// and tasks/cancel of that id go to the upstream from any replica, and
// another owner's get -32602 like any unknown id. A rule takes the tool
// over as for any upstream: the gateway's own task, the extension withheld
// from the upstream.
//
//	client ── tools/call (extension declared) ─▶ gateway ── as it is ─▶ upstream
//	        ◀── {resultType: "task", taskId} ── recorded for the owner ──┘
//	client ── tasks/get|update|cancel {taskId}, any replica
//	gateway: not a task of its own → recorded for this owner → forwarded

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/decide"
	"github.com/taskgate/taskgate/gateway/internal/native"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
)

// native2026 reports whether a tools/call decided c goes as it is to an
// upstream with tasks of its own: the upstream declares the tasks
// extension, the client declares it too, and no rule names the tool.
func (f *Front) native2026(r *http.Request, mr *statelessReq, c decide.Call) bool {
	if !mr.Tasks || core.AuthOwner(r) == "" && f.anonymous.Disabled {
		return false // a client the gateway runs no tasks for keeps no task records either
	}
	era, err := f.Up.Era(r.Context(), core.ForwardedAuth(r))
	if err != nil || !era.Stateless || !era.Tasks {
		return false
	}
	return !c.Ruled
}

// passNative2026 forwards a tools/call to the upstream as it is and
// records the task its answer creates, if any.
func (f *Front) passNative2026(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, tool string) {
	a := f.Up.AskStateless(w, r, msg)
	if a == nil {
		return
	}
	defer a.Close()
	var head struct {
		ResultType string `json:"resultType"`
	}
	if a.Result == nil || json.Unmarshal(a.Result, &head) != nil || head.ResultType != "task" {
		a.Write(w, r, f.Log, nil) // a result, an MRTR round or an error: the upstream's
		return
	}
	t, err := core.ParseCreateTaskResult2026(a.Result)
	if err != nil {
		e := mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, fmt.Sprintf(
			"the upstream answered the tools/call of %q with a malformed CreateTaskResult: %v; its answer: %s", tool, err, core.QuoteAnswer(a.Result)))
		f.Log.Warn().Str("op", "native").Str("tool", tool).Msg(e.Message)
		core.WriteStatelessError(w, msg.ID, e)
		return
	}
	owner := core.Owner2026(r, t.TaskID)
	ttl, out := native.KeepFor(f.store, owner, t.TTLMs, a, "")
	task := a.Result
	if out != nil {
		var m struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(out, &m) == nil {
			task = m.Result
		}
	}
	rec := taskstore.UpstreamTask{ID: t.TaskID, Owner: owner, Protocol: taskstore.Protocol2026, Tool: tool, Task: task}
	if err := native.Record(r.Context(), f.store, f.Up, f.Log, rec, ttl, core.ForwardedAuth(r)); err != nil {
		mcpwire.WriteError(w, msg.ID, core.RPCError(err, core.Era2026)) // the upstream's task is cancelled
		return
	}
	a.Write(w, r, f.Log, out)
}

// upstreamTask2026 answers tasks/get, tasks/update or tasks/cancel of an
// id the gateway has no task of, if this owner's call created it upstream,
// and reports whether it answered.
func (f *Front) upstreamTask2026(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string) bool {
	rec, _, err := f.store.UpstreamTaskOwner(r.Context(), owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, core.TaskError(f.Log, err, "native", id, core.Era2026))
		return true
	}
	if rec == nil || rec.Protocol != taskstore.Protocol2026 {
		return false
	}
	if rec.Lost != "" {
		f.answerLost2026(w, msg, rec)
		return true
	}
	a := f.Up.AskStateless(w, r, msg)
	if a == nil {
		return true
	}
	defer a.Close()
	if msg.MethodName() == "tasks/get" && a.Result == nil && native.NotFoundError(a.Msg) {
		// The upstream no longer knows a task whose record (kept for the
		// ttl it gave) lives: it lost it (a restart, say). Only tasks/get
		// says so: -32602 to an update or a cancel may refuse its params.
		native.MarkLost(r.Context(), f.store, f.Log, rec, native.TaskLost)
		f.answerLost2026(w, msg, rec)
		return true
	}
	a.Write(w, r, f.Log, nil)
	return true
}

// answerLost2026 answers for an upstream task that was lost: tasks/get
// sees it failed, with the error; tasks/update and tasks/cancel of a
// terminal task are acknowledged (they change nothing).
func (f *Front) answerLost2026(w http.ResponseWriter, msg *mcpwire.Message, rec *taskstore.UpstreamTask) {
	if msg.MethodName() != "tasks/get" {
		mcpwire.WriteResult(w, msg.ID, map[string]string{"resultType": "complete"})
		return
	}
	t := native.FailedRecord(rec, "ttlMs")
	for _, k := range []string{"result", "inputRequests", "requestState"} {
		delete(t, k)
	}
	t["resultType"] = "complete"
	t["error"] = map[string]any{"code": mcpwire.CodeInternalError, "message": rec.Lost}
	mcpwire.WriteResult(w, msg.ID, t)
}
