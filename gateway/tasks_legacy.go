package gateway

// 2025-11-25 tasks (../shared/spec/tasks-2025-11-25.mdx), served by the
// gateway for a session whose client negotiated 2025-11-25, whatever the
// upstream speaks: task-augmented tools/call, tasks/get, tasks/result,
// tasks/list and tasks/cancel. The state is in the store, so every method
// works on any replica.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// toolsCallParams is the part of tools/call params the gateway reads.
type toolsCallParams struct {
	Name string `json:"name"`
	// Task is the 2025-11-25 task augmentation ("Creating Tasks").
	Task *struct {
		TTL *float64 `json:"ttl"`
	} `json:"task"`
}

// serveToolsCall decides a tools/call: plain pass-through, or a task.
func (h *Handler) serveToolsCall(w http.ResponseWriter, r *http.Request, msg *message) {
	s, serr := h.sessionErr(r)
	if serr != nil {
		// This replica cannot look the session up (the store is down): a
		// plain call passes through; a task-augmented one cannot be served.
		var p toolsCallParams
		if json.Unmarshal(msg.Params, &p) == nil && p.Task != nil {
			writeRPCError(w, msg.ID, rpcError(serr))
			return
		}
	}
	if !s.legacyTasks() {
		// An older client: no tasks, but the call still teaches latency.
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(msg.Params, &p) == nil && p.Name != "" {
			if _, listed := h.toolInfo(r.Context(), p.Name); listed {
				msg.learn = p.Name
			}
		}
		h.forward(w, r, msg)
		return
	}
	var p toolsCallParams
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "tools/call params must be an object with a tool name"))
		return
	}
	d, learn := h.decide(r.Context(), p.Name, policy.FlavourLegacy)
	ts := d.TaskSupport
	// "Tool-Level Negotiation": -32601 both for a task the tool does not
	// support and for a plain call of a tool that requires one.
	if p.Task == nil {
		if ts == policy.TaskSupportRequired {
			writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeMethodNotFound,
				fmt.Sprintf("tool %q must be called as a task (execution.taskSupport is \"required\"): add params.task", p.Name)))
			return
		}
		msg.learn = learn
		h.forward(w, r, msg)
		return
	}
	if !ts.AllowsTask() {
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeMethodNotFound,
			fmt.Sprintf("tool %q does not support task-augmented calls (no execution.taskSupport)", p.Name)))
		return
	}
	var ttl time.Duration
	if p.Task.TTL != nil {
		if *p.Task.TTL < 0 || math.IsNaN(*p.Task.TTL) {
			writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "params.task.ttl must be a non-negative number of milliseconds"))
			return
		}
		ttl = time.Duration(math.Min(*p.Task.TTL, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond
	}
	params, err := withoutKey(msg.Params, "task")
	if err != nil {
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "tools/call params must be an object"))
		return
	}
	if e := h.admit(); e != nil {
		writeRPCError(w, msg.ID, e)
		return
	}
	j := &job{
		owner:      ownerOf(r),
		sess:       &upstream.Session{ID: s.ID, ProtocolVersion: s.UpstreamVersion, Header: forwardedAuth(r)},
		req:        &jsonrpc.Request{ID: newUpstreamID(), Method: "tools/call", Params: params},
		clientCaps: s.ClientCaps,
		learn:      learn,
		slot:       true,
	}
	if err := h.createTask(r.Context(), j, taskstore.FlavourLegacy, p.Name, taskTTL(d, ttl, j.owner), d.PollInterval); err != nil {
		h.workers.unreserve()
		writeRPCError(w, msg.ID, rpcError(err))
		return
	}
	h.workers.start(h, j)
	writeResult(w, msg.ID, map[string]any{"task": toLegacyTask(j.task)})
}

// newUpstreamID mints the id of a request the gateway sends upstream on
// its own behalf: never one a client could also use on the session.
func newUpstreamID() jsonrpc.ID {
	id, _ := jsonrpc.MakeID("taskgate-" + uuid.NewString())
	return id
}

// createTask stores j's task durably, leased to this replica; the caller
// starts the worker and only then answers CreateTaskResult (DESIGN.md
// invariant 1: a tasks/get on any replica finds it). ttl and poll zero
// mean the store's defaults.
func (h *Handler) createTask(ctx context.Context, j *job, flavour taskstore.Flavour, tool string, ttl, poll time.Duration) error {
	rawID, _ := json.Marshal(j.req.ID.Raw())
	t, err := h.store.Create(ctx, taskstore.NewTask{
		Owner:        j.owner,
		Tool:         tool,
		Flavour:      flavour,
		TTL:          ttl,
		PollInterval: poll,
		Upstream:     taskstore.Upstream{RequestID: rawID, SessionID: j.sess.ID},
		Lease:        &taskstore.LeaseRequest{Holder: h.cfg.ReplicaID, Duration: h.cfg.Lease},
	})
	if err != nil {
		h.log.Warn().Str("op", "create").Str("tool", tool).Str("owner", shortOwner(j.owner)).Err(err).Msg(rpcError(err).Message)
		return err
	}
	j.task = t
	h.metrics.taskCreated(tool, flavour)
	h.log.Info().Str("op", "created").Str("task_id", t.ID).Str("tool", tool).Str("owner", shortOwner(j.owner)).
		Str("replica", h.cfg.ReplicaID).Str("flavour", string(flavour)).Dur("ttl", t.TTL).Dur("poll_interval", t.PollInterval).
		Msg("task created")
	return nil
}

