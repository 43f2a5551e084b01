package taskstore

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestSessionReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const a, b = "5f0c2a9e-1d7b-4c1e-9a53-0f6f2f7b9e01", "{braces}:and spaces"
		key := s.k.sessionReplica(b)
		if want := "tg:stdio:" + ownerTag(b); key != want {
			t.Fatalf("key = %q, want %q (hashed: no hash tag from the id)", key, want)
		}
		if url, err := s.SessionReplica(ctx, a); url != "" || err != nil {
			t.Fatalf("unrecorded session = %q, %v; want \"\", nil", url, err)
		}
		if err := s.PutSessionReplica(ctx, a, "http://10.0.0.1:8080", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSessionReplica(ctx, b, "http://10.0.0.2:8080", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSessionReplica(ctx, "", "http://x", time.Minute); err == nil {
			t.Error("an empty session id was recorded")
		}
		for id, want := range map[string]string{a: "http://10.0.0.1:8080", b: "http://10.0.0.2:8080"} {
			if url, err := s.SessionReplica(ctx, id); url != want || err != nil {
				t.Errorf("SessionReplica(%q) = %q, %v; want %q", id, url, err, want)
			}
		}
		if got := e.rdb.Get(ctx, s.k.sessionReplica(a)).Val(); got != "http://10.0.0.1:8080" {
			t.Errorf("raw record = %q", got)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 50*time.Second || pttl > time.Minute {
			t.Errorf("PTTL = %v, want about 1m", pttl)
		}

		// Renewal extends what exists and reports what does not.
		e.rdb.PExpire(ctx, key, 10*time.Second)
		missing, err := s.RenewSessionReplicas(ctx, []string{a, "gone", b}, time.Hour)
		if err != nil || !slices.Equal(missing, []string{"gone"}) {
			t.Fatalf("RenewSessionReplicas = %v, %v; want [gone]", missing, err)
		}
		if pttl := e.rdb.PTTL(ctx, key).Val(); pttl <= 59*time.Minute {
			t.Errorf("PTTL after renewal = %v, want about 1h", pttl)
		}
		if e.exists(s.k.sessionReplica("gone")) {
			t.Error("renewal created a record")
		}

		// Removal, and expiry of a replica that stopped renewing.
		if err := s.RemoveSessionReplicas(ctx, []string{a}); err != nil {
			t.Fatal(err)
		}
		if url, _ := s.SessionReplica(ctx, a); url != "" {
			t.Errorf("removed session still recorded at %q", url)
		}
		e.rdb.PExpire(ctx, key, time.Second)
		e.elapse(1100 * time.Millisecond)
		if url, _ := s.SessionReplica(ctx, b); url != "" {
			t.Errorf("expired session still recorded at %q", url)
		}
		if missing, err := s.RenewSessionReplicas(ctx, nil, time.Hour); missing != nil || err != nil {
			t.Errorf("renewing nothing = %v, %v", missing, err)
		}
	})
}

