package taskstore

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestLatencies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		const keep = 600 * time.Millisecond
		if got, err := s.LoadLatencies(ctx, "", keep); err != nil || len(got) != 0 {
			t.Fatalf("empty: %v, %v", got, err)
		}
		wantErr(t, s.PublishLatencies(ctx, "r1", map[string][]byte{"slow": {1, 2, 3}, "echo": {1}}, keep), nil)
		wantErr(t, s.PublishLatencies(ctx, "r2", map[string][]byte{"slow": {1, 9}}, keep), nil)

		// Raw state: one hash per replica, in its own slot, with an expiry; the index.
		if h := e.hash("tg:latency:{r1}"); len(h) != 2 || h["slow"] != "\x01\x02\x03" || h["echo"] != "\x01" {
			t.Errorf("raw hash r1 = %q", h)
		}
		if ttl := e.rdb.PTTL(ctx, "tg:latency:{r1}").Val(); ttl <= 0 || ttl > keep {
			t.Errorf("PTTL r1 = %v, want (0, %v]", ttl, keep)
		}
		if !e.isMember("tg:latency:replicas", "r1") || !e.isMember("tg:latency:replicas", "r2") {
			t.Error("index lacks a replica")
		}

		got, err := s.LoadLatencies(ctx, "r1", keep)
		wantErr(t, err, nil)
		if want := map[string]map[string][]byte{"r2": {"slow": {1, 9}}}; !reflect.DeepEqual(got, want) {
			t.Errorf("load except r1 = %v, want %v", got, want)
		}
		got, _ = s.LoadLatencies(ctx, "", keep)
		if len(got) != 2 || len(got["r1"]) != 2 {
			t.Errorf("load all = %v", got)
		}

		// A publish replaces the replica's hash whole.
		wantErr(t, s.PublishLatencies(ctx, "r1", map[string][]byte{"echo": {1, 4}}, keep), nil)
		if h := e.hash("tg:latency:{r1}"); len(h) != 1 || h["echo"] != "\x01\x04" {
			t.Errorf("republished hash r1 = %q", h)
		}
		wantErr(t, s.PublishLatencies(ctx, "r1", nil, keep), nil)
		if e.exists("tg:latency:{r1}") || !e.isMember("tg:latency:replicas", "r1") {
			t.Error("empty publish: the hash should go, the replica stay indexed")
		}

		// A replica that stops publishing is forgotten after keep.
		e.elapse(keep / 2)
		wantErr(t, s.PublishLatencies(ctx, "r1", map[string][]byte{"echo": {1, 5}}, keep), nil)
		e.elapse(keep/2 + 100*time.Millisecond)
		got, _ = s.LoadLatencies(ctx, "", keep)
		if want := map[string]map[string][]byte{"r1": {"echo": {1, 5}}}; !reflect.DeepEqual(got, want) {
			t.Errorf("after r2's keep = %v, want %v", got, want)
		}
		if e.isMember("tg:latency:replicas", "r2") || e.exists("tg:latency:{r2}") {
			t.Error("r2 not dropped after keep")
		}

		if err := s.PublishLatencies(ctx, "", nil, keep); err == nil {
			t.Error("publish with an empty replica id: no error")
		}
	})
}

func TestLatenciesUnavailable(t *testing.T) {
	e := openMiniredis(t)
	s := e.store(t)
	e.mini.Close()
	wantErr(t, s.PublishLatencies(ctx, "r1", map[string][]byte{"a": {1}}, time.Minute), ErrUnavailable)
	_, err := s.LoadLatencies(context.Background(), "r1", time.Minute)
	wantErr(t, err, ErrUnavailable)
}
