package runner

// A worker holds one task's upstream call. It runs on the runner's
// context, not the client's request (the client got CreateTaskResult and
// left), with the task's expiry as deadline. It owns the task's lease and
// renews it; it turns what the upstream sends into task state:
//
//	server→client request  → input request (task input_required)
//	MRTR input_required    → input requests (input.go)
//	notifications/progress → task progress (relayed by tasks/result)
//	the response           → completed / failed (written before anything
//	                         reports the task terminal: invariant 5)
//
// and what clients do into upstream traffic, wherever they did it:
//
//	"inputs" event → TakeInputResponses → the answers upstream
//	"cancel" event → notifications/cancelled upstream, abort the call

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/durable"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// Job is one task's upstream call.
type Job struct {
	Task  *taskstore.Task
	Owner string
	// Id is the task's id when the front mints it (an anonymous task,
	// whose owner is made from it); empty: the store mints one.
	Id string
	// Addr is the client address an anonymous task counts against
	// (Config.Anonymous); empty for other owners.
	Addr string
	Sess *upstream.Session
	Req  *jsonrpc.Request // the tools/call sent upstream, with the gateway's id
	// Call is the upstream call when it started before the task existed
	// (hybrid); nil means the worker starts req.
	Call *InflightCall
	// First is a server→client request taken off call before the task
	// existed; it becomes the task's first input request.
	First *jsonrpc.Request
	// ClientCaps are the client's declared capabilities: an input request
	// it cannot answer is refused upstream, never shown to it.
	ClientCaps json.RawMessage
	// Client2026 is set for a call to a stateless upstream (its MRTR
	// rounds are retried with the answers) and for a task of a 2026-07-28
	// client.
	Client2026 *Job2026
	// Hidden: the task is one a plain call is held under, never shown to
	// its client as a task (not in tasks/list).
	Hidden bool
	// ClientSession is the client's session the task's notifications go
	// to, when it is not sess's (the gateway holds the session itself in
	// front of a stateless upstream: internal/front2025/stateless.go).
	ClientSession string
	// Learn is the tool name the call's latency is recorded under; empty:
	// not learned (decider.Observe).
	Learn string
	// Slot: a reserved in-flight slot (runner.Admit) the worker's first
	// Call takes over; only when call is nil.
	Slot *Slot
	// Fallback: a 2026-07-28 client's task followed through the fallback
	// Task tools (internal/front2026/fallback.go); callerCaps are the capabilities
	// that client declared (clientCaps is nil for it).
	Fallback   bool
	CallerCaps json.RawMessage
	// inputWait is how long the task waited for its client's answers, once
	// it ended (its span's attribute).
	inputWait time.Duration
	// Durable tasks (rerun.go): spec is what the task recorded to run
	// again (nil: it never does); attach the upstream task a re-attached
	// worker follows; keys the input keys the task used before;
	// notBefore when a rerun may start.
	spec      *durable.Spec
	attach    string
	keys      int
	notBefore time.Time
}

// principal is whose share j's calls count in (core.Principal, as its
// front admitted it); a job no front admitted (a rerun) counts for its
// owner.
func (j *Job) principal() string {
	switch {
	case j.Slot != nil:
		return j.Slot.principal
	case j.Call != nil && j.Call.slot != nil:
		return j.Call.slot.principal
	}
	return j.Owner
}

// Job2026 is what a task of a 2026-07-28 client needs besides job.
type Job2026 struct {
	Target *upstreamside.Target
	// Params are the tools/call params as sent upstream, the base of every
	// MRTR retry.
	Params json.RawMessage
}

// taskRun is one worker's state.
type taskRun struct {
	rn       *Runner
	j        *Job
	logc     *zerolog.Logger // log's, once built
	Ctx      context.Context // the worker's: ends at the task's expiry or shutdown
	cancel   context.CancelFunc
	writeCtx context.Context // for store writes: outlives a cancelled ctx
	Call     *InflightCall   // in flight; nil between MRTR rounds
	reqID    jsonrpc.ID      // the id of the upstream request in flight

	keys         int                        // input keys minted so far
	pending      map[string]jsonrpc.ID      // session upstream: key → its request id
	mrtr         map[string]string          // stateless upstream: key → its inputRequests key
	mrtrAnswers  map[string]json.RawMessage // stateless upstream: its key → the client's result
	requestState string

	Start        time.Time // when the upstream call started (before the task, for a hybrid call)
	waitingSince time.Time
	inputWait    time.Duration
	live         obs.LiveTask // taskgate_tasks_live (internal/obs)
	resyncEvery  time.Duration
	renewal      chan error
	takeID       string    // the take id of the last take that failed (deliverAnswers)
	resyncedAt   time.Time // the last resync (tick)

	// The worker has a goroutine only while it has something to do
	// (work): mu guards running and ended.
	watch     *taskstore.Watch
	Mu        sync.Mutex
	running   bool        // a goroutine is in drain
	ended     bool        // the worker is done: wake does nothing
	stopAfter func() bool // unregisters the wake on the context's end
}

