package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
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

	limit   int // most upstream calls held at once (Config.MaxInflight); 0: no limit
	mu      sync.Mutex
	calls   int           // upstream calls held, plus slots reserved for calls about to start
	jobs    int           // worker goroutines running
	changed chan struct{} // closed (and replaced) whenever calls or jobs drops
}

func newWorkers(limit int) *workers {
	ctx, cancel := context.WithCancel(context.Background())
	return &workers{ctx: ctx, cancel: cancel, limit: max(limit, 0), changed: make(chan struct{})}
}

// reserve takes a slot for an upstream call about to start, unless limit
// calls are held already. The slot is handed to startCall (held=true), or
// given back with unreserve.
func (ws *workers) reserve() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.limit > 0 && ws.calls >= ws.limit {
		return false
	}
	ws.calls++
	return true
}

// unreserve gives back a slot from reserve (or ends a held call).
func (ws *workers) unreserve() { ws.drop(&ws.calls) }

func (ws *workers) drop(n *int) {
	ws.mu.Lock()
	*n--
	close(ws.changed)
	ws.changed = make(chan struct{})
	ws.mu.Unlock()
}

// inflight is how many upstream calls are held (or reserved).
func (ws *workers) inflight() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.calls
}

// idle waits until no upstream call is held and no worker runs, or ctx ends.
func (ws *workers) idle(ctx context.Context) error {
	for {
		ws.mu.Lock()
		busy, changed := ws.calls+ws.jobs, ws.changed
		ws.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
	// call is the upstream call when it started before the task existed
	// (hybrid); nil means the worker starts req.
	call *call
	// first is a server→client request taken off call before the task
	// existed; it becomes the task's first input request.
	first *jsonrpc.Request
	// clientCaps are the client's declared capabilities: an input request
	// it cannot answer is refused upstream, never shown to it.
	clientCaps json.RawMessage
	// modern is set for a task of a 2026-07-28 client.
	modern *modernJob
	// learn is the tool name the call's latency is recorded under; empty:
	// not learned (latency.go).
	learn string
	// slot: a reserved in-flight slot (workers.reserve) the worker's first
	// call takes over; only when call is nil.
	slot bool
}

// modernJob is what a task of a 2026-07-28 client needs besides job.
type modernJob struct {
	target *modernTarget
	// params are the tools/call params as sent upstream, the base of every
	// MRTR retry.
	params json.RawMessage
}

func (ws *workers) start(h *Handler, j *job) {
	ws.mu.Lock()
	ws.jobs++
	ws.mu.Unlock()
	ws.wg.Add(1)
	go h.work(j)
}

// errStopping is the cause when the gateway itself shuts down.
var errStopping = errors.New("the gateway replica running the task stopped")

type callResult struct {
	resp *jsonrpc.Response
	err  error
}

// call is one upstream request in flight. Its goroutine belongs to the
// Handler's workers; abort ends it.
type call struct {
	requests chan *jsonrpc.Request // server→client requests (legacy upstream)
	notes    chan *jsonrpc.Request // notifications
	done     chan callResult
	ctx      context.Context
	abort    context.CancelCauseFunc
	started  time.Time // when the request was sent
}

// startCall sends req on sess in a goroutine owned by the workers. It is
// the one place upstream calls are held, and counted (--max-inflight):
// held says the caller reserved the call's slot already (workers.reserve);
// otherwise the call is counted without a limit check (a running task's
// next MRTR round, a retry on a reopened session). The slot is given back
// when the call's goroutine ends.
func (h *Handler) startCall(parent context.Context, sess *upstream.Session, req *jsonrpc.Request, held bool) *call {
	ctx, abort := context.WithCancelCause(parent)
	c := &call{
		requests: make(chan *jsonrpc.Request, 8),
		notes:    make(chan *jsonrpc.Request, 32),
		done:     make(chan callResult, 1),
		ctx:      ctx,
		abort:    abort,
		started:  time.Now(),
	}
	if !held {
		h.workers.mu.Lock()
		h.workers.calls++
		h.workers.mu.Unlock()
	}
	h.workers.wg.Add(1)
	go func() {
		defer h.workers.wg.Done()
		resp, err := h.up.Call(ctx, sess, req, upstream.CallOptions{
			OnRequest: func(m *jsonrpc.Request) {
				select {
				case c.requests <- m:
				case <-ctx.Done():
				}
			},
			OnNotification: func(n *jsonrpc.Request) {
				select {
				case c.notes <- n:
				default: // progress is best effort; never stall the stream
				}
			},
		})
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause // say why we aborted, not just "context canceled"
		}
		// The call is no longer held once it returned: free its slot before
		// anyone hears of the result, so that whoever answers the client
		// (and the client's next call) sees the count already down.
		h.workers.unreserve()
		c.done <- callResult{resp, err}
	}()
	return c
}

