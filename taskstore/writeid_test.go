package taskstore

import (
	"encoding/json"
	"errors"
	"testing"
)

// A retried write whose first attempt Redis ran, but whose reply was lost
// (Redis killed between running a script and answering), must succeed and
// change nothing; an unrelated write must still be refused. Found by e2e
// TestChaos on a slow disk: the worker's retry of AddInputRequests met its
// own keys ("key already used") and failed the task.
func TestWriteIDReplay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		elicit := InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`)}

		t.Run("input requests", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			key := s.k.task("o", task.ID)
			reqs := map[string]InputRequest{"1": elicit, "2": elicit}
			wantErr(t, s.AddInputRequests(ctx, "o", task.ID, reqs, "waiting", "w1"), nil)
			if h := e.hash(key); h["used:1"] != "w1" || h["used:2"] != "w1" || h["pending"] != "2" {
				t.Fatalf("raw after add = %v", h)
			}
			// The client answers one before the retry comes.
			if n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{"1": json.RawMessage(`{"action":"decline"}`)}); err != nil || n != 1 {
				t.Fatalf("AnswerInputs = %d, %v", n, err)
			}
			before := e.hash(key)
			wantErr(t, s.AddInputRequests(ctx, "o", task.ID, reqs, "waiting", "w1"), nil)
			if after := e.hash(key); !mapsEqual(before, after) {
				t.Fatalf("a replayed add changed the task:\nbefore %v\nafter  %v", before, after)
			}
			// Another write id, no write id, or the replayed keys plus a new
			// one: a reused key, nothing written.
			for _, tc := range []struct {
				reqs  map[string]InputRequest
				write string
			}{
				{reqs, "w2"},
				{reqs, ""},
				{map[string]InputRequest{"1": elicit, "2": elicit, "3": elicit}, "w1"},
			} {
				if err := s.AddInputRequests(ctx, "o", task.ID, tc.reqs, "", tc.write); !errors.Is(err, ErrKeyReused) {
					t.Errorf("add of %d requests with write id %q = %v, want ErrKeyReused", len(tc.reqs), tc.write, err)
				}
				if after := e.hash(key); !mapsEqual(before, after) {
					t.Fatalf("a refused add changed the task: %v", after)
				}
			}
			// New keys with the same write id are a new write.
			wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"3": elicit}, "", "w1"), nil)
			if h := e.hash(key); h["in:3"] == "" || h["pending"] != "2" {
				t.Fatalf("raw after a new add = %v", h)
			}
		})

		t.Run("take", func(t *testing.T) {
			task := mustCreate(t, s, "o")
			key := s.k.task("o", task.ID)
			wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"1": elicit, "2": elicit}, "", "w"), nil)
			answer := func(k, v string) {
				t.Helper()
				if n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{k: json.RawMessage(v)}); err != nil || n != 1 {
					t.Fatalf("AnswerInputs %s = %d, %v", k, n, err)
				}
			}
			take := func(id string) map[string]json.RawMessage {
				t.Helper()
				got, _, err := s.TakeInputResponses(ctx, "o", task.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			answer("1", `{"a":1}`)
			// The take's reply is lost: the same take id gets the answers
			// again, with one recorded since.
			if got := take("t1"); len(got) != 1 || string(got["1"]) != `{"a":1}` {
				t.Fatalf("first take = %v", got)
			}
			if h := e.hash(key); h["re:1"] != "" || h["tk:1"] != `{"a":1}` || h["take"] != "t1" {
				t.Fatalf("raw after a take = %v", h)
			}
			answer("2", `{"a":2}`)
			if got := take("t1"); len(got) != 2 || string(got["1"]) != `{"a":1}` || string(got["2"]) != `{"a":2}` {
				t.Fatalf("take repeated = %v, want both answers", got)
			}
			// A new take id: what the last one took is gone.
			if got := take("t2"); len(got) != 0 {
				t.Fatalf("take with a new id = %v, want nothing", got)
			}
			if h := e.hash(key); h["tk:1"] != "" || h["tk:2"] != "" || h["take"] != "t2" {
				t.Fatalf("raw after a new take = %v", h)
			}
			// Without a take id nothing is kept.
			task2 := mustCreate(t, s, "o")
			wantErr(t, s.AddInputRequests(ctx, "o", task2.ID, map[string]InputRequest{"1": elicit}, "", ""), nil)
			if n, err := s.AnswerInputs(ctx, "o", task2.ID, map[string]json.RawMessage{"1": json.RawMessage(`{}`)}); err != nil || n != 1 {
				t.Fatal(n, err)
			}
			if got, _, err := s.TakeInputResponses(ctx, "o", task2.ID, ""); err != nil || len(got) != 1 {
				t.Fatalf("take = %v, %v", got, err)
			}
			if got, _, err := s.TakeInputResponses(ctx, "o", task2.ID, ""); err != nil || len(got) != 0 {
				t.Fatalf("second take without an id = %v, %v, want nothing", got, err)
			}
			if h := e.hash(s.k.task("o", task2.ID)); h["tk:1"] != "" || h["take"] != "" {
				t.Fatalf("raw after takes without an id = %v", h)
			}
		})

		t.Run("outcome", func(t *testing.T) {
			for _, to := range []Status{StatusCompleted, StatusFailed} {
				task := mustCreate(t, s, "o")
				key := s.k.task("o", task.ID)
				o := Outcome{Result: json.RawMessage(`{"content":[]}`), Message: "done", WriteID: "w-" + string(to)}
				wantErr(t, s.Finish(ctx, "o", task.ID, to, o), nil)
				before := e.hash(key)
				if before["status"] != string(to) || before["write"] != o.WriteID {
					t.Fatalf("raw after finish = %v", before)
				}
				wantErr(t, s.Finish(ctx, "o", task.ID, to, o), nil)
				if after := e.hash(key); !mapsEqual(before, after) {
					t.Fatalf("a replayed finish changed the task: %v", after)
				}
				other := o
				other.WriteID = "w-other"
				for _, again := range []Outcome{other, {Result: o.Result}} {
					if err := s.Finish(ctx, "o", task.ID, to, again); !errors.Is(err, ErrTerminal) {
						t.Errorf("finish with write id %q of a task finished by %q = %v, want ErrTerminal", again.WriteID, o.WriteID, err)
					}
				}
			}
			// Cancelled first: the worker's write is refused whatever its id.
			task := mustCreate(t, s, "o")
			if _, err := s.RequestCancel(ctx, "o", task.ID, ""); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(ctx, "o", task.ID, StatusCompleted, Outcome{Result: json.RawMessage(`{}`), WriteID: "w"}); !errors.Is(err, ErrTerminal) {
				t.Errorf("finish of a cancelled task = %v, want ErrTerminal", err)
			}
			if err := s.Finish(ctx, "o", task.ID, StatusCancelled, Outcome{}); !errors.Is(err, ErrInvalidTransition) {
				t.Errorf("Finish to cancelled = %v, want ErrInvalidTransition", err)
			}
		})
	})
}
