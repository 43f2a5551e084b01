package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// A worker holds one task's upstream call. It runs on its own context, not
// the client's request (the client got CreateTaskResult and left), with
// the task's expiry as deadline. It owns the task's lease and renews it;
// it turns what the upstream sends into task state:
//
//	server→client request  → input request (task input_required)
//	notifications/progress → task progress (relayed by tasks/result)
//	the response           → completed / failed (written before anything
//	                         reports the task terminal: invariant 5)
//
// and what clients do into upstream traffic, wherever they did it:
//
//	"inputs" event → TakeInputResponses → POST the answers upstream
//	"cancel" event → notifications/cancelled upstream, abort the call

// workers owns every worker goroutine of a Handler.
type workers struct {
	ctx    context.Context // parent of every worker; cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWorkers() *workers {
	ctx, cancel := context.WithCancel(context.Background())
	return &workers{ctx: ctx, cancel: cancel}
}

// stop cancels every worker and waits for them to record their outcome.
func (ws *workers) stop() {
	ws.cancel()
	ws.wg.Wait()
}

// job is one task's upstream call.
type job struct {
	task  *taskstore.Task
	owner string
	sess  *upstream.Session
	req   *jsonrpc.Request // the tools/call sent upstream, with the gateway's id
}

func (ws *workers) start(h *Handler, j *job) {
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		h.work(j)
	}()
}

// errStopping is the cause when the gateway itself shuts down.
var errStopping = errors.New("the gateway replica running the task stopped")

type callResult struct {
	resp *jsonrpc.Response
	err  error
}

func (h *Handler) work(j *job) {
	t := j.task
	log := h.log.With().Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", shortOwner(j.owner)).
		Str("replica", h.cfg.ReplicaID).Logger()
	ctx, cancel := context.WithDeadlineCause(h.workers.ctx, t.ExpiresAt(), errors.New("the task's ttl ran out"))
	defer cancel()
	// The store's own calls use a context that outlives a cancelled call,
	// so the outcome can still be written.
	storeCtx := context.WithoutCancel(ctx)

	watch, err := h.store.Watch(ctx, j.owner, t.ID)
	if err != nil {
		h.finish(storeCtx, j, log, callResult{err: err}, time.Now())
		return
	}
	defer watch.Close()

	callCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	requests := make(chan *jsonrpc.Request, 8)
	notes := make(chan *jsonrpc.Request, 32)
	done := make(chan callResult, 1)
	start := time.Now()
	go func() {
		resp, err := h.up.Call(callCtx, j.sess, j.req, upstream.CallOptions{
			OnRequest: func(m *jsonrpc.Request) {
				select {
				case requests <- m:
				case <-callCtx.Done():
				}
			},
			OnNotification: func(n *jsonrpc.Request) {
				select {
				case notes <- n:
				default: // progress is best effort; never stall the stream
				}
			},
		})
		done <- callResult{resp, err}
	}()

	renew := time.NewTicker(h.cfg.LeaseRenew)
	defer renew.Stop()
	resync := time.NewTicker(h.resyncInterval())
	defer resync.Stop()
	pending := map[string]jsonrpc.ID{} // input key → the upstream's request id
	keys := 0
	var waitingSince time.Time
	var inputWait time.Duration

	for {
		select {
		case res := <-done:
			// Notifications the upstream sent before its answer come first.
			for drained := false; !drained; {
				select {
				case n := <-notes:
					h.handleNotification(storeCtx, j, n)
				default:
					drained = true
				}
			}
			if !waitingSince.IsZero() {
				inputWait += time.Since(waitingSince)
			}
			if cause := context.Cause(callCtx); res.err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
				res.err = cause
			}
			h.finish(storeCtx, j, log.With().Dur("input_wait", inputWait).Logger(), res, start)
			return

		case m := <-requests:
			keys++
			key := strconv.Itoa(keys)
			in := map[string]taskstore.InputRequest{key: {Method: m.Method, Params: m.Params}}
			if err := h.store.AddInputRequests(storeCtx, j.owner, t.ID, in, "waiting for the client to answer "+m.Method); err != nil {
				// Terminal meanwhile (cancelled) or the store is down: the
				// upstream must not wait for an answer that cannot come.
				_ = h.up.Respond(storeCtx, j.sess, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
					Code: codeInternalError, Message: "taskgate could not relay " + m.Method + " to the client"}})
				log.Warn().Str("op", "input_required").Err(err).Msg("input request not relayed")
				continue
			}
			pending[key] = m.ID
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			}
			log.Info().Str("op", "input_required").Str("method", m.Method).Str("key", key).Msg("task needs input")
			h.notifyStatusByID(storeCtx, j)

		case n := <-notes:
			h.handleNotification(storeCtx, j, n)

		case ev, ok := <-watch.C:
			if !ok {
				abort(errStopping)
				continue
			}
			if ev.Kind == taskstore.EventStatus || ev.Kind == taskstore.EventProgress {
				continue // our own writes
			}
			if h.deliverAnswers(storeCtx, j, pending, abort, log) && len(pending) == 0 && !waitingSince.IsZero() {
				inputWait += time.Since(waitingSince)
				waitingSince = time.Time{}
			}

		case <-resync.C:
			if h.deliverAnswers(storeCtx, j, pending, abort, log) && len(pending) == 0 && !waitingSince.IsZero() {
				inputWait += time.Since(waitingSince)
				waitingSince = time.Time{}
			}

		case <-renew.C:
			err := h.store.Extend(storeCtx, j.owner, t.ID, h.cfg.ReplicaID, h.cfg.Lease)
			switch {
			case errors.Is(err, taskstore.ErrTerminal):
				h.cancelUpstream(storeCtx, j, abort) // cancelled; the event may have been lost
			case errors.Is(err, taskstore.ErrLeaseLost):
				log.Warn().Str("op", "lease").Msg("lease lost to another replica; aborting the upstream call")
				abort(taskstore.ErrLeaseLost)
			}
		}
	}
}

