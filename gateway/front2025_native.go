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
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
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
			ttl = time.Duration(math.Min(*res.Task.TTL, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond
		}
		owner := ownerOf(r)
		if err := f.store.PutUpstreamTask(r.Context(), owner, res.Task.TaskID, ttl); err != nil {
			// No replica could route its tasks/*: the upstream's task is
			// cancelled, and the client told the call failed.
			e := rpcError(err, era2025)
			f.log.Warn().Str("op", "native").Str("tool", learn).Err(err).Msg("cannot record the upstream's task id; cancelling it")
			cancel := mcpwire.MustMarshal(map[string]any{"jsonrpc": "2.0", "id": "taskgate-native-cancel",
				"method": "tasks/cancel", "params": map[string]any{"taskId": res.Task.TaskID}})
			go func() {
				ctx, stop := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
				defer stop()
				if resp, err := f.up.client.Forward(ctx, http.MethodPost, f.upstreamHeader(r), bytes.NewReader(cancel)); err == nil {
					resp.Body.Close()
				}
			}()
			mcpwire.WriteError(w, msg.ID, e)
			return
		}
		f.log.Info().Str("op", "native").Str("task_id", res.Task.TaskID).Str("owner", logOwner(owner)).
			Msg("upstream task passed through")
	}
	a.write(w, r, f.log, nil)
}

// upstreamTask forwards a tasks/* request of an id that is the upstream's
// own task, created by this owner, and reports whether it answered (a
// store failure is answered as one: retryable, not "not found").
func (f *front2025) upstreamTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message, owner, id string) bool {
	mine, _, err := f.store.UpstreamTaskOwner(r.Context(), owner, id)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "native", id, era2025))
		return true
	}
	if !mine {
		return false
	}
	f.up.forward(w, r, msg, f.upstreamHeader(r), "")
	return true
}

// foreignUpstreamTask answers -32602 for tasks/get|result|cancel, from a
// session the gateway serves no tasks for, of an upstream task another
// owner's call created; it reports whether it answered (else the request
// is relayed as it is).
func (f *front2025) foreignUpstreamTask(w http.ResponseWriter, r *http.Request, msg *mcpwire.Message) bool {
	if msg.MethodName() == "tasks/list" {
		return false
	}
	var p taskIDParams
	if json.Unmarshal(msg.Params, &p) != nil || p.TaskID == "" {
		return false
	}
	mine, anyone, err := f.store.UpstreamTaskOwner(r.Context(), ownerOf(r), p.TaskID)
	if err != nil {
		mcpwire.WriteError(w, msg.ID, taskError(f.log, err, "native", p.TaskID, era2025))
		return true
	}
	if anyone && !mine {
		mcpwire.WriteError(w, msg.ID, rpcError(taskstore.ErrNotFound, era2025)) // as for any unknown id
		return true
	}
	return false
}
