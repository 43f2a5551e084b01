package taskstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func nextEvent(t *testing.T, w *Watch, within time.Duration) Event {
	t.Helper()
	select {
	case ev, ok := <-w.C:
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
	}
	return Event{}
}

func TestWatchEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := mustCreate(t, s, "o")
		w, err := s.Watch(ctx, "o", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		other, err := s.Watch(ctx, "o", task.ID) // two watches share one subscription
		if err != nil {
			t.Fatal(err)
		}

		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""), nil)
		if ev := nextEvent(t, w, time.Second); ev != (Event{Kind: EventStatus, Status: StatusInputRequired}) {
			t.Errorf("after add: %+v", ev)
		}
		if ev := nextEvent(t, other, time.Second); ev != (Event{Kind: EventStatus, Status: StatusInputRequired}) {
			t.Errorf("second watch after add: %+v", ev)
		}
		other.Close()
		other.Close() // twice is fine
		if _, ok := <-other.C; ok {
			t.Error("closed watch still delivers")
		}

		if _, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{"k": json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, w, time.Second); ev != (Event{Kind: EventInputs, Status: StatusWorking}) {
			t.Errorf("after answer: %+v", ev)
		}
		wantErr(t, s.SetProgress(ctx, "o", task.ID, json.RawMessage(`{"progress":1}`), ""), nil)
		if ev := nextEvent(t, w, time.Second); ev != (Event{Kind: EventProgress, Status: StatusWorking}) {
			t.Errorf("after progress: %+v", ev)
		}
		if _, err := s.RequestCancel(ctx, "o", task.ID, ""); err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, w, time.Second); ev != (Event{Kind: EventCancel, Status: StatusCancelled}) {
			t.Errorf("after cancel: %+v", ev)
		}

		// Store.Close ends every watch.
		s.Close()
		if _, ok := <-w.C; ok {
			t.Error("watch open after Store.Close")
		}
		if _, err := s.Watch(ctx, "o", task.ID); !errors.Is(err, ErrClosed) {
			t.Errorf("Watch after Close: %v", err)
		}
	})
}

