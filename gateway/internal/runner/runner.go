package runner

// The task runner holds the upstream calls of tasks (and the hybrid and
// bridged calls that may become tasks), each in a worker with a lease on
// its task (worker.go). It owns its own lifetime, the admission of
// new in-flight calls (--max-inflight, drain), and the recoverer that
// fails the tasks of dead replicas (recoverer.go).
//
//	front ── admit ──▶ slot reserved for the call's principal (or -32603:
//	                   draining, too many, past its fair share: admit.go)
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
	FinishAndRelease(ctx context.Context, t *taskstore.Task, holder string, to taskstore.Status, o taskstore.Outcome, note func(*taskstore.Task) []byte) error
	Extend(ctx context.Context, owner, id, holder string, d time.Duration) error
	ExtendMany(ctx context.Context, refs []taskstore.LeaseRef, holder string, d time.Duration) []error
	recovererStore // Get, Fail, Release, Options, and the lease sweeps
	notifyStore    // the notifications of 2025-11-25 tasks (notify.go)
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

// sessionBinder gives an upstream session the freshest token of its
// principal's client (gateway's credentials; a nil one binds nothing).
type sessionBinder interface {
	Bind(sess *upstream.Session) *upstream.Session
}

// Params are a runner's dependencies and settings.
type Params struct {
	Store       runnerStore
	Up          upstreamCaller
	Observe     func(tool string, took time.Duration) // a call's latency (decider.observe)
	Metrics     *obs.Metrics
	Trace       *obs.Tracing // nil: off
	Log         zerolog.Logger
	Replica     string        // names this replica in leases
	Lease       time.Duration // how long a lease lasts unrenewed
	Renew       time.Duration // how often it is renewed, and the recoverer sweeps
	MaxInflight int           // 0: no limit
	// MaxPerPrincipal caps the calls one principal holds (admit.go);
	// 0: no cap. TaskRate is the task creations a minute
	// per principal (rate.go); 0: no limit.
	MaxPerPrincipal int
	TaskRate        float64
	Creds           sessionBinder  // the principals' freshest tokens; nil: none
	Anonymous       core.Anonymous // the caps an anonymous owner's task counts against (launch)
	Durable         Durable        // reruns (rerun.go)
	// Alone: no other replica shares the store (the embedded store), so a
	// task this replica stops under is lost, and its message says so
	// rather than promise a rerun elsewhere.
	Alone bool
	// RestartGrace is how long a held upstream task's tasks/result is
	// asked again while the upstream is unreachable (native.go); 0:
	// DefaultRestartGrace.
	RestartGrace time.Duration
}

// runner owns every worker goroutine and in-flight call of a Handler.
type Runner struct {
	Params
	ctx    context.Context // parent of every worker and in-flight call; ends at stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	Draining atomic.Bool // drain was called: no new in-flight calls

	mu      sync.Mutex
	adm     *admission    // fair shares of --max-inflight, its counts under mu (admit.go)
	jobs    int           // workers running (each has a goroutine only while it has work: worker.go); under mu
	changed chan struct{} // closed (and replaced) whenever calls or jobs drops

	retry     *retrier
	recoverer *recoverer
	upstream  *upstreamTasks // the upstream's own tasks, held (native.go)
	leases    leaseSet       // the workers whose leases it renews (leases.go)
	sealKey   rerunSecret    // seals a durable task's credentials (rerun.go)
}

func New(p Params) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	rn := &Runner{Params: p, ctx: ctx, cancel: cancel, changed: make(chan struct{})}
	rn.MaxInflight = max(p.MaxInflight, 0)
	rn.adm = rn.newAdmission(newTaskRates(p.TaskRate))
	rn.upstream = &upstreamTasks{up: p.Up, log: p.Log, grace: p.RestartGrace}
	rn.retry = &retrier{Max: defaultStoreRetry, Stop: ctx.Done()}
	rn.recoverer = newRecoverer(recovererParams{store: p.Store, notify: rn.StatusChanged, metrics: p.Metrics, log: p.Log,
		replica: p.Replica, lease: p.Lease, every: p.Renew, Retry: rn.retry, resume: rn.resume})
	rn.recoverer.Start()
	rn.leases = leaseSet{store: p.Store, replica: p.Replica, lease: p.Lease, every: p.Renew}
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		rn.leases.renew(ctx)
	}()
	return rn
}

