package taskstore

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func createRerunnable(t *testing.T, s *Store, holder string) *Task {
	t.Helper()
	task, err := s.Create(ctx, NewTask{Owner: "o", Tool: "report", Protocol: Protocol2026,
		Lease: &LeaseRequest{Holder: holder, Duration: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRerun(ctx, "o", task.ID, []byte(`{"params":{}}`)); err != nil {
		t.Fatal(err)
	}
	return task
}

// TestBeginAttemptRace: the lease of a dead replica's rerunnable task has
// expired; two recoverers (two Stores, as on two replicas) race for it,
// many times over, on a real redis-server. Exactly one wins each race, the
// attempt is counted once, and the loser is told who holds it.
func TestBeginAttemptRace(t *testing.T) {
	e := openRedisServer(t)
	s1, s2 := e.store(t), e.store(t)
	for round := range 20 {
		task := createRerunnable(t, s1, "dead")
		e.clock.Advance(13 * time.Second) // lease + grace passed
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := []string{}, 0
		for i, s := range []*Store{s1, s2, s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := "r" + strconv.Itoa(i%2+1)
				a, err := s.BeginAttempt(ctx, "o", task.ID, AttemptRequest{Holder: holder, Lease: 10 * time.Second, Takeover: true,
					Max: 3, Backoff: time.Second, Cause: "replica_stopped", Message: "running it again"})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, holder)
					if a.N != 2 || a.From != "dead" {
						t.Errorf("round %d: attempt %+v, want 2 from dead", round, a)
					}
				case errors.Is(err, ErrLeaseHeld):
					lost++
				default:
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		wg.Wait()
		got, err := s1.Get(ctx, "o", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		holders := map[string]bool{}
		for _, h := range won {
			holders[h] = true
		}
		if len(won) != 1 || !holders[got.Lease.Holder] {
			t.Fatalf("round %d: winners %v, lease holder %q: want exactly one replica", round, won, got.Lease.Holder)
		}
		if got.Attempts != 1+len(won) || got.Status != StatusWorking || got.LastCause != "replica_stopped" || got.StatusMessage != "running it again" {
			t.Fatalf("round %d: after the race %+v (%d wins)", round, got, len(won))
		}
		if lost == 0 {
			t.Fatalf("round %d: nobody lost", round)
		}
	}
}

// TestBeginAttemptLimit: attempts count up to Max, then the next one is
// refused with the count, and the task is left for its holder to fail.
// A task created without a rerun spec has one attempt and none left.
func TestBeginAttemptLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := createRerunnable(t, s, "r1")
		req := AttemptRequest{Holder: "r1", Lease: 10 * time.Second, Max: 3, Backoff: 2 * time.Second, Cause: CauseForTest}
		for want := 2; want <= 3; want++ {
			a, err := s.BeginAttempt(ctx, "o", task.ID, req)
			if err != nil || a.N != want || !a.NextAt.Equal(e.clock.Now().Add(2*time.Second).Truncate(time.Millisecond)) {
				t.Fatalf("attempt %d: %+v %v", want, a, err)
			}
		}
		_, err := s.BeginAttempt(ctx, "o", task.ID, req)
		if !errors.Is(err, ErrAttemptsExhausted) || !strings.Contains(err.Error(), "3 attempts") {
			t.Fatalf("fourth attempt: %v", err)
		}
		// Another holder, while r1's lease is live, is refused; r1 is not
		// the holder of a lease it does not have.
		wantErr(t, func() error {
			_, err := s.BeginAttempt(ctx, "o", task.ID, AttemptRequest{Holder: "r2", Lease: time.Second, Max: 9})
			return err
		}(), ErrLeaseLost)
		if got, _ := s.Get(ctx, "o", task.ID); got.Attempts != 3 || got.Status != StatusWorking {
			t.Fatalf("after the limit: %+v", got)
		}
		plain := mustCreate(t, s, "o")
		wantErr(t, s.Claim(ctx, "o", plain.ID, "r1", time.Second), nil)
		if _, err := s.BeginAttempt(ctx, "o", plain.ID, AttemptRequest{Holder: "r1", Lease: time.Second, Max: 1}); !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("a task of one attempt: %v", err)
		}
		// Terminal tasks begin nothing.
		wantErr(t, s.Fail(ctx, "o", task.ID, Outcome{Message: "gave up"}), nil)
		if _, err := s.BeginAttempt(ctx, "o", task.ID, req); !errors.Is(err, ErrTerminal) {
			t.Fatalf("terminal: %v", err)
		}
	})
}

