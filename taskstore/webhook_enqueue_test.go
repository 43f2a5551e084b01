package taskstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

func batchDelivery(ep, task string, n int) Delivery {
	return Delivery{EventID: evtID(task, n), Endpoint: ep, TaskID: task, Type: WebhookTaskCreated,
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), TraceParent: "00-tp"}
}

// TestEnqueueDeliveriesBatch: one call queues several endpoints' and
// tasks' deliveries with the semantics of one EnqueueDelivery each: once
// per endpoint and event (a known one, or a repeat within the batch, is
// not fresh), each task's events in the order given, only the head due.
func TestEnqueueDeliveriesBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		a, b := uuid.NewString(), uuid.NewString()
		mustEnqueue(t, s, "ops", a, 1) // known already
		batch := []Delivery{
			batchDelivery("ops", a, 1), batchDelivery("ops", a, 2), batchDelivery("chat", a, 1),
			batchDelivery("ops", b, 1), batchDelivery("ops", a, 3), batchDelivery("ops", b, 1), // b 1 twice
			batchDelivery("chat", a, 2),
		}
		fresh, err := s.EnqueueDeliveries(ctx, batch, 48*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := []bool{false, true, true, true, true, false, true}
		if fmt.Sprint(fresh) != fmt.Sprint(want) {
			t.Fatalf("fresh = %v, want %v", fresh, want)
		}
		got := claimIDs(t, s, "ops", time.Minute)
		wantClaimed(t, got, evtID(a, 1), evtID(b, 1))
		if d := got[evtID(b, 1)]; string(d.Payload) != `{"n":1}` || d.TaskID != b || d.Attempts != 1 ||
			d.TraceParent != "00-tp" || !d.EnqueuedAt.Equal(e.clock.Now()) || d.Endpoint != "ops" {
			t.Errorf("claimed %+v", d)
		}
		for n := 1; n <= 3; n++ { // a's events one after the other
			wantErr(t, s.DeliveryDone(ctx, "ops", evtID(a, n)), nil)
			if n < 3 {
				wantClaimed(t, claimIDs(t, s, "ops", time.Minute), evtID(a, n+1))
			}
		}
		wantClaimed(t, claimIDs(t, s, "chat", time.Minute), evtID(a, 1))
		wantErr(t, s.DeliveryDone(ctx, "chat", evtID(a, 1)), nil)
		wantClaimed(t, claimIDs(t, s, "chat", time.Minute), evtID(a, 2))
		// Read again (the dispatcher died before its ack): nothing is new.
		fresh, err = s.EnqueueDeliveries(ctx, batch, 48*time.Hour)
		if err != nil || fmt.Sprint(fresh) != fmt.Sprint(make([]bool, len(batch))) {
			t.Fatalf("the batch again: %v, %v; want none fresh", fresh, err)
		}
	})
}

// TestEnqueueDeliveriesBad: a bad endpoint or event id fails the whole
// batch with a precise error, and nothing of it is queued.
func TestEnqueueDeliveriesBad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		a := uuid.NewString()
		for _, bad := range []Delivery{
			{EventID: evtID(a, 9), Endpoint: "x{y}", TaskID: a},
			{EventID: "evt_nope_1", Endpoint: "ops", TaskID: a},
		} {
			_, err := s.EnqueueDeliveries(ctx, []Delivery{batchDelivery("ops", a, 1), bad}, time.Hour)
			if !errors.Is(err, ErrBadEndpoint) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("%+v: err = %v, want ErrBadEndpoint or ErrNotFound", bad, err)
			}
		}
		if _, err := s.EnqueueDeliveries(ctx, []Delivery{batchDelivery("ops", a, 1)}, 0); err == nil {
			t.Fatal("keep 0 accepted")
		}
		wantClaimed(t, claimIDs(t, s, "ops", time.Minute))
		if fresh, err := s.EnqueueDeliveries(ctx, nil, time.Hour); err != nil || len(fresh) != 0 {
			t.Fatalf("empty batch: %v, %v", fresh, err)
		}
	})
}
