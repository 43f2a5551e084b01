package webhook

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/taskstore"
)

// readCounter counts the reads of the outboxes that found events.
type readCounter struct {
	Store
	found atomic.Int64
}

func (r *readCounter) ReadWebhookEvents(ctx context.Context, consumer string, max int, claimAfter time.Duration) ([]taskstore.WebhookEvent, error) {
	evs, err := r.Store.ReadWebhookEvents(ctx, consumer, max, claimAfter)
	if len(evs) > 0 {
		r.found.Add(1)
	}
	return evs, err
}

// TestAnnouncementsGathered: events announced close together are read in
// one pass, not one read (and acknowledgement, outbox deletion, consumer
// group and hint) per announcement, which under load slowed task
// creation by 1.7× (bench -mode webhooks).
func TestAnnouncementsGathered(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	s := taskstore.New(rdb, taskstore.Options{Webhooks: true})
	t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
	rc := newReceiver(t)
	rs := &readCounter{Store: s}
	// No poll within the test: only announcements make the loop read.
	startDispatcher(t, Config{Store: rs, Consumer: "r1", Endpoints: []Endpoint{testEndpoint("all", rc.srv.URL)}, Poll: time.Hour})
	waitFor(t, "the dispatcher listening for announcements", func() bool { return len(mr.PubSubChannels("")) > 0 })
	owner := fmt.Sprintf("principal:%064x", 1)
	create := func() {
		if _, err := s.Create(ctx, taskstore.NewTask{Owner: owner, Tool: "search"}); err != nil {
			t.Fatal(err)
		}
	}
	create()
	time.Sleep(10 * time.Millisecond) // a read at once would find this one alone
	create()
	create()
	waitFor(t, "three task.created delivered", func() bool { return rc.delivered() == 3 })
	if n := rs.found.Load(); n != 1 {
		t.Fatalf("the three events were read in %d passes, want 1", n)
	}
}

// enqueueCounter counts the store calls that queue deliveries.
type enqueueCounter struct {
	Store
	calls atomic.Int64
}

func (c *enqueueCounter) EnqueueDeliveries(ctx context.Context, ds []taskstore.Delivery, keep time.Duration) ([]bool, error) {
	c.calls.Add(1)
	return c.Store.EnqueueDeliveries(ctx, ds, keep)
}

// TestOneEnqueuePerEndpointPerBatch: the events of one read are queued
// with one store call (one script) per endpoint, not one per event and
// endpoint (a round trip and a script each, on the Redis task handling
// waits for: bench -mode webhooks).
func TestOneEnqueuePerEndpointPerBatch(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	s := taskstore.New(rdb, taskstore.Options{Webhooks: true})
	t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
	owner := fmt.Sprintf("principal:%064x", 2)
	for range 4 {
		if _, err := s.Create(ctx, taskstore.NewTask{Owner: owner, Tool: "search"}); err != nil {
			t.Fatal(err)
		}
	}
	rc1, rc2 := newReceiver(t), newReceiver(t)
	cs := &enqueueCounter{Store: s}
	// The events are in the outbox before the dispatcher starts: its
	// first pass reads them all at once.
	startDispatcher(t, Config{Store: cs, Consumer: "r1", Poll: time.Hour,
		Endpoints: []Endpoint{testEndpoint("one", rc1.srv.URL), testEndpoint("two", rc2.srv.URL)}})
	waitFor(t, "four task.created delivered to each", func() bool { return rc1.delivered() == 4 && rc2.delivered() == 4 })
	if n := cs.calls.Load(); n != 2 {
		t.Fatalf("4 events for 2 endpoints were queued in %d store calls, want 2", n)
	}
}
