package webhook

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/taskgate/taskgate/taskstore"
)

func endpointOpen(d *Dispatcher, endpoint string) float64 {
	return testutil.ToFloat64(d.Metrics().open.WithLabelValues(endpoint))
}

func retried(d *Dispatcher, endpoint string) float64 {
	return metric(d, endpoint, EventCreated, "retried")
}

// TestBreakerStopsHammering: against a receiver that only fails, the
// loop stops claiming after OpenAfter failures in a row (plus the POSTs
// already in flight): the other deliveries stay due and are charged no
// attempt. Before the breaker every queued delivery was POSTed (and
// retried on its own backoff): ~440 POSTs a second toward a failing
// receiver during bench -mode webhooks.
func TestBreakerStopsHammering(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{})
		rc := newReceiver(t)
		rc.answer = func(int, *http.Request) int { return 500 }
		const tasks = 40
		for i := range tasks {
			enqueue(t, s, "a", fmt.Sprintf("%s-%d", t.Name(), i), 1)
		}
		// No retry and no probe within the test: only the breaker decides
		// how many are POSTed.
		d := startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)},
			Concurrency: 4, OpenAfter: 5, FirstRetry: time.Hour, ProbeFirst: time.Hour, ProbeMax: time.Hour})
		waitFor(t, "the breaker open", func() bool { return endpointOpen(d, "a") == 1 })
		calls := func() int { rc.mu.Lock(); defer rc.mu.Unlock(); return rc.calls }
		waitFor(t, "the POSTs in flight ended", func() bool { return int(retried(d, "a")) == calls() })
		if n := calls(); n < 5 || n > 5+3 {
			t.Fatalf("the receiver got %d POSTs, want 5 to 8 (5 failures, then only those in flight)", n)
		}
		ds, err := s.ClaimDeliveries(ctx, "a", 100, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != tasks-calls() {
			t.Fatalf("%d deliveries still due, want %d", len(ds), tasks-calls())
		}
		for _, del := range ds {
			if del.Attempts != 1 { // this claim's
				t.Fatalf("%s was charged %d attempts while the breaker was open", del.EventID, del.Attempts-1)
			}
		}
	})
}

// TestBreakerClosesOnSuccess: once the receiver is back, a probe
// succeeds, the breaker closes and the whole backlog is delivered, in
// order per task.
func TestBreakerClosesOnSuccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, taskstore.Options{})
		rc := newReceiver(t)
		var down atomic.Bool
		down.Store(true)
		var whileOpen atomic.Int64 // POSTs that began while the breaker was open
		var d *Dispatcher
		var ready atomic.Bool
		rc.answer = func(int, *http.Request) int {
			if ready.Load() && endpointOpen(d, "a") == 1 {
				whileOpen.Add(1)
			}
			if down.Load() {
				return 500
			}
			return 204
		}
		const tasks = 10
		for i := range tasks {
			enqueue(t, s, "a", fmt.Sprintf("%s-%d", t.Name(), i), 3)
		}
		d = startDispatcher(t, Config{Store: s, Endpoints: []Endpoint{testEndpoint("a", rc.srv.URL)},
			Concurrency: 4, OpenAfter: 5, FirstRetry: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
			ProbeFirst: 5 * time.Millisecond, ProbeMax: 20 * time.Millisecond})
		ready.Store(true)
		waitFor(t, "the breaker open", func() bool { return endpointOpen(d, "a") == 1 })
		waitFor(t, "two probes", func() bool { return whileOpen.Load() >= 2 })
		down.Store(false)
		waitFor(t, "the backlog delivered", func() bool { return rc.delivered() == 3*tasks })
		if v := endpointOpen(d, "a"); v != 0 {
			t.Fatalf("taskgate_webhook_endpoint_open = %v after deliveries succeeded, want 0", v)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		next := map[string]int{}
		for _, p := range rc.got {
			next[p.Data.TaskID]++
			if want := fmt.Sprintf("evt_%s_%d", p.Data.TaskID, next[p.Data.TaskID]); p.Data.EventID != want {
				t.Fatalf("task %s: got %s, want %s", p.Data.TaskID, p.Data.EventID, want)
			}
		}
	})
}

// TestBreakerProbeBackoff: probes wait ProbeFirst doubling to ProbeMax,
// between half and all of it (jitter), never past ProbeMax.
func TestBreakerProbeBackoff(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		b := newBreaker(Config{OpenAfter: 2, ProbeFirst: time.Second, ProbeMax: 10 * time.Second, Rand: func() float64 { return r }})
		now := time.Unix(1000, 0)
		if open, changed := b.result(false, now); open || changed {
			t.Fatalf("open after one failure")
		}
		if open, changed := b.result(false, now); !open || !changed {
			t.Fatalf("not open after OpenAfter failures")
		}
		for i, ceil := range []time.Duration{1, 2, 4, 8, 10, 10} {
			ceil *= time.Second
			if n, wait := b.allow(4, 0, now); n != 0 || wait <= 0 {
				t.Fatalf("probe %d: allowed %d before its time (wait %v)", i, n, wait)
			}
			wait := b.probeAt.Sub(now)
			if wait < ceil/2 || wait > ceil {
				t.Fatalf("r=%v probe %d: waits %v, want within [%v, %v]", r, i, wait, ceil/2, ceil)
			}
			now = b.probeAt
			if n, _ := b.allow(4, 0, now); n != 1 {
				t.Fatalf("probe %d: allowed %d, want 1", i, n)
			}
			if n, _ := b.allow(4, 0, now); n != 0 {
				t.Fatalf("a second probe while one is in flight")
			}
			b.result(false, now)
		}
		if n, _ := b.allow(4, 1, b.probeAt); n != 0 {
			t.Fatalf("a probe while a POST is in flight")
		}
		if open, changed := b.result(true, now); open || !changed {
			t.Fatalf("a success left it open")
		}
		if n, _ := b.allow(4, 0, now); n != 4 {
			t.Fatalf("closed: allowed %d, want 4", n)
		}
	}
}
