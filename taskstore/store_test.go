package taskstore

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestCreateGet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		k := s.k
		now := e.clock.Now()

		task, err := s.Create(ctx, NewTask{
			Owner: "alice", Tool: "slow", Protocol: Protocol2026, StatusMessage: "started",
			Upstream: Upstream{RequestID: json.RawMessage(`7`), SessionID: "sess-1"},
			Lease:    &LeaseRequest{Holder: "replica-a", Duration: 30 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		if u, err := uuid.Parse(task.ID); err != nil || u.Version() != 4 || u.String() != task.ID {
			t.Fatalf("id %q is not a canonical UUID v4", task.ID)
		}

		// Raw state.
		h := e.hash(k.task("alice", task.ID))
		want := map[string]string{
			"id": task.ID, "owner": "alice", "tool": "slow", "flavour": "modern", "status": "working",
			"message": "started", "created": strconv.FormatInt(now.UnixMilli(), 10),
			"updated": strconv.FormatInt(now.UnixMilli(), 10), "ttl": "3600000", "poll": "1000", "pending": "0",
			"up_request_id": "7", "up_session": "sess-1",
			"lease_holder": "replica-a", "lease_until": strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10),
		}
		for f, v := range want {
			if h[f] != v {
				t.Errorf("field %s = %q, want %q", f, h[f], v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("hash has %d fields, want %d: %v", len(h), len(want), h)
		}
		pttl := e.rdb.PTTL(ctx, k.task("alice", task.ID)).Val()
		if pttl <= 59*time.Minute || pttl > time.Hour {
			t.Errorf("task PTTL = %v, want about 1h", pttl)
		}
		if g := e.rdb.PTTL(ctx, k.gone("alice", task.ID)).Val(); g <= time.Hour+59*time.Minute || g > 2*time.Hour {
			t.Errorf("tombstone PTTL = %v, want about ttl + 1h", g)
		}
		if sc := e.rdb.ZScore(ctx, k.created("alice"), task.ID).Val(); int64(sc) != now.UnixMilli() {
			t.Errorf("created index score = %v", sc)
		}
		if !e.isMember(k.active("alice"), task.ID) {
			t.Error("task not in active set")
		}
		if sc := e.rdb.ZScore(ctx, k.leases(), leaseMember("alice", task.ID)).Val(); int64(sc) != now.Add(30*time.Second).UnixMilli() {
			t.Errorf("leases index score = %v", sc)
		}
		for _, key := range []string{k.created("alice"), k.active("alice")} {
			if d := e.rdb.PTTL(ctx, key).Val(); d <= 0 {
				t.Errorf("owner index %s has no ttl (%v)", key, d)
			}
		}

		// Get returns what Create returned.
		got, err := s.Get(ctx, "alice", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != task.ID || got.Owner != "alice" || got.Tool != "slow" || got.Protocol != Protocol2026 ||
			got.Status != StatusWorking || got.StatusMessage != "started" || !got.CreatedAt.Equal(now) ||
			!got.LastUpdatedAt.Equal(now) || got.TTL != time.Hour || got.PollInterval != time.Second ||
			string(got.Upstream.RequestID) != "7" || got.Upstream.SessionID != "sess-1" ||
			got.Lease.Holder != "replica-a" || !got.Lease.Deadline.Equal(now.Add(30*time.Second)) {
			t.Errorf("Get = %+v", got)
		}

		// Misses.
		for _, id := range []string{uuid.NewString(), "not-a-uuid", "", "{" + task.ID + "}", strings.ToUpper(task.ID)} {
			_, err := s.Get(ctx, "alice", id)
			wantErr(t, err, ErrNotFound)
		}
	})
}

func TestCreateTTLAndPollInterval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) {
			o.MaxTTL = 2 * time.Hour
			o.DefaultTTL = 30 * time.Minute
			o.PollInterval = 3 * time.Second
		})
		for _, c := range []struct {
			ttl, poll, wantTTL, wantPoll time.Duration
		}{
			{0, 0, 30 * time.Minute, 3 * time.Second},
			{5 * time.Second, 500 * time.Millisecond, 5 * time.Second, 500 * time.Millisecond},
			{48 * time.Hour, 0, 2 * time.Hour, 3 * time.Second},
			{1500 * time.Microsecond, 0, time.Millisecond, 3 * time.Second},
		} {
			task, err := s.Create(ctx, NewTask{Owner: "o", TTL: c.ttl, PollInterval: c.poll})
			if err != nil {
				t.Fatal(err)
			}
			if task.TTL != c.wantTTL || task.PollInterval != c.wantPoll {
				t.Errorf("ttl %v poll %v: got ttl %v poll %v", c.ttl, c.poll, task.TTL, task.PollInterval)
			}
			if c.wantTTL < time.Second {
				continue // the key may already have expired, as it should
			}
			if h := e.hash(s.k.task("o", task.ID)); h["ttl"] != strconv.FormatInt(c.wantTTL.Milliseconds(), 10) {
				t.Errorf("raw ttl = %s", h["ttl"])
			}
		}
	})
}

