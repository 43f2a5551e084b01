package durable

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDigest(t *testing.T) {
	a := Digest("elicitation/create", json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}`))
	b := Digest("elicitation/create", json.RawMessage(`{ "requestedSchema": {"properties":{"n":{"type":"string"}},"type":"object"},  "message":"name?"}`))
	if a != b {
		t.Error("the same question in another member order has another digest")
	}
	for _, other := range []string{
		Digest("elicitation/create", json.RawMessage(`{"message":"name?!","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}`)),
		Digest("sampling/createMessage", json.RawMessage(`{"message":"name?","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}}}`)),
		Digest("elicitation/create", json.RawMessage(`{"message":"name?"}`)),
	} {
		if other == a {
			t.Error("another question has the same digest")
		}
	}
	if Digest("m", json.RawMessage(`{"n":1.0}`)) == Digest("m", json.RawMessage(`{"n":1}`)) {
		t.Error("numbers are compared as written; 1.0 and 1 should differ")
	}
	if Digest("m", nil) != Digest("m", json.RawMessage(" ")) || Digest("m", json.RawMessage("{bad")) == Digest("m", nil) {
		t.Error("absent params, or bad JSON")
	}
	answered := map[string]json.RawMessage{a: json.RawMessage(`{"result":{"action":"accept"}}`)}
	if got, ok := Replay(answered, "elicitation/create", json.RawMessage(`{"requestedSchema":{"type":"object","properties":{"n":{"type":"string"}}},"message":"name?"}`)); !ok || string(got) != `{"result":{"action":"accept"}}` {
		t.Errorf("replay = %s %v", got, ok)
	}
	if _, ok := Replay(answered, "elicitation/create", json.RawMessage(`{"message":"other?"}`)); ok {
		t.Error("a new question replayed")
	}
}

func TestMessages(t *testing.T) {
	if got := RerunMessage(CauseReplicaStopped, 2, 3); got != "the replica running it stopped; running it again (attempt 2 of 3)" {
		t.Error(got)
	}
	if got := ExhaustedMessage(3, "connection_reset", "the upstream closed the stream"); !strings.Contains(got, "3 attempts") || !strings.Contains(got, "connection broke") {
		t.Error(got)
	}
	if describe("whatever") != "whatever" {
		t.Error("unknown cause")
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second, 9: 5 * time.Second} {
		got := Backoff(n, time.Second, 5*time.Second)
		if got < want || got > want+want/4 {
			t.Errorf("attempt %d: %v, want %v to %v", n, got, want, want+want/4)
		}
	}
	if Backoff(3, 0, time.Second) != 0 {
		t.Error("no base: no wait")
	}
}

func TestSpecAndSeal(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	sealed, err := Seal(secret, "task-1", []byte("Bearer abc"))
	if err != nil || bytes.Contains(sealed, []byte("abc")) {
		t.Fatalf("seal: %v", err)
	}
	s := &Spec{Rerun: true, Params: json.RawMessage(`{"name":"x","arguments":{"i":1}}`), Session: "s1", Auth: sealed}
	got, err := Decode(s.Encode())
	if err != nil || !got.Rerun || got.Session != "s1" || string(got.Params) != string(s.Params) {
		t.Fatalf("decode: %+v %v", got, err)
	}
	if plain, err := Open(secret, "task-1", got.Auth); err != nil || string(plain) != "Bearer abc" {
		t.Fatalf("open: %q %v", plain, err)
	}
	if _, err := Open(secret, "task-2", got.Auth); err != errSealed {
		t.Errorf("opened for another task: %v", err)
	}
	if _, err := Open(secret, "task-1", got.Auth[:3]); err != errSealed {
		t.Errorf("short: %v", err)
	}
	for _, bad := range []string{`{`, `{"rerun":true}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// FuzzDigest: the params of a question are the upstream's, any bytes.
// Digest never panics, and the same JSON value re-spaced and re-ordered
// has the same digest.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{`{"message":"name?","requestedSchema":{"type":"object"}}`, `[1,2,{"a":null}]`, `"x"`, `{`, ``, `1e400`, `{"a":1,"a":2}`} {
		f.Add("elicitation/create", s)
	}
	f.Fuzz(func(t *testing.T, method, params string) {
		d := Digest(method, json.RawMessage(params))
		if len(d) != 32 {
			t.Fatalf("digest %q", d)
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(params)))
		dec.UseNumber() // numbers keep their spelling
		var v any
		if dec.Decode(&v) != nil || dec.More() {
			return
		}
		again, err := json.MarshalIndent(v, " ", "  ")
		if err != nil {
			return
		}
		if Digest(method, again) != d {
			t.Fatalf("%s and %s: digests differ", params, again)
		}
	})
}