func TestSessionReplicasUnavailable(t *testing.T) {
	e := openRedisServer(t)
	s := e.store(t)
	e.srv.Stop()
	if _, err := s.SessionReplica(ctx, "x"); !isUnavailable(err) {
		t.Errorf("SessionReplica with Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.PutSessionReplica(ctx, "x", "http://h:1", time.Minute); !isUnavailable(err) {
		t.Errorf("PutSessionReplica with Redis down: %v, want ErrUnavailable", err)
	}
	if _, err := s.RenewSessionReplicas(ctx, []string{"x"}, time.Minute); !isUnavailable(err) {
		t.Errorf("RenewSessionReplicas with Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.RemoveSessionReplicas(ctx, []string{"x"}); !isUnavailable(err) {
		t.Errorf("RemoveSessionReplicas with Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.ReleaseSessionReplicas(ctx, []string{"x"}, "http://h:1"); !isUnavailable(err) {
		t.Errorf("ReleaseSessionReplicas with Redis down: %v, want ErrUnavailable", err)
	}
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// TestClaimSessionReplica: the record of a principal's child is claimed
// once: the first replica's claim holds, another's returns the holder; the
// holder renews its own; a replica found gone is taken over, only from
// the holder named; an expired claim is free again.
func TestClaimSessionReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const id, a, b, c = "\x00principal\x00alice", "http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080"
		claim := func(url, from string, ttl time.Duration, want string) {
			t.Helper()
			if got, err := s.ClaimSessionReplica(ctx, id, url, from, ttl); got != want || err != nil {
				t.Fatalf("claim by %s (from %q) = %q, %v; want %q", url, from, got, err, want)
			}
		}
		claim(a, "", time.Minute, a)
		claim(b, "", time.Minute, a) // A holds it
		if got := e.rdb.Get(ctx, s.k.sessionReplica(id)).Val(); got != a {
			t.Fatalf("raw record after B's claim = %q, want A's", got)
		}
		e.rdb.PExpire(ctx, s.k.sessionReplica(id), 10*time.Second)
		claim(a, "", time.Hour, a) // A renews its own
		if pttl := e.rdb.PTTL(ctx, s.k.sessionReplica(id)).Val(); pttl <= 59*time.Minute {
			t.Errorf("PTTL after A renewed = %v, want about 1h", pttl)
		}
		claim(b, c, time.Minute, a)  // C is not the holder: nothing to take over
		claim(b, a, time.Minute, b)  // A found gone: B takes over
		claim(c, a, time.Minute, b)  // ... once: C found A gone too, late
		claim(a, "", time.Minute, b) // A is back: B keeps it
		if url, err := s.SessionReplica(ctx, id); url != b || err != nil {
			t.Fatalf("SessionReplica = %q, %v; want B's", url, err)
		}
		claim(b, "", 200*time.Millisecond, b) // B renews for a short while
		e.elapse(300 * time.Millisecond)
		claim(c, "", time.Minute, c) // B stopped renewing: it expired, free
		for _, bad := range []struct{ id, url string }{{"", a}, {id, ""}} {
			if _, err := s.ClaimSessionReplica(ctx, bad.id, bad.url, "", time.Minute); err == nil {
				t.Errorf("claim of %q by %q: no error", bad.id, bad.url)
			}
		}
		if _, err := s.ClaimSessionReplica(ctx, id, a, "", 0); err == nil {
			t.Error("a claim with no ttl: no error")
		}
	})
}

// TestReleaseSessionReplicas: a replica releasing its claims deletes only
// those that still name it: one another replica took over stays.
func TestReleaseSessionReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const mine, taken, a, b = "\x00principal\x00alice", "\x00principal\x00bob", "http://10.0.0.1:8080", "http://10.0.0.2:8080"
		for _, id := range []string{mine, taken} {
			if _, err := s.ClaimSessionReplica(ctx, id, a, "", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.ClaimSessionReplica(ctx, taken, b, a, time.Minute); got != b || err != nil {
			t.Fatalf("B's takeover = %q, %v", got, err)
		}
		if err := s.ReleaseSessionReplicas(ctx, []string{mine, taken, "never recorded"}, a); err != nil {
			t.Fatal(err)
		}
		if url, err := s.SessionReplica(ctx, mine); url != "" || err != nil {
			t.Errorf("A's own claim after its release = %q, %v; want none", url, err)
		}
		if url, err := s.SessionReplica(ctx, taken); url != b || err != nil {
			t.Errorf("the claim B took over, after A's release = %q, %v; want B's", url, err)
		}
		if e.exists(s.k.sessionReplica("never recorded")) {
			t.Error("a release created a record")
		}
		if err := s.ReleaseSessionReplicas(ctx, nil, a); err != nil {
			t.Errorf("releasing nothing: %v", err)
		}
	})
}
