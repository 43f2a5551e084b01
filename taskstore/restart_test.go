package taskstore

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisRestart: while Redis is down calls fail fast with ErrUnavailable
// (no hang); once it is back they work again, scripts reloaded, and waiters
// are woken through the re-established subscription.
func TestRedisRestart(t *testing.T) {
	e := openRedisServer(t)
	s := e.store(t, func(o *Options) { o.ResyncInterval = time.Minute })
	task := mustCreate(t, s, "o")
	if _, err := s.Get(ctx, "o", task.ID); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "o", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	e.srv.Stop()
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, "o", task.ID); return err },
		"Create": func() error { _, err := s.Create(ctx, NewTask{Owner: "o"}); return err },
		"Complete": func() error {
			return s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`))
		},
		"List":  func() error { _, _, err := s.List(ctx, "o", "", 10); return err },
		"Claim": func() error { return s.Claim(ctx, "o", task.ID, "r", time.Second) },
	} {
		start := time.Now()
		err := call()
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s while down: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("%s took %v to fail", name, d)
		}
	}

	e.srv.Start() // empty: no persistence, no script cache
	var fresh *Task
	deadline := time.Now().Add(5 * time.Second)
	for {
		fresh, err = s.Create(ctx, NewTask{Owner: "o"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Create after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Get(ctx, "o", fresh.ID); err != nil {
		t.Fatalf("Get after restart: %v", err)
	}

	// The shared pub/sub connection came back: a waiter wakes by signal.
	done := make(chan error, 1)
	go func() {
		_, err := s.WaitFor(ctx, "o", fresh.ID, IsTerminal)
		done <- err
	}()
	waitSubscribed(t, e, s, "o", fresh.ID)
	wantErr(t, s.Complete(ctx, "o", fresh.ID, json.RawMessage(`{}`)), nil)
	select {
	case err := <-done:
		wantErr(t, err, nil)
	case <-time.After(2 * time.Second):
		t.Fatal("waiter did not wake after restart")
	}
	// The watch from before the restart was told to re-read.
	for {
		select {
		case ev := <-w.C:
			if ev.Kind == EventResync {
				return
			}
		case <-time.After(2 * time.Second):
			t.Fatal("old watch got no EventResync")
		}
	}
}

func TestClosedClientIsUnavailable(t *testing.T) {
	e := openMiniredis(t)
	rdb := redis.NewClient(&redis.Options{Addr: e.mini.Addr()})
	s := New(rdb, Options{})
	defer s.Close()
	rdb.Close()
	_, err := s.Get(ctx, "o", "00000000-0000-4000-8000-000000000000")
	wantErr(t, err, ErrUnavailable)
}