// A waiter wakes on the change's event, not from the slow timer: its
// resync is a minute, so waking within the 5 s guard can only be the event.
// (No bound on how fast: a timed assertion fails on a loaded machine.)
func TestWaitForWakesOnSignal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.ResyncInterval = time.Minute })
		task := mustCreate(t, s, "o")
		type res struct {
			task *Task
			err  error
			at   time.Time
		}
		done := make(chan res, 1)
		go func() {
			got, err := s.WaitFor(ctx, "o", task.ID, IsTerminal)
			done <- res{got, err, time.Now()}
		}()
		waitSubscribed(t, e, s, "o", task.ID)

		// A non-terminal change wakes it, but it keeps waiting.
		wantErr(t, s.transition(ctx, "o", task.ID, StatusInputRequired, ""), nil)
		select {
		case r := <-done:
			t.Fatalf("returned early: %+v", r)
		case <-time.After(50 * time.Millisecond):
		}

		start := time.Now()
		wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{"ok":true}`)), nil)
		select {
		case r := <-done:
			if r.err != nil || r.task.Status != StatusCompleted || string(r.task.Result) != `{"ok":true}` {
				t.Fatalf("WaitFor = %+v, %v", r.task, r.err)
			}
			t.Logf("woke %v after Complete", r.at.Sub(start))
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not wake")
		}
	})
}

// waitSubscribed waits until Redis reports a subscriber on the task's channel.
func waitSubscribed(t *testing.T, e *env, s *Store, owner, id string) {
	t.Helper()
	ch := s.k.channel(owner, id)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		n := e.rdb.PubSubNumSub(ctx, ch).Val()
		if n[ch] > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no subscriber on the task's channel")
}

// A waiter still wakes when the message is lost: on the slow timer.
func TestWaitForWakesWhenMessageDropped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.ResyncInterval = 100 * time.Millisecond })
		s.hub.dropMessages.Store(true)
		task := mustCreate(t, s, "o")
		done := make(chan error, 1)
		go func() {
			_, err := s.WaitFor(ctx, "o", task.ID, IsTerminal)
			done <- err
		}()
		waitSubscribed(t, e, s, "o", task.ID)
		wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), nil)
		select {
		case err := <-done:
			wantErr(t, err, nil)
		case <-time.After(2 * time.Second):
			t.Fatal("waiter did not wake without the message")
		}
	})
}

func TestWaitForEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		_, err := s.WaitFor(ctx, "o", uuid.NewString(), IsTerminal)
		wantErr(t, err, ErrNotFound)

		task := mustCreate(t, s, "o")
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = s.WaitFor(c, "o", task.ID, IsTerminal)
		if !errors.Is(err, c.Err()) || c.Err() == nil {
			t.Errorf("WaitFor after deadline: %v", err)
		}
	})
}

// After the pub/sub connection is cut, the waiter re-reads on resubscribe
// and sees what it missed (real redis-server: CLIENT KILL).
func TestWatchResyncAfterReconnect(t *testing.T) {
	e := openRedisServer(t)
	s := e.store(t, func(o *Options) { o.ResyncInterval = time.Minute })
	task := mustCreate(t, s, "o")
	w, err := s.Watch(ctx, "o", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.hub.dropMessages.Store(true) // the change below is "published while disconnected"
	wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), nil)
	s.hub.dropMessages.Store(false)
	if err := e.rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	sawResync := false
	deadline := time.After(3 * time.Second)
	for !sawResync {
		select {
		case ev := <-w.C:
			sawResync = ev.Kind == EventResync
		case <-deadline:
			t.Fatal("no EventResync after the connection was cut")
		}
	}
	got, err := s.Get(ctx, "o", task.ID)
	if err != nil || got.Status != StatusCompleted {
		t.Fatalf("re-read = %+v, %v", got, err)
	}
}

// Many waiters share one pub/sub connection and all wake.
func TestManyWaitersOneConnection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.ResyncInterval = time.Minute; o.MaxTasksPerOwner = -1 })
		const tasks, perTask = 50, 20
		ids := make([]string, tasks)
		for i := range ids {
			ids[i] = mustCreate(t, s, "o").ID
		}
		done := make(chan error, tasks*perTask)
		for _, id := range ids {
			for j := 0; j < perTask; j++ {
				go func(id string) {
					_, err := s.WaitFor(ctx, "o", id, IsTerminal)
					done <- err
				}(id)
			}
		}
		for _, id := range ids {
			waitSubscribed(t, e, s, "o", id)
		}
		if e.srv != nil {
			subscribed := 0 // connections with at least one channel
			for _, line := range strings.Split(e.rdb.ClientList(ctx).Val(), "\n") {
				for _, f := range strings.Fields(line) {
					if strings.HasPrefix(f, "sub=") && f != "sub=0" {
						subscribed++
					}
				}
			}
			if subscribed != 1 {
				t.Errorf("%d connections hold subscriptions, want 1", subscribed)
			}
		}
		for _, id := range ids {
			wantErr(t, s.Complete(ctx, "o", id, json.RawMessage(`{}`)), nil)
		}
		timeout := time.After(5 * time.Second)
		for i := 0; i < tasks*perTask; i++ {
			select {
			case err := <-done:
				wantErr(t, err, nil)
			case <-timeout:
				t.Fatalf("only %d of %d waiters woke", i, tasks*perTask)
			}
		}
		// All watches closed: the channels are unsubscribed.
		deadline := time.Now().Add(2 * time.Second)
		for {
			if n := len(e.rdb.PubSubChannels(ctx, "*").Val()); n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("channels still subscribed: %v", e.rdb.PubSubChannels(ctx, "*").Val())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestSessionMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		st := e.store(t)
		w, err := st.WatchSession(ctx, "sess-1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		other, err := st.WatchSession(ctx, "sess-2")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		msg := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"status":"working: yes"}}`
		if err := st.PublishSession(ctx, "sess-1", []byte(msg)); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.C:
			if ev.Kind != EventMessage || ev.Data != msg {
				t.Fatalf("got %+v %q", ev, ev.Data)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("session message not delivered")
		}
		select {
		case ev := <-other.C:
			t.Fatalf("another session heard it: %+v", ev)
		case <-time.After(50 * time.Millisecond):
		}
	})
}

func TestResultStreamMark(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		st := e.store(t)
		if open, err := st.ResultStreamOpen(ctx, "o", "t1"); err != nil || open {
			t.Fatalf("fresh: open=%v err=%v", open, err)
		}
		if err := st.MarkResultStream(ctx, "o", "t1", time.Second); err != nil {
			t.Fatal(err)
		}
		if open, _ := st.ResultStreamOpen(ctx, "o", "t1"); !open {
			t.Fatal("mark not seen")
		}
		if open, _ := st.ResultStreamOpen(ctx, "other-owner", "t1"); open {
			t.Fatal("mark seen by another owner")
		}
		if err := st.ClearResultStream(ctx, "o", "t1"); err != nil {
			t.Fatal(err)
		}
		if open, _ := st.ResultStreamOpen(ctx, "o", "t1"); open {
			t.Fatal("mark survived Clear")
		}
		_ = st.MarkResultStream(ctx, "o", "t1", 100*time.Millisecond)
		e.elapse(300 * time.Millisecond)
		if open, _ := st.ResultStreamOpen(ctx, "o", "t1"); open {
			t.Fatal("mark did not expire")
		}
	})
}
