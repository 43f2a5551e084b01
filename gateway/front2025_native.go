package gateway

// Upstream tools with tasks of their own, for 2025-11-25 clients (issue:
// "upstreams that already have tasks"): a tool whose tools/list entry
// declares execution.taskSupport is the upstream's to run as a task. Its
// task-augmented tools/call passes through untouched (params.task
// included), and the upstream's CreateTaskResult reaches the client; the
// task id is recorded in Redis under the calling owner (PutUpstreamTask),
// so that tasks/get, tasks/result and tasks/cancel of that id, on any
// replica, go to the upstream on the client's own session, and another
// owner's tasks/* of the id gets -32602 like any unknown id.
//
//	client ── tools/call {task} of a tool the upstream declares taskSupport for
//	gateway ── forwarded as it is ──▶ upstream: CreateTaskResult {task.taskId}
//	        ◀─ recorded: <prefix>:{owner}:ut:<taskId> (the task's ttl) ─ relayed
//	client ── tasks/get|result|cancel {taskId}, any replica
//	gateway: not a task of its own → recorded for this owner → forwarded

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// nativeTask reports whether tool runs as the upstream's own task for a
// task-augmented call: the upstream declared execution.taskSupport for it.
func (f *front2025) nativeTask(ctx context.Context, tool string) bool {
	decl, listed := f.decider.toolInfo(ctx, tool)
	return listed && decl.ts.AllowsTask()
}

// passNativeTask forwards a task-augmented call of the upstream's own task
// tool and records the task id its CreateTaskResult names.
func (f *front2025) passNativeTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, learn string) {
	a := f.up.forwardForRewrite(w, r, msg, identityHeader(f.upstreamHeader(r)), msg.Raw)
	if a == nil {
		return
	}
	defer a.close()
	var res struct {
		Task *struct {
			TaskID string   `json:"taskId"`
			TTL    *float64 `json:"ttl"`
		} `json:"task"`
	}
	if a.result != nil && json.Unmarshal(a.result, &res) == nil && res.Task != nil && res.Task.TaskID != "" {
		var ttl time.Duration
		if res.Task.TTL != nil && *res.Task.TTL > 0 {
			ttl = time.Duration(*res.Task.TTL) * time.Millisecond
		}
		owner := ownerOf(r)
		if err := f.store.PutUpstreamTask(r.Context(), owner, res.Task.TaskID, ttl); err != nil {
			// The client still gets its task; only replicas other than
			// the upstream's own answers cannot route it: say so.
			f.log.Warn().Str("op", "native").Str("tool", learn).Err(err).Msg("cannot record the upstream's task id; its tasks/* will not be routed")
		} else {
			f.log.Info().Str("op", "native").Str("task_id", res.Task.TaskID).Str("owner", logOwner(owner)).
				Msg("upstream task passed through")
		}
	}
	a.write(w, r, f.log, nil)
}

// upstreamTask forwards a tasks/* request of an id that is the upstream's
// own task, created by this owner, and reports whether it did.
func (f *front2025) upstreamTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string) bool {
	ok, err := f.store.IsUpstreamTask(r.Context(), owner, id)
	if err != nil || !ok {
		return false
	}
	f.up.forward(w, r, msg, f.upstreamHeader(r), "")
	return true
}
