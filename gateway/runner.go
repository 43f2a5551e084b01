package gateway

// The task runner holds the upstream calls of tasks (and the hybrid and
// bridged calls that may become tasks), each in a worker with a lease on
// its task (runner_worker.go). It owns its own lifetime, the admission of
// new in-flight calls (--max-inflight, drain), and the recoverer that
// fails the tasks of dead replicas (runner_recoverer.go).
//
//	front ── admit ──▶ slot reserved (or -32603: draining, too many)
//	      ── launch ─▶ anonymous caps counted, task stored, leased to this
//	                   replica (invariant 1); on error all of it undone
//	                   └─ start ─▶ worker: call upstream, renew the lease,
//	                      relay input, write the outcome (invariant 5),
//	                      release the lease
//	front ── hold ───▶ an in-flight call with no task yet (hybrid, bridge),
//	                   launched later if it runs past the wait

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// runnerStore is what the runner needs of the task store.
type runnerStore interface {
	Create(ctx context.Context, n taskstore.NewTask) (*taskstore.Task, error)
	Watch(ctx context.Context, owner, id string) (*taskstore.Watch, error)
	AddInputRequests(ctx context.Context, owner, id string, reqs map[string]taskstore.InputRequest, message, writeID string) error
	TakeInputResponses(ctx context.Context, owner, id, takeID string) (map[string]json.RawMessage, taskstore.Status, error)
	SetProgress(ctx context.Context, owner, id string, progress json.RawMessage, message string) error
	Finish(ctx context.Context, owner, id string, to taskstore.Status, o taskstore.Outcome) error
	Extend(ctx context.Context, owner, id, holder string, d time.Duration) error
	ExtendMany(ctx context.Context, refs []taskstore.LeaseRef, holder string, d time.Duration) []error
	recovererStore // Get, Fail, Release, Options, and the lease sweeps
}

// upstreamCaller is what the runner needs of the upstream client: a call
// (with the upstream's requests and notifications on the way), the answer
// to one of its requests, and a cancellation.
type upstreamCaller interface {
	Call(ctx context.Context, s *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions) (*jsonrpc.Response, error)
	CallAsync(ctx context.Context, s *upstream.Session, req *jsonrpc.Request, opts upstream.CallOptions, done func(*jsonrpc.Response, error))
	Respond(ctx context.Context, s *upstream.Session, r *jsonrpc.Response) error
	Cancel(ctx context.Context, s *upstream.Session, id jsonrpc.ID, reason string) error
}

// taskNotifier hears of what changed in a task, to tell the clients that
// watch it (the 2025-11-25 front: notifications/tasks/status, progress).
type taskNotifier interface {
	statusChanged(ctx context.Context, t *taskstore.Task)
	progress(ctx context.Context, owner string, t *taskstore.Task, sessionID string, params json.RawMessage)
	logMessage(ctx context.Context, owner string, t *taskstore.Task, sessionID string, params json.RawMessage)
}

// runnerParams are a runner's dependencies and settings.
type runnerParams struct {
	store       runnerStore
	up          upstreamCaller
	notify      taskNotifier
	observe     func(tool string, took time.Duration) // a call's latency (decider.observe)
	metrics     *obs.Metrics
	trace       *obs.Tracing // nil: off
	log         zerolog.Logger
	replica     string         // names this replica in leases
	lease       time.Duration  // how long a lease lasts unrenewed
	renew       time.Duration  // how often it is renewed, and the recoverer sweeps
	maxInflight int            // 0: no limit
	creds       *credentials   // the principals' freshest tokens; nil: none
	anonymous   core.Anonymous // the caps an anonymous owner's task counts against (launch)
}

// runner owns every worker goroutine and in-flight call of a Handler.
type runner struct {
	runnerParams
	ctx    context.Context // parent of every worker and in-flight call; ends at stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	draining atomic.Bool // drain was called: no new in-flight calls

	mu      sync.Mutex
	calls   int           // in-flight calls, plus slots reserved for calls about to start
	jobs    int           // workers running (each has a goroutine only while it has work: runner_worker.go)
	changed chan struct{} // closed (and replaced) whenever calls or jobs drops

	retry     *retrier
	recoverer *recoverer
	leases    leaseSet // the workers whose leases renewLeases renews
}