// handleNotification records upstream progress on the task (latest
// progress, statusMessage) and relays it to the client. Other upstream
// notifications during a task are not relayed.
func (h *Handler) handleNotification(ctx context.Context, j *job, n *jsonrpc.Request) {
	if n.Method != "notifications/progress" {
		return
	}
	if err := h.store.SetProgress(ctx, j.owner, j.task.ID, n.Params, progressMessage(n.Params)); err == nil {
		h.relayProgress(ctx, j, n.Params)
	}
}

// deliverAnswers takes the client's recorded answers and posts them to the
// upstream with the upstream's own request ids. A cancelled task aborts
// the call instead. It reports whether any answer was delivered.
func (h *Handler) deliverAnswers(ctx context.Context, j *job, pending map[string]jsonrpc.ID,
	abort context.CancelCauseFunc, log zerolog.Logger) bool {
	answers, status, err := h.store.TakeInputResponses(ctx, j.owner, j.task.ID)
	if err != nil {
		return false // store briefly down: the resync timer tries again
	}
	if status == taskstore.StatusCancelled {
		h.cancelUpstream(ctx, j, abort)
		return false
	}
	delivered := false
	for key, raw := range answers {
		upID, ok := pending[key]
		if !ok {
			continue
		}
		delete(pending, key)
		var a inputAnswer
		_ = json.Unmarshal(raw, &a)
		resp := &jsonrpc.Response{ID: upID, Result: a.Result}
		if len(a.Error) > 0 {
			var we jsonrpc.Error
			if json.Unmarshal(a.Error, &we) != nil {
				we = jsonrpc.Error{Code: codeInternalError, Message: "the client answered with a malformed error"}
			}
			resp = &jsonrpc.Response{ID: upID, Error: &we}
		}
		if err := h.up.Respond(ctx, j.sess, resp); err != nil {
			log.Warn().Str("op", "answer").Str("key", key).Err(err).Msg("could not deliver the client's answer upstream")
			continue
		}
		delivered = true
	}
	if delivered {
		h.notifyStatusByID(ctx, j)
	}
	return delivered
}

