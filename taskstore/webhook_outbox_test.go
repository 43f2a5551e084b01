package taskstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
