package runner

// A call the gateway holds of a stateless upstream's tool that runs only as
// a task of the upstream's own (the tasks extension: the upstream answers a
// request without the extension with -32021 naming it, SEP-2663 "Capability
// Negotiation"). The gateway's call declares no extension (it is the
// client's tasks server); on that -32021 it asks again declaring it, and
// holds the upstream's task underneath its own:
//
//	worker ── tools/call ──▶ upstream: -32021 (tasks extension required)
//	       ── tools/call, extension declared ──▶ {resultType: "task", taskId}
//	       ── tasks/get, every pollIntervalMs ──▶ working … input_required
//	       ◀─ input_required round (requestState names the held task)
//	worker records the questions; the client answers (tasks/result,
//	tasks/update, MRTR retry: whichever it speaks)
//	worker ── the "retry" ──▶ sent as tasks/update {inputResponses}
//	       ── tasks/get … completed: its result is the call's
//	abort  ── tasks/cancel ──▶
//
// The worker needs nothing new: the upstream's questions reach it as an
// MRTR round, and its retry, whose requestState names the held task,
// becomes a tasks/update.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// heldPrefix starts the requestState of a round of a held upstream task.
const heldPrefix = "taskgate-held:"

// Bounds of the polling of a held upstream task.
const (
	heldPollMin = 100 * time.Millisecond
	heldPollMax = 5 * time.Second
)

// requiresTasksExtension reports whether resp is the -32021 an upstream
// answers a request it can serve only as a task.
func requiresTasksExtension(resp *jsonrpc.Response) bool {
	var we *jsonrpc.Error
	if resp == nil || !errors.As(resp.Error, &we) || we.Code != mcpwire.CodeMissingCapability {
		return false
	}
	return strings.Contains(string(we.Data), core.TasksExtension)
}

// withTasksExtensionMeta returns params with the tasks extension declared
// in _meta's client capabilities.
func withTasksExtensionMeta(params json.RawMessage) json.RawMessage {
	p := map[string]json.RawMessage{}
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(p["_meta"], &meta)
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(meta[core.MetaClientCaps], &caps)
	ext := map[string]json.RawMessage{}
	_ = json.Unmarshal(caps["extensions"], &ext)
	ext[core.TasksExtension] = json.RawMessage(`{}`)
	caps["extensions"] = mcpwire.MustMarshal(ext)
	meta[core.MetaClientCaps] = mcpwire.MustMarshal(caps)
	p["_meta"] = mcpwire.MustMarshal(meta)
	return mcpwire.MustMarshal(p)
}

