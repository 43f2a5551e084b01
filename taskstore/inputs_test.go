package taskstore

import (
	"encoding/json"
	"testing"
)

func TestInputRequests(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := mustCreate(t, s, "o")
		key := s.k.task("o", task.ID)
		elicit := InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`)}
		sample := InputRequest{Method: "sampling/createMessage", Params: json.RawMessage(`{"maxTokens":5}`)}

		// Add sets input_required and stores the requests.
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"a": elicit, "b": sample}, "waiting", ""), nil)
		h := e.hash(key)
		if h["status"] != "input_required" || h["pending"] != "2" || h["used:a"] != "1" || h["used:b"] != "1" ||
			h["in:a"] != `{"method":"elicitation/create","params":{"message":"name?"}}` || h["message"] != "waiting" {
			t.Fatalf("raw after add = %v", h)
		}
		got, err := s.Get(ctx, "o", task.ID)
		if err != nil || len(got.InputRequests) != 2 || got.InputRequests["b"].Method != "sampling/createMessage" ||
			string(got.InputRequests["a"].Params) != `{"message":"name?"}` {
			t.Fatalf("Get = %+v, %v", got, err)
		}

		// Reusing a key writes nothing, even alongside a new one.
		before := e.hash(key)
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"c": elicit, "a": elicit}, "", ""), ErrKeyReused)
		if after := e.hash(key); !mapsEqual(before, after) {
			t.Fatalf("rejected add changed the task: %v", after)
		}

		// A partial answer, plus an unknown key that is ignored.
		n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{
			"a": json.RawMessage(`{"action":"accept","content":{"name":"x"}}`), "zzz": json.RawMessage(`{}`)})
		if err != nil || n != 1 {
			t.Fatalf("AnswerInputs = %d, %v", n, err)
		}
		h = e.hash(key)
		if h["status"] != "input_required" || h["pending"] != "1" || h["in:a"] != "" || h["re:a"] == "" || h["re:zzz"] != "" {
			t.Fatalf("raw after partial answer = %v", h)
		}
		// Already answered: ignored.
		if n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{"a": json.RawMessage(`{"late":1}`)}); err != nil || n != 0 {
			t.Fatalf("second answer = %d, %v", n, err)
		}
		if h := e.hash(key); h["re:a"] != `{"action":"accept","content":{"name":"x"}}` {
			t.Errorf("second answer overwrote the first: %s", h["re:a"])
		}

		// The worker takes them once.
		resp, st, err := s.TakeInputResponses(ctx, "o", task.ID, "")
		if err != nil || st != StatusInputRequired || len(resp) != 1 || string(resp["a"]) != `{"action":"accept","content":{"name":"x"}}` {
			t.Fatalf("Take = %v, %s, %v", resp, st, err)
		}
		if h := e.hash(key); h["re:a"] != "" || h["used:a"] != "1" {
			t.Errorf("raw after take = %v", h)
		}
		if resp, _, err := s.TakeInputResponses(ctx, "o", task.ID, ""); err != nil || len(resp) != 0 {
			t.Errorf("second Take = %v, %v", resp, err)
		}

		// The last answer sends the task back to working.
		if n, err := s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{"b": json.RawMessage(`{"role":"assistant"}`)}); err != nil || n != 1 {
			t.Fatalf("answer b = %d, %v", n, err)
		}
		h = e.hash(key)
		if h["status"] != "working" || h["pending"] != "0" || h["message"] != "" {
			t.Fatalf("raw after last answer = %v", h)
		}

		// Keys stay used for the task's lifetime.
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"a": elicit}, "", ""), ErrKeyReused)
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"c": elicit}, "", ""), nil)
		if h := e.hash(key); h["status"] != "input_required" || h["pending"] != "1" {
			t.Fatalf("raw after third add = %v", h)
		}

		// Terminal tasks take no more input.
		wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), nil)
		_, err = s.AnswerInputs(ctx, "o", task.ID, map[string]json.RawMessage{"c": json.RawMessage(`{}`)})
		wantErr(t, err, ErrTerminal)
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"d": elicit}, "", ""), ErrTerminal)
		if _, st, err := s.TakeInputResponses(ctx, "o", task.ID, ""); err != nil || st != StatusCompleted {
			t.Errorf("Take on terminal = %s, %v", st, err)
		}

		// Bad input.
		if err := s.AddInputRequests(ctx, "o", task.ID, nil, "", ""); err == nil {
			t.Error("empty AddInputRequests accepted")
		}
	})
}
