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
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
