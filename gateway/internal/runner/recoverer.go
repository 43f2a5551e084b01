package runner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/obs"
	"github.com/taskgate/taskgate/taskstore"
)

// The recoverer makes sure no task stays working forever (docs/ARCHITECTURE.md
// invariant 4): a worker renews its task's lease every LeaseRenew; when a
// replica dies, its leases run out, and a sweep on any surviving replica
// claims each expired one and fails the task with a message that says what
// happened. The store adds a grace period (taskstore.Options.LeaseGrace) to
// every deadline, so clock skew between replicas does not fail a task whose
// worker is alive.
//
// Leases are judged by the wall clock, but a worker can only renew while
// Redis answers. After the store was out of reach (for the sweeper, and so
// most likely for every worker), or after the sweeper itself stalled, every
// lease may look expired though its worker is alive and about to renew. So
// the sweeper then holds its claims for one Lease: a live worker renews
// within LeaseRenew, a dead one's lease stays expired and is taken after
// the hold. Without it, a Redis outage longer than Lease plus the grace
// would fail every running task as "replica stopped" and drop the results
// their upstream calls produced.

// sweepState is what the recoverer remembers between sweeps.
type sweepState struct {
	lastOK    time.Time // when a sweep last reached the store
	outage    bool      // a sweep failed since lastOK
	holdUntil time.Time // no claims before this
}

// recovererStore is what the recoverer needs of the task store.
type recovererStore interface {
	ListExpiredLeases(ctx context.Context, limit int) ([]taskstore.ExpiredLease, error)
	Claim(ctx context.Context, owner, id, holder string, d time.Duration) error
	Fail(ctx context.Context, owner, id string, o taskstore.Outcome) error
	Release(ctx context.Context, owner, id, holder string) error
	Get(ctx context.Context, owner, id string) (*taskstore.Task, error)
	Options() taskstore.Options
}

// recovererParams are a recoverer's dependencies and settings.
type recovererParams struct {
	store   recovererStore
	notify  func(ctx context.Context, t *taskstore.Task) // a status change told to the task's client (notify.go)
	metrics *obs.Metrics
	log     zerolog.Logger
	replica string        // claims are made in this replica's name
	lease   time.Duration // a claim's lease, and the hold after an outage
	every   time.Duration // the sweep period (the lease renewal period)
	Retry   *retrier      // the failure write's retries
	// resume deals with the expired lease of a durable task (a rerun, a
	// re-attach: rerun.go) and reports whether it did; nil or false: the
	// task is failed.
	resume func(ctx context.Context, l taskstore.ExpiredLease) bool
}

// Recoverer sweeps for expired leases every period, on a goroutine of its
// own, from start until shutdown.
type recoverer struct {
	recovererParams
	sweep  sweepState   // owned by the sweeping goroutine (and tests)
	lastOK atomic.Int64 // sweep.lastOK in unix ms, for Figures (status.go)
	cancel context.CancelFunc
	Done   sync.WaitGroup
}

func newRecoverer(p recovererParams) *recoverer { return &recoverer{recovererParams: p} }

// Start runs a sweep every period until shutdown.
func (rc *recoverer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	rc.Done.Add(1)
	go func() {
		defer rc.Done.Done()
		core.Every(ctx, rc.every, func(ctx context.Context) { rc.RecoverOnce(ctx) })
	}()
}

// shutdown stops the sweeps and waits for the one under way.
func (rc *recoverer) shutdown() {
	if rc.cancel != nil {
		rc.cancel()
	}
	rc.Done.Wait()
}

