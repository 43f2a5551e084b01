package taskstore

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func TestOwnerSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const owner = "auth:{tenant}"
		key := s.k.held(owner)
		if want := "tg:{" + ownerTag(owner) + "}:held"; key != want {
			t.Fatalf("key = %q, want %q", key, want)
		}
		_, err := s.GetOwnerSession(ctx, owner)
		wantErr(t, err, ErrNoSession)

		// First writer wins when none was recorded.
		a := OwnerSession{SessionID: "sess-a", ProtocolVersion: "2025-11-25", Init: json.RawMessage(`{"capabilities":{"tools":{}}}`)}
		got, ok, err := s.PutOwnerSession(ctx, owner, a, "", time.Hour)
		if err != nil || !ok || got.SessionID != "sess-a" || !got.CreatedAt.Equal(e.clock.Now()) {
			t.Fatalf("first put = %+v, %v, %v", got, ok, err)
		}
		want := map[string]string{"sid": "sess-a", "pv": "2025-11-25", "init": `{"capabilities":{"tools":{}}}`,
			"created": strconv.FormatInt(e.clock.Now().UnixMilli(), 10)}
		h := e.hash(key)
		for f, v := range want {
			if h[f] != v {
				t.Errorf("field %s = %q, want %q", f, h[f], v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("hash has %d fields, want %d: %v", len(h), len(want), h)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 59*time.Minute || pttl > time.Hour {
			t.Errorf("PTTL = %v, want about 1h", pttl)
		}

		// A second replica that also saw none loses, and learns the winner.
		got, ok, err = s.PutOwnerSession(ctx, owner, OwnerSession{SessionID: "sess-b", ProtocolVersion: "2025-06-18"}, "", time.Hour)
		if err != nil || ok || got.SessionID != "sess-a" || got.ProtocolVersion != "2025-11-25" ||
			string(got.Init) != `{"capabilities":{"tools":{}}}` || !got.CreatedAt.Equal(e.clock.Now()) {
			t.Fatalf("losing put = %+v, %v, %v", got, ok, err)
		}

		// Replacing the session the upstream forgot: the first replica
		// swaps; a second one replacing the same stale id gets the new one.
		e.elapse(time.Second)
		got, ok, err = s.PutOwnerSession(ctx, owner, OwnerSession{SessionID: "sess-c", ProtocolVersion: "2025-11-25"}, "sess-a", time.Hour)
		if err != nil || !ok || got.SessionID != "sess-c" || string(got.Init) != "{}" {
			t.Fatalf("swap = %+v, %v, %v", got, ok, err)
		}
		got, ok, err = s.PutOwnerSession(ctx, owner, OwnerSession{SessionID: "sess-d"}, "sess-a", time.Hour)
		if err != nil || ok || got.SessionID != "sess-c" {
			t.Fatalf("stale swap = %+v, %v, %v", got, ok, err)
		}
		rec, err := s.GetOwnerSession(ctx, owner)
		if err != nil || rec.SessionID != "sess-c" || rec.ProtocolVersion != "2025-11-25" || !rec.CreatedAt.Equal(e.clock.Now()) {
			t.Fatalf("GetOwnerSession = %+v, %v", rec, err)
		}

		// Another owner has its own record.
		if _, err := s.GetOwnerSession(ctx, "anonymous"); err == nil {
			t.Error("another owner sees the held session")
		}

		// Touch renews; expiry removes; a stale id may then record anew.
		e.rdb.PExpire(ctx, key, time.Minute)
		if ok, err := s.TouchOwnerSession(ctx, owner, time.Hour); !ok || err != nil {
			t.Fatalf("TouchOwnerSession = %v, %v", ok, err)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 59*time.Minute {
			t.Errorf("PTTL after touch = %v", pttl)
		}
		e.rdb.PExpire(ctx, key, time.Second)
		e.elapse(1100 * time.Millisecond)
		_, err = s.GetOwnerSession(ctx, owner)
		wantErr(t, err, ErrNoSession)
		if ok, err := s.TouchOwnerSession(ctx, owner, time.Hour); ok || err != nil || e.exists(key) {
			t.Errorf("TouchOwnerSession(missing) = %v, %v", ok, err)
		}
		if got, ok, err := s.PutOwnerSession(ctx, owner, OwnerSession{SessionID: "sess-e"}, "sess-c", time.Hour); !ok || err != nil || got.SessionID != "sess-e" {
			t.Errorf("put after expiry = %+v, %v, %v", got, ok, err)
		}
		if _, _, err := s.PutOwnerSession(ctx, owner, OwnerSession{}, "", time.Hour); err == nil {
			t.Error("empty session id accepted")
		}
	})
}

func TestOwnerSessionsUnavailable(t *testing.T) {
	e := openMiniredis(t)
	s := e.store(t)
	e.mini.Close()
	_, _, err := s.PutOwnerSession(ctx, "o", OwnerSession{SessionID: "x"}, "", time.Hour)
	wantErr(t, err, ErrUnavailable)
	_, err = s.GetOwnerSession(ctx, "o")
	wantErr(t, err, ErrUnavailable)
	_, err = s.TouchOwnerSession(ctx, "o", time.Hour)
	wantErr(t, err, ErrUnavailable)
}