func newRunner(p runnerParams) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	rn := &runner{runnerParams: p, ctx: ctx, cancel: cancel, changed: make(chan struct{})}
	rn.maxInflight = max(p.maxInflight, 0)
	rn.retry = &retrier{max: defaultStoreRetry, stop: ctx.Done()}
	rn.recoverer = newRecoverer(recovererParams{store: p.store, notify: p.notify, metrics: p.metrics, log: p.log,
		replica: p.replica, lease: p.lease, every: p.renew, retry: rn.retry})
	rn.recoverer.start()
	rn.wg.Add(1)
	go rn.renewLeases()
	return rn
}

// errDraining refuses, while draining, a tools/call that would start an
// in-flight call; no task is created.
var errDraining = mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "this gateway replica is shutting down; retry on another replica")

// admit reserves a slot for a new in-flight call (a task, a hybrid or
// bridged call), or says why not. The caller hands the slot to a job
// (job.slot) or to hold, or gives it back with unreserve.
func (rn *runner) admit() *mcpwire.Error {
	if rn.draining.Load() {
		return errDraining
	}
	if !rn.reserve() {
		rn.log.Warn().Str("op", "admit").Int("limit", rn.maxInflight).Msg("max-inflight reached: tools/call refused")
		return mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError,
			fmt.Sprintf("too many upstream calls in flight on this replica (limit %d); retry later", rn.maxInflight))
	}
	if rn.draining.Load() { // drain began meanwhile
		rn.unreserve()
		return errDraining
	}
	return nil
}

// reserve takes a slot unless maxInflight calls are in flight already.
func (rn *runner) reserve() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.maxInflight > 0 && rn.calls >= rn.maxInflight {
		return false
	}
	rn.calls++
	return true
}

// count takes a slot without the limit: a running task's next call (an
// MRTR round, a retry on a reopened session) is not refused midway.
func (rn *runner) count() {
	rn.mu.Lock()
	rn.calls++
	rn.mu.Unlock()
}

// unreserve gives back a slot from reserve or count.
func (rn *runner) unreserve() { rn.drop(&rn.calls) }

func (rn *runner) drop(n *int) {
	rn.mu.Lock()
	*n--
	close(rn.changed)
	rn.changed = make(chan struct{})
	rn.mu.Unlock()
}

// inflight is how many calls are in flight (or reserved).
func (rn *runner) inflight() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.calls
}

