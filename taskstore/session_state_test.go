package taskstore

import (
	"slices"
	"testing"
	"time"
)

// TestSessionState: a held session's log level, resource subscriptions
// (bounded, counted once each) and plain calls live in its record, are
// never written without one, and go with it.
func TestSessionState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		_, err := s.SubscribeSession(ctx, "none", "test://a", true, 2)
		wantErr(t, err, ErrNoSession)
		_, err = s.SetSessionLogLevel(ctx, "none", "info")
		wantErr(t, err, ErrNoSession)
		wantErr(t, s.SetSessionCall(ctx, "none", "1", "task"), ErrNoSession)
		if n, _ := s.rdb.Exists(ctx, s.k.session("none")).Result(); n != 0 {
			t.Fatal("a change to a session without a record created one")
		}

		if err := s.PutSession(ctx, Session{ID: "s1", ClientVersion: "2025-11-25", UpstreamVersion: "2026-07-28"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if level, err := s.SessionLogLevel(ctx, "s1"); err != nil || level != "" {
			t.Fatalf("level before any set: %q %v", level, err)
		}
		for i, want := range []bool{true, false} { // the second time: no change
			if changed, err := s.SetSessionLogLevel(ctx, "s1", "warning"); err != nil || changed != want {
				t.Fatalf("set level #%d: changed %v %v, want %v", i, changed, err, want)
			}
		}
		for _, c := range []struct {
			uri      string
			on, want bool
			err      error
		}{
			{"test://a", true, true, nil},
			{"test://a", true, false, nil}, // again: nothing changes, not counted twice
			{"test://b", true, true, nil},
			{"test://c", true, false, ErrTooManySubscriptions},
			{"test://x", false, false, nil}, // never subscribed
			{"test://a", false, true, nil},
			{"test://c", true, true, nil}, // room again
		} {
			changed, err := s.SubscribeSession(ctx, "s1", c.uri, c.on, 2)
			if c.err != nil {
				wantErr(t, err, c.err)
			} else if err != nil || changed != c.want {
				t.Errorf("subscribe %s %v: changed %v %v, want %v", c.uri, c.on, changed, err, c.want)
			}
		}
		rec, err := s.GetSession(ctx, "s1")
		if err != nil || rec.LogLevel != "warning" || !slices.Equal(rec.Subscriptions, []string{"test://b", "test://c"}) {
			t.Fatalf("record: %+v %v", rec, err)
		}

		if err := s.SetSessionCall(ctx, "s1", `"r1"`, "task-1"); err != nil {
			t.Fatal(err)
		}
		if id, err := s.SessionCall(ctx, "s1", `"r1"`); err != nil || id != "task-1" {
			t.Fatalf("call: %q %v", id, err)
		}
		// A later call reusing the id is not forgotten by the earlier one's end.
		if err := s.SetSessionCall(ctx, "s1", `"r1"`, "task-2"); err != nil {
			t.Fatal(err)
		}
		if err := s.ClearSessionCall(ctx, "s1", `"r1"`, "task-1"); err != nil {
			t.Fatal(err)
		}
		if id, _ := s.SessionCall(ctx, "s1", `"r1"`); id != "task-2" {
			t.Fatalf("after the earlier call's end: %q, want task-2", id)
		}
		if err := s.ClearSessionCall(ctx, "s1", `"r1"`, "task-2"); err != nil {
			t.Fatal(err)
		}
		if id, _ := s.SessionCall(ctx, "s1", `"r1"`); id != "" {
			t.Fatalf("after its end: %q", id)
		}
		// The state lives and goes with the record.
		if ttl, _ := s.rdb.PTTL(ctx, s.k.session("s1")).Result(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("record ttl %v after the changes", ttl)
		}
		if err := s.DeleteSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if level, _ := s.SessionLogLevel(ctx, "s1"); level != "" {
			t.Errorf("level after delete: %q", level)
		}

		w, err := s.WatchSession(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := s.AnnounceSession(ctx, "s1", SessionEnded); err != nil {
			t.Fatal(err)
		}
		for ev := range w.C {
			if ev.Kind == EventResync {
				continue
			}
			if ev.Kind != EventSession || ev.Status != SessionEnded {
				t.Fatalf("event %+v, want the session's end", ev)
			}
			break
		}
	})
}
