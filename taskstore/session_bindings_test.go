package taskstore

import (
	"errors"
	"testing"
	"time"
)

func TestSessionBindings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const sid, alice, bob = "{braces}:and spaces", "principal:alice", "principal:bob"
		key := s.k.sessionBinding(sid)
		if want := "tg:bind:" + ownerTag(sid); key != want {
			t.Fatalf("key = %q, want %q (hashed: no hash tag from the id)", key, want)
		}
		if o, err := s.SessionBinding(ctx, sid, time.Minute); o != "" || err != nil {
			t.Fatalf("unbound session = %q, %v; want \"\", nil", o, err)
		}
		if e.exists(key) {
			t.Fatal("a lookup created a record")
		}
		if err := s.BindSession(ctx, sid, alice, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.BindSession(ctx, sid, alice, time.Minute); err != nil {
			t.Fatalf("binding again to the same owner: %v", err)
		}
		if err := s.BindSession(ctx, sid, bob, time.Minute); !errors.Is(err, ErrBoundElsewhere) {
			t.Fatalf("binding to another owner = %v, want ErrBoundElsewhere", err)
		}
		if err := s.BindSession(ctx, "", alice, time.Minute); err == nil {
			t.Error("an empty session id was bound")
		}
		if got := e.rdb.Get(ctx, key).Val(); got != alice {
			t.Errorf("raw record = %q, want %q (bob's attempt changed it?)", got, alice)
		}
		// A lookup renews the record.
		e.rdb.PExpire(ctx, key, 10*time.Second)
		if o, err := s.SessionBinding(ctx, sid, time.Hour); o != alice || err != nil {
			t.Fatalf("SessionBinding = %q, %v; want alice", o, err)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 59*time.Minute {
			t.Errorf("PTTL after a lookup = %v, want about 1h", pttl)
		}
		if err := s.UnbindSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if o, _ := s.SessionBinding(ctx, sid, time.Minute); o != "" {
			t.Errorf("unbound session still bound to %q", o)
		}
	})
}