// taskRun is one worker's state.
type taskRun struct {
	h      *Handler
	j      *job
	logc   *zerolog.Logger // log's, once built
	ctx    context.Context // the worker's: ends at the task's expiry or shutdown
	cancel context.CancelFunc
	store  context.Context // for store writes: outlives a cancelled ctx
	call   *call           // in flight; nil between MRTR rounds
	reqID  jsonrpc.ID      // the id of the upstream request in flight

	keys         int                        // input keys minted so far
	pending      map[string]jsonrpc.ID      // legacy upstream: key → its request id
	mrtr         map[string]string          // modern upstream: key → its inputRequests key
	mrtrAnswers  map[string]json.RawMessage // modern upstream: its key → the client's result
	requestState string

	start        time.Time // when the upstream call started (before the task, for a hybrid call)
	waitingSince time.Time
	inputWait    time.Duration
	live         liveTask // taskgate_tasks_live (metrics.go)
	resyncEvery  time.Duration
	renewedAt    time.Time // the last lease renewal (tick)
	renewing     bool      // a renewal is under way (renew)
	renewal      chan error
	takeID       string    // the take id of the last take that failed (deliverAnswers)
	resyncedAt   time.Time // the last resync (tick)
}

// work runs the job's task to its end (workers.start). Most held tasks
// spend their life parked in loop's select, and a parked goroutine's stack
// stays as large as it ever grew until the garbage collector halves it,
// which it does only while what is in use plus 800 bytes (runtime:
// stackNosplit) is under a quarter of it. So the deep calls stay off the
// parked goroutine: begin (the watch's subscription, the call's start)
// runs on the goroutine work starts on, which then hands the task to a
// fresh one (park); each select case's work is a function of its own, not
// inlined; and the lease is renewed by a short-lived goroutine of its own
// (tick). Parked with about 900 bytes in use, a worker keeps the stack it
// started with (4 KiB, the runtime's adaptive start) instead of the 8 KiB
// its setup and go-redis's call chain grew it to: 40 MB for 10,000 held
// tasks (bench -mode scale).
func (h *Handler) work(j *job) {
	run, watch := h.begin(j)
	if run == nil {
		h.workers.drop(&h.workers.jobs)
		h.workers.wg.Done()
		return
	}
	go run.park(watch)
}

// park is the worker's goroutine from begin to the end.
func (run *taskRun) park(watch *taskstore.Watch) {
	run.loop(watch)
	run.end(watch)
	run.h.workers.drop(&run.h.workers.jobs)
	run.h.workers.wg.Done()
}

// begin sets the worker up: its context, logger and metrics, the task's
// event watch, and the upstream call (started here unless the handler
// already holds it). nil when the task ended at once (no watch).
//
//go:noinline
func (h *Handler) begin(j *job) (*taskRun, *taskstore.Watch) {
	t := j.task
	ctx, cancel := context.WithDeadlineCause(h.workers.ctx, t.ExpiresAt(), errors.New("the task's ttl ran out"))
	run := &taskRun{
		h: h, j: j, ctx: ctx, cancel: cancel, store: context.WithoutCancel(ctx), start: time.Now(),
		pending: map[string]jsonrpc.ID{}, mrtr: map[string]string{}, mrtrAnswers: map[string]json.RawMessage{},
		live: liveTask{m: h.metrics}, resyncEvery: h.resyncInterval(), renewal: make(chan error, 1),
	}
	run.renewedAt, run.resyncedAt = run.start, run.start // the lease was taken with the task
	run.live.set(taskstore.StatusWorking)
	watch, err := h.store.Watch(ctx, j.owner, t.ID)
	if err != nil {
		if j.call != nil {
			j.call.abort(err)
		}
		if j.slot {
			h.workers.unreserve()
		}
		h.finish(run.store, j, *run.log(), callResult{err: err}, run.start)
		run.live.done()
		cancel()
		return nil, nil
	}
	run.call, run.reqID = j.call, j.req.ID
	if run.call == nil {
		run.call = h.startCall(ctx, j.sess, j.req, j.slot)
	}
	run.start = run.call.started
	if j.first != nil {
		run.inputRequest(j.first)
	}
	return run, watch
}