// work runs the job's task to its end (runner.Start). Most running tasks
// spend their life waiting for the upstream's answer, with nothing to do:
// 10,000 held tasks per replica. So a worker has no goroutine of its own
// while it waits: whatever it must act on wakes it (wake) — the call
// (an answer, a server→client request, a notification), the task's watch
// (answers, a cancel), the lease renewal's outcome, the end of its
// context (expiry, shutdown) — and a fresh goroutine then drains what is
// pending (drain) and ends when nothing is, unless the worker waits for
// its client's answers, when it stays (its resync timer ticks). A waiting
// goroutine's stack stays as large as it ever grew; a dormant worker has
// none, and each drain starts with a small one.
func (rn *Runner) work(j *Job) {
	if !rn.waitNotBefore(j) { // a rerun's backoff (rerun.go)
		j.Slot.free()
		rn.drop(&rn.jobs)
		rn.wg.Done()
		return
	}
	run, watch := rn.begin(j)
	if run == nil {
		rn.drop(&rn.jobs)
		rn.wg.Done()
		return
	}
	run.watch = watch
	watch.SetWake(run.wake)
	run.stopAfter = context.AfterFunc(run.Ctx, run.wake)
	// running has been set since begin made run: wakes until now did
	// nothing, and this drain looks at whatever they announced.
	go run.Drain()
}

// wake makes sure a goroutine drains the worker's pending work: it starts
// one unless one runs or the worker ended. Every source of work calls it
// after it made its work visible (a send on a buffered channel, a closed
// watch, a done context), so drain's last look (idle) cannot miss it.
func (run *taskRun) wake() {
	run.Mu.Lock()
	if run.running || run.ended {
		run.Mu.Unlock()
		return
	}
	run.running = true
	run.Mu.Unlock()
	go run.Drain()
}

// Drain is the worker's goroutine while it has work: loop until it is
// Done (then the end) or idle.
//
// Small frames: a worker waiting for its client's answers keeps its
// goroutine parked in loop, and a parked goroutine keeps the largest stack
// it grew. Setup, cleanup and each select case are functions of their own,
// marked //go:noinline so the compiler does not fold their frames back
// into loop's: only then does the parked stack stay small enough for GC to
// halve it (docs/BENCHMARKS.md, RSS per held task).
func (run *taskRun) Drain() {
	if !run.loop(run.watch) {
		return // idle: the next wake starts another drain
	}
	run.Mu.Lock()
	run.ended = true
	run.Mu.Unlock()
	run.stopAfter()
	run.end(run.watch)
	run.rn.drop(&run.rn.jobs)
	run.rn.wg.Done()
}

// Idle ends the drain when nothing is pending and the worker does not wait
// for its client's answers: running is cleared under mu, so a wake after
// this look starts a new drain, and one before it made its work visible
// to the look.
func (run *taskRun) Idle(watch *taskstore.Watch) bool {
	if run.waiting() {
		return false
	}
	run.Mu.Lock()
	defer run.Mu.Unlock()
	if run.Call != nil && (len(run.Call.Done) > 0 || len(run.Call.Requests) > 0 || len(run.Call.Notes) > 0) ||
		len(watch.C) > 0 || watch.Ended() || watch.Dropped(false) || len(run.renewal) > 0 || run.Ctx.Err() != nil {
		return false
	}
	run.running = false
	return true
}

// adopt makes c the worker's call in flight: its sends wake the worker.
func (run *taskRun) adopt(c *InflightCall) {
	wake := run.wake
	c.wake.Store(&wake)
	run.Call = c
}

