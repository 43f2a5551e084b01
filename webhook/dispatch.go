package webhook

import (
	"context"
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
// that wants each, and acknowledges the events all of whose deliveries
// are queued. An event not acknowledged is read again (by this replica or
// another, after claimAfter); queueing is idempotent per endpoint and
// event, so that costs no duplicate. It returns how many events it read.
func (d *Dispatcher) dispatchOnce(ctx context.Context) int {
	evs, err := d.cfg.Store.ReadWebhookEvents(ctx, d.cfg.Consumer, batch, claimAfter)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("webhook events not read; read again shortly")
		}
		return 0
	}
	eps := d.Endpoints()
	done := evs[:0:0]
	// Once an event of an outbox is not queued, its later ones wait too
	// (read again after it, in order): queued now, a task's later event
	// would overtake its earlier one in the endpoint's per-task list.
	held := map[string]bool{}
	for _, ev := range evs {
		if held[ev.Outbox] {
			continue
		}
		if d.enqueue(ctx, ev, eps) {
			done = append(done, ev)
		} else {
			held[ev.Outbox] = true
		}
	}
	if len(done) > 0 {
		if err := d.cfg.Store.AckWebhookEvents(ctx, done); err != nil && ctx.Err() == nil {
			d.log.Warn().Err(err).Int("events", len(done)).Msg("webhook events queued but not acknowledged; they are read again and queued once")
		}
	}
	return len(evs)
}

// enqueue queues ev for every endpoint in eps that wants it; false when a
// queueing failed (the event is kept for another try).
func (d *Dispatcher) enqueue(ctx context.Context, ev taskstore.WebhookEvent, eps []Endpoint) bool {
	var body []byte
	for _, e := range eps {
		if !e.Wants(ev.Type, ev.Tool, ev.Owner) {
			continue
		}
		if body == nil {
			body = Render(ev, d.cfg.ConsoleURL)
		}
		del := taskstore.Delivery{
			EventID: ev.ID, Endpoint: e.Name, TaskID: ev.TaskID, Type: ev.Type,
			Payload: body, TraceParent: ev.TraceParent, // due now, by the store's clock
		}
		// The marker outlives every retry of the delivery, so an event
		// read again within that window is never queued twice.
		fresh, err := d.cfg.Store.EnqueueDelivery(ctx, del, d.cfg.RetryFor+24*time.Hour)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn().Err(err).Str("endpoint", e.Name).Str("event_id", ev.ID).Msg("webhook delivery not queued; queued on the next read")
			}
			return false
		}
		if fresh {
			d.wakeEndpoint(e.Name)
		}
	}
	return true
}
