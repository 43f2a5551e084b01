package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/taskgate/taskgate/taskstore"
)

// The recoverer makes sure no task stays working forever (DESIGN.md
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
// failed every running task as "replica stopped" and dropped the results
// their upstream calls produced (found by e2e TestChaos).

// sweepState is what the recoverer goroutine remembers between sweeps.
type sweepState struct {
	lastOK    time.Time // when a sweep last reached the store
	outage    bool      // a sweep failed since lastOK
	holdUntil time.Time // no claims before this
}

// startRecoverer runs the sweep every LeaseRenew until the Handler closes.
func (h *Handler) startRecoverer() {
	h.workers.wg.Add(1)
	go func() {
		defer h.workers.wg.Done()
		tick := time.NewTicker(h.cfg.LeaseRenew)
		defer tick.Stop()
		for {
			select {
			case <-h.workers.ctx.Done():
				return
			case <-tick.C:
				h.recoverOnce(h.workers.ctx)
			}
		}
	}()
}

// recoverOnce fails the tasks whose worker lease expired. It returns how
// many it recovered.
func (h *Handler) recoverOnce(ctx context.Context) int {
	now := h.store.Options().Clock()
	expired, err := h.store.ListExpiredLeases(ctx, 100)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, taskstore.ErrUnavailable) {
			h.log.Warn().Str("op", "recover").Err(err).Msg("cannot list expired leases")
		}
		h.sweep.outage = true
		return 0
	}
	sw := &h.sweep
	if !sw.lastOK.IsZero() && (sw.outage || now.Sub(sw.lastOK) > 2*h.cfg.LeaseRenew) {
		sw.holdUntil = now.Add(h.cfg.Lease)
		h.log.Info().Str("op", "recover").Dur("unreachable", now.Sub(sw.lastOK)).Dur("hold", h.cfg.Lease).
			Msg("task store reachable again: no lease is taken over until the workers had a lease period to renew")
	}
	sw.lastOK, sw.outage = now, false
	if now.Before(sw.holdUntil) {
		return 0
	}
	n := 0
	for _, l := range expired {
		// Claim succeeds only while the lease is still expired, and for one
		// replica only: a worker that came back, or another sweeper, wins.
		if err := h.store.Claim(ctx, l.Owner, l.ID, h.cfg.ReplicaID, h.cfg.Lease); err != nil {
			continue
		}
		// Name the replica whose worker ran the task: the holder, unless an
		// earlier claim took the lease from it and did not finish the
		// recovery (its failure write was lost to a store outage, or its
		// lease ran out while it retried), whose holder is then that
		// claimer (found by e2e TestChaos).
		dead := l.Holder
		if l.From != "" {
			dead = l.From
		}
		msg := "the gateway replica running the task (" + dead + ") stopped before the upstream answered"
		e, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
		// Claimed, the task is this replica's: if the write fails (Redis
		// went away), retry it, or a later sweep would fail the task in
		// this replica's name instead of the one that stopped.
		o := taskstore.Outcome{Error: e, Message: msg, WriteID: uuid.NewString()} // retries: see finish
		err := h.retryStore(ctx, func() error { return h.store.Fail(ctx, l.Owner, l.ID, o) })
		if errors.Is(err, taskstore.ErrUnavailable) {
			// Still unwritten after the retries: keep the claim. Released,
			// the task would have no lease for any sweep to find and stay
			// working until its ttl; kept, it expires and a later sweep
			// (lease_from names the dead replica) fails it.
			h.log.Warn().Str("op", "recover").Str("task_id", l.ID).Err(err).Msg("cannot fail a dead replica's task yet; a later sweep retries")
			continue
		}
		_ = h.store.Release(context.WithoutCancel(ctx), l.Owner, l.ID, h.cfg.ReplicaID)
		if err != nil {
			continue
		}
		n++
		h.metrics.recovered.Inc()
		ev := h.log.Warn().Str("op", "recovered").Str("task_id", l.ID).Str("owner", shortOwner(l.Owner)).
			Str("replica", h.cfg.ReplicaID).Str("dead_replica", dead)
		t, err := h.store.Get(ctx, l.Owner, l.ID)
		if err == nil {
			ev = ev.Str("tool", t.Tool).Dur("duration", time.Since(t.CreatedAt))
			h.metrics.taskFinished(t.Tool, taskstore.StatusFailed, t.CreatedAt)
		} else {
			h.metrics.taskFinished("", taskstore.StatusFailed, time.Time{})
		}
		ev.Msg("task failed: its replica stopped")
		if err == nil {
			h.notifyStatus(ctx, t)
		}
	}
	return n
}
