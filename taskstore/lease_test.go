package taskstore

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.LeaseGrace = time.Second })
		task := mustCreate(t, s, "o")
		key := s.k.task("o", task.ID)
		member := leaseMember("o", task.ID)
		leaseUntil := func() string { return e.hash(key)["lease_until"] }
		msAt := func(d time.Duration) string { return strconv.FormatInt(e.clock.Now().Add(d).UnixMilli(), 10) }

		wantErr(t, s.Claim(ctx, "o", task.ID, "r1", 10*time.Second), nil)
		if h := e.hash(key); h["lease_holder"] != "r1" || h["lease_until"] != msAt(10*time.Second) {
			t.Fatalf("raw after claim = %v", h)
		}
		if sc, err := e.rdb.ZScore(ctx, s.k.leases(), member).Result(); err != nil || strconv.FormatInt(int64(sc), 10) != msAt(10*time.Second) {
			t.Fatalf("leases index = %v, %v", sc, err)
		}
		wantErr(t, s.Claim(ctx, "o", task.ID, "r2", 10*time.Second), ErrLeaseHeld)
		wantErr(t, s.Claim(ctx, "o", task.ID, "r1", 10*time.Second), nil) // re-claim by the holder
		wantErr(t, s.Extend(ctx, "o", task.ID, "r2", 10*time.Second), ErrLeaseLost)
		wantErr(t, s.Release(ctx, "o", task.ID, "r2"), ErrLeaseLost)

		// Extended leases are not reported, and the index catches up.
		e.clock.Advance(8 * time.Second)
		wantErr(t, s.Extend(ctx, "o", task.ID, "r1", 10*time.Second), nil)
		if leaseUntil() != msAt(10*time.Second) {
			t.Fatalf("lease_until = %s", leaseUntil())
		}
		e.clock.Advance(5 * time.Second) // index score (t+10s) < now-grace (t+12s) < deadline (t+18s)
		exp, err := s.ListExpiredLeases(ctx, 10)
		if err != nil || len(exp) != 0 {
			t.Fatalf("ListExpiredLeases = %v, %v", exp, err)
		}
		if sc := e.rdb.ZScore(ctx, s.k.leases(), member).Val(); strconv.FormatInt(int64(sc), 10) != leaseUntil() {
			t.Errorf("index not re-scored: %v, lease_until %s", sc, leaseUntil())
		}

		// Within the grace the lease is still held.
		e.clock.Advance(5500 * time.Millisecond) // deadline + 0.5s
		wantErr(t, s.Claim(ctx, "o", task.ID, "r2", 10*time.Second), ErrLeaseHeld)
		if exp, _ := s.ListExpiredLeases(ctx, 10); len(exp) != 0 {
			t.Fatalf("reported within grace: %v", exp)
		}

		// Past deadline + grace: reported, and another replica takes it over.
		e.clock.Advance(time.Second)
		exp, err = s.ListExpiredLeases(ctx, 10)
		if err != nil || len(exp) != 1 || exp[0].ID != task.ID || exp[0].Owner != "o" || exp[0].Holder != "r1" {
			t.Fatalf("ListExpiredLeases = %+v, %v", exp, err)
		}
		wantErr(t, s.Claim(ctx, "o", task.ID, "r2", 10*time.Second), nil)
		wantErr(t, s.Extend(ctx, "o", task.ID, "r1", 10*time.Second), ErrLeaseLost)
		wantErr(t, s.Release(ctx, "o", task.ID, "r1"), ErrLeaseLost)
		if h := e.hash(key); h["lease_holder"] != "r2" || h["lease_from"] != "r1" {
			t.Fatalf("holder = %s, taken from %q; want r2, from r1", h["lease_holder"], h["lease_from"])
		}

		// The new holder fails it and releases: the index forgets it.
		wantErr(t, s.Fail(ctx, "o", task.ID, Outcome{Message: "worker replica lost"}), nil)
		wantErr(t, s.Extend(ctx, "o", task.ID, "r2", 10*time.Second), ErrTerminal)
		wantErr(t, s.Claim(ctx, "o", task.ID, "r3", 10*time.Second), ErrTerminal)
		wantErr(t, s.Release(ctx, "o", task.ID, "r2"), nil)
		if h := e.hash(key); h["lease_holder"] != "" || h["lease_until"] != "" || h["lease_from"] != "" {
			t.Errorf("raw after release = %v", h)
		}
		e.clock.Advance(time.Minute)
		if exp, err := s.ListExpiredLeases(ctx, 10); err != nil || len(exp) != 0 {
			t.Fatalf("ListExpiredLeases after release = %v, %v", exp, err)
		}
		if n := e.rdb.ZCard(ctx, s.k.leases()).Val(); n != 0 {
			t.Errorf("leases index keeps %d entries", n)
		}
	})
}

func TestLeaseFromCreateAndRecovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		var dead []string
		for i := 0; i < 3; i++ {
			task, err := s.Create(ctx, NewTask{Owner: "o" + strconv.Itoa(i), Lease: &LeaseRequest{Holder: "dead-replica", Duration: 30 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			dead = append(dead, task.ID)
		}
		alive, err := s.Create(ctx, NewTask{Owner: "o0", Lease: &LeaseRequest{Holder: "live-replica", Duration: 30 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		done, err := s.Create(ctx, NewTask{Owner: "o1", Lease: &LeaseRequest{Holder: "live-replica", Duration: 30 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, s.Complete(ctx, "o1", done.ID, json.RawMessage(`{}`)), nil)

		e.clock.Advance(20 * time.Second)
		wantErr(t, s.Extend(ctx, "o0", alive.ID, "live-replica", 30*time.Second), nil)
		e.clock.Advance(20 * time.Second)

		// Recovery as the gateway does it: list, claim, fail, release.
		exp, err := s.ListExpiredLeases(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(exp) != len(dead) {
			t.Fatalf("expired = %+v, want the %d dead ones", exp, len(dead))
		}
		for _, l := range exp {
			wantErr(t, s.Claim(ctx, l.Owner, l.ID, "recoverer", 10*time.Second), nil)
			wantErr(t, s.Fail(ctx, l.Owner, l.ID, Outcome{Message: "the gateway replica running this task stopped"}), nil)
			wantErr(t, s.Release(ctx, l.Owner, l.ID, "recoverer"), nil)
		}
		for i, id := range dead {
			got, err := s.Get(ctx, "o"+strconv.Itoa(i), id)
			if err != nil || got.Status != StatusFailed {
				t.Errorf("dead task %d = %+v, %v", i, got, err)
			}
		}
		if got, _ := s.Get(ctx, "o0", alive.ID); got.Status != StatusWorking || got.Lease.Holder != "live-replica" {
			t.Errorf("live task = %+v", got)
		}
	})
}

// TestExpiredLeaseFrom: a takeover records whom it took the lease from,
// and a later takeover (the first claimer did not finish the recovery)
// keeps it: ListExpiredLeases reports the replica whose worker ran the
// task as From, whoever claimed it since (found by e2e TestChaos).
func TestExpiredLeaseFrom(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.LeaseGrace = time.Second })
		task, err := s.Create(ctx, NewTask{Owner: "o", Lease: &LeaseRequest{Holder: "worker", Duration: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		for _, claimer := range []string{"sweeper-a", "sweeper-b", ""} {
			e.clock.Advance(4 * time.Second) // past the holder's lease and grace
			exp, err := s.ListExpiredLeases(ctx, 10)
			if err != nil || len(exp) != 1 {
				t.Fatalf("ListExpiredLeases = %+v, %v", exp, err)
			}
			wantFrom := "worker"
			if exp[0].Holder == "worker" {
				wantFrom = "" // nobody took it over yet
			}
			if exp[0].From != wantFrom {
				t.Errorf("expired lease held by %s: From = %q, want %q", exp[0].Holder, exp[0].From, wantFrom)
			}
			if claimer != "" {
				wantErr(t, s.Claim(ctx, "o", task.ID, claimer, 2*time.Second), nil)
				wantErr(t, s.Claim(ctx, "o", task.ID, claimer, 2*time.Second), nil) // its own again: no takeover
			}
		}
	})
}

// TestExtendMany: one round trip renews every lease of a holder, and
// reports per task what Extend would: done, another holder's, terminal,
// missing. A script cache flushed meanwhile (a restarted Redis) is
// reloaded.
func TestExtendMany(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		mine := mustCreate(t, s, "o1")
		theirs := mustCreate(t, s, "o2")
		done := mustCreate(t, s, "o1")
		wantErr(t, s.Claim(ctx, "o1", mine.ID, "r1", time.Second), nil)
		wantErr(t, s.Claim(ctx, "o2", theirs.ID, "r2", time.Second), nil)
		wantErr(t, s.Claim(ctx, "o1", done.ID, "r1", time.Second), nil)
		wantErr(t, s.Complete(ctx, "o1", done.ID, json.RawMessage(`{}`)), nil)
		e.rdb.ScriptFlush(ctx)
		refs := []LeaseRef{{"o1", mine.ID}, {"o2", theirs.ID}, {"o1", done.ID}, {"o1", "not-a-uuid"}, {"o3", mine.ID}}
		errs := s.ExtendMany(ctx, refs, "r1", 10*time.Second)
		wantErr(t, errs[0], nil)
		wantErr(t, errs[1], ErrLeaseLost)
		wantErr(t, errs[2], ErrTerminal)
		wantErr(t, errs[3], ErrNotFound)
		wantErr(t, errs[4], ErrNotFound)
		if got := e.hash(s.k.task("o1", mine.ID))["lease_until"]; got != strconv.FormatInt(e.clock.Now().Add(10*time.Second).UnixMilli(), 10) {
			t.Errorf("lease_until = %s", got)
		}
		if errs := s.ExtendMany(ctx, nil, "r1", time.Second); len(errs) != 0 {
			t.Errorf("no refs: %v", errs)
		}
	})
}

// TestLeasesIndexFollowsRenewals: each ExtendMany re-scores the leases
// index entries of the leases its previous call renewed (their deadlines
// then, a lower bound of the current ones), so a sweep does not find held
// tasks' entries expired by score every lease period; Release removes the
// entry, so finished tasks do not pile up in the index for sweeps to drop.
func TestLeasesIndexFollowsRenewals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		tk, err := s.Create(ctx, NewTask{Owner: "o1", Tool: "slow", Protocol: Protocol2026, Lease: &LeaseRequest{Holder: "r1", Duration: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		member := leaseMember("o1", tk.ID)
		score := func() float64 {
			t.Helper()
			v, err := e.rdb.ZScore(ctx, s.k.leases(), member).Result()
			if err != nil {
				t.Fatalf("leases index entry: %v", err)
			}
			return v
		}
		created := score()
		refs := []LeaseRef{{"o1", tk.ID}}
		e.clock.Advance(500 * time.Millisecond)
		first := e.clock.Now().Add(10 * time.Second).UnixMilli()
		wantErr(t, s.ExtendMany(ctx, refs, "r1", 10*time.Second)[0], nil)
		if got := score(); got != created {
			t.Errorf("after the first renewal the entry's score is %v, want still %v", got, created)
		}
		e.clock.Advance(5 * time.Second)
		wantErr(t, s.ExtendMany(ctx, refs, "r1", 10*time.Second)[0], nil)
		if got := score(); got != float64(first) {
			t.Errorf("after the second renewal the entry's score is %v, want the first renewal's deadline %d", got, first)
		}
		// Past the first renewal's deadline, the lease (renewed since)
		// is not listed, and its entry stays.
		e.clock.Advance(6*time.Second + s.opt.LeaseGrace)
		if l, err := s.ListExpiredLeases(ctx, 100); err != nil || len(l) != 0 {
			t.Errorf("expired leases = %v %v, want none", l, err)
		}
		wantErr(t, s.Complete(ctx, "o1", tk.ID, json.RawMessage(`{}`)), nil)
		wantErr(t, s.Release(ctx, "o1", tk.ID, "r1"), nil)
		if n, _ := e.rdb.ZCard(ctx, s.k.leases()).Result(); n != 0 {
			t.Errorf("after Release the leases index holds %d entries, want 0", n)
		}
		// A renewal after the release does not bring the entry back.
		s.ExtendMany(ctx, nil, "r1", 10*time.Second)
		s.ExtendMany(ctx, refs, "r1", 10*time.Second)
		if n, _ := e.rdb.ZCard(ctx, s.k.leases()).Result(); n != 0 {
			t.Errorf("a renewal brought %d entries back, want 0", n)
		}
	})
}

// zaddSizes records how many entries each ZADD sent in a pipeline names.
type zaddSizes struct{ entries []int }

func (*zaddSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*zaddSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (z *zaddSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "zadd" {
				z.entries = append(z.entries, (len(c.Args())-3)/2) // ZADD key XX (score member)...
			}
		}
		return next(ctx, cmds)
	}
}

// TestLeasesIndexRescoreChunks: a renewal of more leases than
// rescoreChunk re-scores them all, in commands of at most rescoreChunk
// entries.
func TestLeasesIndexRescoreChunks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		// Thousands of leases in one pipeline: miniredis under the race
		// detector on a busy machine takes longer than the suite's short
		// read and write timeouts, which are for tests of an unreachable
		// Redis (a write of the whole pipeline timed out once in CI).
		opts := *e.rdb.Options()
		opts.ReadTimeout = 30 * time.Second
		opts.WriteTimeout = 30 * time.Second
		e.rdb = redis.NewClient(&opts)
		defer e.rdb.Close()
		s := New(e.rdb, Options{Clock: e.clock.Now, MaxTasksPerOwner: -1})
		defer s.Close()
		const n = 2*rescoreChunk + 1
		refs := make([]LeaseRef, n)
		for i := range refs {
			tk, err := s.Create(ctx, NewTask{Owner: "o", Tool: "slow", Protocol: Protocol2026, Lease: &LeaseRequest{Holder: "r1", Duration: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			refs[i] = LeaseRef{"o", tk.ID}
		}
		deadline := e.clock.Now().Add(time.Minute).UnixMilli()
		for _, err := range s.ExtendMany(ctx, refs, "r1", time.Minute) {
			wantErr(t, err, nil)
		}
		zadds := &zaddSizes{}
		e.rdb.AddHook(zadds)
		s.ExtendMany(ctx, refs, "r1", time.Minute)
		if len(zadds.entries) != 3 || zadds.entries[0] != rescoreChunk || zadds.entries[2] != 1 {
			t.Errorf("ZADD commands of %v entries, want %d, %d and 1", zadds.entries, rescoreChunk, rescoreChunk)
		}
		got, err := e.rdb.ZCount(ctx, s.k.leases(), strconv.FormatInt(deadline, 10), strconv.FormatInt(deadline, 10)).Result()
		if err != nil || got != n {
			t.Errorf("%d of %d entries re-scored (%v)", got, n, err)
		}
	})
}

// TestUpstreamTasks: an upstream task id is known to the owner that
// recorded it only, with the session it lives on, until its ttl.
func TestUpstreamTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := json.RawMessage(`{"taskId":"up-1","status":"working"}`)
		wantErr(t, s.PutUpstreamTask(ctx, UpstreamTask{ID: "up-1", Owner: "o1", Session: "s-1", Tool: "research", Protocol: Protocol2025, Task: task}, 2*time.Second), nil)
		for _, tc := range []struct {
			owner, id string
			want      bool
		}{{"o1", "up-1", true}, {"o2", "up-1", false}, {"o1", "up-2", false}, {"o1", "", false}} {
			if got, _, err := s.UpstreamTaskOwner(ctx, tc.owner, tc.id); err != nil || (got != nil) != tc.want {
				t.Errorf("UpstreamTaskOwner(%s, %s) = %v, %v; want %v", tc.owner, tc.id, got, err, tc.want)
			}
		}
		if mine, anyone, err := s.UpstreamTaskOwner(ctx, "o2", "up-1"); err != nil || mine != nil || !anyone {
			t.Errorf("UpstreamTaskOwner(o2) = %v, %v, %v; want another owner's", mine, anyone, err)
		}
		mine, anyone, err := s.UpstreamTaskOwner(ctx, "o1", "up-1")
		if err != nil || mine == nil || !anyone {
			t.Fatalf("UpstreamTaskOwner(o1) = %v, %v, %v; want its own", mine, anyone, err)
		}
		if mine.Session != "s-1" || mine.Tool != "research" || mine.Protocol != Protocol2025 || string(mine.Task) != string(task) || !mine.Recorded.Equal(e.clock.Now().Truncate(time.Millisecond)) {
			t.Errorf("record = %+v", mine)
		}
		wantErr(t, s.MarkUpstreamTaskLost(ctx, "o1", "up-1", "the upstream restarted"), nil)
		if got, _, err := s.UpstreamTaskOwner(ctx, "o1", "up-1"); err != nil || got == nil || got.Lost != "the upstream restarted" || got.Session != "s-1" {
			t.Errorf("after MarkUpstreamTaskLost: %+v, %v", got, err)
		}
		if ttl := e.rdb.PTTL(ctx, s.k.upstreamTask("o1", "up-1")).Val(); ttl <= 0 || ttl > 2*time.Second {
			t.Errorf("the lost record's ttl is %v; want its own (<= 2s)", ttl)
		}
		wantErr(t, s.MarkUpstreamTaskLost(ctx, "o1", "never", "x"), nil)
		if n := e.rdb.Exists(ctx, s.k.upstreamTask("o1", "never")).Val(); n != 0 {
			t.Errorf("marking an unknown task lost created a record")
		}
		e.elapse(3 * time.Second)
		if got, _, _ := s.UpstreamTaskOwner(ctx, "o1", "up-1"); got != nil {
			t.Errorf("an expired record is still known")
		}
		if err := s.PutUpstreamTask(ctx, UpstreamTask{ID: string(make([]byte, 300)), Owner: "o1"}, 0); err == nil {
			t.Errorf("an over-long id was recorded")
		}
		// The owner's index holds the 2025-11-25 record, and expires;
		// a 2026-07-28 record (no tasks/list) is not indexed.
		wantErr(t, s.PutUpstreamTask(ctx, UpstreamTask{ID: "ext-1", Owner: "o3", Protocol: Protocol2026}, time.Minute), nil)
		if n := e.rdb.Exists(ctx, s.k.created("o3")).Val(); n != 0 {
			t.Errorf("a 2026-07-28 record was indexed")
		}
		wantErr(t, s.PutUpstreamTask(ctx, UpstreamTask{ID: "up-9", Owner: "o3", Protocol: Protocol2025}, time.Minute), nil)
		if ttl := e.rdb.PTTL(ctx, s.k.created("o3")).Val(); ttl <= 0 {
			t.Errorf("the owner's index has no expiry (%v)", ttl)
		}
		// A record of an older version ("1") still routes, to the
		// caller's own session.
		e.rdb.Set(ctx, s.k.upstreamTask("o1", "old"), "1", time.Minute)
		if got, _, err := s.UpstreamTaskOwner(ctx, "o1", "old"); err != nil || got == nil || got.Session != "" || got.ID != "old" {
			t.Errorf("old record = %+v, %v", got, err)
		}
	})
}

