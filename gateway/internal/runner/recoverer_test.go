package runner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestRecovererHoldsAfterStoreOutage: Redis is out of reach for longer
// than the lease plus the grace. When it is back, every lease looks
// expired, but the workers of live replicas have not had a chance to
// renew: the recoverer takes nothing over for one lease period; then it
// fails only the task whose worker did not renew. Found by e2e TestChaos:
// after a 6 s Redis outage with a 3 s lease, every running task was failed
// as "replica stopped" and its upstream result dropped.
func TestRecovererHoldsAfterStoreOutage(t *testing.T) { recovererHoldsAfterOutage(t, true) }

// TestRecovererHoldsAfterAnOutageItStartedIn: a replica that starts while
// the store is out of reach has seen no sweep succeed, yet the outage is
// the same for it as for the others: when the store answers again, it too
// takes nothing over for one lease, and then only the task whose worker did
// not renew.
func TestRecovererHoldsAfterAnOutageItStartedIn(t *testing.T) { recovererHoldsAfterOutage(t, false) }

// recovererHoldsAfterOutage runs a 10 s outage past a sweeper (which swept
// once before it when sweptBefore) and two leased tasks, one of whose
// workers renews once the store answers again.
func recovererHoldsAfterOutage(t *testing.T, sweptBefore bool) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	store := taskstore.New(rdb, taskstore.Options{Clock: clock, LeaseGrace: time.Second})
	defer store.Close()
	ctx := context.Background()
	lease := 2 * time.Second
	newTask := func(holder string) string {
		tk, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: taskstore.Protocol2026,
			Lease: &taskstore.LeaseRequest{Holder: holder, Duration: lease}})
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	alive, dead := newTask("alive"), newTask("dead")
	// The recoverer alone, not started: only the test sweeps, on its
	// clock.
	rc := newRecoverer(recovererParams{store: store, notify: func(context.Context, *taskstore.Task) {}, metrics: obs.NewMetrics(func() float64 { return 0 }),
		log: zerolog.Nop(), replica: "sweeper", lease: lease, every: 500 * time.Millisecond,
		Retry: &retrier{Max: time.Second, Stop: make(chan struct{})}})

	if sweptBefore {
		if n := rc.RecoverOnce(ctx); n != 0 {
			t.Fatalf("recovered %d live tasks", n)
		}
	}
	mr.SetError("LOADING Redis is loading the dataset in memory")
	for range 20 { // 10 s of sweeps against a Redis that does not answer
		now = now.Add(500 * time.Millisecond)
		rc.RecoverOnce(ctx)
	}
	mr.SetError("")
	now = now.Add(500 * time.Millisecond)
	if n := rc.RecoverOnce(ctx); n != 0 {
		t.Fatalf("right after the outage the recoverer took over %d tasks whose workers had no chance to renew", n)
	}
	// The live worker renews; the dead one does not.
	recovered := 0
	for range 9 { // the hold (one lease), then a sweep that may claim
		now = now.Add(500 * time.Millisecond)
		if err := store.Extend(ctx, "o", alive, "alive", lease); err != nil {
			t.Fatalf("the live worker lost its lease: %v", err)
		}
		recovered += rc.RecoverOnce(ctx)
	}
	if recovered != 1 {
		t.Errorf("recovered %d tasks after the hold, want 1 (the dead worker's)", recovered)
	}
	if got, _ := store.Get(ctx, "o", dead); got.Status != taskstore.StatusFailed {
		t.Errorf("the dead worker's task is %s, want failed", got.Status)
	}
	if got, _ := store.Get(ctx, "o", alive); got.Status != taskstore.StatusWorking {
		t.Errorf("the live worker's task is %s (%s), want working", got.Status, got.StatusMessage)
	}
}

