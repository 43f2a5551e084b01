package taskstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func evtID(task string, n int) string { return fmt.Sprintf("evt_%s_%d", task, n) }

func mustEnqueue(t *testing.T, s *Store, ep, task string, n int) {
	t.Helper()
	ok, err := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(task, n), Endpoint: ep, TaskID: task,
		Type: WebhookTaskCreated, Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), TraceParent: "00-tp"}, 48*time.Hour)
	if err != nil || !ok {
		t.Fatalf("EnqueueDelivery %d: %t, %v", n, ok, err)
	}
}

func claimIDs(t *testing.T, s *Store, ep string, lease time.Duration) map[string]Delivery {
	t.Helper()
	ds, err := s.ClaimDeliveries(ctx, ep, 100, lease)
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	m := map[string]Delivery{}
	for _, d := range ds {
		m[d.EventID] = d
	}
	return m
}

func wantClaimed(t *testing.T, got map[string]Delivery, ids ...string) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("claimed %d deliveries %v, want %v", len(got), keysOf(got), ids)
	}
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			t.Fatalf("claimed %v, want %v", keysOf(got), ids)
		}
	}
}

func keysOf(m map[string]Delivery) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestDeliveryQueueOrder: only the head of a task's events is handed out,
// the next after Done; a claimed delivery is not handed out again until
// its lease passes; enqueue is idempotent per event and endpoint.
func TestDeliveryQueueOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		a, b := uuid.NewString(), uuid.NewString()
		mustEnqueue(t, s, "ops", a, 1)
		mustEnqueue(t, s, "ops", a, 2)
		mustEnqueue(t, s, "ops", b, 1)
		mustEnqueue(t, s, "chat", a, 1) // another endpoint: its own queue
		if ok, err := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(a, 1), Endpoint: "ops", TaskID: a}, time.Hour); ok || err != nil {
			t.Fatalf("second EnqueueDelivery = %t, %v, want false (known)", ok, err)
		}

		got := claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(a, 1), evtID(b, 1))
		d := got[evtID(a, 1)]
		if d.Attempts != 1 || string(d.Payload) != `{"n":1}` || d.TaskID != a || d.Type != WebhookTaskCreated ||
			d.Endpoint != "ops" || d.TraceParent != "00-tp" || !d.EnqueuedAt.Equal(e.clock.Now()) {
			t.Errorf("claimed %+v", d)
		}
		wantClaimed(t, claimIDs(t, s, "ops", time.Minute)) // leased
		if due, dead, err := s.WebhookQueueStats(ctx, "ops"); err != nil || due != 2 || dead != 0 {
			t.Errorf("stats = %d, %d, %v; want 2 due", due, dead, err)
		}

		wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, 1)), nil)
		got = claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(a, 2))
		wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, 2)), nil)
		wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, 2)), nil) // twice: harmless

		// b's lease passes: handed out again, a second attempt.
		e.clock.Advance(time.Minute + time.Millisecond)
		got = claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(b, 1))
		if got[evtID(b, 1)].Attempts != 2 {
			t.Errorf("attempts after a lapsed lease = %d, want 2", got[evtID(b, 1)].Attempts)
		}
		// Done events are not enqueued again (the marker outlives them).
		if ok, _ := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(a, 1), Endpoint: "ops", TaskID: a}, time.Hour); ok {
			t.Error("a delivered event was enqueued again")
		}
		wantClaimed(t, claimIDs(t, s, "chat", time.Minute), evtID(a, 1))
	})
}

// TestDeliveryRetryAndDead: a retry is due at its time with its error; a
// dead letter is listed, frees its task's next event, and RetryDead sends
// it again.
func TestDeliveryRetryAndDead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		a := uuid.NewString()
		mustEnqueue(t, s, "ops", a, 1)
		mustEnqueue(t, s, "ops", a, 2)
		wantClaimed(t, claimIDs(t, s, "ops", time.Minute), evtID(a, 1))
		next := e.clock.Now().Add(5 * time.Second)
		wantErr(t, s.DeliveryRetry(ctx, "ops", evtID(a, 1), next, "HTTP 500"), nil)
		e.clock.Advance(4 * time.Second)
		wantClaimed(t, claimIDs(t, s, "ops", time.Minute))
		e.clock.Advance(time.Second)
		got := claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(a, 1))
		if d := got[evtID(a, 1)]; d.Attempts != 2 || d.LastError != "HTTP 500" {
			t.Errorf("retried delivery = %+v", d)
		}

		wantErr(t, s.DeliveryDead(ctx, "ops", evtID(a, 1), "HTTP 503"), nil)
		wantClaimed(t, claimIDs(t, s, "ops", time.Minute), evtID(a, 2)) // the next one goes
		wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, 2)), nil)
		dead, err := s.DeadDeliveries(ctx, "ops", 10)
		if err != nil || len(dead) != 1 || dead[0].EventID != evtID(a, 1) || dead[0].LastError != "HTTP 503" ||
			!dead[0].DeadAt.Equal(e.clock.Now()) || string(dead[0].Payload) != `{"n":1}` {
			t.Fatalf("DeadDeliveries = %+v, %v", dead, err)
		}
		if due, n, err := s.WebhookQueueStats(ctx, "ops"); err != nil || due != 0 || n != 1 {
			t.Errorf("stats = %d due, %d dead, %v", due, n, err)
		}
		// A retry of a delivery no longer queued changes nothing.
		wantErr(t, s.DeliveryRetry(ctx, "ops", evtID(a, 1), e.clock.Now(), "late"), nil)
		if n, _ := e.rdb.ZCard(ctx, s.k.whDue("ops")).Result(); n != 0 {
			t.Errorf("a retry of a dead letter queued it: %d due", n)
		}

		e.clock.Advance(time.Hour)
		wantErr(t, s.RetryDead(ctx, "ops", evtID(a, 1)), nil)
		wantErr(t, s.RetryDead(ctx, "ops", evtID(a, 1)), ErrNotFound)
		got = claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(a, 1))
		if d := got[evtID(a, 1)]; !d.EnqueuedAt.Equal(e.clock.Now()) || !d.DeadAt.IsZero() {
			t.Errorf("retried dead letter = %+v, want a new window", d)
		}
		wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, 1)), nil)
		if dead, _ := s.DeadDeliveries(ctx, "ops", 10); len(dead) != 0 {
			t.Errorf("dead letters after the retry = %+v", dead)
		}
	})
}