// TestListWithUpstreamTasks: the owner's upstream tasks are listed among
// its own tasks, newest first, with one cursor, whatever their ids hold;
// another owner's are not, and an expired record drops out.
func TestListWithUpstreamTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		var want []string // newest first
		for i, id := range []string{"", "up.1/with dots", "", "up-2", "", strings.Repeat("x", maxUpstreamTaskID)} {
			e.clock.Advance(time.Millisecond)
			if id == "" {
				want = append([]string{mustCreate(t, s, "o").ID}, want...)
				continue
			}
			ttl := time.Hour
			if i == 3 {
				ttl = time.Second // expires before the listing
			} else {
				want = append([]string{id}, want...)
			}
			wantErr(t, s.PutUpstreamTask(ctx, UpstreamTask{ID: id, Owner: "o", Session: "s"}, ttl), nil)
		}
		wantErr(t, s.PutUpstreamTask(ctx, UpstreamTask{ID: "foreign", Owner: "other"}, time.Hour), nil)
		e.elapse(2 * time.Second)
		var got []string
		cursor := ""
		for page := 0; page < 10; page++ {
			list, next, err := s.List(ctx, "o", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range list {
				switch {
				case l.Task != nil && l.Upstream == nil:
					got = append(got, l.Task.ID)
				case l.Upstream != nil && l.Task == nil && l.Upstream.Owner == "o" && l.Upstream.Session == "s":
					got = append(got, l.Upstream.ID)
				default:
					t.Errorf("entry %+v", l)
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("listed %q\nwant   %q", got, want)
		}
	})
}

