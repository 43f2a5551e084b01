package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/taskgate/taskgate/taskstore"
)

// endpointLoop delivers one endpoint's queue: it claims what is due, at
// most Concurrency at once, and POSTs each on its own goroutine.
type endpointLoop struct {
	d    *Dispatcher
	name string

	mu sync.Mutex
	ep Endpoint // in force; SetEndpoints swaps it

	wake  chan struct{}
	done  chan struct{} // closed when the endpoint is removed
	once  sync.Once
	slots chan struct{} // one per POST in flight
	brk   *breaker
}

func newEndpointLoop(d *Dispatcher, e Endpoint) *endpointLoop {
	return &endpointLoop{d: d, name: e.Name, ep: e, wake: make(chan struct{}, 1), done: make(chan struct{}),
		slots: make(chan struct{}, d.cfg.Concurrency), brk: newBreaker(d.cfg)}
}

func (l *endpointLoop) set(e Endpoint) { l.mu.Lock(); l.ep = e; l.mu.Unlock() }
func (l *endpointLoop) get() Endpoint  { l.mu.Lock(); defer l.mu.Unlock(); return l.ep }
func (l *endpointLoop) stop()          { l.once.Do(func() { close(l.done) }) }

func (l *endpointLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// lease is how long a claimed delivery stays invisible to other claims:
// past one POST's timeout, so only a dead claimer's delivery is claimed
// again.
func (l *endpointLoop) lease() time.Duration { return l.d.cfg.Timeout + 30*time.Second }

// run claims and delivers until ctx ends or the endpoint is removed; it
// returns once its POSTs have ended.
func (l *endpointLoop) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var posts sync.WaitGroup
	defer posts.Wait()
	t := time.NewTicker(l.d.cfg.Poll)
	defer t.Stop()
	for {
		n, probeIn := l.claim(ctx, &posts)
		if n > 0 && len(l.slots) < cap(l.slots) {
			continue // it had some: there may be more due now
		}
		if !l.wait(ctx, t.C, probeIn) {
			return
		}
	}
}

// wait waits for the tick, a poke or, while the breaker is open, the
// next probe's time; false when the loop is to end.
func (l *endpointLoop) wait(ctx context.Context, tick <-chan time.Time, probeIn time.Duration) bool {
	var probe <-chan time.Time
	if probeIn > 0 {
		pt := time.NewTimer(probeIn)
		defer pt.Stop()
		probe = pt.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.done:
		return false
	case <-tick:
	case <-l.wake:
	case <-probe:
	}
	return true
}

// claim takes as many due deliveries as there are free slots (one probe
// at a time while the breaker is open) and starts their POSTs; it returns
// how many it took, and when the breaker allows the next probe.
func (l *endpointLoop) claim(ctx context.Context, posts *sync.WaitGroup) (int, time.Duration) {
	free := cap(l.slots) - len(l.slots)
	if free == 0 {
		return 0, 0
	}
	free, probeIn := l.brk.allow(free, len(l.slots), time.Now())
	if free == 0 {
		return 0, probeIn
	}
	ds, err := l.d.cfg.Store.ClaimDeliveries(ctx, l.name, free, l.lease())
	if err != nil && ctx.Err() == nil {
		l.d.log.Warn().Err(err).Str("endpoint", l.name).Msg("webhook deliveries not claimed; claimed again shortly")
	}
	if len(ds) == 0 {
		l.brk.unclaimed()
		return 0, 0
	}
	for _, del := range ds {
		l.slots <- struct{}{}
		posts.Add(1)
		go func() {
			defer func() { <-l.slots; posts.Done(); l.poke() }()
			if ok, sent := l.deliver(ctx, del); sent {
				l.outcome(ok)
			}
		}()
	}
	return len(ds), 0
}

// outcome tells the breaker how a POST went, and logs and exports its
// state when it opens or closes (not per failure: deliver logs those).
func (l *endpointLoop) outcome(ok bool) {
	open, changed := l.brk.result(ok, time.Now())
	if !changed {
		return
	}
	if open {
		l.d.metrics.open.WithLabelValues(l.name).Set(1)
		l.d.log.Warn().Str("endpoint", l.name).Int("failures", l.d.cfg.OpenAfter).
			Msg("webhook endpoint failing: breaker open, one probe delivery at a time until one succeeds")
		return
	}
	l.d.metrics.open.WithLabelValues(l.name).Set(0)
	l.d.log.Info().Str("endpoint", l.name).Msg("webhook endpoint delivered again: breaker closed, its backlog flows")
}

