package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// The recoverer makes sure no task stays working forever (DESIGN.md
// invariant 4): a worker renews its task's lease every LeaseRenew; when a
// replica dies, its leases run out, and a sweep on any surviving replica
// claims each expired one and fails the task with a message that says what
// happened. The store adds a grace period (taskstore.Options.LeaseGrace) to
// every deadline, so clock skew between replicas does not fail a task whose
// worker is alive.

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
	expired, err := h.store.ListExpiredLeases(ctx, 100)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, taskstore.ErrUnavailable) {
			h.log.Warn().Str("op", "recover").Err(err).Msg("cannot list expired leases")
		}
		return 0
	}
	n := 0
	for _, l := range expired {
		// Claim succeeds only while the lease is still expired, and for one
		// replica only: a worker that came back, or another sweeper, wins.
		if err := h.store.Claim(ctx, l.Owner, l.ID, h.cfg.ReplicaID, h.cfg.Lease); err != nil {
			continue
		}
		msg := "the gateway replica running the task (" + l.Holder + ") stopped before the upstream answered"
		e, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
		err := h.store.Fail(ctx, l.Owner, l.ID, taskstore.Outcome{Error: e, Message: msg})
		_ = h.store.Release(context.WithoutCancel(ctx), l.Owner, l.ID, h.cfg.ReplicaID)
		if err != nil {
			continue
		}
		n++
		ev := h.log.Warn().Str("op", "recovered").Str("task_id", l.ID).Str("owner", shortOwner(l.Owner)).
			Str("replica", h.cfg.ReplicaID).Str("dead_replica", l.Holder)
		t, err := h.store.Get(ctx, l.Owner, l.ID)
		if err == nil {
			ev = ev.Str("tool", t.Tool).Dur("duration", time.Since(t.CreatedAt))
		}
		ev.Msg("task failed: its replica stopped")
		if err == nil {
			h.notifyStatus(ctx, t)
		}
	}
	return n
}