// idle waits until no call is in flight and no worker runs, or ctx ends.
func (rn *runner) idle(ctx context.Context) error {
	for {
		rn.mu.Lock()
		busy, changed := rn.calls+rn.jobs, rn.changed
		rn.mu.Unlock()
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

// drain refuses new in-flight calls from now on and waits until none is
// left (idle).
func (rn *runner) drain(ctx context.Context) error {
	if !rn.draining.Swap(true) {
		rn.log.Info().Str("op", "drain").Int("inflight", rn.inflight()).Msg("draining: new tasks are refused")
	}
	return rn.idle(ctx)
}

// stop cancels every worker and in-flight call and waits for them to
// record their outcome, and for the recoverer.
func (rn *runner) stop() {
	rn.cancel()
	rn.recoverer.shutdown()
	rn.wg.Wait()
}

// create stores j's task durably, leased to this replica; the caller
// starts the worker and only then answers CreateTaskResult
// (docs/ARCHITECTURE.md invariant 1: a tasks/get on any replica finds it).
// ttl and poll zero mean the store's defaults.
func (rn *runner) create(ctx context.Context, j *job, proto taskstore.Protocol, tool string, ttl, poll time.Duration) error {
	rawID, _ := json.Marshal(j.req.ID.Raw())
	t, err := rn.store.Create(ctx, taskstore.NewTask{
		ID:           j.id,
		Owner:        j.owner,
		Tool:         tool,
		Protocol:     proto,
		TTL:          ttl,
		PollInterval: poll,
		Upstream:     taskstore.Upstream{RequestID: rawID, SessionID: j.notifySession()},
		Lease:        &taskstore.LeaseRequest{Holder: rn.replica, Duration: rn.lease},
		Trace:        rn.trace.MintTask(ctx), // the task's span: child of the creating request's
		Unlisted:     j.hidden,
	})
	if err != nil {
		rn.log.Warn().Str("op", "create").Str("tool", tool).Str("owner", core.LogOwner(j.owner)).Err(err).Msg(core.RPCError(err, core.Era2025).Message)
		return err
	}
	j.task = t
	rn.metrics.TaskCreated(tool, proto)
	rn.log.Info().Str("op", "created").Str("task_id", t.ID).Str("tool", tool).Str("owner", core.LogOwner(j.owner)).
		Str("protocol", string(proto)).Float64("ttl_seconds", t.TTL.Seconds()).Float64("poll_interval_seconds", t.PollInterval.Seconds()).
		Msg("task created")
	return nil
}

// launchSpec is the task launch makes of a job.
type launchSpec struct {
	proto     taskstore.Protocol
	tool      string
	ttl, poll time.Duration // zero: the store's defaults
	// beforeStart, when set, runs once the task exists, before its worker
	// starts: a watch opened there misses none of the worker's events.
	beforeStart func()
}

// launch makes j a task and starts its worker: the one sequence every
// front follows once admit reserved a slot (j.slot) or hold started the
// call (j.call). An anonymous owner's task (j.addr set) is counted against
// the anonymous caps first; then the task is stored (create). On error
// launch gives back what it took (the anonymous count, j's slot) and
// returns the error: the caller answers it, or lets a running call end as
// a plain one. Only a stored task's worker starts, so a CreateTaskResult
// written after launch names a task any replica finds (invariant 1).
func (rn *runner) launch(ctx context.Context, j *job, l launchSpec) error {
	if j.addr != "" {
		if err := rn.anonymous.Reserve(context.WithoutCancel(ctx), j.id, j.addr, l.ttl); err != nil {
			rn.log.Warn().Str("op", "create").Str("tool", l.tool).Err(err).Msg("anonymous task refused")
			rn.giveBack(j)
			return err
		}
	}
	if err := rn.create(ctx, j, l.proto, l.tool, l.ttl, l.poll); err != nil {
		if j.addr != "" {
			rn.anonymous.Release(context.WithoutCancel(ctx), j.id, j.addr)
		}
		rn.giveBack(j)
		return err
	}
	if l.beforeStart != nil {
		l.beforeStart()
	}
	rn.start(j)
	return nil
}

// giveBack returns the slot a job that never ran was given (j.slot).
func (rn *runner) giveBack(j *job) {
	if j.slot {
		rn.unreserve()
	}
}

// start runs j's worker (runner_worker.go) until its task ends.
func (rn *runner) start(j *job) {
	rn.mu.Lock()
	rn.jobs++
	rn.mu.Unlock()
	rn.wg.Add(1)
	go rn.work(j)
}

// resyncInterval is how often a waiting reader re-reads a task whose
// events may have been lost (pub/sub drops messages).
func (rn *runner) resyncInterval() time.Duration { return core.ResyncInterval(rn.store) }

// defaultStoreRetry is how long a retrier keeps trying: an upstream result
// waits this long for Redis to come back.
const defaultStoreRetry = 5 * time.Minute

// retrier runs store writes that must not be lost to a brief outage.
type retrier struct {
	max  time.Duration   // how long to keep trying
	stop <-chan struct{} // the runner is stopping: give up
}

// do runs op until it succeeds, fails for a reason other than the store
// being unavailable, max has passed, ctx ends, or the runner stops
// (another replica's recoverer then fails the task): an upstream result is
// never dropped because Redis blinked (docs/ARCHITECTURE.md invariant 5).
func (rt *retrier) do(ctx context.Context, op func() error) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(rt.max)
	for {
		err := op()
		if !errors.Is(err, taskstore.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-rt.stop:
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