func TestRecovererFailsTasksOfADeadReplica(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	store := taskstore.New(rdb, taskstore.Options{Clock: clock, LeaseGrace: time.Second})
	defer store.Close()
	ctx := context.Background()

	// A task whose worker, on replica "dead", held a 2 s lease.
	dead, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: taskstore.Protocol2025,
		Lease: &taskstore.LeaseRequest{Holder: "dead", Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	// And one whose worker is alive and renews.
	alive, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: taskstore.Protocol2025,
		Lease: &taskstore.LeaseRequest{Holder: "alive", Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	rn := newSweepRunner(t, store, "survivor", 2*time.Second, 0)

	// Within the lease plus grace nothing happens, even with skew.
	now = now.Add(2500 * time.Millisecond)
	if n := rn.recoverer.RecoverOnce(ctx); n != 0 {
		t.Fatalf("recovered %d tasks before their lease and grace ran out", n)
	}
	if err := store.Extend(ctx, "o", alive.ID, "alive", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second) // dead's lease + grace is over; alive's is not
	if n := rn.recoverer.RecoverOnce(ctx); n != 1 {
		t.Fatalf("recovered %d tasks, want 1", n)
	}
	got, err := store.Get(ctx, "o", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != taskstore.StatusFailed || !strings.Contains(got.StatusMessage, "replica running the task (dead) stopped") ||
		!strings.Contains(string(got.Error), "-32603") {
		t.Errorf("dead replica's task = %s %q %s", got.Status, got.StatusMessage, got.Error)
	}
	if got, _ := store.Get(ctx, "o", alive.ID); got.Status != taskstore.StatusWorking {
		t.Errorf("a live worker's task was recovered: %s", got.Status)
	}
	if n := rn.recoverer.RecoverOnce(ctx); n != 0 {
		t.Errorf("a second sweep recovered %d more", n)
	}
}

// TestRecovererSweepsManyAtOnce: a dead replica leaves all its tasks at
// once; one sweep recovers more than a page of them.
func TestRecovererSweepsManyAtOnce(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	store := taskstore.New(rdb, taskstore.Options{Clock: clock, LeaseGrace: time.Second, MaxTasksPerOwner: -1})
	defer store.Close()
	ctx := context.Background()
	const tasks = 3*sweepPage + 7
	for i := 0; i < tasks; i++ {
		if _, err := store.Create(ctx, taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: taskstore.Protocol2025,
			Lease: &taskstore.LeaseRequest{Holder: "dead", Duration: 2 * time.Second}}); err != nil {
			t.Fatal(err)
		}
	}
	// A long lease: its renewal period is the background sweep's, which
	// must not take tasks from the sweep under test.
	rn := newSweepRunner(t, store, "survivor", time.Hour, 0)
	now = now.Add(4 * time.Second)
	if n := rn.recoverer.RecoverOnce(ctx); n != tasks {
		t.Fatalf("one sweep recovered %d of %d tasks", n, tasks)
	}
	if n, _ := rdb.ZCard(ctx, "tg:leases").Result(); n != 0 {
		t.Errorf("the leases index holds %d entries after the recovery, want 0", n)
	}
}

// TestRecovererRetriesTheFailAfterItsClaim: the sweeper claims a dead
// replica's task, and Redis refuses the write that fails it. The sweeper
// retries: otherwise the task stays leased to the sweeper, and a later
// sweep fails it naming the sweeper as the replica that stopped (found by
// e2e TestChaos, a sweep cut by the Redis restart).
func TestRecovererRetriesTheFailAfterItsClaim(t *testing.T) {
	blip := &failScriptHook{Match: "the gateway replica running the task (dead)", Left: 2}
	rig := newSweepRig(t, "survivor", blip, 0)
	store, rn, ctx := rig.store, rig.rn, context.Background()
	dead := rig.leased(t, "dead")
	rig.advance(4 * time.Second)
	if n := rn.recoverer.RecoverOnce(ctx); n != 1 {
		t.Errorf("recovered %d tasks, want 1", n)
	}
	if blip.Failed.Load() != 2 {
		t.Fatalf("the store refused %d fail writes, want 2 (the test's premise)", blip.Failed.Load())
	}
	got, err := store.Get(ctx, "o", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "the gateway replica running the task (dead) stopped before the upstream answered"; got.Status != taskstore.StatusFailed || got.StatusMessage != want {
		t.Errorf("task = %s %q, want failed %q", got.Status, got.StatusMessage, want)
	}
}

// TestRecovererNamesTheWorkerAfterAnUnfinishedClaim: a sweeper's claim
// takes the lease of a dead replica's task, but its recovery does not
// finish. Here Redis fails Claim's second round trip (the leases index), so
// Claim reports an error though the lease is taken; in e2e TestChaos the
// claim's lease ran out while the sweeper retried the failure write across
// the Redis restart, and another sweeper took the task over. Either way the
// task is then leased to a live sweeper, and the sweep that takes it over
// later must still name the replica whose worker ran the task, not the
// sweeper (found by e2e TestChaos: a task failed as "the gateway replica
// running the task (<a survivor>) stopped").
func TestRecovererNamesTheWorkerAfterAnUnfinishedClaim(t *testing.T) {
	blip := &failCmdHook{name: "zadd", left: 1}
	rig := newSweepRig(t, "survivor", blip, 500*time.Millisecond)
	store, rn, ctx := rig.store, rig.rn, context.Background()
	dead := rig.leased(t, "dead")

	rig.advance(4 * time.Second) // past the dead worker's lease and grace
	if n := rn.recoverer.RecoverOnce(ctx); n != 0 || blip.failed.Load() != 1 {
		t.Fatalf("recovered %d tasks with the claim's index write refused %d times; want 0 and 1 (the test's premise)", n, blip.failed.Load())
	}
	if got, _ := store.Get(ctx, "o", dead.ID); got.Status != taskstore.StatusWorking || got.Lease.Holder != "survivor" {
		t.Fatalf("after the unfinished claim the task is %s leased to %q, want working leased to survivor", got.Status, got.Lease.Holder)
	}
	recovered := 0
	for range 8 { // sweeps every LeaseRenew until the claim's lease and grace ran out
		rig.advance(500 * time.Millisecond)
		recovered += rn.recoverer.RecoverOnce(ctx)
	}
	got, err := store.Get(ctx, "o", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "the gateway replica running the task (dead) stopped before the upstream answered"
	if recovered != 1 || got.Status != taskstore.StatusFailed || got.StatusMessage != want || !strings.Contains(string(got.Error), want) {
		t.Errorf("recovered %d, task = %s %q %s; want 1, failed %q", recovered, got.Status, got.StatusMessage, got.Error, want)
	}
}

// failCmdHook fails the first left commands called name (lower case) as
// a Redis that is loading would.
type failCmdHook struct {
	name   string
	left   int64
	failed atomic.Int64
}

func (*failCmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failCmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.ToLower(cmd.Name()) == f.name && f.failed.Load() < f.left {
			f.failed.Add(1)
			err := errors.New("LOADING Redis is loading the dataset in memory")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (*failCmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRecovererKeepsItsClaimWhileTheStoreIsDown: the sweeper claims a dead
// replica's task, and the write that fails it keeps failing past the
// retries. The sweeper keeps the claim rather than releasing it: a released
// task has no lease for any sweep to find and would stay working until its
// ttl. Once the store takes writes again, a later sweep fails the task,
// naming the replica that stopped.
func TestRecovererKeepsItsClaimWhileTheStoreIsDown(t *testing.T) {
	down := &failScriptHook{Match: "the gateway replica running the task (dead)", Left: 1 << 40}
	// LeaseRenew near Lease: the background sweep (on the real clock)
	// stays out of the way of the test's own sweeps.
	rig := newSweepRig(t, "survivor", down, 1900*time.Millisecond)
	store, rn, ctx := rig.store, rig.rn, context.Background()
	dead := rig.leased(t, "dead")
	rn.retry.Max = 100 * time.Millisecond

	rig.advance(4 * time.Second)
	if n := rn.recoverer.RecoverOnce(ctx); n != 0 {
		t.Fatalf("recovered %d tasks while the failure write is refused", n)
	}
	got, err := store.Get(ctx, "o", dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != taskstore.StatusWorking || got.Lease.Holder != "survivor" {
		t.Fatalf("after the refused write: %s, lease holder %q; want working, still claimed by survivor", got.Status, got.Lease.Holder)
	}

	down.Left = 0 // the store takes writes again
	recovered := 0
	for i := 0; i < 20 && recovered == 0; i++ { // sweeps every 500ms of the store's clock
		rig.advance(500 * time.Millisecond)
		recovered += rn.recoverer.RecoverOnce(ctx)
	}
	if recovered != 1 {
		t.Fatalf("no later sweep recovered the task")
	}
	got, _ = store.Get(ctx, "o", dead.ID)
	if want := "the gateway replica running the task (dead) stopped before the upstream answered"; got.Status != taskstore.StatusFailed || got.StatusMessage != want {
		t.Errorf("task = %s %q, want failed %q", got.Status, got.StatusMessage, want)
	}
}

// TestWorkerKeepsItsLeaseWhenTheOutcomeStaysUnwritten: a worker whose
// outcome write is refused past its retries keeps the task's lease instead
// of releasing it, so that, once the store takes writes again, a recoverer
// ends the task instead of it staying working with no lease until its ttl.
func TestWorkerKeepsItsLeaseWhenTheOutcomeStaysUnwritten(t *testing.T) {
	// Only the outcome write fails: the result's bytes are its argument.
	down := &failScriptHook{Match: `{"content":[],"unwritten"`, Left: 1 << 40}
	rig := newSweepRig(t, "worker", down, 1900*time.Millisecond)
	store, rn, ctx := rig.store, rig.rn, context.Background()
	rn.retry.Max = 100 * time.Millisecond
	task := rig.leased(t, "worker")
	j := &Job{Task: task, Owner: "o"}
	rn.finish(ctx, j, rn.Log, CallResult{Resp: &jsonrpc.Response{Result: json.RawMessage(`{"content":[],"unwritten":true}`)}}, rig.now())
	if down.Failed.Load() == 0 {
		t.Fatal("the outcome write was not refused (the test's premise)")
	}
	down.Left = 0
	got, err := store.Get(ctx, "o", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != taskstore.StatusWorking || got.Lease.Holder != "worker" {
		t.Fatalf("after the unwritten outcome: %s, lease %q; want working, still leased to worker", got.Status, got.Lease.Holder)
	}
	recovered := 0
	for i := 0; i < 20 && recovered == 0; i++ {
		rig.advance(500 * time.Millisecond)
		recovered += rn.recoverer.RecoverOnce(ctx)
	}
	if got, _ := store.Get(ctx, "o", task.ID); recovered != 1 || got.Status != taskstore.StatusFailed {
		t.Errorf("recovered %d; task %s %q, want failed by a sweep", recovered, got.Status, got.StatusMessage)
	}
}

// sweepRig is one replica on miniredis with a store whose clock the test
// moves, for recoverer tests. Leases last 2 s, plus 1 s of grace.
type sweepRig struct {
	mr    *miniredis.Miniredis
	store *taskstore.Store
	rn    *Runner
	clock atomic.Int64 // the store's now, unix ns (the background sweep reads it too)
}

// newSweepRig starts replica on a store whose Redis client carries hook
// (may be nil); renew is how often leases are renewed (0: a third of the lease,
// as gateway.Config.LeaseRenew).
func newSweepRig(t *testing.T, replica string, hook redis.Hook, renew time.Duration) *sweepRig {
	t.Helper()
	r := &sweepRig{mr: miniredis.RunT(t)}
	r.clock.Store(time.Now().UnixNano())
	rdb := redis.NewClient(&redis.Options{Addr: r.mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	if hook != nil {
		rdb.AddHook(hook)
	}
	r.store = taskstore.New(rdb, taskstore.Options{Clock: r.now, LeaseGrace: time.Second})
	t.Cleanup(func() { r.store.Close() })
	r.rn = newSweepRunner(t, r.store, replica, 2*time.Second, renew)
	return r
}

func (r *sweepRig) now() time.Time { return time.Unix(0, r.clock.Load()) }

func (r *sweepRig) advance(d time.Duration) { r.clock.Add(int64(d)) }

// leased creates a task of owner "o" whose worker on holder holds a 2 s lease.
func (r *sweepRig) leased(t *testing.T, holder string) *taskstore.Task {
	t.Helper()
	tk, err := r.store.Create(context.Background(), taskstore.NewTask{Owner: "o", Tool: "slow", Protocol: taskstore.Protocol2026,
		Lease: &taskstore.LeaseRequest{Holder: holder, Duration: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// newSweepRunner is replica's runner on store, as gateway.New builds it for
// these tests but alone: leases of lease renewed every renew (0: a third
// of the lease, gateway.Config's default), no upstream behind it (a closed
// port), a notifier that hears nothing.
func newSweepRunner(t *testing.T, store *taskstore.Store, replica string, lease, renew time.Duration) *Runner {
	t.Helper()
	if renew <= 0 || renew >= lease {
		renew = lease / 3
	}
	up, err := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rn := New(Params{Store: store, Up: up, Observe: func(string, time.Duration) {},
		Metrics: obs.NewMetrics(func() float64 { return 0 }), Log: zerolog.Nop(), Replica: replica,
		Lease: lease, Renew: renew})
	t.Cleanup(rn.Stop)
	return rn
}
