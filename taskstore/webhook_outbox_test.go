package taskstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
)

// addRawEvent appends an entry to an owner's outbox as whEmit does, and
// names the outbox in the hint.
func addRawEvent(t *testing.T, e *env, s *Store, owner, id, typ string) {
	t.Helper()
	err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.k.outbox(owner), Values: []string{
		"id", id, "type", typ, "at", "1000", "task", "t", "owner", owner, "tool", "slow", "status", "working",
		"created", "900", "attempt", "1"}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.SAdd(ctx, s.k.outboxes(), s.k.outbox(owner)).Err(); err != nil {
		t.Fatal(err)
	}
}

func readEvents(t *testing.T, s *Store, consumer string, claimAfter time.Duration) []WebhookEvent {
	t.Helper()
	evs, err := s.ReadWebhookEvents(ctx, consumer, 100, claimAfter)
	if err != nil {
		t.Fatalf("ReadWebhookEvents: %v", err)
	}
	return evs
}

func eventIDs(evs []WebhookEvent) []string {
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestOutboxReadAck: events are read once by one consumer, in order; an
// outbox being read by a live consumer is left to it; events a consumer
// read and never acked are taken over after claimAfter; an outbox emptied
// by the ack is deleted and dropped from the hint.
func TestOutboxReadAck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		addRawEvent(t, e, s, "alice", "evt_a_1", WebhookTaskCreated)
		addRawEvent(t, e, s, "alice", "evt_a_2", WebhookTaskCompleted)
		addRawEvent(t, e, s, "bob", "evt_b_1", WebhookTaskCreated)

		evs := readEvents(t, s, "r1", time.Hour)
		if len(evs) != 3 {
			t.Fatalf("read %v, want 3 events", eventIDs(evs))
		}
		var alice []WebhookEvent
		for _, ev := range evs {
			if ev.Owner == "alice" {
				alice = append(alice, ev)
			}
			if ev.Outbox == "" || ev.StreamID == "" || ev.Tool != "slow" || ev.Attempt != 1 || ev.At.UnixMilli() != 1000 {
				t.Errorf("event %+v", ev)
			}
		}
		if len(alice) != 2 || alice[0].ID != "evt_a_1" || alice[1].ID != "evt_a_2" {
			t.Fatalf("alice's events out of order: %v", eventIDs(alice))
		}
		// r1 holds them: nobody else gets them, nor new ones of the same
		// outboxes (they would overtake r1's).
		addRawEvent(t, e, s, "alice", "evt_a_3", WebhookTaskCreated)
		if evs := readEvents(t, s, "r2", time.Hour); len(evs) != 0 {
			t.Fatalf("r2 read %v while r1 holds the outboxes", eventIDs(evs))
		}
		wantErr(t, s.AckWebhookEvents(ctx, alice), nil)
		if evs := readEvents(t, s, "r2", time.Hour); len(evs) != 1 || evs[0].ID != "evt_a_3" {
			t.Fatalf("r2 read %v, want evt_a_3", eventIDs(evs))
		}
		// r1 "dies" holding evt_b_1: r3 takes it over once it has been
		// idle for claimAfter.
		time.Sleep(5 * time.Millisecond)
		evs = readEvents(t, s, "r3", time.Millisecond)
		if len(evs) != 2 { // evt_b_1 from r1, evt_a_3 from r2
			t.Fatalf("r3 took over %v, want evt_b_1 and evt_a_3", eventIDs(evs))
		}
		wantErr(t, s.AckWebhookEvents(ctx, evs), nil)
		for _, o := range []string{"alice", "bob"} {
			if e.exists(s.k.outbox(o)) {
				t.Errorf("%s's empty outbox kept", o)
			}
		}
		if n, _ := e.rdb.SCard(ctx, s.k.outboxes()).Result(); n != 0 {
			t.Errorf("hint keeps %d outboxes, want none", n)
		}
		// A new event after the outbox was deleted: a new group, read.
		addRawEvent(t, e, s, "alice", "evt_a_4", WebhookTaskCreated)
		if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 1 || evs[0].ID != "evt_a_4" {
			t.Fatalf("read %v after the outbox was recreated, want evt_a_4", eventIDs(evs))
		}
	})
}

