package runner

// How a task's worker ends: the upstream's outcome written (retried while
// Redis is briefly down: invariant 5), a cancel honoured upstream, or a
// gateway-side failure; then the lease released.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// fail ends the task as failed with a gateway-side reason.
func (run *taskRun) fail(msg string) {
	run.Abort(errors.New(msg))
	o := taskstore.Outcome{Error: core.InternalError(msg), Message: msg, WriteID: uuid.NewString()}
	err := run.rn.retry.do(run.writeCtx, func() error {
		return run.rn.Store.Fail(run.writeCtx, run.j.Owner, run.j.Task.ID, o)
	})
	if err == nil {
		run.observeInputWait()
		t := *run.j.Task
		t.StatusMessage = msg
		run.rn.Metrics.TaskFinished(&t, taskstore.StatusFailed, run.inputWait)
	}
	run.rn.settle(run.writeCtx, run.j, err)
	run.log().Warn().Str("op", "failed").Msg(msg)
}

// handleNotification records upstream progress on the task (latest
// progress, statusMessage) and relays it, and the upstream's log messages,
// to a 2025-11-25 client. Other upstream notifications during a task are
// not relayed; neither is progress for a 2026-07-28 client, which sees it
// as the statusMessage (SEP-2663).
func (rn *Runner) handleNotification(ctx context.Context, j *Job, n *jsonrpc.Request) {
	switch n.Method {
	case "notifications/progress":
		if err := rn.Store.SetProgress(ctx, j.Owner, j.Task.ID, n.Params, progressMessage(n.Params)); err == nil {
			rn.progress(ctx, j, n.Params)
		}
	case "notifications/message":
		// A log message (MCP "Logging"): the client's, as it comes; an
		// upstream sends them only at the level the client asked for.
		rn.logMessage(ctx, j, n.Params)
	}
}

// cancelled stops the work of a task cancelled in the store: a session
// upstream is told with notifications/cancelled (MCP
// "Cancellation"); the HTTP request is aborted either way, which is how a
// stateless upstream learns it. It reports true: the worker is done.
func (run *taskRun) cancelled() bool {
	rn, j := run.rn, run.j
	run.cancelUpstream("the task was cancelled")
	run.Abort(errTaskCancelled)
	run.observeInputWait()
	rn.release(run.writeCtx, j)
	run.log().Info().Str("op", "cancelled").Float64("duration_seconds", time.Since(run.Start).Seconds()).Msg("upstream call aborted: task cancelled")
	return true
}

var errTaskCancelled = errors.New("the task was cancelled")

// cancelUpstream tells a session upstream to stop the call in flight
// (notifications/cancelled, MCP "Cancellation"): aborting the HTTP request
// alone is not cancellation there, only disconnection. A stateless
// upstream learns it from the abort (run.Abort), which must follow.
func (run *taskRun) cancelUpstream(reason string) {
	if run.Call == nil || run.j.Sess.ID == "" {
		return
	}
	cctx, cancel := context.WithTimeout(run.writeCtx, 5*time.Second)
	_ = run.rn.Up.Cancel(cctx, run.j.Sess, run.reqID, reason)
	cancel()
}

