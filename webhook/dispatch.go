package webhook

import (
	"context"
	"slices"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// claimAfter is how long an outbox entry read by a replica may stay
// unacknowledged before another replica takes it over (XAUTOCLAIM): the
// reader died between reading and acknowledging.
const claimAfter = time.Minute

// sweepEvery is how often this replica offers to sweep the outboxes.
const sweepEvery = time.Minute

// dispatchLoop moves events from the outboxes to the endpoints' queues
// until Stop, every Poll or sooner when woken.
func (d *Dispatcher) dispatchLoop() {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	// The scripts announce new events: read at once rather than at the
	// next tick (a hint; the tick is the backstop).
	if stop, err := d.cfg.Store.WatchWebhookEvents(d.ctx, d.wake); err == nil {
		defer stop()
	} else {
		d.log.Warn().Err(err).Msg("webhook events are read every poll only: no announcements")
	}
	var swept time.Time
	for {
		if time.Since(swept) >= sweepEvery {
			// The outboxes' hint SET is written after the scripts, not
			// atomically: the sweep finds outboxes it lost (the store
			// runs it at most once a minute across the fleet).
			swept = time.Now()
			if n, err := d.cfg.Store.SweepWebhookOutboxes(d.ctx); err != nil && d.ctx.Err() == nil {
				d.log.Warn().Err(err).Msg("webhook outboxes not swept; swept again in a minute")
			} else if n > 0 {
				d.log.Debug().Int("outboxes", n).Msg("webhook outboxes swept")
			}
		}
		for d.dispatchOnce(d.ctx) == batch && d.ctx.Err() == nil {
			// A full batch: more may be waiting.
		}
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
			d.gather()
		}
	}
}

// gatherFor is how long the dispatch loop waits after an announcement
// before it reads, so that the events announced meanwhile are read,
// queued and acknowledged together. Reading at once on every
// announcement cost, per event, a read script, an acknowledging script
// and, with the outbox then empty, its deletion, a new consumer group
// and the hint's SREM and SADD (about six Redis calls beside each status
// change, on the Redis the task handling waits for): under load the
// outboxes' upkeep slowed task creation by 1.7× (bench -mode webhooks,
// docs/BENCHMARKS.md). A tenth of a second is nothing to a receiver
// (Standard Webhooks promises no latency; retries are seconds apart).
const gatherFor = 100 * time.Millisecond

// gather waits gatherFor (at most Poll), or until Stop; announcements
// meanwhile are for the read that follows.
func (d *Dispatcher) gather() {
	t := time.NewTimer(min(gatherFor, d.cfg.Poll))
	defer t.Stop()
	select {
	case <-d.ctx.Done():
	case <-t.C:
	}
	select { // drop the announcements made while waiting: this read covers them
	case <-d.wake:
	default:
	}
}

// dispatchOnce reads one batch of events, queues a delivery per endpoint
// that wants each (one store call per endpoint for the whole batch), and
// acknowledges the events all of whose deliveries are queued (one call).
// An event not acknowledged is read again (by this replica or another,
// after claimAfter); queueing is idempotent per endpoint and event, so
// that costs no duplicate. It returns how many events it read.
func (d *Dispatcher) dispatchOnce(ctx context.Context) int {
	evs, err := d.cfg.Store.ReadWebhookEvents(ctx, d.cfg.Consumer, batch, claimAfter)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("webhook events not read; read again shortly")
		}
		return 0
	}
	if len(evs) == 0 {
		return 0
	}
	failed := d.enqueue(ctx, evs, d.Endpoints())
	done := evs[:0:0]
	// Once an event of an outbox is not queued, its later ones are not
	// acknowledged either (read again after it, in order): a task's
	// later event must not reach an endpoint's per-task list first.
	held := map[string]bool{}
	for i, ev := range evs {
		if failed[i] || held[ev.Outbox] {
			held[ev.Outbox] = true
			continue
		}
		done = append(done, ev)
	}
	if len(done) > 0 {
		if err := d.cfg.Store.AckWebhookEvents(ctx, done); err != nil && ctx.Err() == nil {
			d.log.Warn().Err(err).Int("events", len(done)).Msg("webhook events queued but not acknowledged; they are read again and queued once")
		}
	}
	return len(evs)
}

// enqueue queues each event of evs for every endpoint in eps that wants
// it, one store call per endpoint, in the events' order (so one task's
// events queue in order). failed[i] is true when a queueing of evs[i]
// failed: that event is kept in its outbox for another try.
func (d *Dispatcher) enqueue(ctx context.Context, evs []taskstore.WebhookEvent, eps []Endpoint) (failed []bool) {
	failed = make([]bool, len(evs))
	bodies := make([][]byte, len(evs)) // rendered once per event, for all endpoints
	// The marker outlives every retry of the delivery, so an event read
	// again within that window is never queued twice.
	keep := d.cfg.RetryFor + 24*time.Hour
	for _, e := range eps {
		var dels []taskstore.Delivery
		var which []int
		for i, ev := range evs {
			if !e.Wants(ev.Type, ev.Tool, ev.Owner) {
				continue
			}
			if bodies[i] == nil {
				bodies[i] = Render(ev, d.cfg.ConsoleURL)
			}
			dels = append(dels, taskstore.Delivery{
				EventID: ev.ID, Endpoint: e.Name, TaskID: ev.TaskID, Type: ev.Type,
				Payload: bodies[i], TraceParent: ev.TraceParent, // due now, by the store's clock
			})
			which = append(which, i)
		}
		if len(dels) == 0 {
			continue
		}
		fresh, err := d.cfg.Store.EnqueueDeliveries(ctx, dels, keep)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn().Err(err).Str("endpoint", e.Name).Int("events", len(dels)).Msg("webhook deliveries not queued; queued on the next read")
			}
			for _, i := range which {
				failed[i] = true
			}
			continue
		}
		if slices.Contains(fresh, true) {
			d.wakeEndpoint(e.Name)
		}
	}
	return failed
}