const CauseForTest = "connection_reset"

// TestAnswersKept: a question asked with a digest keeps the client's
// answer under it, bounded; a new attempt drops the dead attempt's
// outstanding questions (status back to working) but not the answers, and
// reports the keys used, so the next worker mints new ones.
func TestAnswersKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := createRerunnable(t, s, "r1")
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{
			"1": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`), Digest: "d1"},
			"2": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"age?"}`), Digest: "d2"},
			"3": {Method: "roots/list"},
		}, "", "w1"), nil)
		big := `{"result":{"action":"accept","content":{"x":"` + strings.Repeat("a", maxAnswerBytes) + `"}}}`
		if n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{
			"1": json.RawMessage(`{"result":{"action":"accept","content":{"name":"Ada"}}}`),
			"2": json.RawMessage(big), // too large to keep
			"3": json.RawMessage(`{"result":{"roots":[]}}`),
		}); err != nil || n != 3 {
			t.Fatalf("answer: %d %v", n, err)
		}
		got, _ := s.Get(ctx, "o", task.ID)
		if len(got.Answered) != 1 || string(got.Answered["d1"]) != `{"result":{"action":"accept","content":{"name":"Ada"}}}` {
			t.Fatalf("answered = %v", got.Answered)
		}
		// A question left open when the replica died.
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"4": {Method: "elicitation/create", Digest: "d4"}}, "", "w2"), nil)
		a, err := s.BeginAttempt(ctx, "o", task.ID, AttemptRequest{Holder: "r1", Lease: time.Second, Max: 3})
		if err != nil || a.Keys != 4 {
			t.Fatalf("attempt: %+v %v", a, err)
		}
		got, _ = s.Get(ctx, "o", task.ID)
		if got.Status != StatusWorking || len(got.InputRequests) != 0 || len(got.InputResponses) != 0 || len(got.Answered) != 1 {
			t.Fatalf("after the new attempt: %s %v %v %v", got.Status, got.InputRequests, got.InputResponses, got.Answered)
		}
		// Keys stay unique: the new worker's key 5 is fine, 4 is not.
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"4": {Method: "x"}}, "", "w3"), ErrKeyReused)
		// The bound on how many are kept.
		for i := 0; i < maxAnswered+5; i++ {
			k := strconv.Itoa(100 + i)
			wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{k: {Method: "m", Digest: "q" + k}}, "", "a"+k), nil)
			if _, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{k: json.RawMessage(`{"result":{}}`)}); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ = s.Get(ctx, "o", task.ID); len(got.Answered) != maxAnswered {
			t.Fatalf("kept %d answers, want the bound %d", len(got.Answered), maxAnswered)
		}
	})
}

// TestSetUpstreamTask: only the lease holder records the upstream's task.
func TestSetUpstreamTask(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := createRerunnable(t, s, "r1")
		wantErr(t, s.SetUpstreamTask(ctx, "o", task.ID, "r2", "up-1"), ErrLeaseLost)
		wantErr(t, s.SetUpstreamTask(ctx, "o", task.ID, "r1", "up-1"), nil)
		if got, _ := s.Get(ctx, "o", task.ID); got.UpstreamTask != "up-1" || got.Attempts != 1 || string(got.Rerun) != `{"params":{}}` {
			t.Fatalf("record: %+v", got)
		}
		wantErr(t, s.SetUpstreamTask(ctx, "x", task.ID, "r1", "up-1"), ErrNotFound)
		// A task that ended is never made durable; an ended task's
		// record does not grow.
		wantErr(t, s.Fail(ctx, "o", task.ID, Outcome{Message: "done"}), nil)
		if err := s.SetRerun(ctx, "o", task.ID, []byte(`{}`)); !errors.Is(err, ErrTerminal) {
			t.Fatalf("SetRerun of a failed task: %v", err)
		}
		wantErr(t, s.SetRerun(ctx, "o", "not-a-uuid", []byte(`{}`)), ErrNotFound)
	})
}