// newAdmission is the runner's admission, on its mu and Params.
func (rn *Runner) newAdmission(rates *taskRates) *admission {
	return &admission{mu: &rn.mu, changedLocked: rn.changedLocked, draining: &rn.Draining, metrics: rn.Metrics,
		maxInflight: rn.MaxInflight, maxPerPrincipal: rn.MaxPerPrincipal, held: map[string]int{}, rates: rates}
}

// errDraining refuses, while draining, a tools/call that would start an
// in-flight call; no task is created.
var errDraining = mcpwire.NewError(http.StatusOK, mcpwire.CodeInternalError, "this gateway replica is shutting down; retry on another replica")

// changedLocked wakes whoever waits for calls or jobs to drop (Idle).
func (rn *Runner) changedLocked() {
	close(rn.changed)
	rn.changed = make(chan struct{})
}

func (rn *Runner) drop(n *int) {
	rn.mu.Lock()
	*n--
	rn.changedLocked()
	rn.mu.Unlock()
}

// Inflight is how many calls are in flight (or reserved).
func (rn *Runner) Inflight() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.adm.calls
}

// Idle waits until no call is in flight and no worker runs, or ctx ends.
// Exported for tests elsewhere (gateway's waitIdle in gate_test.go, drain_test.go and frontdoor_test.go; front2026's listen_bound_test.go).
func (rn *Runner) Idle(ctx context.Context) error {
	for {
		rn.mu.Lock()
		busy, changed := rn.adm.calls+rn.jobs, rn.changed
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

// Drain refuses new in-flight calls from now on and waits until none is
// left (idle).
func (rn *Runner) Drain(ctx context.Context) error {
	if !rn.Draining.Swap(true) {
		rn.Log.Info().Str("op", "drain").Int("inflight", rn.Inflight()).Msg("draining: new tasks are refused")
	}
	return rn.Idle(ctx)
}

// Stop cancels every worker and in-flight call and waits for them to
// record their outcome, and for the recoverer.
func (rn *Runner) Stop() {
	rn.cancel()
	rn.recoverer.shutdown()
	rn.wg.Wait()
}

// create stores j's task durably, leased to this replica; the caller
// starts the worker and only then answers CreateTaskResult
// (docs/ARCHITECTURE.md invariant 1: a tasks/get on any replica finds it).
// ttl and poll zero mean the store's defaults.
func (rn *Runner) create(ctx context.Context, j *Job, proto taskstore.Protocol, tool string, ttl, poll time.Duration) error {
	rawID, _ := json.Marshal(j.Req.ID.Raw())
	spec := rn.rerunSpec(ctx, j, tool) // mints j.Id when the task is durable (rerun.go)
	t, err := rn.Store.Create(ctx, taskstore.NewTask{
		ID:           j.Id,
		Owner:        j.Owner,
		Tool:         tool,
		Protocol:     proto,
		TTL:          ttl,
		PollInterval: poll,
		Upstream:     taskstore.Upstream{RequestID: rawID, SessionID: j.notifySession()},
		Lease:        &taskstore.LeaseRequest{Holder: rn.Replica, Duration: rn.Lease},
		Trace:        rn.Trace.MintTask(ctx), // the task's span: child of the creating request's
		Unlisted:     j.Hidden,
	})
	if err != nil {
		rn.Log.Warn().Str("op", "create").Str("tool", tool).Str("owner", core.LogOwner(j.Owner)).Err(err).Msg(core.RPCError(err, core.Era2025).Message)
		return err
	}
	j.Task = t
	rn.makeDurable(ctx, j, spec) // rerun.go
	rn.Metrics.TaskCreated(tool, proto)
	rn.Log.Info().Str("op", "created").Str("task_id", t.ID).Str("tool", tool).Str("owner", core.LogOwner(j.Owner)).
		Str("protocol", string(proto)).Float64("ttl_seconds", t.TTL.Seconds()).Float64("poll_interval_seconds", t.PollInterval.Seconds()).
		Msg("task created")
	return nil
}

// LaunchSpec is the task launch makes of a job.
type LaunchSpec struct {
	Proto     taskstore.Protocol
	Tool      string
	TTL, Poll time.Duration // zero: the store's defaults
	// BeforeStart, when set, runs once the task exists, before its worker
	// starts: a watch opened there misses none of the worker's events.
	BeforeStart func()
}

// Launch makes j a task and starts its worker: the one sequence every
// front follows once admit reserved a slot (j.Slot) or hold started the
// Call (j.Call). An anonymous owner's task (j.Addr set) is counted against
// the anonymous caps first; then the task is stored (create). On error
// Launch gives back what it took (the anonymous count, j's slot) and
// returns the error: the caller answers it, or lets a running call end as
// a plain one. Only a stored task's worker starts, so a CreateTaskResult
// written after launch names a task any replica finds (invariant 1).
func (rn *Runner) Launch(ctx context.Context, j *Job, l LaunchSpec) error {
	if j.Addr != "" {
		if err := rn.Anonymous.Reserve(context.WithoutCancel(ctx), j.Id, j.Addr, l.TTL); err != nil {
			rn.Log.Warn().Str("op", "create").Str("tool", l.Tool).Err(err).Msg("anonymous task refused")
			rn.giveBack(j)
			return err
		}
	}
	if err := rn.create(ctx, j, l.Proto, l.Tool, l.TTL, l.Poll); err != nil {
		if j.Addr != "" {
			rn.Anonymous.Release(context.WithoutCancel(ctx), j.Id, j.Addr)
		}
		rn.giveBack(j)
		return err
	}
	if l.BeforeStart != nil {
		l.BeforeStart()
	}
	rn.start(j)
	return nil
}

// giveBack returns the slot a job that never ran was given (j.Slot).
func (rn *Runner) giveBack(j *Job) { j.Slot.free() }

// start runs j's worker (worker.go) until its task ends.
func (rn *Runner) start(j *Job) {
	rn.mu.Lock()
	rn.jobs++
	rn.mu.Unlock()
	rn.wg.Add(1)
	go rn.work(j)
}

// resyncInterval is how often a waiting reader re-reads a task whose
// events may have been lost (pub/sub drops messages).
func (rn *Runner) resyncInterval() time.Duration { return core.ResyncInterval(rn.Store) }

// defaultStoreRetry is how long a retrier keeps trying: an upstream result
// waits this long for Redis to come back.
const defaultStoreRetry = 5 * time.Minute

// retrier runs store writes that must not be lost to a brief outage.
type retrier struct {
	Max  time.Duration   // how long to keep trying
	Stop <-chan struct{} // the runner is stopping: give up
}

// do runs op until it succeeds, fails for a reason other than the store
// being unavailable, max has passed, ctx ends, or the runner stops
// (another replica's recoverer then fails the task): an upstream result is
// never dropped because Redis blinked (docs/ARCHITECTURE.md invariant 5).
func (rt *retrier) do(ctx context.Context, op func() error) error {
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(rt.Max)
	for {
		err := op()
		if !errors.Is(err, taskstore.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-rt.Stop:
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Life is the runner's lifetime: the parent of every worker and in-flight
// call, ended when the runner stops.
func (rn *Runner) Life() context.Context { return rn.ctx }
