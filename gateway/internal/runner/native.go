package runner

// A call the gateway holds of a native tool (the upstream declared
// execution.taskSupport for it, MCP 2025-11-25, Tasks) goes through the
// upstream's own task: the tools/call is sent task-augmented, and the
// upstream's CreateTaskResult is followed by tasks/result on the same
// session, whose stream carries the task's input requests (server→client
// Requests with related-task _meta) and, last, the tool's result. To the
// worker it is one call like any other: the same requests, notifications
// and outcome. An aborted call (the gateway's task cancelled, the replica
// stopping) cancels the upstream's task with tasks/cancel.
//
//	worker ── tools/call {task} ──▶ upstream: CreateTaskResult {taskId}
//	       ── tasks/result {taskId} ──▶ stream: elicitation/create …, result
//	abort  ── tasks/cancel {taskId} ──▶
//
// This is how a rule takes a native tool over (the gateway owns the task,
// the client sees one), and how a 2026-07-28 client gets a SEP-2663 task
// of a 2025-11-25 upstream's task tool.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/upstream"
)

// WithUpstreamTask returns tools/call params asking the upstream for a task
// of ttl (0: the upstream's default).
func WithUpstreamTask(params json.RawMessage, ttl time.Duration) (json.RawMessage, error) {
	task := json.RawMessage(`{}`)
	if ttl > 0 {
		task = mcpwire.MustMarshal(map[string]int64{"ttl": ttl.Milliseconds()})
	}
	return mcpwire.WithMember(params, "task", task)
}

// viaUpstreamTask reports whether req is a task-augmented tools/call: one
// the gateway sends to run the upstream's own task.
func viaUpstreamTask(req *jsonrpc.Request) bool {
	if req.Method != "tools/call" || !bytes.Contains(req.Params, []byte(`"task"`)) {
		return false
	}
	var p struct {
		Task json.RawMessage `json:"task"`
	}
	return json.Unmarshal(req.Params, &p) == nil && len(p.Task) > 0 && !bytes.Equal(p.Task, []byte("null"))
}

// errUpstreamSessionLost is the outcome of a call whose upstream task's
// session went away.
var errUpstreamSessionLost = errors.New("the upstream session behind the upstream's task was lost (the upstream answered 404 for it: it restarted, or ended the session)")

// DefaultRestartGrace is how long a tasks/result whose stream broke
// without an answer (an idle timeout on the way, an upstream restarting)
// is asked again: long enough for a rolling restart of the upstream, which
// keeps its tasks (MCP 2025-11-25, Tasks: a task outlives its request).
const DefaultRestartGrace = 60 * time.Second

// resultBackoffMax caps the wait between two tasks/result asked again
// (0.2 s, 0.4 s, … up to this).
const resultBackoffMax = 2 * time.Second

// upstreamTasks holds the upstream's own tasks for the runner: a
// task-augmented tools/call's task waited for through tasks/result (asked
// again for a grace while the upstream restarts), a 2026-07-28 task's
// tasks/get rounds (native2026.go), and their cancellation. It needs only
// the upstream client and the log.
type upstreamTasks struct {
	up    upstreamCaller
	log   zerolog.Logger
	grace time.Duration // Params.RestartGrace; 0: DefaultRestartGrace
}

// callUpstream sends req: through the upstream's task when it is
// Task-augmented, else as it is; done gets the outcome. The answer is
// waited for apart (upstream.Client.CallAsync), so done may run on another
// goroutine.
func (rn *Runner) callUpstream(ctx context.Context, sess *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions, done func(*jsonrpc.Response, error)) {
	switch {
	case sess.ID == "" && sess.ProtocolVersion == core.Version2026:
		rn.upstream.callStateless(ctx, sess, req, opts, done) // native2026.go
	case !viaUpstreamTask(req):
		rn.Up.CallAsync(ctx, sess, req, opts, done)
	default:
		rn.upstream.callNative(ctx, sess, req, opts, done)
	}
}

// callNative holds the upstream's own task of req, a task-augmented
// tools/call; done gets the outcome. The task's tasks/result is waited for
// apart (upstream.Client.CallAsync), so done may run on another goroutine.
func (u *upstreamTasks) callNative(ctx context.Context, sess *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions, done func(*jsonrpc.Response, error)) {
	hooks := nativeHooksOf(ctx) // a durable task's (rerun.go)
	if hooks != nil && hooks.attach != "" {
		u.holdNative(ctx, sess, hooks.attach, opts, done) // re-attached: the task runs upstream already
		return
	}
	resp, err := u.up.Call(ctx, sess, req, opts)
	if err != nil || resp.Error != nil {
		done(resp, err)
		return
	}
	if !HasMember(resp.Result, "task") {
		// The upstream ran it as a plain call after all (it may, for a
		// tool whose taskSupport is "optional"): that is the outcome.
		done(resp, nil)
		return
	}
	t, _, err := core.ParseCreateTaskResult(resp.Result)
	if err != nil {
		done(nil, fmt.Errorf("the upstream answered the task-augmented tools/call without a valid CreateTaskResult: %v; its answer: %s", err, core.QuoteAnswer(resp.Result)))
		return
	}
	u.log.Info().Str("op", "native").Str("upstream_task_id", t.TaskID).Str("upstream_request_id", fmt.Sprint(req.ID.Raw())).
		Msg("upstream task held")
	if hooks != nil && hooks.note != nil {
		hooks.note(t.TaskID) // another replica can re-attach to it
	}
	u.holdNative(ctx, sess, t.TaskID, opts, done)
}