// deliver makes one attempt of del and records its outcome: done, due
// again after a backoff, or dead once the retry window is spent. ok: the
// receiver took it; sent: an attempt was made (not cut short by Stop).
func (l *endpointLoop) deliver(ctx context.Context, del taskstore.Delivery) (ok, sent bool) {
	ep := l.get()
	start := time.Now()
	ctx, span := l.d.startSpan(ctx, ep, del)
	status, err := l.post(ctx, ep, del)
	l.d.metrics.seconds.WithLabelValues(l.name).Observe(time.Since(start).Seconds())
	endSpan(span, status, err)
	log := l.d.log.With().Str("endpoint", l.name).Str("event_id", del.EventID).Str("task", del.TaskID).
		Str("type", del.Type).Int("attempt", del.Attempts).Logger()
	if err == nil {
		l.record(ctx, del, "delivered", l.doneWhileClaimed(ctx, del))
		log.Debug().Int("status", status).Msg("webhook delivered")
		return true, true
	}
	if ctx.Err() != nil {
		return false, false // stopping: the claim lapses and the delivery is due again
	}
	now := l.d.cfg.Clock()
	next := now.Add(backoff(del.Attempts, l.d.cfg.FirstRetry, l.d.cfg.MaxBackoff, l.d.cfg.Rand()))
	if !next.Before(del.EnqueuedAt.Add(l.d.cfg.RetryFor)) {
		l.record(ctx, del, "dead", l.d.cfg.Store.DeliveryDead(ctx, l.name, del.EventID, err.Error()))
		log.Warn().Err(err).Msg("webhook delivery failed for good: kept as a dead letter (console, deliveries page)")
		return false, true
	}
	l.record(ctx, del, "retried", l.d.cfg.Store.DeliveryRetry(ctx, l.name, del.EventID, next, err.Error()))
	log.Info().Err(err).Time("next", next).Msg("webhook delivery failed; retried later")
	return false, true
}

// record counts an outcome once the store has it; a store error leaves
// the claim to lapse, and the delivery is attempted again.
func (l *endpointLoop) record(ctx context.Context, del taskstore.Delivery, outcome string, err error) {
	if err != nil {
		if ctx.Err() == nil {
			l.d.log.Warn().Err(err).Str("endpoint", l.name).Str("event_id", del.EventID).Str("outcome", outcome).
				Msg("webhook delivery outcome not recorded; it is attempted again after its claim lapses")
		}
		return
	}
	l.d.metrics.deliveries.WithLabelValues(l.name, del.Type, outcome).Inc()
}

// post sends del once, signed now with every secret of ep; nil error
// for a 2xx answer.
func (l *endpointLoop) post(ctx context.Context, ep Endpoint, del taskstore.Delivery) (int, error) {
	// The receiver checks the timestamp against its own clock (Standard
	// Webhooks, "Verifying webhook authenticity"): the wall clock, not
	// Config.Clock, which times the retry window with the store.
	ts := time.Now()
	sig, err := SignatureHeader(ep.Secrets, del.EventID, ts, del.Payload)
	if err != nil {
		return 0, err // Check refused such secrets; kept for safety
	}
	ctx, cancel := context.WithTimeout(ctx, l.d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytesReader(del.Payload))
	if err != nil {
		return 0, errors.New("the endpoint's URL cannot be requested")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "taskgate-webhooks")
	req.Header.Set(HeaderID, del.EventID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	injectTrace(ctx, req)
	resp, err := l.d.cfg.Client.Do(req)
	if err != nil {
		return 0, sendError(err)
	}
	// Read a bounded part so the connection can be reused; a receiver
	// that sends more gets its connection closed.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// sendError is a failed POST's cause without the URL: an endpoint's URL
// may hold a credential (chat services put theirs in the path), and this
// error is logged and kept with the delivery.
func sendError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return errors.New("no answer within the timeout")
		}
		err = ue.Err
	}
	return fmt.Errorf("not sent: %v", err)
}

// doneWhileClaimed records a delivery done, trying again while Redis is
// away (restarting) and the claim holds: once it lapses, another claim
// sends the event again, a duplicate the receiver must drop by
// webhook-id (Standard Webhooks, "Idempotency").
func (l *endpointLoop) doneWhileClaimed(ctx context.Context, del taskstore.Delivery) error {
	until := time.Now().Add(l.lease() - l.d.cfg.Timeout)
	for {
		err := l.d.cfg.Store.DeliveryDone(ctx, l.name, del.EventID)
		if !errors.Is(err, taskstore.ErrUnavailable) || time.Now().After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}
