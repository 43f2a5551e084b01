package taskstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Defaults of Options, and of the matching taskgate flags.
const (
	DefaultTTL              = time.Hour       // --default-ttl
	DefaultMaxTTL           = 24 * time.Hour  // --max-ttl
	DefaultPollInterval     = time.Second     // --poll-interval
	DefaultMaxTasksPerOwner = 100             // --max-tasks-per-owner
	DefaultMaxResultBytes   = 8 << 20         // --max-result-bytes
	DefaultPrefix           = "tg"            // key prefix
	DefaultExpiredWindow    = time.Hour       // how long ErrExpired is told apart
	DefaultLeaseGrace       = 2 * time.Second // clock-skew margin on leases
	DefaultResyncInterval   = 5 * time.Second // waiters' slow re-read timer
	DefaultPageSize         = 50              // List page size when none is given
	MaxPageSize             = 1000            // List page size cap
	unavailableRetryDelay   = 50 * time.Millisecond
)

// Options configure a Store. Every field is optional; the zero value of a
// field means its default.
type Options struct {
	// Prefix starts every key and channel name. Default "tg".
	Prefix string
	// DefaultTTL applies when a task is created without a ttl. Default 1h.
	DefaultTTL time.Duration
	// MaxTTL caps a requested ttl (MCP 2025-11-25, Tasks (utilities/tasks),
	// section "Security": enforce a maximum ttl). Default 24h.
	MaxTTL time.Duration
	// PollInterval is the pollInterval given to tasks that ask for none.
	// Default 1s.
	PollInterval time.Duration
	// MaxTasksPerOwner caps an owner's non-terminal tasks; Create returns
	// ErrTooMany beyond it. Default 100; negative means no limit.
	MaxTasksPerOwner int
	// MaxResultBytes caps the result and error a task can store; a larger
	// outcome fails the task with an explanatory error. Default 8 MiB.
	MaxResultBytes int
	// ExpiredWindow is how long after a task's expiry Get still answers
	// ErrExpired (from a tombstone key) rather than ErrNotFound. Default 1h;
	// negative disables tombstones.
	ExpiredWindow time.Duration
	// LeaseGrace is added to a lease's deadline before another replica may
	// take it over, to absorb clock skew between replicas. Default 2s.
	LeaseGrace time.Duration
	// ResyncInterval is the slow timer on which waiters re-read the task even
	// when no event arrives (pub/sub may drop messages). Default 5s.
	ResyncInterval time.Duration
	// Clock is "now" for every timestamp and expiry check. Default time.Now.
	Clock func() time.Time
	// NoOpsRecords: the scripts keep neither the operator's index nor the
	// tasks' timelines (ops.go, timeline.go), and the console shows
	// neither. Default false: both are kept (neither on Cluster).
	NoOpsRecords bool
	// Webhooks: every script that changes a task's status also records
	// the event in the owner's webhook outbox, in the same atomic step
	// (webhook_outbox.go), for a dispatcher to read. Default false.
	Webhooks bool
	// Logger receives the store's operational warnings (pub/sub reconnects).
	// Task lifecycle audit logging is the gateway's job. Default: disabled.
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.DefaultTTL > o.MaxTTL {
		o.DefaultTTL = o.MaxTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxTasksPerOwner == 0 {
		o.MaxTasksPerOwner = DefaultMaxTasksPerOwner
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.ExpiredWindow == 0 {
		o.ExpiredWindow = DefaultExpiredWindow
	}
	if o.LeaseGrace <= 0 {
		o.LeaseGrace = DefaultLeaseGrace
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Store keeps task state in Redis. It is safe for concurrent use. Every
// method is one round trip to Redis unless its comment says otherwise.
type Store struct {
	rdb redis.UniversalClient
	opt Options
	k   keys
	hub *hub
	ab  abandoner // removals of what failed creates may have written (abandon.go)

	// rescore holds, per holder, the leases index scores ExtendMany sends
	// with its next renewal: the deadlines its last one set (lease.go).
	rescoreMu sync.Mutex
	rescore   map[string][]redis.Z

	// cluster: the store is a Redis Cluster, where no script can write
	// the operator's index with a task (another slot): the store keeps
	// no index there, nor timelines (the console could not find a task
	// to show one).
	cluster bool
	// slots follows a Cluster's failovers (failover.go); nil otherwise.
	slots *slotRefresher
	// The last Keyspace answer, reused for keyspaceCacheFor (keyspace.go).
	ksMu  sync.Mutex
	ks    Keyspace
	ksErr error
	ksAt  time.Time
	// records: the scripts keep the operator's index (ops.go) and the
	// tasks' timelines (timeline.go); Options.NoOpsRecords and
	// SetOpsRecords set it. Never on Cluster.
	records atomic.Bool
}

// New returns a Store on rdb, which may be a standalone, Sentinel (failover)
// or Cluster client. The caller keeps ownership of rdb and closes it after
// Store.Close.
func New(rdb redis.UniversalClient, opt Options) *Store {
	opt = opt.withDefaults()
	cc, cluster := rdb.(*redis.ClusterClient)
	s := &Store{rdb: rdb, opt: opt, k: keys{prefix: opt.Prefix}, cluster: cluster}
	s.records.Store(!opt.NoOpsRecords)
	s.hub = newHub(rdb, opt.Logger)
	if cluster {
		// A dead master is followed at once, not after go-redis' minute
		// (failover.go). The hook stays on the client, which the caller
		// owns: one Store per client, as AddHook says.
		s.slots = newSlotRefresher(cc)
		rdb.AddHook(refreshHook{s.slots})
		s.hub.trouble = s.slots.trouble
	}
	return s
}

// Close stops the store's shared pub/sub connection and ends every Watch.
// It does not close the Redis client.
func (s *Store) Close() error {
	s.hub.close()
	s.ab.stop()
	return nil
}

// AddHook adds a go-redis hook to the store's client, which sees every
// command the store sends (the gateway's metrics). The hook stays on the
// client, which the caller owns: add it once per client.
func (s *Store) AddHook(h redis.Hook) { s.rdb.AddHook(h) }

// PoolStats reports the Redis client's connection pool (for metrics).
func (s *Store) PoolStats() *redis.PoolStats { return s.rdb.PoolStats() }

// Options returns the options in force, defaults filled in.
func (s *Store) Options() Options { return s.opt }

func (s *Store) nowMS() int64 { return s.opt.Clock().UnixMilli() }

// NewTask describes a task to create.
type NewTask struct {
	// ID, when set, is the task's id: a UUID the caller minted (an
	// anonymous task's owner is made from its id before it exists). Empty:
	// a fresh UUIDv4.
	ID       string
	Owner    string
	Tool     string
	Protocol Protocol
	// TTL requested by the client; 0 means Options.DefaultTTL, and it is
	// clamped to Options.MaxTTL ("TTL and Resource Management": receivers
	// may override the requested ttl).
	TTL time.Duration
	// PollInterval to suggest; 0 means Options.PollInterval.
	PollInterval  time.Duration
	StatusMessage string
	Upstream      Upstream
	// Trace is kept with the task and returned as Task.Trace.
	Trace string
	// Lease, when set, makes the creating replica the task's worker from
	// the first instant, so a crash right after Create is recovered too.
	Lease *LeaseRequest
	// Unlisted keeps the task out of List: a task the gateway holds a
	// plain call under, which its client never sees as a task.
	Unlisted bool
}

// LeaseRequest asks for a lease: Holder (a replica id) for Duration.
type LeaseRequest struct {
	Holder   string
	Duration time.Duration
}

// Create stores a new working task with a fresh random id (UUID v4, 122
// random bits) and indexes it under its owner. When Create returns nil the
// write has been applied by the Redis primary, so a Get on any replica finds
// the task (docs/ARCHITECTURE.md invariant 1). Returns ErrTooMany when the
// owner is at Options.MaxTasksPerOwner.
func (s *Store) Create(ctx context.Context, n NewTask) (*Task, error) {
	now := s.opt.Clock()
	nowMS := now.UnixMilli()
	ttl := s.clampTTL(n.TTL)
	poll := n.PollInterval
	if poll <= 0 {
		poll = s.opt.PollInterval
	}
	id := n.ID
	if id == "" {
		id = uuid.NewString()
	} else if !validID(id) {
		return nil, fmt.Errorf("taskstore: create: id %q is not a UUID", id)
	}
	t := &Task{
		ID:            id,
		Owner:         n.Owner,
		Tool:          n.Tool,
		Protocol:      n.Protocol,
		Status:        StatusWorking,
		StatusMessage: n.StatusMessage,
		CreatedAt:     fromMS(nowMS),
		LastUpdatedAt: fromMS(nowMS),
		TTL:           ttl,
		PollInterval:  poll,
		Upstream:      n.Upstream,
		Trace:         n.Trace,
	}
	listed := "1"
	if n.Unlisted {
		listed = "0"
	}
	args := []interface{}{t.ID, nowMS, ms(ttl), ms(s.opt.MaxTTL), s.opt.MaxTasksPerOwner, s.windowMS(), listed,
		opsMember(t.Owner, t.ID), t.Tool, s.whArg(),
		fID, t.ID, fOwner, t.Owner, fTool, t.Tool, fFlavour, string(t.Protocol),
		fStatus, string(t.Status), fCreated, nowMS, fUpdated, nowMS,
		fTTL, ms(ttl), fPoll, ms(poll), fPending, 0}
	if t.StatusMessage != "" {
		args = append(args, fMessage, t.StatusMessage)
	}
	if t.Trace != "" {
		args = append(args, fTrace, t.Trace)
	}
	args = appendUpstream(args, n.Upstream)
	var lease func(redis.Pipeliner)
	if n.Lease != nil {
		t.Lease = Lease{Holder: n.Lease.Holder, Deadline: now.Add(n.Lease.Duration)}
		until := t.Lease.Deadline.UnixMilli()
		args = append(args, fLeaseHolder, t.Lease.Holder, fLeaseUntil, until)
		lease = func(p redis.Pipeliner) {
			p.ZAdd(ctx, s.k.leases(), redis.Z{Score: float64(until), Member: leaseMember(t.Owner, t.ID)})
		}
	}
	ks := s.withRecords(s.k.createKeys(n.Owner, t.ID), n.Owner, t.ID, true)
	vals, err := s.runWith(ctx, createCmd, ks, args, also(lease, s.whHint(ctx, n.Owner)))
	if err != nil {
		// Redis went away (or the context ended) before the reply came:
		// the write may have landed. The caller tells its client the
		// create failed, so no task must remain: remove it.
		s.abandon(ks, t.ID, opsMember(t.Owner, t.ID))
	}
	if err == nil {
		// codeExists can only mean that go-redis retried our own write
		// after a network error: the id is fresh and 122 bits random.
		if c := code(vals); c != codeExists {
			err = codeErr(c, detail(vals))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("taskstore: create task for tool %q: %w", n.Tool, err)
	}
	return t, nil
}

func (s *Store) clampTTL(ttl time.Duration) time.Duration {
	switch {
	case ttl <= 0:
		return s.opt.DefaultTTL
	case ttl > s.opt.MaxTTL:
		return s.opt.MaxTTL
	case ttl < time.Millisecond:
		return time.Millisecond
	}
	return ttl.Truncate(time.Millisecond)
}

func (s *Store) windowMS() int64 {
	if s.opt.ExpiredWindow < 0 {
		return 0
	}
	return ms(s.opt.ExpiredWindow)
}

// appendUpstream adds the non-empty up_* fields of u to args.
func appendUpstream(args []interface{}, u Upstream) []interface{} {
	if len(u.RequestID) > 0 {
		args = append(args, fUpRequestID, string(u.RequestID))
	}
	if u.SessionID != "" {
		args = append(args, fUpSession, u.SessionID)
	}
	return args
}

// Get returns the owner's task. A task of another owner, or a malformed id,
// is ErrNotFound, exactly as if the id did not exist. A task whose ttl has
// elapsed is ErrExpired (for Options.ExpiredWindow, then ErrNotFound).
// One HGETALL; a second round trip only when the task is missing.
func (s *Store) Get(ctx context.Context, owner, id string) (*Task, error) {
	t, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, fmt.Errorf("taskstore: get %s: %w", id, err)
	}
	return t, nil
}

func (s *Store) get(ctx context.Context, owner, id string) (*Task, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	m, err := s.rdb.HGetAll(ctx, s.k.task(owner, id)).Result()
	if err != nil {
		return nil, classify(ctx, err)
	}
	t, ok := decodeTask(m)
	if !ok {
		return nil, s.missing(ctx, owner, id)
	}
	if t.Owner != owner {
		return nil, ErrNotFound
	}
	if !t.ExpiresAt().After(s.opt.Clock()) {
		return nil, ErrExpired
	}
	return t, nil
}

// Stamp is what identifies one state of a task record: its status and when
// it last changed. A terminal task never changes again, so a stamp equal to
// the one of a terminal task read earlier means the record is that task
// still (its rendering can be reused).
type Stamp struct {
	Status        Status
	LastUpdatedAt time.Time
}

// Stamp reads the task's stamp: one HMGET of three small fields instead of
// Get's whole record (result included). ok is false when the task is not
// the owner's or is gone; Get says why. Expiry is not checked: the caller
// knows createdAt and ttl from the record it compares with.
func (s *Store) Stamp(ctx context.Context, owner, id string) (st Stamp, ok bool, err error) {
	if !validID(id) {
		return Stamp{}, false, nil
	}
	v, err := s.rdb.HMGet(ctx, s.k.task(owner, id), fOwner, fStatus, fUpdated).Result()
	if err != nil {
		return Stamp{}, false, fmt.Errorf("taskstore: stamp %s: %w", id, classify(ctx, err))
	}
	o, _ := v[0].(string)
	status, _ := v[1].(string)
	updated, _ := v[2].(string)
	n, perr := strconv.ParseInt(updated, 10, 64)
	if o != owner || status == "" || perr != nil {
		return Stamp{}, false, nil
	}
	return Stamp{Status: Status(status), LastUpdatedAt: fromMS(n)}, true, nil
}

// missing tells an expired task (tombstone present) from one that never was.
func (s *Store) missing(ctx context.Context, owner, id string) error {
	if s.opt.ExpiredWindow < 0 {
		return ErrNotFound
	}
	n, err := s.rdb.Exists(ctx, s.k.gone(owner, id)).Result()
	if err != nil {
		return classify(ctx, err)
	}
	if n == 1 {
		return ErrExpired
	}
	return ErrNotFound
}

func validID(id string) bool {
	return len(id) == 36 && uuid.Validate(id) == nil
}

// transition moves the task to status to with the given status message
// (empty clears it). The state machine is MCP 2025-11-25, Tasks
// (utilities/tasks), section "Task Status Lifecycle": working <->
// input_required, and either -> completed, failed or cancelled. From a
// terminal status: ErrTerminal. To the same status, or to an unknown one:
// ErrInvalidTransition. The gateway changes a status only through the
// methods that also write what goes with it (Finish, Complete, Fail,
// RequestCancel, AddInputRequests, AnswerInputs); tests use transition to
// reach a status directly.
func (s *Store) transition(ctx context.Context, owner, id string, to Status, message string) error {
	if !to.Valid() {
		return ErrInvalidTransition
	}
	if !validID(id) {
		return ErrNotFound
	}
	vals, err := s.runWith(ctx, transitionCmd, s.withRecords(s.k.taskKeys(owner, id), owner, id, true),
		[]interface{}{owner, s.nowMS(), id, s.k.channel(owner, id), string(to), message, opsMember(owner, id), s.whArg()},
		s.whHint(ctx, owner))
	if err != nil {
		return err
	}
	return s.replyErr(ctx, owner, id, vals)
}

// Outcome is how the upstream call of a task ended.
type Outcome struct {
	// Result is the JSON-RPC result (e.g. a CallToolResult, with isError
	// for a legacy failed tool call).
	Result json.RawMessage
	// Error is the JSON-RPC error object.
	Error json.RawMessage
	// Message becomes the statusMessage.
	Message string
	// WriteID, when not empty, makes the write safe to retry after
	// ErrUnavailable: Redis may have run a write whose reply was lost (it
	// died before answering). A task already terminal through a write with
	// the same WriteID then returns nil instead of ErrTerminal. Use one
	// WriteID per outcome (e.g. a fresh UUID), the same for its retries.
	WriteID string
}

// Finish makes the task completed or failed (to) with the outcome, as
// Complete and Fail do.
func (s *Store) Finish(ctx context.Context, owner, id string, to Status, o Outcome) error {
	switch to {
	case StatusCompleted:
		_, err := s.finish(ctx, "complete", owner, id, finishing{}, to, o)
		return err
	case StatusFailed:
		_, err := s.finish(ctx, "fail", owner, id, finishing{}, to, o)
		return err
	}
	return fmt.Errorf("taskstore: finish %s: %w: to %q", id, ErrInvalidTransition, to)
}

// FinishAndRelease is what a worker's last writes were (Finish, Release
// of holder's lease, the status notification to the task's session), in
// one script, so in one round trip, and the leases index entry follows as
// Release's does. The lease is given up also when the task was already
// terminal (ErrTerminal), as Release after a refused Finish did. note, when
// not nil, makes the message (as PublishSession takes it) published to
// t's session when the write changes the task; it gets the task as the
// write leaves it (t with the new status, statusMessage and
// lastUpdatedAt), and returns nil for none. t is the task as created (its
// owner, id, session and the fields a write never changes).
func (s *Store) FinishAndRelease(ctx context.Context, t *Task, holder string, to Status, o Outcome, note func(*Task) []byte) error {
	if to != StatusCompleted && to != StatusFailed {
		return fmt.Errorf("taskstore: finish %s: %w: to %q", t.ID, ErrInvalidTransition, to)
	}
	if holder == "" {
		return fmt.Errorf("taskstore: finish %s: empty lease holder", t.ID)
	}
	f := finishing{holder: holder}
	if note != nil && t.Upstream.SessionID != "" {
		f.note = func(to Status, message string, nowMS int64) (string, string) {
			after := *t
			after.Status, after.StatusMessage, after.LastUpdatedAt = to, message, fromMS(nowMS)
			msg := note(&after)
			if msg == nil {
				return "", ""
			}
			return s.k.sessionChannel(t.Upstream.SessionID), string(EventMessage) + ":" + string(msg)
		}
	}
	vals, err := s.finish(ctx, "finish", t.Owner, t.ID, f, to, o)
	if len(vals) > 2 {
		if released, _ := vals[2].(int64); released == 1 {
			// The index entry is only a hint: if this fails, a sweep drops it.
			_ = s.rdb.ZRem(ctx, s.k.leases(), leaseMember(t.Owner, t.ID)).Err()
		}
	}
	return err
}

// finishing is what FinishAndRelease adds to a finish: the holder whose
// lease goes, and the session notification (channel and message, made
// from the status, message and time the write sets).
type finishing struct {
	holder string
	note   func(to Status, message string, nowMS int64) (channel, msg string)
}

// Complete makes the task completed with result. A task already terminal is
// left as it is and ErrTerminal returned; so a result arriving after a
// cancel leaves the task cancelled. A result over Options.MaxResultBytes
// fails the task instead and returns ErrResultTooLarge.
func (s *Store) Complete(ctx context.Context, owner, id string, result json.RawMessage) error {
	_, err := s.finish(ctx, "complete", owner, id, finishing{}, StatusCompleted, Outcome{Result: result})
	return err
}

// Fail makes the task failed with the outcome. Rules as for Complete.
func (s *Store) Fail(ctx context.Context, owner, id string, o Outcome) error {
	_, err := s.finish(ctx, "fail", owner, id, finishing{}, StatusFailed, o)
	return err
}

// finish runs finishCmd (with f's additions: its ARGV[14..16]) and
// returns its reply with the error the reply means.
func (s *Store) finish(ctx context.Context, op, owner, id string, f finishing, to Status, o Outcome) ([]interface{}, error) {
	var tooLarge error
	if size := len(o.Result) + len(o.Error) + len(o.Message); size > s.opt.MaxResultBytes {
		tooLarge = fmt.Errorf("%w: %d bytes, limit %d", ErrResultTooLarge, size, s.opt.MaxResultBytes)
		to, o = StatusFailed, tooLargeOutcome(size, s.opt.MaxResultBytes, o.WriteID)
	}
	err := ErrNotFound
	var vals []interface{}
	if validID(id) {
		now := s.nowMS()
		args := []interface{}{owner, now, id, s.k.channel(owner, id), string(to), o.Message, string(o.Result),
			string(o.Error), o.WriteID, opsMember(owner, id), s.whArg(), len(o.Result) + len(o.Error), s.isErrorArg(o)}
		if f.holder != "" || f.note != nil {
			channel, msg := "", ""
			if f.note != nil {
				channel, msg = f.note(to, o.Message, now)
			}
			args = append(args, f.holder, channel, msg)
		}
		vals, err = s.runWith(ctx, finishCmd, s.withRecords(s.k.taskKeys(owner, id), owner, id, true), args,
			s.whHint(ctx, owner))
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err == nil {
		err = tooLarge
	}
	if err != nil {
		return vals, fmt.Errorf("taskstore: %s %s: %w", op, id, err)
	}
	return vals, nil
}

// tooLargeOutcome is the failure stored instead of an oversized outcome: an
// internal error (-32603) that says what happened.
func tooLargeOutcome(size, limit int, writeID string) Outcome {
	msg := fmt.Sprintf("result of %d bytes exceeds the gateway's limit of %d bytes (--max-result-bytes)", size, limit)
	e, _ := json.Marshal(map[string]any{"code": -32603, "message": msg})
	return Outcome{Error: e, Message: msg, WriteID: writeID}
}

// RequestCancel records that the owner asked to cancel the task and moves it
// to cancelled at once, returning the cancelled task (MCP 2025-11-25, Tasks
// (utilities/tasks), section "Task Cancellation": the task MUST be cancelled
// before the response). The worker is told by a "cancel" event. A terminal
// task: ErrTerminal.
func (s *Store) RequestCancel(ctx context.Context, owner, id, message string) (*Task, error) {
	t, err := s.requestCancel(ctx, owner, id, message, "client")
	if err != nil {
		return nil, fmt.Errorf("taskstore: cancel %s: %w", id, err)
	}
	return t, nil
}

func (s *Store) requestCancel(ctx context.Context, owner, id, message, by string) (*Task, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	vals, err := s.runWith(ctx, cancelCmd, s.withRecords(s.k.taskKeys(owner, id), owner, id, true),
		[]interface{}{owner, s.nowMS(), id, s.k.channel(owner, id), message, opsMember(owner, id), by, s.whArg()},
		s.whHint(ctx, owner))
	if err != nil {
		return nil, err
	}
	if err := s.replyErr(ctx, owner, id, vals); err != nil {
		return nil, err
	}
	t, ok := decodeTask(decodePairs(vals[1:]))
	if !ok {
		return nil, ErrNotFound
	}
	return t, nil
}

// SetProgress stores the latest progress (the params of a
// notifications/progress, verbatim) of a non-terminal task and signals
// listeners. A non-empty message also replaces the statusMessage.
func (s *Store) SetProgress(ctx context.Context, owner, id string, progress json.RawMessage, message string) error {
	err := ErrNotFound
	if validID(id) {
		var vals []interface{}
		vals, err = s.run(ctx, progressCmd, s.withRecords([]string{s.k.task(owner, id)}, owner, id, false), owner, s.nowMS(),
			s.k.channel(owner, id), string(progress), message)
		if err == nil {
			err = s.replyErr(ctx, owner, id, vals)
		}
	}
	if err != nil {
		return fmt.Errorf("taskstore: progress %s: %w", id, err)
	}
	return nil
}

// run runs a script (EVALSHA, then EVAL once if Redis lost its script cache)
// and returns its reply.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...interface{}) ([]interface{}, error) {
	vals, err := sc.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return nil, classify(ctx, err)
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("taskstore: empty script reply")
	}
	return vals, nil
}

// runWith runs a script and, in the same pipeline (one round trip on a
// single node), whatever also adds. Errors of also's commands are not
// returned: they only maintain hints (the leases index).
func (s *Store) runWith(ctx context.Context, sc *redis.Script, keys []string, args []interface{}, also func(redis.Pipeliner)) ([]interface{}, error) {
	if also == nil {
		return s.run(ctx, sc, keys, args...)
	}
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		cmd := pipe.EvalSha(ctx, sc.Hash(), keys, args...)
		also(pipe)
		_, _ = pipe.Exec(ctx)
		vals, err := cmd.Slice()
		if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				return nil, classify(ctx, err)
			}
			continue
		}
		if err != nil {
			return nil, classify(ctx, err)
		}
		if len(vals) == 0 {
			return nil, fmt.Errorf("taskstore: empty script reply")
		}
		return vals, nil
	}
}

// code and detail read the two leading elements of a script reply.
func code(vals []interface{}) int64 {
	c, _ := vals[0].(int64)
	return c
}

func detail(vals []interface{}) string {
	if len(vals) < 2 {
		return ""
	}
	d, _ := vals[1].(string)
	return d
}

// replyErr turns a per-task script's reply code into an error. A task the
// script could not find is looked up once more to tell an expired one
// (tombstone) from one that never was, as Get does.
func (s *Store) replyErr(ctx context.Context, owner, id string, vals []interface{}) error {
	err := codeErr(code(vals), detail(vals))
	if err == ErrNotFound {
		return s.missing(ctx, owner, id)
	}
	return err
}

// Ping reports whether Redis answers; ErrUnavailable when it does not.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("taskstore: ping: %w", classify(ctx, err))
	}
	return nil
}
