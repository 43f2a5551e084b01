package gateway

// Tasks for 2026-07-28 clients that declare the io.modelcontextprotocol/tasks
// extension (SEP-2663, ../shared/spec/ext-tasks-spec.md): the gateway, not
// the client, decides per tools/call whether it becomes a task; the task is
// polled with tasks/get (a DetailedTask with result, error or inputRequests
// inlined), fed with tasks/update, cancelled with tasks/cancel, and watched
// with subscriptions/listen. The worker and input relay are the ones the
// 2025-11-25 flavour uses; only the wire shapes differ.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
)

// MCP error codes of the 2026-07-28 schema.
const codeMissingCapability = -32021 // Missing Required Client Capability

const (
	// DefaultHybridWait is how long an "auto" tools/call may run before it
	// becomes a task (--hybrid-wait).
	DefaultHybridWait = time.Second
	// anonymousTTL caps the default ttl of a task whose owner has no
	// Authorization: its id is then the only bearer, so it should not live
	// long (SEP-2663 "Security Considerations").
	anonymousTTL = 10 * time.Minute
)

// modernTask is the SEP-2663 Task, and with its status payload inlined,
// the DetailedTask (ext-tasks-schema.ts).
type modernTask struct {
	ResultType     string                            `json:"resultType,omitempty"`
	TaskID         string                            `json:"taskId"`
	Status         string                            `json:"status"`
	StatusMessage  string                            `json:"statusMessage,omitempty"`
	CreatedAt      string                            `json:"createdAt"`
	LastUpdatedAt  string                            `json:"lastUpdatedAt"`
	TTLMs          int64                             `json:"ttlMs"`
	PollIntervalMs int64                             `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage                   `json:"result,omitempty"`
	Error          json.RawMessage                   `json:"error,omitempty"`
	InputRequests  map[string]taskstore.InputRequest `json:"inputRequests,omitempty"`
	Meta           map[string]any                    `json:"_meta,omitempty"`
}

// toModernTask renders t. detailed inlines the status payload: result when
// completed, error when failed, the outstanding input requests when
// input_required.
func toModernTask(t *taskstore.Task, resultType string, detailed bool) modernTask {
	mt := modernTask{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      wireTime(t.CreatedAt),
		LastUpdatedAt:  wireTime(t.LastUpdatedAt),
		TTLMs:          t.TTL.Milliseconds(),
		PollIntervalMs: t.PollInterval.Milliseconds(),
	}
	if !detailed {
		return mt
	}
	switch t.Status {
	case taskstore.StatusCompleted:
		// A legacy upstream's result lacks resultType, which 2026-07-28
		// requires on every result (schema-2026-07-28.ts Result).
		mt.Result = modernResult("tools/call", t.Result)
	case taskstore.StatusFailed:
		mt.Error = t.Error
		if len(mt.Error) == 0 {
			mt.Error = mustJSON(map[string]any{"code": codeInternalError, "message": t.StatusMessage})
		}
	case taskstore.StatusInputRequired:
		mt.InputRequests = t.InputRequests
	}
	return mt
}

// missingTasksCapability is the -32021 error naming the tasks extension.
func missingTasksCapability(why string) *rpcErr {
	e := newRPCErr(http.StatusOK, codeMissingCapability, "Missing required client capability: "+why)
	e.Data = mustJSON(map[string]any{"requiredCapabilities": map[string]any{
		"extensions": map[string]any{tasksExtension: map[string]any{}}}})
	return e
}

// modernMode is what a tools/call of a modern client becomes (DESIGN.md
// table "What each rule means per client").
type modernMode int

const (
	modeSync modernMode = iota
	modeTask
	modeAuto
	modeRefuse // required task, client without the extension: -32021
)

// decideModern decides a modern client's tools/call (policy.Decide, via
// decide) and maps the decision to what the gateway does; the Decision
// carries the hybrid wait, ttl and pollInterval, learn the name the call's
// latency is recorded under.
func (h *Handler) decideModern(ctx context.Context, tool string, mr *modernReq) (mode modernMode, d policy.Decision, learn string) {
	flavour := policy.FlavourModern
	if !mr.Tasks {
		flavour = policy.FlavourModernNoExt
	}
	d, learn = h.decide(ctx, tool, flavour)
	switch d.Mode {
	case policy.Task:
		return modeTask, d, learn
	case policy.Auto:
		return modeAuto, d, learn
	case policy.TaskRequired: // only without the extension: with it, Decide says Task
		return modeRefuse, d, learn
	}
	return modeSync, d, learn
}

// serveModernToolsCall decides a modern tools/call: forwarded, a task, or
// "auto" (hybrid): run, and become a task only if it takes long.
func (h *Handler) serveModernToolsCall(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	var p toolsCallParams
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "tools/call params must be an object with a tool name"))
		return
	}
	if id, responses, ok := bridgeState(msg.Params); ok {
		h.continueBridge(w, r, msg, mr, id, responses)
		return
	}
	mode, d, learn := h.decideModern(r.Context(), p.Name, mr)
	switch mode {
	case modeSync:
		msg.learn = learn
		h.forwardModern(w, r, msg, mr)
		return
	case modeRefuse:
		writeModernError(w, msg.ID, missingTasksCapability(fmt.Sprintf("tool %q runs only as a task", p.Name)))
		return
	}
	// A 2025-11-25 params.task means nothing here (the server decides) and
	// must not reach the upstream.
	params, err := withoutKey(msg.Params, "task")
	if err != nil {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "tools/call params must be an object"))
		return
	}
	owner, auth := ownerOf(r), forwardedAuth(r)
	target, err := h.modernUpstream(r.Context(), owner, auth, mr)
	if err != nil {
		writeModernError(w, msg.ID, rpcError(err))
		return
	}
	if e := h.admit(); e != nil {
		writeModernError(w, msg.ID, e)
		return
	}
	upParams := h.upstreamCallParams(params, target)
	j := &job{
		owner:      owner,
		sess:       target.Session,
		req:        &jsonrpc.Request{ID: newUpstreamID(), Method: "tools/call", Params: upParams},
		clientCaps: mr.ClientCaps,
		modern:     &modernJob{target: target, params: upParams},
		learn:      learn,
	}
	if mode == modeTask {
		j.slot = true
		h.startModernTask(w, r, msg, j, p.Name, d)
		return
	}
	h.hybrid(w, r, msg, j, p.Name, d)
}

// startModernTask creates the task, with the ttl and pollInterval of d,
// starts its worker and answers the flat CreateTaskResult, only once the
// task is durable ("Task Creation").
func (h *Handler) startModernTask(w http.ResponseWriter, r *http.Request, msg *message, j *job, tool string, d policy.Decision) {
	ttl := taskTTL(d, h.defaultTTL(j.owner), j.owner)
	if err := h.createTask(context.WithoutCancel(r.Context()), j, taskstore.FlavourModern, tool, ttl, d.PollInterval); err != nil {
		if j.call != nil {
			j.call.abort(err)
		}
		if j.slot {
			h.workers.unreserve()
		}
		writeModernError(w, msg.ID, rpcError(err))
		return
	}
	h.workers.start(h, j)
	writeResult(w, msg.ID, toModernTask(j.task, "task", false))
}

// defaultTTL is the ttl of a modern task (the client asks for none): the
// store's default, shorter for an anonymous owner.
func (h *Handler) defaultTTL(owner string) time.Duration {
	if owner == "anonymous" && h.store.Options().DefaultTTL > anonymousTTL {
		return anonymousTTL
	}
	return 0
}

// hybrid starts the upstream call and waits up to the hybrid budget
// (d.HybridWait). An answer in time goes back as it is, with no task and
// no store write, and teaches the tool's latency; so does an MRTR
// input_required round, which teaches nothing (SEP-2663: MRTR rounds SHOULD
// resolve before the task exists; the client's retry is decided afresh). A
// call still running, or a legacy upstream asking for input, becomes a task.
func (h *Handler) hybrid(w http.ResponseWriter, r *http.Request, msg *message, j *job, tool string, d policy.Decision) {
	wait := d.HybridWait
	if wait <= 0 {
		wait = DefaultHybridWait
	}
	c := h.startCall(h.workers.ctx, j.sess, j.req, true) // the slot admit reserved
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case res := <-c.done:
		if res.err == nil && !isInputRequired(res.resp) {
			h.observe(j.learn, time.Since(c.started))
		}
		h.writeCallResult(w, msg, res)
	case m := <-c.requests:
		j.call, j.first = c, m
		h.startModernTask(w, r, msg, j, tool, d)
	case <-timer.C:
		j.call = c
		h.startModernTask(w, r, msg, j, tool, d)
	case <-r.Context().Done():
		c.abort(errors.New("the client went away"))
		<-c.done
	}
}

// isInputRequired reports whether resp is an MRTR input_required result.
func isInputRequired(resp *jsonrpc.Response) bool {
	if resp == nil || resp.Error != nil || !bytes.Contains(resp.Result, []byte(`"input_required"`)) {
		return false
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(resp.Result, &r) == nil && r.ResultType == "input_required"
}

// writeCallResult answers a modern tools/call with the upstream's own
// answer: its result (marked resultType "complete" if the upstream, being
// legacy, did not say: modernResult), or its JSON-RPC error.
func (h *Handler) writeCallResult(w http.ResponseWriter, msg *message, res callResult) {
	switch {
	case res.err != nil:
		e := rpcError(res.err)
		h.log.Warn().Str("op", "call").Msg(e.Message)
		writeModernError(w, msg.ID, e)
	case res.resp.Error != nil:
		status := http.StatusOK
		var we *jsonrpc.Error
		if errors.As(res.resp.Error, &we) {
			status = modernStatus(int(we.Code))
		}
		writeJSON(w, status, rpcResponse{JSONRPC: "2.0", ID: msg.ID, Error: mustJSON(res.resp.Error)})
	default:
		writeResult(w, msg.ID, modernResult("tools/call", res.resp.Result))
	}
}

// serveModernTasks answers tasks/get, tasks/update and tasks/cancel, and
// refuses the 2025-11-25 methods the extension dropped.
func (h *Handler) serveModernTasks(w http.ResponseWriter, r *http.Request, msg *message, mr *modernReq) {
	method := msg.method()
	if method == "tasks/result" || method == "tasks/list" {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeMethodNotFound,
			"Method not found: "+method+" is not part of the tasks extension; poll tasks/get"))
		return
	}
	if !mr.Tasks {
		writeModernError(w, msg.ID, missingTasksCapability(method+" needs the tasks extension declared"))
		return
	}
	var p struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if mp, err := msg.modernParams(); err == nil && mp.TaskID != nil && len(mp.InputResponses) == 0 {
		p.TaskID = *mp.TaskID // what decoding params again would give (fastpath.go)
	} else if err := json.Unmarshal(msg.Params, &p); err != nil {
		p.TaskID = ""
	}
	if p.TaskID == "" {
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, method+" needs params.taskId"))
		return
	}
	owner := ownerOf(r)
	ack := map[string]string{"resultType": "complete"}
	switch method {
	case "tasks/get":
		if !h.pollAllowed(w, msg, owner, p.TaskID) { // ratelimit.go
			return
		}
		raw, err := h.getRendered(r.Context(), renderModernGet, owner, p.TaskID) // rendercache.go
		if err != nil {
			writeModernError(w, msg.ID, h.taskError(err, "get", p.TaskID))
			return
		}
		writeMarshalled(w, msg.ID, raw)
	case "tasks/update":
		if p.InputResponses == nil {
			writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeInvalidParams, "tasks/update needs params.inputResponses"))
			return
		}
		answers := make(map[string]json.RawMessage, len(p.InputResponses))
		for k, v := range p.InputResponses {
			answers[k] = mustJSON(inputAnswer{Result: v})
		}
		// One round trip: recorded durably, then acknowledged. Unknown or
		// already answered keys are ignored; a terminal task needs nothing.
		_, err := h.store.AnswerInputs(r.Context(), owner, p.TaskID, answers)
		if err != nil && !errors.Is(err, taskstore.ErrTerminal) {
			writeModernError(w, msg.ID, h.taskError(err, "update", p.TaskID))
			return
		}
		writeResult(w, msg.ID, ack)
	case "tasks/cancel":
		t, err := h.store.RequestCancel(r.Context(), owner, p.TaskID, "The task was cancelled by request.")
		switch {
		case errors.Is(err, taskstore.ErrTerminal):
		case err != nil:
			writeModernError(w, msg.ID, h.taskError(err, "cancel", p.TaskID))
			return
		default:
			h.metrics.taskFinished(t.Tool, taskstore.StatusCancelled, t.CreatedAt)
			h.log.Info().Str("op", "cancelled").Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", shortOwner(owner)).
				Dur("duration", time.Since(t.CreatedAt)).Msg("task cancelled")
		}
		writeResult(w, msg.ID, ack)
	default:
		writeModernError(w, msg.ID, newRPCErr(http.StatusOK, codeMethodNotFound, "Method not found: "+method))
	}
}
