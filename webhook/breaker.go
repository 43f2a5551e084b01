package webhook

import (
	"sync"
	"time"
)

// breaker is an endpoint's circuit breaker, per replica. After OpenAfter
// consecutive failed POSTs with no success it opens: the delivery loop
// then claims one delivery at a time (a probe), each after its own
// backoff (ProbeFirst doubling to ProbeMax, jittered), instead of
// Concurrency at once. A success closes it and the backlog flows again.
//
// Why: every queued delivery retries on its own backoff, so a receiver
// that is down or answers 500 got a POST (a claim, a POST and a retry
// script each) for every pending task's head, hundreds a second under
// load, and that work competed with task handling for the CPU and Redis
// (bench -mode webhooks, docs/BENCHMARKS.md). Deliveries not claimed while
// it is open stay due and are charged no attempt; the probe backoff's cap
// bounds how long a receiver back up waits for its backlog. This is the
// "circuit breaker" of Nygard, Release It! (2nd ed., ch. 5); Standard
// Webhooks ("Retry schedule") lets senders pause a failing endpoint.
type breaker struct {
	openAfter      int
	first, maxWait time.Duration
	rand           func() float64
	mu             sync.Mutex
	fails          int       // consecutive failures
	open           bool      // under mu
	probes         int       // failed probes since it opened
	probing        bool      // a probe is in flight
	probeAt        time.Time // the next probe, wall clock
}

func newBreaker(cfg Config) *breaker {
	return &breaker{openAfter: cfg.OpenAfter, first: cfg.ProbeFirst, maxWait: cfg.ProbeMax, rand: cfg.Rand}
}

// allow is how many deliveries the loop may claim now, given free slots
// and how many POSTs are in flight; wait is when to ask again when it
// is 0 because of the breaker (0: no timer needed).
func (b *breaker) allow(free, inFlight int, now time.Time) (n int, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return free, 0
	}
	if inFlight > 0 || b.probing {
		return 0, 0 // an outcome in flight pokes the loop
	}
	if d := b.probeAt.Sub(now); d > 0 {
		return 0, d
	}
	b.probing = true
	return 1, 0
}

// unclaimed: the probe slot was granted but nothing was due.
func (b *breaker) unclaimed() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// result records one POST's outcome; changed is true when the breaker
// opened or closed with it (for the gauge and the one log line).
func (b *breaker) result(ok bool, now time.Time) (open, changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wasProbe := b.probing
	b.probing = false
	if ok {
		b.fails, b.probes = 0, 0
		changed, b.open = b.open, false
		return false, changed
	}
	b.fails++
	switch {
	case !b.open && b.fails >= b.openAfter:
		b.open, changed, b.probes = true, true, 0
		b.probeAt = now.Add(b.probeWait())
	case b.open && wasProbe:
		b.probes++
		b.probeAt = now.Add(b.probeWait())
	}
	return b.open, changed
}

// probeWait is the wait before the next probe: first·2^probes capped at
// maxWait, with "equal jitter" (between half and all of it), so probes
// of many replicas spread out yet none waits past maxWait.
func (b *breaker) probeWait() time.Duration {
	ceil := b.first
	for i := 0; i < b.probes && ceil < b.maxWait; i++ {
		ceil *= 2
	}
	ceil = min(ceil, b.maxWait)
	return ceil/2 + time.Duration(b.rand()*float64(ceil/2))
}