// RecoverOnce fails the tasks whose worker lease expired. It returns how
// many it recovered.
func (rc *recoverer) RecoverOnce(ctx context.Context) int {
	now := rc.store.Options().Clock()
	expired, err := rc.store.ListExpiredLeases(ctx, sweepPage)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, taskstore.ErrUnavailable) {
			rc.log.Warn().Str("op", "recover").Err(err).Msg("cannot list expired leases")
		}
		rc.sweep.outage = true
		return 0
	}
	sw := &rc.sweep
	// An outage counts from the replica's start too: a replica that came
	// up while the store was out of reach knows no more than the others
	// whether the workers are alive.
	if sw.outage || !sw.lastOK.IsZero() && now.Sub(sw.lastOK) > 2*rc.every {
		sw.holdUntil = now.Add(rc.lease)
		ev := rc.log.Info().Str("op", "recover").Float64("hold_seconds", rc.lease.Seconds())
		if !sw.lastOK.IsZero() {
			ev = ev.Float64("unreachable_seconds", now.Sub(sw.lastOK).Seconds())
		}
		ev.Msg("task store reachable again: no lease is taken over until the workers had a lease period to renew")
	}
	sw.lastOK, sw.outage = now, false
	rc.lastOK.Store(now.UnixMilli())
	if now.Before(sw.holdUntil) {
		return 0
	}
	n := rc.recoverPage(ctx, expired)
	// A dead replica leaves all its tasks at once: more pages in the same
	// sweep, a bounded number (the next sweep goes on).
	for page := 1; len(expired) == sweepPage && page < sweepPages && ctx.Err() == nil; page++ {
		if expired, err = rc.store.ListExpiredLeases(ctx, sweepPage); err != nil {
			break
		}
		n += rc.recoverPage(ctx, expired)
	}
	return n
}

const (
	sweepPage  = 100 // expired leases listed at once
	sweepPages = 20  // pages per sweep at most
)

// recoverPage fails the tasks of expired whose lease this replica claims,
// and returns how many.
func (rc *recoverer) recoverPage(ctx context.Context, expired []taskstore.ExpiredLease) int {
	n := 0
	for _, l := range expired {
		if rc.resume != nil && rc.resume(ctx, l) {
			continue
		}
		// Claim succeeds only while the lease is still expired, and for one
		// replica only: a worker that came back, or another sweeper, wins.
		if err := rc.store.Claim(ctx, l.Owner, l.ID, rc.replica, rc.lease); err != nil {
			continue
		}
		// Name the replica whose worker ran the task: the holder, unless an
		// earlier claim took the lease from it and did not finish the
		// recovery (its failure write was lost to a store outage, or its
		// lease ran out while it retried), whose holder is then that
		// claimer.
		dead := l.Holder
		if l.From != "" {
			dead = l.From
		}
		msg := "the gateway replica running the task (" + dead + ") stopped before the upstream answered"
		// Claimed, the task is this replica's: if the write fails (Redis
		// went away), retry it, or a later sweep would fail the task in
		// this replica's name instead of the one that stopped.
		o := taskstore.Outcome{Error: core.InternalError(msg), Message: msg, WriteID: uuid.NewString()} // retries: see finish
		err := rc.Retry.do(ctx, func() error { return rc.store.Fail(ctx, l.Owner, l.ID, o) })
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Still unwritten after the retries: keep the claim. Released,
			// the task would have no lease for any sweep to find and stay
			// working until its ttl; kept, it expires and a later sweep
			// (lease_from names the dead replica) fails it.
			rc.log.Warn().Str("op", "recover").Str("task_id", l.ID).Err(err).Msg("cannot fail a dead replica's task yet; a later sweep retries")
			continue
		}
		_ = rc.store.Release(context.WithoutCancel(ctx), l.Owner, l.ID, rc.replica)
		if err != nil {
			continue
		}
		n++
		rc.metrics.Recovered.Inc()
		ev := rc.log.Warn().Str("op", "recovered").Str("task_id", l.ID).Str("owner", core.LogOwner(l.Owner)).
			Str("dead_replica", dead)
		t, err := rc.store.Get(ctx, l.Owner, l.ID)
		if err == nil {
			ev = ev.Str("tool", t.Tool).Float64("duration_seconds", time.Since(t.CreatedAt).Seconds())
			ended := *t
			ended.StatusMessage = "the gateway replica running the task stopped (" + dead + ")"
			rc.metrics.TaskFinished(&ended, taskstore.StatusFailed, 0)
		} else {
			rc.metrics.TaskFinished(&taskstore.Task{}, taskstore.StatusFailed, 0)
		}
		ev.Msg("task failed: its replica stopped")
		if err == nil {
			rc.notify(ctx, t)
		}
	}
	return n
}
