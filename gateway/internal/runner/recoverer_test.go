package runner

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/taskstore"
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