// forwardedAuth is the part of the client's headers a worker sends on its
// own upstream requests: the client's credentials.
func forwardedAuth(r *http.Request) http.Header {
	h := http.Header{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		h["Authorization"] = v
	}
	return h
}

// withoutKey returns the JSON object obj without key.
func withoutKey(obj json.RawMessage, key string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		return nil, errors.New("not an object")
	}
	delete(m, key)
	return json.Marshal(m)
}

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
// Unknown params are tolerated (the TypeScript SDK sends task:{ttl} on
// tasks/get), and related-task _meta is ignored: taskId is the source of
// truth ("Associating Task-Related Messages").
type taskIDParams struct {
	TaskID string  `json:"taskId"`
	Cursor *string `json:"cursor"`
}

func (h *Handler) serveLegacyTasks(w http.ResponseWriter, r *http.Request, msg *message, s *sessionInfo) {
	var p taskIDParams
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &p) != nil {
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, msg.method()+" params must be an object"))
		return
	}
	owner := ownerOf(r)
	if msg.method() == "tasks/list" {
		if !h.pollAllowed(w, msg, owner, "") { // ratelimit.go
			return
		}
		h.listTasks(w, r, msg, owner, p.Cursor)
		return
	}
	if p.TaskID == "" {
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, msg.method()+" needs params.taskId"))
		return
	}
	switch msg.method() {
	case "tasks/get":
		if !h.pollAllowed(w, msg, owner, p.TaskID) {
			return
		}
		raw, err := h.getRendered(r.Context(), renderLegacyGet, owner, p.TaskID) // rendercache.go
		if err != nil {
			writeRPCError(w, msg.ID, h.taskError(err, "get", p.TaskID))
			return
		}
		writeMarshalled(w, msg.ID, raw)
	case "tasks/cancel":
		h.cancelLegacy(w, r, msg, owner, p.TaskID)
	case "tasks/result":
		h.serveTaskResult(w, r, msg, owner, p.TaskID)
	}
}

// taskError maps a store error on a task operation, logging what is not
// the client's doing.
func (h *Handler) taskError(err error, op, id string) *rpcErr {
	e := rpcError(err)
	// A request the client gave up on (context.Canceled) is no gateway
	// fault: nobody reads the answer, and it is not logged.
	if e.Code == codeInternalError && !errors.Is(err, context.Canceled) {
		h.log.Warn().Str("op", op).Str("task_id", id).Err(err).Msg(e.Message)
	}
	return e
}

func (h *Handler) listTasks(w http.ResponseWriter, r *http.Request, msg *message, owner string, cursor *string) {
	c := ""
	if cursor != nil {
		c = *cursor
	}
	tasks, next, err := h.store.List(r.Context(), owner, c, 0)
	if err != nil {
		writeRPCError(w, msg.ID, h.taskError(err, "list", ""))
		return
	}
	out := struct {
		Tasks      []legacyTask `json:"tasks"`
		NextCursor string       `json:"nextCursor,omitempty"`
	}{Tasks: make([]legacyTask, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, toLegacyTask(t))
	}
	writeResult(w, msg.ID, out)
}

// cancelLegacy moves the task to cancelled before answering ("Task
// Cancellation": MUST transition before sending the response); the worker,
// on whichever replica holds the call, hears the cancel event and aborts
// the upstream call. A terminal task is refused with -32602.
func (h *Handler) cancelLegacy(w http.ResponseWriter, r *http.Request, msg *message, owner, id string) {
	t, err := h.store.RequestCancel(r.Context(), owner, id, "The task was cancelled by request.")
	if errors.Is(err, taskstore.ErrTerminal) {
		status := "terminal"
		if cur, gerr := h.store.Get(r.Context(), owner, id); gerr == nil {
			status = string(cur.Status)
		}
		writeRPCError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams,
			fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status)))
		return
	}
	if err != nil {
		writeRPCError(w, msg.ID, h.taskError(err, "cancel", id))
		return
	}
	h.metrics.taskFinished(t.Tool, taskstore.StatusCancelled, t.CreatedAt)
	h.log.Info().Str("op", "cancelled").Str("task_id", id).Str("tool", t.Tool).Str("owner", shortOwner(owner)).
		Dur("duration", time.Since(t.CreatedAt)).Msg("task cancelled")
	h.notifyStatus(r.Context(), t)
	writeResult(w, msg.ID, toLegacyTask(t))
}

// finalResponse is what tasks/result returns for a terminal task: exactly
// what the underlying call returned, a result or a JSON-RPC error, with
// related-task _meta on a result ("Result Retrieval").
func finalResponse(id json.RawMessage, t *taskstore.Task) rpcResponse {
	if len(t.Error) > 0 && len(t.Result) == 0 {
		return rpcResponse{JSONRPC: "2.0", ID: id, Error: t.Error}
	}
	res := t.Result
	if len(res) == 0 { // cancelled before any result: the spec leaves it open
		res = json.RawMessage(`{"content":[{"type":"text","text":"The task was cancelled before it produced a result."}],"isError":true}`)
		if t.Status != taskstore.StatusCancelled {
			res = json.RawMessage(`{"content":[],"isError":true}`)
		}
	}
	return rpcResponse{JSONRPC: "2.0", ID: id, Result: withMeta(res, relatedTaskKey, relatedTask(t.ID))}
}