// TestDeadLettersBounded: the newest DeadLetterMax per endpoint, for
// DeadLetterKeep.
func TestDeadLettersBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := uuid.NewString()
		for n := 1; n <= DeadLetterMax+2; n++ {
			mustEnqueue(t, s, "ops", task, n)
			e.clock.Advance(time.Millisecond)
			wantErr(t, s.DeliveryDead(ctx, "ops", evtID(task, n), "x"), nil)
		}
		_, dead, _ := s.WebhookQueueStats(ctx, "ops")
		if dead != DeadLetterMax {
			t.Fatalf("%d dead letters, want %d", dead, DeadLetterMax)
		}
		if e.exists(s.k.whDelivery("ops", evtID(task, 1))) {
			t.Error("a trimmed dead letter's hash was kept")
		}
		ds, _ := s.DeadDeliveries(ctx, "ops", 2)
		if len(ds) != 2 || ds[0].EventID != evtID(task, DeadLetterMax+2) || ds[1].EventID != evtID(task, DeadLetterMax+1) {
			t.Fatalf("newest dead letters = %+v", ds)
		}
		e.clock.Advance(DeadLetterKeep)
		other := uuid.NewString()
		mustEnqueue(t, s, "ops", other, 1)
		wantErr(t, s.DeliveryDead(ctx, "ops", evtID(other, 1), "x"), nil)
		if _, dead, _ = s.WebhookQueueStats(ctx, "ops"); dead != 1 {
			t.Fatalf("%d dead letters after %v, want 1", dead, DeadLetterKeep)
		}
	})
}

func TestDeliveryQueueBadInput(t *testing.T) {
	e := openMiniredis(t)
	s := e.store(t)
	task := uuid.NewString()
	for _, ep := range []string{"", "a{b", "a}b", string(make([]byte, 201))} {
		if _, err := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(task, 1), Endpoint: ep}, time.Hour); !errors.Is(err, ErrBadEndpoint) {
			t.Errorf("endpoint %q: %v, want ErrBadEndpoint", ep, err)
		}
		if _, err := s.ClaimDeliveries(ctx, ep, 1, time.Minute); !errors.Is(err, ErrBadEndpoint) {
			t.Errorf("claim on endpoint %q: %v", ep, err)
		}
	}
	for _, id := range []string{"", "evt_", "evt_" + task, "evt_" + task + "_", "evt_" + task + "_x", "evt_nope_1", "x" + evtID(task, 1)} {
		if _, err := s.EnqueueDelivery(ctx, Delivery{EventID: id, Endpoint: "ops"}, time.Hour); !errors.Is(err, ErrNotFound) {
			t.Errorf("event id %q: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.EnqueueDelivery(ctx, Delivery{EventID: evtID(task, 1), Endpoint: "ops"}, 0); err == nil {
		t.Error("keep 0 accepted")
	}
	wantErr(t, s.RetryDead(ctx, "ops", evtID(task, 9)), ErrNotFound)
}

// FuzzEventTask: any event id is either refused or yields the UUID it was
// made from; none panics.
func FuzzEventTask(f *testing.F) {
	for _, s := range []string{"evt_6f1c2d9a-1b2c-4d3e-8f40-123456789abc_1", "evt_", "evt_x_1", "",
		"evt_6f1c2d9a-1b2c-4d3e-8f40-123456789abc_", "evt_6f1c2d9a-1b2c-4d3e-8f40-123456789abc_-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		task, ok := eventTask(id)
		if !ok {
			return
		}
		if uuid.Validate(task) != nil || !strings.HasPrefix(id, "evt_"+task+"_") {
			t.Fatalf("eventTask(%q) = %q", id, task)
		}
	})
}