// cancelUpstream tells the upstream to stop (MCP "Cancellation") and
// aborts the HTTP request. The task is already cancelled in the store.
func (h *Handler) cancelUpstream(ctx context.Context, j *job, abort context.CancelCauseFunc) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = h.up.Cancel(cctx, j.sess, j.req.ID, "the task was cancelled")
	abort(errTaskCancelled)
}

var errTaskCancelled = errors.New("the task was cancelled")

// finish records the call's outcome. The 2025-11-25 rule: a CallToolResult
// with isError is a failed task; a JSON-RPC error is failed. A task already
// terminal (cancelled) stays as it is.
func (h *Handler) finish(ctx context.Context, j *job, log zerolog.Logger, res callResult, start time.Time) {
	t := j.task
	var err error
	status := taskstore.StatusCompleted
	switch {
	case errors.Is(res.err, errTaskCancelled):
		log.Info().Str("op", "cancelled").Dur("duration", time.Since(start)).Msg("upstream call aborted: task cancelled")
		h.release(ctx, j)
		return
	case errors.Is(res.err, taskstore.ErrLeaseLost):
		return // another replica owns the task now
	case res.err != nil:
		status = taskstore.StatusFailed
		msg := failureMessage(res.err)
		e, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
		err = h.retryStore(ctx, func() error {
			return h.store.Fail(ctx, j.owner, t.ID, taskstore.Outcome{Error: e, Message: msg})
		})
	case res.resp.Error != nil:
		status = taskstore.StatusFailed
		e, _ := json.Marshal(res.resp.Error)
		msg := "the tool call failed: " + res.resp.Error.Error()
		err = h.retryStore(ctx, func() error {
			return h.store.Fail(ctx, j.owner, t.ID, taskstore.Outcome{Error: e, Message: msg})
		})
	case isErrorResult(res.resp.Result) && t.Flavour == taskstore.FlavourLegacy:
		status = taskstore.StatusFailed
		err = h.retryStore(ctx, func() error {
			return h.store.Fail(ctx, j.owner, t.ID, taskstore.Outcome{Result: res.resp.Result, Message: "the tool reported an error (isError)"})
		})
	default:
		err = h.retryStore(ctx, func() error { return h.store.Complete(ctx, j.owner, t.ID, res.resp.Result) })
	}
	if errors.Is(err, taskstore.ErrResultTooLarge) {
		status, err = taskstore.StatusFailed, nil
	}
	h.release(ctx, j)
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		log.Info().Str("op", "discarded").Msg("upstream answered after the task ended; its result is dropped")
		return
	case err != nil:
		log.Error().Str("op", string(status)).Err(err).Msg("could not record the task's outcome")
		return
	}
	ev := log.Info()
	if status == taskstore.StatusFailed {
		ev = log.Warn()
		if res.err != nil {
			ev = ev.Str("error", failureMessage(res.err))
		}
	}
	ev.Str("op", string(status)).Dur("duration", time.Since(t.CreatedAt)).Msg("task " + string(status))
	h.notifyStatusByID(ctx, j)
}

// retryStore runs op until it succeeds, fails for a reason other than the
// store being unavailable, or about a minute has passed: an upstream result
// is never dropped because Redis blinked (DESIGN.md invariant 5).
func (h *Handler) retryStore(ctx context.Context, op func() error) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if !errors.Is(err, taskstore.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (h *Handler) release(ctx context.Context, j *job) {
	_ = h.store.Release(ctx, j.owner, j.task.ID, h.cfg.ReplicaID)
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

// isErrorResult reports whether a CallToolResult has isError: true.
func isErrorResult(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
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