// log is the worker's logger, with the task's fields. It is built on
// first use: a held task that logs nothing until its end then holds no
// logger (about 700 bytes of context each) while it waits.
func (run *taskRun) log() *zerolog.Logger {
	if run.logc == nil {
		t := run.j.task
		l := run.h.log.With().Str("task_id", t.ID).Str("tool", t.Tool).Str("owner", shortOwner(run.j.owner)).
			Str("replica", run.h.cfg.ReplicaID).Logger()
		run.logc = &l
	}
	return run.logc
}

// end undoes begin, in reverse: the call still in flight is aborted, the
// watch closed, the live gauge and the context released.
//
//go:noinline
func (run *taskRun) end(watch *taskstore.Watch) {
	if run.call != nil {
		run.call.abort(nil)
	}
	watch.Close()
	run.live.done()
	run.cancel()
}

// loop waits for what the task's worker must act on. Each case's work is
// a method of its own (see work): it reports whether the worker is done.
func (run *taskRun) loop(watch *taskstore.Watch) {
	h := run.h
	tick := time.NewTicker(run.tickEvery())
	defer tick.Stop()
	for {
		var done <-chan callResult
		var requests, notes <-chan *jsonrpc.Request
		if run.call != nil {
			done, requests, notes = run.call.done, run.call.requests, run.call.notes
		}
		select {
		case res := <-done:
			if run.answered(res) {
				return
			}
		case m := <-requests:
			run.inputRequest(m)
		case <-run.ctx.Done():
			run.expired()
			return
		case n := <-notes:
			h.handleNotification(run.store, run.j, n)
		case ev, ok := <-watch.C:
			if run.event(ev, ok) {
				return
			}
		case <-tick.C:
			if run.tick() {
				return
			}
		case err := <-run.renewal:
			run.renewing = false
			if run.renewed(err) {
				return
			}
		}
	}
}

// answered handles the upstream's answer to the call in flight: another
// MRTR round, or the task's outcome.
//
//go:noinline
func (run *taskRun) answered(res callResult) (done bool) {
	h, j := run.h, run.j
	// Notifications the upstream sent before its answer come first.
	for drained := false; !drained; {
		select {
		case n := <-run.call.notes:
			h.handleNotification(run.store, j, n)
		default:
			drained = true
		}
	}
	run.call = nil
	if run.mrtrRound(res) {
		return false
	}
	run.stopWaiting()
	run.observeInputWait()
	if res.err == nil { // an answer, result or JSON-RPC error: the tool's latency
		h.observe(j.learn, time.Since(run.start)-run.inputWait)
	}
	h.finish(run.store, j, run.log().With().Dur("input_wait", run.inputWait).Logger(), res, run.start)
	return true
}

// expired ends the task at its expiry or the gateway's shutdown: a call
// started before the task existed (hybrid) does not hang off the worker's
// context, so it is ended here.
//
//go:noinline
func (run *taskRun) expired() {
	if run.call != nil {
		run.call.abort(context.Cause(run.ctx))
		res := <-run.call.done
		run.call = nil
		run.h.finish(run.store, run.j, *run.log(), res, run.start)
	}
}

// event handles an event of the task's watch (ok false: the watch ended,
// the gateway is stopping).
//
//go:noinline
func (run *taskRun) event(ev taskstore.Event, ok bool) (done bool) {
	if !ok {
		run.abort(errStopping)
		return true
	}
	if ev.Kind == taskstore.EventStatus || ev.Kind == taskstore.EventProgress || ev.Kind == taskstore.EventMessage {
		return false // our own writes
	}
	return run.deliverAnswers()
}