// setupStatus brings a fresh task to status st through the Store's methods.
func setupStatus(t *testing.T, s *Store, owner string, st Status) *Task {
	t.Helper()
	task := mustCreate(t, s, owner)
	var err error
	switch st {
	case StatusWorking:
	case StatusInputRequired:
		err = s.transition(ctx, owner, task.ID, StatusInputRequired, "need input")
	case StatusCompleted:
		err = s.Complete(ctx, owner, task.ID, json.RawMessage(`{"content":[]}`))
	case StatusFailed:
		err = s.Fail(ctx, owner, task.ID, Outcome{Error: json.RawMessage(`{"code":-32603,"message":"boom"}`)})
	case StatusCancelled:
		_, err = s.RequestCancel(ctx, owner, task.ID, "")
	}
	if err != nil {
		t.Fatalf("setup %s: %v", st, err)
	}
	return task
}

func TestTransitionTable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		for _, from := range Statuses {
			for _, to := range append(Statuses, Status("paused")) {
				t.Run(string(from)+"->"+string(to), func(t *testing.T) {
					var want error
					switch {
					case !to.Valid():
						want = ErrInvalidTransition
					case from.Terminal():
						want = ErrTerminal
					case from == to:
						want = ErrInvalidTransition
					}
					task := setupStatus(t, s, "owner", from)
					key := s.k.task("owner", task.ID)
					before := e.hash(key)
					e.clock.Advance(time.Millisecond)

					err := s.transition(ctx, "owner", task.ID, to, "msg "+string(to))
					wantErr(t, err, want)

					after := e.hash(key)
					if want != nil {
						if !mapsEqual(before, after) {
							t.Errorf("rejected transition changed the task:\nbefore %v\nafter  %v", before, after)
						}
						return
					}
					if after["status"] != string(to) || after["message"] != "msg "+string(to) {
						t.Errorf("status/message = %q/%q", after["status"], after["message"])
					}
					if after["updated"] != strconv.FormatInt(e.clock.Now().UnixMilli(), 10) {
						t.Errorf("updated = %s", after["updated"])
					}
					if active := e.isMember(s.k.active("owner"), task.ID); active == to.Terminal() {
						t.Errorf("in active set = %v for %s", active, to)
					}
				})
			}
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestCompleteAndFail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.MaxResultBytes = 1024 })
		result := json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)

		t.Run("complete once", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			wantErr(t, s.Complete(ctx, "o", task.ID, result), nil)
			h := e.hash(s.k.task("o", task.ID))
			if h["status"] != "completed" || h["result"] != string(result) {
				t.Fatalf("raw = %v", h)
			}
			if e.isMember(s.k.active("o"), task.ID) {
				t.Error("completed task still active")
			}
			wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{"other":1}`)), ErrTerminal)
			wantErr(t, s.Fail(ctx, "o", task.ID, Outcome{Error: json.RawMessage(`{}`)}), ErrTerminal)
			_, err := s.RequestCancel(ctx, "o", task.ID, "")
			wantErr(t, err, ErrTerminal)
			if h2 := e.hash(s.k.task("o", task.ID)); !mapsEqual(h, h2) {
				t.Errorf("second terminal write changed the task: %v", h2)
			}
		})

		t.Run("fail with error and message", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			o := Outcome{Error: json.RawMessage(`{"code":-32000,"message":"upstream"}`), Message: "upstream said no"}
			wantErr(t, s.Fail(ctx, "o", task.ID, o), nil)
			h := e.hash(s.k.task("o", task.ID))
			if h["status"] != "failed" || h["error"] != string(o.Error) || h["message"] != o.Message || h["result"] != "" {
				t.Fatalf("raw = %v", h)
			}
		})

		t.Run("legacy isError result fails", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			r := json.RawMessage(`{"content":[],"isError":true}`)
			wantErr(t, s.Fail(ctx, "o", task.ID, Outcome{Result: r}), nil)
			got, err := s.Get(ctx, "o", task.ID)
			if err != nil || got.Status != StatusFailed || string(got.Result) != string(r) {
				t.Fatalf("Get = %+v, %v", got, err)
			}
		})

		t.Run("result after cancel stays cancelled", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			if _, err := s.RequestCancel(ctx, "o", task.ID, ""); err != nil {
				t.Fatal(err)
			}
			wantErr(t, s.Complete(ctx, "o", task.ID, result), ErrTerminal)
			h := e.hash(s.k.task("o", task.ID))
			if h["status"] != "cancelled" || h["cancel"] != "1" || h["result"] != "" {
				t.Fatalf("raw = %v", h)
			}
		})

		t.Run("result too large fails the task", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			big := json.RawMessage(`{"text":"` + strings.Repeat("x", 2000) + `"}`)
			err := s.Complete(ctx, "o", task.ID, big)
			wantErr(t, err, ErrResultTooLarge)
			h := e.hash(s.k.task("o", task.ID))
			if h["status"] != "failed" || h["result"] != "" || !strings.Contains(h["error"], "-32603") ||
				!strings.Contains(h["message"], "exceeds") {
				t.Fatalf("raw = %v", h)
			}
		})

		t.Run("unknown task", func(t *testing.T) {
			wantErr(t, s.Complete(ctx, "o", uuid.NewString(), result), ErrNotFound)
		})
	})
}

func TestRequestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		for _, from := range []Status{StatusWorking, StatusInputRequired} {
			task := setupStatus(t, s, "o", from)
			e.clock.Advance(time.Second)
			got, err := s.RequestCancel(ctx, "o", task.ID, "The task was cancelled by request.")
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != StatusCancelled || !got.CancelRequested || got.StatusMessage != "The task was cancelled by request." ||
				!got.LastUpdatedAt.Equal(e.clock.Now()) || got.ID != task.ID {
				t.Errorf("from %s: RequestCancel = %+v", from, got)
			}
			h := e.hash(s.k.task("o", task.ID))
			if h["status"] != "cancelled" || h["cancel"] != "1" {
				t.Errorf("raw = %v", h)
			}
			if e.isMember(s.k.active("o"), task.ID) {
				t.Error("cancelled task still active")
			}
			_, err = s.RequestCancel(ctx, "o", task.ID, "")
			wantErr(t, err, ErrTerminal)
			if !strings.Contains(err.Error(), "cancelled") {
				t.Errorf("terminal error does not name the status: %v", err)
			}
		}
	})
}

func TestProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := mustCreate(t, s, "o")
		p := json.RawMessage(`{"progress":3,"total":10}`)
		wantErr(t, s.SetProgress(ctx, "o", task.ID, p, "3 of 10"), nil)
		got, err := s.Get(ctx, "o", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Progress) != string(p) || got.StatusMessage != "3 of 10" {
			t.Errorf("Get = %+v", got)
		}
		wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), nil)
		wantErr(t, s.SetProgress(ctx, "o", task.ID, p, ""), ErrTerminal)
	})
}

func TestOwnerIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := mustCreate(t, s, "alice")
		if err := s.AddInputRequests(ctx, "alice", task.ID, map[string]InputRequest{"k": {Method: "elicitation/create"}}, "", ""); err != nil {
			t.Fatal(err)
		}
		key := s.k.task("alice", task.ID)
		before := e.hash(key)
		unknown := uuid.NewString()

		for _, id := range []string{task.ID, unknown} {
			_, err := s.Get(ctx, "mallory", id)
			wantErr(t, err, ErrNotFound)
			if errors.Is(err, ErrExpired) {
				t.Error("Get hints at the task")
			}
			_, err = s.RequestCancel(ctx, "mallory", id, "")
			wantErr(t, err, ErrNotFound)
			wantErr(t, s.transition(ctx, "mallory", id, StatusCompleted, ""), ErrNotFound)
			wantErr(t, s.Complete(ctx, "mallory", id, json.RawMessage(`{}`)), ErrNotFound)
			_, err = s.AnswerInputs(ctx, "mallory", id, map[string]json.RawMessage{"k": json.RawMessage(`{}`)})
			wantErr(t, err, ErrNotFound)
			_, _, err = s.TakeInputResponses(ctx, "mallory", id, "")
			wantErr(t, err, ErrNotFound)
			wantErr(t, s.Claim(ctx, "mallory", id, "r", time.Minute), ErrNotFound)
		}
		list, next, err := s.List(ctx, "mallory", "", 10)
		if err != nil || len(list) != 0 || next != "" {
			t.Errorf("mallory's List = %v, %q, %v", list, next, err)
		}
		// A cursor from alice's list shows mallory nothing either.
		mustCreate(t, s, "alice")
		_, cur, err := s.List(ctx, "alice", "", 1)
		if err != nil || cur == "" {
			t.Fatalf("alice's List: %q, %v", cur, err)
		}
		if list, _, err := s.List(ctx, "mallory", cur, 10); err != nil || len(list) != 0 {
			t.Errorf("mallory's List with alice's cursor = %v, %v", list, err)
		}
		if after := e.hash(key); !mapsEqual(before, after) {
			t.Errorf("another owner changed the task:\nbefore %v\nafter  %v", before, after)
		}
		if _, err := s.Get(ctx, "alice", task.ID); err != nil {
			t.Errorf("owner's Get: %v", err)
		}
	})
}

func TestTooManyPerOwner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.MaxTasksPerOwner = 3 })
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, mustCreate(t, s, "o").ID)
		}
		_, err := s.Create(ctx, NewTask{Owner: "o"})
		wantErr(t, err, ErrTooMany)
		mustCreate(t, s, "other") // per owner

		// A terminal task frees its slot.
		wantErr(t, s.Complete(ctx, "o", ids[0], json.RawMessage(`{}`)), nil)
		mustCreate(t, s, "o")
		_, err = s.Create(ctx, NewTask{Owner: "o"})
		wantErr(t, err, ErrTooMany)

		// Expired tasks free theirs.
		s2 := e.store(t, func(o *Options) { o.MaxTasksPerOwner = 2 })
		for i := 0; i < 2; i++ {
			if _, err := s2.Create(ctx, NewTask{Owner: "short", TTL: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = s2.Create(ctx, NewTask{Owner: "short"})
		wantErr(t, err, ErrTooMany)
		e.elapse(150 * time.Millisecond)
		if _, err := s2.Create(ctx, NewTask{Owner: "short"}); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
		if n := e.rdb.ZCard(ctx, s2.k.active("short")).Val(); n != 1 {
			t.Errorf("active set has %d ids, want 1", n)
		}
	})
}

func TestTTLExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		t.Run("keys expire", func(t *testing.T) {
			s := e.store(t, func(o *Options) { o.ExpiredWindow = 300 * time.Millisecond })
			task, err := s.Create(ctx, NewTask{Owner: "o", TTL: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "o", task.ID); err != nil {
				t.Fatal(err)
			}
			e.elapse(250 * time.Millisecond)
			if e.exists(s.k.task("o", task.ID)) {
				t.Error("task key still exists after its ttl")
			}
			_, err = s.Get(ctx, "o", task.ID)
			wantErr(t, err, ErrExpired)
			_, err = s.RequestCancel(ctx, "o", task.ID, "")
			wantErr(t, err, ErrExpired)
			_, err = s.Get(ctx, "intruder", task.ID)
			wantErr(t, err, ErrNotFound)

			e.elapse(300 * time.Millisecond) // past the tombstone window
			_, err = s.Get(ctx, "o", task.ID)
			wantErr(t, err, ErrNotFound)
		})

		t.Run("clock decides before redis deletes", func(t *testing.T) {
			s := e.store(t)
			task, err := s.Create(ctx, NewTask{Owner: "o", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Hour) // Redis still has the key
			if !e.exists(s.k.task("o", task.ID)) {
				t.Fatal("key vanished")
			}
			_, err = s.Get(ctx, "o", task.ID)
			wantErr(t, err, ErrExpired)
			wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), ErrExpired)
			wantErr(t, s.transition(ctx, "o", task.ID, StatusInputRequired, ""), ErrExpired)
			if list, _, _ := s.List(ctx, "o", "", 10); len(list) != 0 {
				t.Errorf("List shows expired tasks: %d", len(list))
			}
		})

		t.Run("no tombstones", func(t *testing.T) {
			s := e.store(t, func(o *Options) { o.ExpiredWindow = -1 })
			task, err := s.Create(ctx, NewTask{Owner: "o", TTL: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if e.exists(s.k.gone("o", task.ID)) {
				t.Error("tombstone written")
			}
			e.elapse(150 * time.Millisecond)
			_, err = s.Get(ctx, "o", task.ID)
			wantErr(t, err, ErrNotFound)
		})
	})
}
