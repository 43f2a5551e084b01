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