// tickEvery is the period of the worker's one timer: often enough for the
// lease renewal (every LeaseRenew) and the resync (every resyncEvery).
func (run *taskRun) tickEvery() time.Duration {
	return max(min(run.h.cfg.LeaseRenew, run.resyncEvery), time.Millisecond)
}

// tick renews the lease when it is due and, while the worker waits for the
// client's answers, looks for answers whose event was lost (a cancel whose
// event was lost is found by the renewal: ErrTerminal). A deadline within
// half a period counts as due, so the ticks do not drift past it.
//
//go:noinline
func (run *taskRun) tick() (done bool) {
	now, slack := time.Now(), min(run.h.cfg.LeaseRenew, run.resyncEvery)/2
	if !run.renewing && now.Sub(run.renewedAt) >= run.h.cfg.LeaseRenew-slack {
		run.renewedAt, run.renewing = now, true
		run.h.workers.wg.Add(1)
		go run.renew()
	}
	if run.waiting() && now.Sub(run.resyncedAt) >= run.resyncEvery-slack {
		run.resyncedAt = now
		return run.deliverAnswers()
	}
	return false
}

// waiting reports whether the worker waits for the client's answers.
func (run *taskRun) waiting() bool { return len(run.pending) > 0 || len(run.mrtr) > 0 }

// renew extends the task's lease, on a goroutine of its own (see work),
// and hands the outcome to the worker's loop (renewed). One at a time:
// renewing is set until the loop has it.
func (run *taskRun) renew() {
	defer run.h.workers.wg.Done()
	run.renewal <- run.h.store.Extend(run.store, run.j.owner, run.j.task.ID, run.h.cfg.ReplicaID, run.h.cfg.Lease)
}

// renewed acts on a lease renewal's outcome.
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
		run.abort(taskstore.ErrLeaseLost)
		return true
	}
	return false
}

// abort ends the call in flight, if any, with cause.
func (run *taskRun) abort(cause error) {
	if run.call != nil {
		run.call.abort(cause)
		<-run.call.done
		run.call = nil
	}
}

func (run *taskRun) mintKey() string {
	run.keys++
	return strconv.Itoa(run.keys)
}

func (run *taskRun) stopWaiting() {
	if !run.waitingSince.IsZero() {
		run.inputWait += time.Since(run.waitingSince)
		run.waitingSince = time.Time{}
		run.live.set(taskstore.StatusWorking)
	}
}

// startWaiting marks the task waiting for its client's answers.
func (run *taskRun) startWaiting() {
	if run.waitingSince.IsZero() {
		run.waitingSince = time.Now()
		run.live.set(taskstore.StatusInputRequired)
	}
}

// observeInputWait records, once the task ends, how long it waited for
// input in all (tasks that never asked are not observed).
func (run *taskRun) observeInputWait() {
	run.stopWaiting()
	if run.inputWait > 0 {
		run.h.metrics.inputWait.WithLabelValues(run.h.metrics.tools.label(run.j.task.Tool)).Observe(run.inputWait.Seconds())
	}
}

// inputRequest turns a legacy upstream's server→client request into an
// input request of the task (input_required), or refuses it upstream when
// the client did not declare the capability to answer it.
func (run *taskRun) inputRequest(m *jsonrpc.Request) {
	h, j := run.h, run.j
	if !clientCan(j.clientCaps, m.Method) {
		_ = h.up.Respond(run.store, j.sess, refusal(m))
		run.log().Info().Str("op", "refused").Str("method", m.Method).Msg("the client did not declare the capability; refused upstream")
		return
	}
	key := run.mintKey()
	in := map[string]taskstore.InputRequest{key: {Method: m.Method, Params: m.Params}}
	// Redis briefly down is waited out (as for the outcome, finish): the
	// upstream's question must not turn into an error result because
	// Redis blinked. One write id for every attempt: an attempt Redis ran
	// but whose reply was lost makes the next one a no-op, not a reused
	// key (found by e2e TestChaos on a slow disk).
	write := uuid.NewString()
	if err := h.retryStore(run.ctx, func() error {
		return h.store.AddInputRequests(run.store, j.owner, j.task.ID, in, "waiting for the client to answer "+m.Method, write)
	}); err != nil {
		// Terminal meanwhile (cancelled) or the store stayed down: the
		// upstream must not wait for an answer that cannot come.
		_ = h.up.Respond(run.store, j.sess, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
			Code: codeInternalError, Message: "taskgate could not relay " + m.Method + " to the client"}})
		run.log().Warn().Str("op", "input_required").Err(err).Msg("input request not relayed")
		return
	}
	run.pending[key] = m.ID
	run.startWaiting()
	run.log().Info().Str("op", "input_required").Str("method", m.Method).Str("key", key).Msg("task needs input")
	h.notifyStatusByID(run.store, j)
}