// begin sets the worker up: its context, logger and metrics, the task's
// event watch, and the upstream call (started here unless the handler
// already holds it). nil when the task ended at once (no watch).
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (rn *Runner) begin(j *Job) (*taskRun, *taskstore.Watch) {
	t := j.Task
	// The worker's upstream calls are children of the task's span.
	ctx, cancel := context.WithDeadlineCause(rn.Trace.TaskContext(rn.ctx, t), t.ExpiresAt(), errTTL)
	run := &taskRun{
		rn: rn, j: j, Ctx: ctx, cancel: cancel, writeCtx: context.WithoutCancel(ctx), Start: time.Now(),
		pending: map[string]jsonrpc.ID{}, mrtr: map[string]string{}, mrtrAnswers: map[string]json.RawMessage{},
		live: obs.NewLiveTask(rn.Metrics), resyncEvery: rn.resyncInterval(), renewal: make(chan error, 1),
		running: true, // until work starts the first drain: the setup is the worker's work
	}
	run.resyncedAt = run.Start
	run.live.Set(taskstore.StatusWorking)
	watch, err := rn.Store.Watch(ctx, j.Owner, t.ID)
	if err != nil {
		if j.Call != nil {
			j.Call.Abort(err)
		}
		j.Slot.free()
		rn.finish(run.writeCtx, j, *run.log(), CallResult{Err: err}, run.Start)
		run.live.Done()
		cancel()
		return nil, nil
	}
	rn.leases.add(run) // renewed with the others (leases.go)
	run.reqID, run.keys = j.Req.ID, j.keys
	if j.Call != nil {
		run.adopt(j.Call)
	} else {
		slot := j.Slot
		if slot == nil {
			slot = rn.Count(j.principal())
		}
		run.adopt(rn.StartCall(rerunContext(rn.nativeContext(ctx, j), j), j.Sess, j.Req, slot))
	}
	run.Start = run.Call.Started
	if j.First != nil {
		run.inputRequest(j.First)
	}
	return run, watch
}

// log is the worker's logger, with the task's fields. It is built on
// First use: a running task that logs nothing until its end then holds no
// logger (about 700 bytes of context each) while it waits.
func (run *taskRun) log() *zerolog.Logger {
	if run.logc == nil {
		t := run.j.Task
		l := run.rn.Log.With().Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", core.LogOwner(run.j.Owner)).
			Logger()
		run.logc = &l
	}
	return run.logc
}

// end undoes begin, in reverse: the call still in flight is aborted, the
// watch closed, the live gauge and the context released.
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) end(watch *taskstore.Watch) {
	run.rn.leases.remove(run)
	if run.Call != nil {
		run.Call.Abort(nil)
	}
	watch.Close()
	run.live.Done()
	run.cancel()
}

// loop acts on what the task's worker must act on until the worker is
// Done (true) or idle (false). Each case's work is a method of its own: it
// reports whether the worker is done. While the worker waits for its
// client's answers it blocks here, with its resync timer.
func (run *taskRun) loop(watch *taskstore.Watch) (done bool) {
	rn := run.rn
	var tick *time.Ticker
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		// An event the watch had no room for may have been an answer or a
		// cancel: look at the task (a cancel is also found by the next
		// lease renewal).
		if watch.Dropped(true) && run.deliverAnswers() {
			return true
		}
		if run.Idle(watch) {
			return false
		}
		var tickC <-chan time.Time
		if run.waiting() {
			if tick == nil {
				tick = time.NewTicker(run.tickEvery())
			}
			tickC = tick.C
		}
		var done <-chan CallResult
		var requests, notes <-chan *jsonrpc.Request
		if run.Call != nil {
			done, requests, notes = run.Call.Done, run.Call.Requests, run.Call.Notes
		}
		select {
		case res := <-done:
			if run.answered(res) {
				return true
			}
		case m := <-requests:
			run.inputRequest(m)
		case <-run.Ctx.Done():
			run.expired()
			return true
		case n := <-notes:
			rn.handleNotification(run.writeCtx, run.j, n)
		case ev, ok := <-watch.C:
			if run.event(ev, ok) {
				return true
			}
		case <-tickC:
			if run.tick() {
				return true
			}
		case err := <-run.renewal:
			if run.renewed(err) {
				return true
			}
		}
	}
}

// answered handles the upstream's answer to the call in flight: another
// MRTR round, or the task's outcome.
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) answered(res CallResult) (done bool) {
	rn, j := run.rn, run.j
	// Notifications the upstream sent before its answer come first.
	for drained := false; !drained; {
		select {
		case n := <-run.Call.Notes:
			rn.handleNotification(run.writeCtx, j, n)
		default:
			drained = true
		}
	}
	run.Call = nil
	if run.mrtrRound(res) {
		return false
	}
	if done, ok := run.rerunOnFailure(res); ok { // rerun.go
		return done
	}
	run.stopWaiting()
	run.observeInputWait()
	if res.Err == nil { // an answer, result or JSON-RPC error: the tool's latency
		rn.Observe(j.Learn, time.Since(run.Start)-run.inputWait)
	}
	rn.finish(run.writeCtx, j, run.log().With().Float64("input_wait_seconds", run.inputWait.Seconds()).Logger(), res, run.Start)
	return true
}

