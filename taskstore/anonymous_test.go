package taskstore

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReserveAnonymous: the anonymous caps count tasks not yet expired,
// in all and per address, on one slot; expired ones stop counting; a
// release gives the place back; the keys expire with the last entry.
func TestReserveAnonymous(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		now := e.clock.Now()
		reserve := func(addr string, life time.Duration) (string, error) {
			id := uuid.NewString()
			return id, s.ReserveAnonymous(ctx, id, addr, now.Add(life), 3, 2)
		}
		a1, err := reserve("10.0.0.1", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reserve("10.0.0.1", time.Second); err != nil {
			t.Fatal(err)
		}
		_, err = reserve("10.0.0.1", time.Second)
		wantErr(t, err, ErrTooManyFromAddress)
		if _, err := reserve("10.0.0.2", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		_, err = reserve("10.0.0.3", time.Second)
		wantErr(t, err, ErrTooManyAnonymous)

		if err := s.ReleaseAnonymous(ctx, a1, "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if _, err := reserve("10.0.0.1", time.Second); err != nil {
			t.Fatalf("after a release: %v", err)
		}
		// Past the one-second entries' expiry they no longer count.
		e.elapse(1100 * time.Millisecond)
		now = e.clock.Now()
		if _, err := reserve("10.0.0.1", time.Second); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
		if ttl := e.rdb.PTTL(ctx, s.k.anonLive()).Val(); ttl <= 0 {
			t.Errorf("the live index has no expiry (PTTL %v)", ttl)
		}
	})
}

// TestRenewAnonymous: a renewed place keeps counting past its first
// expiry, even when the caps are full, and is never moved earlier.
func TestRenewAnonymous(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		now := e.clock.Now()
		if err := s.ReserveAnonymous(ctx, "session:a", "10.0.0.9", now.Add(time.Second), -1, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.RenewAnonymous(ctx, "session:a", "10.0.0.9", now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.RenewAnonymous(ctx, "session:a", "10.0.0.9", now.Add(2*time.Second)); err != nil { // earlier: ignored
			t.Fatal(err)
		}
		e.elapse(5 * time.Second)
		err := s.ReserveAnonymous(ctx, "session:b", "10.0.0.9", e.clock.Now().Add(time.Second), -1, 1)
		wantErr(t, err, ErrTooManyFromAddress)
		if ttl := e.rdb.PTTL(ctx, s.k.anonAddr("10.0.0.9")).Val(); ttl < 50*time.Minute {
			t.Errorf("the address index expires in %v, before the renewed place", ttl)
		}
	})
}

// TestCreateWithID: a caller-minted id is the task's; one that is not a
// UUID is refused.
func TestCreateWithID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		id := uuid.NewString()
		task, err := s.Create(ctx, NewTask{ID: id, Owner: "anon:" + id, Tool: "x"})
		if err != nil || task.ID != id {
			t.Fatalf("Create with an id: %v, %v", task, err)
		}
		if _, err := s.Create(ctx, NewTask{ID: "not-a-uuid", Owner: "o"}); err == nil {
			t.Error("Create accepted an id that is not a UUID")
		}
	})
}