// refusal answers an input request the client cannot serve: a declined
// elicitation, else a method-not-found error.
func refusal(m *jsonrpc.Request) *jsonrpc.Response {
	if m.Method == "elicitation/create" {
		return &jsonrpc.Response{ID: m.ID, Result: json.RawMessage(`{"action":"decline"}`)}
	}
	return &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: codeMethodNotFound,
		Message: "the client did not declare the capability for " + m.Method}}
}

// clientCan reports whether capabilities caps let the client answer method.
// Unknown capabilities (nil) allow everything: the client then sees the
// request and may refuse it itself.
func clientCan(caps json.RawMessage, method string) bool {
	if len(caps) == 0 {
		return true
	}
	var c map[string]json.RawMessage
	if json.Unmarshal(caps, &c) != nil {
		return true
	}
	switch method {
	case "elicitation/create":
		return c["elicitation"] != nil
	case "sampling/createMessage":
		return c["sampling"] != nil
	case "roots/list":
		return c["roots"] != nil
	}
	return true
}

// mrtrRound handles a modern upstream's input_required result (SEP-2322
// multi round-trip requests): its inputRequests become the task's, under
// keys the gateway mints, and once all are answered the call is retried
// with inputResponses and the same requestState. It reports whether res
// was such a round (and the task goes on).
func (run *taskRun) mrtrRound(res callResult) bool {
	j := run.j
	if j.modern == nil || !j.modern.target.Modern || res.err != nil || res.resp == nil || res.resp.Error != nil {
		return false
	}
	var ir struct {
		ResultType    string                            `json:"resultType"`
		InputRequests map[string]taskstore.InputRequest `json:"inputRequests"`
		RequestState  *string                           `json:"requestState"`
	}
	if json.Unmarshal(res.resp.Result, &ir) != nil || ir.ResultType != "input_required" {
		return false
	}
	run.requestState = ""
	if ir.RequestState != nil {
		run.requestState = *ir.RequestState
	}
	toStore := map[string]taskstore.InputRequest{}
	for _, uk := range sortedInputKeys(ir.InputRequests) {
		in := ir.InputRequests[uk]
		if !clientCan(j.clientCaps, in.Method) {
			if in.Method == "elicitation/create" {
				run.mrtrAnswers[uk] = json.RawMessage(`{"action":"decline"}`)
				continue
			}
			run.fail("the upstream asked for " + in.Method + ", which the client did not declare it can answer")
			return true
		}
		key := run.mintKey()
		toStore[key] = in
		run.mrtr[key] = uk
	}
	if len(toStore) > 0 {
		msg := "waiting for the client to answer " + strconv.Itoa(len(toStore)) + " input request(s)"
		write := uuid.NewString() // as in inputRequest
		if err := run.h.retryStore(run.ctx, func() error {
			return run.h.store.AddInputRequests(run.store, j.owner, j.task.ID, toStore, msg, write)
		}); err != nil {
			run.fail("could not record the upstream's input requests: " + err.Error())
			return true
		}
		run.startWaiting()
		run.log().Info().Str("op", "input_required").Int("requests", len(toStore)).Msg("task needs input")
	}
	if len(run.mrtr) == 0 {
		run.retry()
	}
	return true
}

// retry sends the tools/call again with the answers collected so far and
// the requestState of the last round.
func (run *taskRun) retry() {
	j := run.j
	var p map[string]json.RawMessage
	_ = json.Unmarshal(j.modern.params, &p)
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	p["inputResponses"] = mustJSON(run.mrtrAnswers)
	if run.requestState != "" {
		p["requestState"] = mustJSON(run.requestState)
	} else {
		delete(p, "requestState")
	}
	run.mrtrAnswers = map[string]json.RawMessage{}
	run.reqID, _ = jsonrpc.MakeID("taskgate-" + uuid.NewString())
	run.stopWaiting()
	run.call = run.h.startCall(run.ctx, j.sess, &jsonrpc.Request{ID: run.reqID, Method: "tools/call", Params: mustJSON(p)}, false)
}