// heldRequest is the part of a tools/call that resumes a held task: the
// Task (from requestState) and the answers.
func heldRequest(req *jsonrpc.Request) (taskID string, responses json.RawMessage, ok bool) {
	if req.Method != "tools/call" || !strings.Contains(string(req.Params), heldPrefix) {
		return "", nil, false
	}
	var p struct {
		RequestState   string          `json:"requestState"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return "", nil, false
	}
	id, ok := strings.CutPrefix(p.RequestState, heldPrefix)
	return id, p.InputResponses, ok && id != ""
}

// callStateless sends req to a stateless upstream: as it is, or, when the
// upstream runs the tool only as its own task, holding that task; done
// gets the outcome. The answer to req as it is is waited for apart
// (upstream.Client.CallAsync), so done may run on another goroutine.
func (u *upstreamTasks) callStateless(ctx context.Context, sess *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions, done func(*jsonrpc.Response, error)) {
	if id, responses, ok := heldRequest(req); ok {
		done(u.resumeTask2026(ctx, sess, id, responses, req.Params))
		return
	}
	again := opts
	again.Body, again.Name = nil, "" // the pre-encoded body is req's: not kept while the call waits
	u.up.CallAsync(ctx, sess, req, opts, func(resp *jsonrpc.Response, err error) {
		done(u.statelessAnswered(ctx, sess, req, again, resp, err))
	})
}

// resumeTask2026 is the worker's retry of a held task's round: the answers
// go to the task, which then goes on.
func (u *upstreamTasks) resumeTask2026(ctx context.Context, sess *upstream.Session, id string, responses, params json.RawMessage) (*jsonrpc.Response, error) {
	meta := metaOf(withTasksExtensionMeta(params))
	update := mcpwire.MustMarshal(map[string]any{"taskId": id, "inputResponses": responses, "_meta": meta})
	if _, err := u.up.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/update", Params: update}, upstream.CallOptions{}); err != nil {
		return nil, err
	}
	return u.holdTask2026(ctx, sess, id, meta)
}

// statelessAnswered goes on from the upstream's answer to req as it is:
// that is the outcome, unless the upstream runs the tool only as its own
// Task (-32021), which is then asked for and held (with opts, which carry
// no pre-encoded body).
func (u *upstreamTasks) statelessAnswered(ctx context.Context, sess *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions, resp *jsonrpc.Response, err error) (*jsonrpc.Response, error) {
	if err != nil || req.Method != "tools/call" || !requiresTasksExtension(resp) {
		return resp, err
	}
	ext := &jsonrpc.Request{ID: core.NewUpstreamID(), Method: req.Method, Params: withTasksExtensionMeta(req.Params)}
	resp, err = u.up.Call(ctx, sess, ext, opts) // opts without req's pre-encoded body
	if err != nil || resp.Error != nil {
		return resp, err
	}
	var created struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if json.Unmarshal(resp.Result, &created) != nil || created.ResultType != "task" {
		return resp, nil // answered after all
	}
	if created.TaskID == "" || len(created.TaskID) > 256 {
		return nil, errors.New("the upstream answered with a task without a valid taskId; its answer: " + core.QuoteAnswer(resp.Result))
	}
	u.log.Info().Str("op", "native").Str("upstream_task_id", created.TaskID).Msg("upstream task held")
	return u.holdTask2026(ctx, sess, created.TaskID, metaOf(ext.Params))
}

// metaOf is params' _meta.
func metaOf(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	if len(p.Meta) == 0 {
		return json.RawMessage(`{}`)
	}
	return p.Meta
}

// holdTask2026 polls the upstream's task id until it ends, or asks for
// input (then its questions are returned as an MRTR round whose
// requestState names the task). An aborted call cancels the task.
func (u *upstreamTasks) holdTask2026(ctx context.Context, sess *upstream.Session, id string, meta json.RawMessage) (*jsonrpc.Response, error) {
	params := mcpwire.MustMarshal(map[string]any{"taskId": id, "_meta": meta})
	wait := time.Duration(0)
	for {
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				u.cancelTask2026(ctx, sess, id, meta)
				return nil, ctx.Err()
			}
		}
		resp, err := u.up.Call(ctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/get", Params: params}, upstream.CallOptions{})
		switch {
		case ctx.Err() != nil:
			u.cancelTask2026(ctx, sess, id, meta)
			return nil, ctx.Err()
		case err != nil:
			wait = heldPollMax // the upstream briefly unreachable: ask again
			continue
		case resp.Error != nil:
			if core.NotFoundWire(resp.Error) {
				return nil, errors.New("the upstream no longer knows its task (it restarted, or dropped the task before its ttl)")
			}
			return resp, nil
		}
		var t struct {
			Status         string          `json:"status"`
			StatusMessage  string          `json:"statusMessage"`
			PollIntervalMs int64           `json:"pollIntervalMs"`
			Result         json.RawMessage `json:"result"`
			Error          json.RawMessage `json:"error"`
			InputRequests  json.RawMessage `json:"inputRequests"`
		}
		if err := json.Unmarshal(resp.Result, &t); err != nil {
			return nil, errors.New("the upstream's tasks/get answer is malformed: " + core.QuoteAnswer(resp.Result))
		}
		switch t.Status {
		case "completed":
			return &jsonrpc.Response{ID: resp.ID, Result: WithoutRelatedTask(t.Result)}, nil
		case "failed":
			var we jsonrpc.Error
			if json.Unmarshal(t.Error, &we) != nil || we.Code == 0 {
				we = jsonrpc.Error{Code: mcpwire.CodeInternalError, Message: "the upstream's task failed: " + t.StatusMessage}
			}
			return &jsonrpc.Response{ID: resp.ID, Error: &we}, nil
		case "cancelled":
			return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: mcpwire.CodeInternalError,
				Message: "the upstream cancelled its task: " + t.StatusMessage}}, nil
		case "input_required":
			var asked map[string]json.RawMessage
			if json.Unmarshal(t.InputRequests, &asked) == nil && len(asked) > 0 {
				round := mcpwire.MustMarshal(map[string]any{"resultType": "input_required",
					"inputRequests": t.InputRequests, "requestState": heldPrefix + id})
				return &jsonrpc.Response{ID: resp.ID, Result: round}, nil
			}
		}
		wait = min(max(time.Duration(t.PollIntervalMs)*time.Millisecond, heldPollMin), heldPollMax)
	}
}

// cancelTask2026 sends tasks/cancel of the upstream's task, best effort.
func (u *upstreamTasks) cancelTask2026(ctx context.Context, sess *upstream.Session, id string, meta json.RawMessage) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	params := mcpwire.MustMarshal(map[string]any{"taskId": id, "_meta": meta})
	_, _ = u.up.Call(cctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/cancel", Params: params}, upstream.CallOptions{})
}
