package taskstore

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestWatchRemovalsLiveness: the listener is told when the subscription is
// confirmed, when the connection is lost (notices may be missed from then
// on), and when it is confirmed again after a reconnect; notices published
// on the removals channel reach it, never dropped, however many.
func TestWatchRemovalsLiveness(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	s := New(rdb, Options{})
	defer s.Close()
	var mu sync.Mutex
	var states []bool
	var ids []string
	stop, err := s.WatchRemovals(context.Background(), Removals{
		Removed: func(id string) { mu.Lock(); ids = append(ids, id); mu.Unlock() },
		Live:    func(live bool) { mu.Lock(); states = append(states, live); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: states %v, %d ids", what, states, len(ids))
			}
		}
	}
	wait("confirmed", func() bool { return len(states) == 1 && states[0] })
	const n = 200 // more than a Watch's buffer: a listener drops none
	for i := 0; i < n; i++ {
		mr.Publish(s.k.removals(), "id"+strconv.Itoa(i))
	}
	wait("every notice", func() bool { return len(ids) == n })
	if ids[0] != "id0" || ids[n-1] != "id"+strconv.Itoa(n-1) {
		t.Errorf("notices %s … %s", ids[0], ids[n-1])
	}
	addr := mr.Addr()
	mr.Close()
	wait("lost", func() bool { return len(states) >= 2 && !states[len(states)-1] })
	mr2 := miniredis.NewMiniRedis()
	if err := mr2.StartAddr(addr); err != nil {
		t.Skipf("cannot restart miniredis on %s: %v", addr, err)
	}
	defer mr2.Close()
	wait("confirmed again", func() bool { return states[len(states)-1] })
	stop()
	stop()
}

// TestWatchDropped: events a task watch has no room for are dropped, and
// the watch says so until its reader clears it; the wake hook runs for
// every event, kept or dropped.
func TestWatchDropped(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	s := New(rdb, Options{})
	defer s.Close()
	w, err := s.Watch(context.Background(), "o", "00000000-0000-4000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wakes atomic.Int64
	const n = taskWatchBuffer + 3
	w.SetWake(func() { wakes.Add(1) })
	if w.Dropped(false) {
		t.Fatal("dropped before any event")
	}
	for i := 0; i < n; i++ {
		mr.Publish(s.k.channel("o", "00000000-0000-4000-8000-000000000001"), "inputs:working")
	}
	for deadline := time.Now().Add(10 * time.Second); wakes.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d wakes for %d events", wakes.Load(), n)
		}
	}
	if len(w.C) != taskWatchBuffer || !w.Dropped(true) {
		t.Fatalf("%d events buffered, dropped %v; want %d and true", len(w.C), w.Dropped(false), taskWatchBuffer)
	}
	if w.Dropped(true) {
		t.Error("Dropped(true) did not clear the flag")
	}
}