// fail ends the task as failed with a gateway-side reason.
func (run *taskRun) fail(msg string) {
	run.abort(errors.New(msg))
	e, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
	o := taskstore.Outcome{Error: e, Message: msg, WriteID: uuid.NewString()}
	err := run.h.retryStore(run.store, func() error {
		return run.h.store.Fail(run.store, run.j.owner, run.j.task.ID, o)
	})
	if err == nil {
		run.observeInputWait()
		run.h.metrics.taskFinished(run.j.task.Tool, taskstore.StatusFailed, run.j.task.CreatedAt)
	}
	run.h.settle(run.store, run.j, err)
	run.log().Warn().Str("op", "failed").Msg(msg)
}

// handleNotification records upstream progress on the task (latest
// progress, statusMessage) and relays it to a legacy client. Other upstream
// notifications during a task are not relayed; neither is progress for a
// modern client, which sees it as the statusMessage (SEP-2663).
func (h *Handler) handleNotification(ctx context.Context, j *job, n *jsonrpc.Request) {
	if n.Method != "notifications/progress" {
		return
	}
	if err := h.store.SetProgress(ctx, j.owner, j.task.ID, n.Params, progressMessage(n.Params)); err == nil {
		h.relayProgress(ctx, j, n.Params)
	}
}

// deliverAnswers takes the client's recorded answers and hands them to the
// upstream: a POSTed response with the upstream's own request id (legacy
// upstream), or, once a round is fully answered, a retried call (modern
// upstream). It reports whether the worker is done (the task was
// cancelled).
func (run *taskRun) deliverAnswers() (done bool) {
	h, j := run.h, run.j
	// One take id until a take succeeds: a take Redis ran but whose reply
	// was lost (it died before answering) took the answers out of the
	// record, and only a take with the same id gets them back (found by
	// e2e TestChaos: the task waited forever for answers already taken).
	if run.takeID == "" {
		run.takeID = "take-" + uuid.NewString()
	}
	answers, status, err := h.store.TakeInputResponses(run.store, j.owner, j.task.ID, run.takeID)
	if err != nil {
		return false // store briefly down: the resync timer tries again
	}
	run.takeID = ""
	if status == taskstore.StatusCancelled {
		return run.cancelled()
	}
	delivered := false
	for key, raw := range answers {
		var a inputAnswer
		_ = json.Unmarshal(raw, &a)
		if uk, ok := run.mrtr[key]; ok {
			delete(run.mrtr, key)
			run.mrtrAnswers[uk] = a.Result
			delivered = true
			continue
		}
		upID, ok := run.pending[key]
		if !ok {
			continue
		}
		delete(run.pending, key)
		resp := &jsonrpc.Response{ID: upID, Result: a.Result}
		if len(a.Error) > 0 {
			var we jsonrpc.Error
			if json.Unmarshal(a.Error, &we) != nil {
				we = jsonrpc.Error{Code: codeInternalError, Message: "the client answered with a malformed error"}
			}
			resp = &jsonrpc.Response{ID: upID, Error: &we}
		}
		if err := h.up.Respond(run.store, j.sess, resp); err != nil {
			run.log().Warn().Str("op", "answer").Str("key", key).Err(err).Msg("could not deliver the client's answer upstream")
			continue
		}
		delivered = true
	}
	if len(run.pending) == 0 && len(run.mrtr) == 0 {
		run.stopWaiting()
	}
	if delivered && run.call == nil && len(run.mrtr) == 0 && j.modern != nil {
		run.retry()
	}
	if delivered {
		h.notifyStatusByID(run.store, j)
	}
	return false
}