// TestSharedSecret: every store on the same Redis reads the same secret,
// made once; another name is another secret.
func TestSharedSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := e.store(t), e.store(t)
		s1, err := a.SharedSecret(ctx, "mrtr")
		if err != nil || len(s1) != 32 {
			t.Fatalf("SharedSecret = %x, %v", s1, err)
		}
		s2, err := b.SharedSecret(ctx, "mrtr")
		if err != nil || string(s2) != string(s1) {
			t.Errorf("another replica's secret = %x, %v; want %x", s2, err, s1)
		}
		if other, _ := a.SharedSecret(ctx, "other"); string(other) == string(s1) {
			t.Error("two names share a secret")
		}
	})
}

// TestFinishAndRelease: a worker's last write records the outcome, gives
// its lease up (the index entry too) and publishes the session's
// notification, made from the task as the write left it, only when the
// write changed the task; a holder that lost the lease keeps none of it
// from the new holder; a task already terminal still has its lease given
// up, and tells nobody.
func TestFinishAndRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t, func(o *Options) { o.LeaseGrace = time.Second })
		create := func() *Task {
			t.Helper()
			task, err := s.Create(ctx, NewTask{Owner: "o", Tool: "slow", Protocol: Protocol2025,
				Upstream: Upstream{SessionID: "s1"}, Lease: &LeaseRequest{Holder: "r1", Duration: 10 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		w, err := s.WatchSession(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		next := func() string {
			t.Helper()
			for {
				select {
				case ev := <-w.C:
					if ev.Kind == EventMessage {
						return ev.Data
					}
				case <-time.After(10 * time.Second): // a bound on a hang, not a timed assertion
					t.Fatal("no message published to the session")
				}
			}
		}
		// A marker published after a write: the next message is the
		// write's own if it published one, else the marker.
		marker := func(n int) string {
			t.Helper()
			m := "marker " + strconv.Itoa(n)
			if err := s.PublishSession(ctx, "s1", []byte(m)); err != nil {
				t.Fatal(err)
			}
			return m
		}
		var noted []*Task
		note := func(after *Task) []byte {
			noted = append(noted, after)
			return []byte("status " + string(after.Status) + " " + after.StatusMessage + " " + after.LastUpdatedAt.Format(time.RFC3339Nano))
		}

		task := create()
		e.clock.Advance(time.Second)
		o := Outcome{Result: json.RawMessage(`{"content":[]}`), Message: "done", WriteID: "w1"}
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCompleted, o, note), nil)
		got, err := s.Get(ctx, "o", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusCompleted || string(got.Result) != `{"content":[]}` || got.Lease.Holder != "" {
			t.Fatalf("after the write: %+v", got)
		}
		if h := e.hash(s.k.task("o", task.ID)); h["lease_until"] != "" || h["lease_from"] != "" {
			t.Errorf("lease fields left: %v", h)
		}
		if e.isMember(s.k.leases(), leaseMember("o", task.ID)) {
			t.Error("the leases index keeps the released lease")
		}
		want := "status completed done " + got.LastUpdatedAt.Format(time.RFC3339Nano)
		if msg := next(); msg != want {
			t.Fatalf("session got %q, want %q (the task as stored)", msg, want)
		}
		if a := noted[len(noted)-1]; a.ID != task.ID || a.CreatedAt != got.CreatedAt || a.TTL != got.TTL || a.PollInterval != got.PollInterval {
			t.Errorf("note got %+v, want the stored task's fields %+v", a, got)
		}
		// A retried write that had landed: no error, no second notification.
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCompleted, o, note), nil)
		if m := marker(1); next() != m {
			t.Error("a replayed write published its notification again")
		}

		// r1 lost the lease to r2: its outcome is written, r2's lease stays.
		task = create()
		e.clock.Advance(12 * time.Second)
		wantErr(t, s.Claim(ctx, "o", task.ID, "r2", 10*time.Second), nil)
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusFailed, Outcome{Message: "boom"}, note), nil)
		if h := e.hash(s.k.task("o", task.ID)); h["status"] != "failed" || h["lease_holder"] != "r2" {
			t.Errorf("after r1's write: %v", h)
		}
		if !e.isMember(s.k.leases(), leaseMember("o", task.ID)) {
			t.Error("r1 removed r2's leases index entry")
		}
		if msg := next(); !strings.HasPrefix(msg, "status failed boom ") {
			t.Errorf("session got %q", msg)
		}

		// Cancelled meanwhile: ErrTerminal, the lease given up, nobody told.
		task = create()
		if _, err := s.RequestCancel(ctx, "o", task.ID, ""); err != nil {
			t.Fatal(err)
		}
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCompleted, o, note), ErrTerminal)
		if h := e.hash(s.k.task("o", task.ID)); h["status"] != "cancelled" || h["lease_holder"] != "" {
			t.Errorf("after a refused write: %v", h)
		}
		if e.isMember(s.k.leases(), leaseMember("o", task.ID)) {
			t.Error("the leases index keeps the lease given up")
		}
		if m := marker(2); next() != m {
			t.Error("a refused write published a notification")
		}

		// No note, or a nil message: nothing published.
		task = create()
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCompleted, Outcome{}, nil), nil)
		task = create()
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCompleted, Outcome{}, func(*Task) []byte { return nil }), nil)
		if m := marker(3); next() != m {
			t.Error("a write without a note published one")
		}

		// Bad input: a precise error, nothing written.
		task = create()
		if err := s.FinishAndRelease(ctx, task, "", StatusCompleted, Outcome{}, nil); err == nil || !strings.Contains(err.Error(), "empty lease holder") {
			t.Errorf("no holder: err = %v", err)
		}
		wantErr(t, s.FinishAndRelease(ctx, task, "r1", StatusCancelled, Outcome{}, nil), ErrInvalidTransition)
		if h := e.hash(s.k.task("o", task.ID)); h["status"] != "working" || h["lease_holder"] != "r1" {
			t.Errorf("after refused calls: %v", h)
		}
	})
}