// expired ends the task at its expiry or the gateway's shutdown: a call
// Started before the task existed (hybrid) does not hang off the worker's
// context, so it is ended here.
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) expired() {
	if run.Call != nil {
		run.Call.Abort(context.Cause(run.Ctx))
		res := <-run.Call.Done
		run.Call = nil
		run.rn.finish(run.writeCtx, run.j, *run.log(), res, run.Start)
		return
	}
	if errors.Is(context.Cause(run.Ctx), errTTL) { // waiting for input when the ttl ran out
		run.observeInputWait()
		run.rn.Trace.EndTask(run.j.Task, obs.OutcomeExpired, run.inputWait)
	}
}

// errTTL is the worker context's cause when the task's ttl runs out.
var errTTL = errors.New("the task's ttl ran out")

// event handles an event of the task's watch (ok false: the watch ended,
// the gateway is stopping).
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) event(ev taskstore.Event, ok bool) (done bool) {
	if !ok {
		run.Abort(errStopping)
		return true
	}
	if ev.Kind == taskstore.EventStatus || ev.Kind == taskstore.EventProgress || ev.Kind == taskstore.EventMessage {
		return false // our own writes
	}
	return run.deliverAnswers()
}

// tickEvery is the period of the worker's one timer: the resync (every
// resyncEvery). Lease renewals come from the runner (leases.go).
func (run *taskRun) tickEvery() time.Duration {
	return max(run.resyncEvery, time.Millisecond)
}

// tick, while the worker waits for the client's answers, looks for
// answers whose event was lost (a cancel whose event was lost is found by
// the lease renewal: ErrTerminal). A deadline within half a period counts
// as due, so the ticks do not drift past it.
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) tick() (done bool) {
	now, slack := time.Now(), run.resyncEvery/2
	if run.waiting() && now.Sub(run.resyncedAt) >= run.resyncEvery-slack {
		run.resyncedAt = now
		return run.deliverAnswers()
	}
	return false
}

// waiting reports whether the worker waits for the client's answers.
func (run *taskRun) waiting() bool { return len(run.pending) > 0 || len(run.mrtr) > 0 }

// renewed acts on a lease renewal's outcome.
// Out of line: its frame must not sit in the waiting worker's (see
// "Small frames" on drain).
//
//go:noinline
func (run *taskRun) renewed(err error) (done bool) {
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		return run.cancelled() // the cancel event may have been lost
	case errors.Is(err, taskstore.ErrLeaseLost):
		// Another replica took the task over (this one stalled past its
		// lease): nobody will collect this call's result.
		run.log().Warn().Str("op", "lease").Msg("lease lost to another replica; aborting the upstream call")
		run.cancelUpstream("the gateway replica running the task lost its lease")
		run.Abort(taskstore.ErrLeaseLost)
		return true
	case errors.Is(err, taskstore.ErrNotFound), errors.Is(err, taskstore.ErrExpired):
		return run.gone(err)
	}
	return false
}

// gone stops the work of a task whose record is gone (Redis restarted
// without persistence, evicted it, or it expired): nobody can read its
// outcome any more, so the upstream is told to stop and the in-flight slot
// is freed now, not at the ttl.
func (run *taskRun) gone(err error) (done bool) {
	run.log().Warn().Str("op", "gone").Err(err).Msg("the task's record is gone from the store; aborting the upstream call")
	run.cancelUpstream("the task no longer exists")
	run.Abort(errTaskGone)
	run.observeInputWait()
	run.rn.Trace.EndTask(run.j.Task, obs.OutcomeExpired, run.inputWait)
	return true
}

// errTaskGone is the cause when the task's record vanished.
var errTaskGone = errors.New("the task's record is gone from the store")

// Abort ends the call in flight, if any, with cause.
func (run *taskRun) Abort(cause error) {
	if run.Call != nil {
		run.Call.Abort(cause)
		<-run.Call.Done
		run.Call = nil
	}
}

// notifySession is the client session j's notifications go to.
func (j *Job) notifySession() string {
	if j.ClientSession != "" {
		return j.ClientSession
	}
	return j.Sess.ID
}