// cancelled stops the work of a task cancelled in the store: a legacy
// (session) upstream is told with notifications/cancelled (MCP
// "Cancellation"); the HTTP request is aborted either way, which is how a
// stateless upstream learns it. It reports true: the worker is done.
func (run *taskRun) cancelled() bool {
	h, j := run.h, run.j
	run.cancelUpstream("the task was cancelled")
	run.abort(errTaskCancelled)
	run.observeInputWait()
	h.release(run.store, j)
	run.log().Info().Str("op", "cancelled").Dur("duration", time.Since(run.start)).Msg("upstream call aborted: task cancelled")
	return true
}

var errTaskCancelled = errors.New("the task was cancelled")

// cancelUpstream tells a session upstream to stop the call in flight
// (notifications/cancelled, MCP "Cancellation"): aborting the HTTP request
// alone is not cancellation there, only disconnection. A stateless
// upstream learns it from the abort (run.abort), which must follow.
func (run *taskRun) cancelUpstream(reason string) {
	if run.call == nil || run.j.sess.ID == "" {
		return
	}
	cctx, cancel := context.WithTimeout(run.store, 5*time.Second)
	_ = run.h.up.Cancel(cctx, run.j.sess, run.reqID, reason)
	cancel()
}

// finish records the call's outcome. The 2025-11-25 rule: a CallToolResult
// with isError is a failed task; a JSON-RPC error is failed. A task already
// terminal (cancelled) stays as it is.
func (h *Handler) finish(ctx context.Context, j *job, log zerolog.Logger, res callResult, start time.Time) {
	t := j.task
	status := taskstore.StatusCompleted
	// One write id for every attempt: an attempt Redis ran but whose reply
	// was lost (it died before answering) makes the retry a success, not
	// "already terminal" (taskstore.Outcome.WriteID).
	o := taskstore.Outcome{WriteID: uuid.NewString()}
	switch {
	case errors.Is(res.err, errTaskCancelled):
		h.release(ctx, j)
		return
	case errors.Is(res.err, taskstore.ErrLeaseLost):
		return // another replica owns the task now
	case res.err != nil:
		status = taskstore.StatusFailed
		o.Message = failureMessage(res.err)
		o.Error, _ = json.Marshal(map[string]any{"code": codeInternalError, "message": o.Message})
	case res.resp.Error != nil:
		status = taskstore.StatusFailed
		o.Error, _ = json.Marshal(res.resp.Error)
		o.Message = "the tool call failed: " + res.resp.Error.Error()
	case isErrorResult(res.resp.Result) && t.Flavour == taskstore.FlavourLegacy:
		status = taskstore.StatusFailed
		o.Result, o.Message = res.resp.Result, "the tool reported an error (isError)"
	default:
		o.Result = res.resp.Result
	}
	err := h.retryStore(ctx, func() error { return h.store.Finish(ctx, j.owner, t.ID, status, o) })
	if errors.Is(err, taskstore.ErrResultTooLarge) {
		status, err = taskstore.StatusFailed, nil
	}
	h.settle(ctx, j, err)
	switch {
	case errors.Is(err, taskstore.ErrTerminal):
		log.Info().Str("op", "discarded").Msg("upstream answered after the task ended; its result is dropped")
		return
	case err != nil:
		log.Error().Str("op", string(status)).Err(err).Msg("could not record the task's outcome")
		return
	}
	h.metrics.taskFinished(t.Tool, status, t.CreatedAt)
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

// defaultStoreRetry is how long retryStore keeps trying: an upstream
// result waits this long for Redis to come back.
const defaultStoreRetry = 5 * time.Minute

// retryStore runs op until it succeeds, fails for a reason other than the
// store being unavailable, h.storeRetry (five minutes) has passed, or the
// Handler is closing (another replica's recoverer then fails the task): an upstream result
// is never dropped because Redis blinked (DESIGN.md invariant 5).
func (h *Handler) retryStore(ctx context.Context, op func() error) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(h.storeRetry)
	for {
		err := op()
		if !errors.Is(err, taskstore.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-h.workers.ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// settle gives the task's lease up once its outcome is written, or moot
// (err is the write's error). When the store stayed unavailable the lease
// is kept: it runs out and a recoverer fails the task once Redis is back,
// instead of the task staying working, with no lease to find, until its
// ttl.
func (h *Handler) settle(ctx context.Context, j *job, err error) {
	if errors.Is(err, taskstore.ErrUnavailable) {
		return
	}
	h.release(ctx, j)
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