// holdNative waits for the outcome of the upstream's task id on sess.
func (u *upstreamTasks) holdNative(ctx context.Context, sess *upstream.Session, id string, opts upstream.CallOptions, done func(*jsonrpc.Response, error)) {
	h := &nativeHold{u: u, Ctx: ctx, Sess: sess, taskID: id,
		params: mcpwire.MustMarshal(map[string]string{"taskId": id}),
		opts:   upstream.CallOptions{OnRequest: opts.OnRequest, OnNotification: opts.OnNotification}, Done: done}
	h.ask()
}

// nativeHold is the tasks/result of an upstream task callNative holds,
// asked again while its stream breaks before the answer.
type nativeHold struct {
	u      *upstreamTasks
	Ctx    context.Context
	Sess   *upstream.Session
	taskID string
	params json.RawMessage
	opts   upstream.CallOptions
	Done   func(*jsonrpc.Response, error)
	try    int       // asked again so often since a stream last lasted
	began  time.Time // when the last tasks/result was sent
	broke  time.Time // when the first of the breaks in a row began; zero: none
}

// ask sends tasks/result; answered goes on.
func (h *nativeHold) ask() {
	h.began = time.Now()
	h.u.up.CallAsync(h.Ctx, h.Sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/result", Params: h.params}, h.opts, h.answered)
}

// answered acts on tasks/result's outcome: the call's outcome, or asked
// again.
func (h *nativeHold) answered(res *jsonrpc.Response, err error) {
	u, ctx := h.u, h.Ctx
	switch {
	case ctx.Err() != nil:
		u.cancelUpstreamTask(ctx, h.Sess, h.taskID)
		h.Done(res, err)
		return
	case errors.Is(err, upstream.ErrSessionNotFound):
		h.Done(nil, errUpstreamSessionLost)
		return
	case err == nil && res.Error == nil:
		res.Result = WithoutRelatedTask(res.Result)
		h.Done(res, nil)
		return
	case err == nil:
		h.Done(res, nil) // the task's own JSON-RPC error: it ended upstream
		return
	case errors.Is(err, upstream.ErrNoResponse) || errors.Is(err, upstream.ErrUnreachable):
		// The stream broke before the answer, or the upstream is
		// restarting: ask again (a restarted upstream answers 404). A
		// stream that lasted was not the trouble: the budget starts over.
		if h.try == 0 || time.Since(h.began) > resultStreamLasted {
			h.try, h.broke = 0, h.began
		}
		if time.Since(h.broke) < u.restartGrace() {
			h.try++
			select {
			case <-time.After(min(time.Duration(h.try)*200*time.Millisecond, resultBackoffMax)):
			case <-ctx.Done():
			}
			h.ask()
			return
		}
		u.log.Warn().Str("op", "native").Str("upstream_task_id", h.taskID).Err(err).
			Float64("grace_seconds", u.restartGrace().Seconds()).Msg("the upstream stayed unreachable past the grace; the held task fails")
	}
	// Given up: the upstream's task must not run on for nobody.
	u.cancelUpstreamTask(ctx, h.Sess, h.taskID)
	h.Done(res, err)
}

// resultStreamLasted: a tasks/result stream that broke after this long
// was not the trouble: the grace starts over.
const resultStreamLasted = 30 * time.Second

func (u *upstreamTasks) restartGrace() time.Duration {
	if u.grace > 0 {
		return u.grace
	}
	return DefaultRestartGrace
}

// cancelUpstreamTask sends tasks/cancel of the upstream's task id, best
// effort, after the call holding it was aborted.
func (u *upstreamTasks) cancelUpstreamTask(ctx context.Context, sess *upstream.Session, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := u.up.Call(cctx, sess, &jsonrpc.Request{ID: core.NewUpstreamID(), Method: "tasks/cancel",
		Params: mcpwire.MustMarshal(map[string]string{"taskId": id})}, upstream.CallOptions{})
	if err != nil {
		u.log.Debug().Str("op", "native").Str("upstream_task_id", id).Err(err).Msg("cannot cancel the upstream's task")
	}
}

// WithoutRelatedTask drops the related-task _meta of the upstream's task
// from its result: the client's task is another (the gateway's, or none).
func WithoutRelatedTask(result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, []byte(core.RelatedTaskKey)) {
		return result
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m == nil {
		return result
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) != nil || meta == nil {
		return result
	}
	delete(meta, core.RelatedTaskKey)
	if len(meta) == 0 {
		delete(m, "_meta")
	} else {
		m["_meta"] = mcpwire.MustMarshal(meta)
	}
	if out, err := json.Marshal(m); err == nil {
		return out
	}
	return result
}

// HasMember reports whether obj is a JSON object with member key.
func HasMember(obj json.RawMessage, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