func TestOutboxBadInput(t *testing.T) {
	e := openMiniredis(t)
	s := e.store(t)
	if _, err := s.ReadWebhookEvents(ctx, "", 10, time.Second); err == nil {
		t.Error("empty consumer accepted")
	}
	if err := s.AckWebhookEvents(ctx, []WebhookEvent{{ID: "x", Outbox: "tg:other", StreamID: "1-0"}}); err == nil {
		t.Error("ack of an event of no outbox accepted")
	}
	wantErr(t, s.AckWebhookEvents(ctx, nil), nil)
	if evs := readEvents(t, s, "r1", time.Second); len(evs) != 0 {
		t.Errorf("read %v from no outbox", evs)
	}
}

// TestOutboxSweep: the sweep finds the outboxes a lost hint no longer
// names, and runs at most once a minute across the fleet.
func TestOutboxSweep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := webhookStore(t, e)
		for _, o := range []string{"alice", "bob", "carol"} {
			mustCreate(t, s, o)
		}
		if err := e.rdb.Del(ctx, s.k.outboxes()).Err(); err != nil {
			t.Fatal(err)
		}
		if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 0 {
			t.Fatalf("read %v without a hint", eventIDs(evs))
		}
		n, err := s.SweepWebhookOutboxes(ctx)
		if err != nil || n != 3 {
			t.Fatalf("sweep = %d, %v; want 3", n, err)
		}
		if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 3 {
			t.Fatalf("read %v after the sweep, want 3 events", eventIDs(evs))
		}
		other := e.store(t, func(o *Options) { o.Webhooks = true })
		if n, err := other.SweepWebhookOutboxes(ctx); err != nil || n != 0 {
			t.Fatalf("a second sweep within the minute = %d, %v; want skipped", n, err)
		}
	})
}