// finish records the call's outcome. The 2025-11-25 rule: a CallToolResult
// with isError is a failed task; a JSON-RPC error is failed. A task already
// terminal (cancelled) stays as it is.
func (rn *Runner) finish(ctx context.Context, j *Job, log zerolog.Logger, res CallResult, start time.Time) {
	if rn.leaveForRerun(j, res, log) { // rerun.go
		return
	}
	t := j.Task
	status := taskstore.StatusCompleted
	// One write id for every attempt: an attempt Redis ran but whose reply
	// was lost (it died before answering) makes the retry a success, not
	// "already terminal" (taskstore.Outcome.WriteID).
	o := taskstore.Outcome{WriteID: uuid.NewString()}
	switch {
	case errors.Is(res.Err, errTaskCancelled):
		rn.release(ctx, j)
		return
	case errors.Is(res.Err, taskstore.ErrLeaseLost):
		return // another replica owns the task now
	case res.Err != nil:
		status = taskstore.StatusFailed
		o.Message = rn.failureMessage(res.Err)
		o.Error = core.InternalError(o.Message)
	case res.Resp.Error != nil:
		status = taskstore.StatusFailed
		o.Error, _ = json.Marshal(res.Resp.Error)
		o.Message = "the tool call failed: " + res.Resp.Error.Error()
	case core.IsErrorResult(res.Resp.Result) && t.Protocol == taskstore.Protocol2025:
		status = taskstore.StatusFailed
		o.Result, o.Message = res.Resp.Result, "the tool reported an error (isError)"
	default:
		o.Result = res.Resp.Result
	}
	// The outcome, the lease's release and the status notification in one
	// write: one round trip where there were four (and a read).
	err := rn.retry.do(ctx, func() error {
		return rn.Store.FinishAndRelease(ctx, t, rn.Replica, status, o, statusNote)
	})
	if errors.Is(err, taskstore.ErrResultTooLarge) {
		status, err = taskstore.StatusFailed, nil
	}
	if !finishReleased(err) {
		rn.settle(ctx, j, err)
	}
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		log.Info().Str("op", "discarded").Msg("upstream answered after the task ended; its result is dropped")
		return
	case errors.Is(err, taskstore.ErrExpired), errors.Is(err, taskstore.ErrNotFound):
		rn.Trace.EndTask(t, obs.OutcomeExpired, j.inputWait) // its ttl ran out first: the span still ends
		log.Info().Str("op", "expired").Msg("the task expired before its outcome was recorded")
		return
	case err != nil:
		log.Error().Str("op", string(status)).Err(err).Msg("could not record the task's outcome")
		return
	}
	ended := *t
	ended.StatusMessage = o.Message
	rn.Metrics.TaskFinished(&ended, status, j.inputWait)
	ev := log.Info()
	if status == taskstore.StatusFailed {
		ev = log.Warn()
		if res.Err != nil {
			ev = ev.Str("error", rn.failureMessage(res.Err))
		}
	}
	ev.Str("op", string(status)).Float64("duration_seconds", time.Since(t.CreatedAt).Seconds()).Msg("task " + string(status))
}

// finishReleased reports whether FinishAndRelease ran its script, which
// gave the lease up (or found it not this replica's, or the task gone);
// otherwise (the store unavailable, the call failed before Redis
// answered) settle decides, as after Finish.
func finishReleased(err error) bool {
	return err == nil || errors.Is(err, taskstore.ErrTerminal) || errors.Is(err, taskstore.ErrExpired) ||
		errors.Is(err, taskstore.ErrNotFound)
}

// settle gives the task's lease up once its outcome is written, or moot
// (err is the write's error). When the store stayed unavailable the lease
// is kept: it runs out and a recoverer fails the task once Redis is back,
// instead of the task staying working, with no lease to find, until its
// ttl.
func (rn *Runner) settle(ctx context.Context, j *Job, err error) {
	if errors.Is(err, taskstore.ErrUnavailable) {
		return
	}
	rn.release(ctx, j)
}

func (rn *Runner) release(ctx context.Context, j *Job) {
	_ = rn.Store.Release(ctx, j.Owner, j.Task.ID, rn.Replica)
}

// LostMessage is the statusMessage of a task the gateway stopped under
// when no other replica shares its store (Params.Alone): the task is
// gone with this process, and nothing will run it again.
const LostMessage = "the gateway stopped before the upstream answered; with the embedded store no other replica can run the task again, so it is lost"

// failureMessage is failureMessage(err), but names the loss when this
// replica stops alone (Params.Alone).
func (rn *Runner) failureMessage(err error) string {
	if rn.Alone && rn.ctx.Err() != nil && (errors.Is(err, errStopping) || errors.Is(err, context.Canceled)) {
		return LostMessage
	}
	return failureMessage(err)
}

// failureMessage says why an upstream call produced no response, in words
// for the task's statusMessage.
func failureMessage(err error) string {
	var ue *upstream.UnreachableError
	switch {
	case errors.Is(err, errStopping), errors.Is(err, context.Canceled):
		return errStopping.Error() + " before the upstream answered"
	case errors.As(err, &ue):
		return ue.Error()
	case errors.Is(err, upstream.ErrSessionNotFound):
		return "the upstream session ended before the call finished"
	case errors.Is(err, upstream.ErrNoResponse):
		return "the upstream broke off the call: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "the task's ttl ran out before the upstream answered"
	}
	return "the upstream call failed: " + err.Error()
}

// progressMessage is the statusMessage a progress notification implies.
func progressMessage(params json.RawMessage) string {
	var p struct {
		Progress float64  `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.Message != "" {
		return p.Message
	}
	if p.Total != nil && *p.Total > 0 {
		return fmt.Sprintf("progress %g/%g", p.Progress, *p.Total)
	}
	return fmt.Sprintf("progress %g", p.Progress)
}