// TestOutboxSurvivesRestart: on a redis-server with AOF, events recorded
// and events read but not acknowledged, and queued deliveries, are all
// there after a restart (SIGKILL).
func TestOutboxSurvivesRestart(t *testing.T) {
	srv := redistest.NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	e := &env{t: t, rdb: rdb, clock: newFakeClock(), srv: srv}
	s := webhookStore(t, e)
	a, b := mustCreate(t, s, "alice"), mustCreate(t, s, "bob")
	wantErr(t, s.Complete(ctx, "alice", a.ID, json.RawMessage(`{}`)), nil)
	if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 3 { // r1 dies holding them
		t.Fatalf("read %v", eventIDs(evs))
	}
	wantErr(t, s.Complete(ctx, "bob", b.ID, json.RawMessage(`{}`)), nil)
	mustEnqueue(t, s, "ops", a.ID, 1)

	srv.Restart()
	var evs []WebhookEvent
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		evs, err = s.ReadWebhookEvents(ctx, "r2", 100, time.Millisecond)
		if err == nil || time.Now().After(deadline) {
			wantErr(t, err, nil)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// r2 takes over r1's three; bob's completion waits behind bob's
	// created (r1 held bob's outbox): the next read has it.
	if len(evs) != 3 {
		t.Fatalf("after the restart read %v, want r1's 3 events", eventIDs(evs))
	}
	wantErr(t, s.AckWebhookEvents(ctx, evs), nil)
	evs = readEvents(t, s, "r2", time.Millisecond)
	if len(evs) != 1 || evs[0].Type != WebhookTaskCompleted || evs[0].TaskID != b.ID {
		t.Fatalf("then read %v, want bob's completion", eventIDs(evs))
	}
	wantClaimed(t, claimIDs(t, s, "ops", time.Minute), evtID(a.ID, 1))
}

// TestWebhooksCluster: on a real 3-master Redis Cluster every webhook
// script stays in one slot: events of owners on several shards are
// recorded, read, acknowledged and swept, and an endpoint's queue works.
func TestWebhooksCluster(t *testing.T) {
	rdb := clusterClient(t)
	s := New(rdb, Options{Webhooks: true, ResyncInterval: time.Minute})
	defer s.Close()
	owners := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
	var first string
	for _, owner := range owners {
		task, err := s.Create(ctx, NewTask{Owner: owner, Tool: "t", Lease: &LeaseRequest{Holder: "r1", Duration: time.Minute}})
		if err != nil {
			t.Fatalf("%s: Create: %v", owner, err)
		}
		first = task.ID
		if err := s.AddInputRequests(ctx, owner, task.ID, map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
			t.Fatalf("%s: AddInputRequests: %v", owner, err)
		}
		if _, err := s.RequestCancel(ctx, owner, task.ID, ""); err != nil {
			t.Fatalf("%s: RequestCancel: %v", owner, err)
		}
	}
	if err := rdb.Del(ctx, s.k.outboxes()).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepWebhookOutboxes(ctx); err != nil || n != len(owners) {
		t.Fatalf("sweep on Cluster = %d, %v; want %d", n, err, len(owners))
	}
	evs, err := s.ReadWebhookEvents(ctx, "r1", 100, time.Minute)
	if err != nil || len(evs) != 3*len(owners) {
		t.Fatalf("ReadWebhookEvents on Cluster = %d events, %v", len(evs), err)
	}
	if err := s.AckWebhookEvents(ctx, evs); err != nil {
		t.Fatalf("AckWebhookEvents on Cluster: %v", err)
	}
	if n, _ := rdb.SCard(ctx, s.k.outboxes()).Result(); n != 0 {
		t.Errorf("hint keeps %d outboxes after the acks", n)
	}
	for _, ep := range []string{"ops", "chat"} {
		for n := 1; n <= 2; n++ {
			if ok, err := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(first, n), Endpoint: ep, TaskID: first}, time.Hour); err != nil || !ok {
				t.Fatalf("EnqueueDelivery on Cluster: %t, %v", ok, err)
			}
		}
		ds, err := s.ClaimDeliveries(ctx, ep, 10, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("ClaimDeliveries on Cluster = %+v, %v", ds, err)
		}
		wantErr(t, s.DeliveryDead(ctx, ep, ds[0].EventID, "x"), nil)
		wantErr(t, s.RetryDead(ctx, ep, ds[0].EventID), nil)
		wantErr(t, s.DeliveryDone(ctx, ep, ds[0].EventID), nil)
		if due, dead, err := s.WebhookQueueStats(ctx, ep); err != nil || due != 1 || dead != 0 {
			t.Fatalf("stats on Cluster = %d, %d, %v", due, dead, err)
		}
	}
}

// TestOutboxRereadOwnPending: events a live consumer read and could not
// acknowledge (queueing them failed, or Redis restarted and the reply to
// its read was lost) are its own to read again at once, in order, not
// after claimAfter: meanwhile they hold back every newer event of that
// owner (they would overtake them), so waiting for the takeover delayed a
// whole owner's webhooks by claimAfter (a minute) after a Redis blip.
func TestOutboxRereadOwnPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		addRawEvent(t, e, s, "alice", "evt_a_1", WebhookTaskCreated)
		addRawEvent(t, e, s, "alice", "evt_a_2", WebhookTaskCompleted)
		if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 2 {
			t.Fatalf("read %v, want 2 events", eventIDs(evs))
		}
		// Not acknowledged: r1 reads them again, in order; r2 still not.
		evs := readEvents(t, s, "r1", time.Hour)
		if got := eventIDs(evs); len(got) != 2 || got[0] != "evt_a_1" || got[1] != "evt_a_2" {
			t.Fatalf("r1 read %v again, want its own unacknowledged evt_a_1, evt_a_2", got)
		}
		if evs := readEvents(t, s, "r2", time.Hour); len(evs) != 0 {
			t.Fatalf("r2 read %v while r1 holds them", eventIDs(evs))
		}
		wantErr(t, s.AckWebhookEvents(ctx, evs), nil)
		addRawEvent(t, e, s, "alice", "evt_a_3", WebhookTaskCreated)
		if evs := readEvents(t, s, "r1", time.Hour); len(evs) != 1 || evs[0].ID != "evt_a_3" {
			t.Fatalf("read %v after the ack, want evt_a_3", eventIDs(evs))
		}
	})
}
