package taskstore

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

func TestEmbedded(t *testing.T) {
	var logs bytes.Buffer
	emb, err := OpenEmbedded(zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	if n := strings.Count(logs.String(), "lost on exit"); n != 1 {
		t.Errorf("warning logged %d times: %s", n, logs.String())
	}
	s := New(emb.Client(), Options{})
	defer s.Close()

	task, err := s.Create(ctx, NewTask{Owner: "o", TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "o", task.ID); err != nil {
		t.Fatal(err)
	}
	// Real time passes; the embedded clock expires the key on its own.
	key := s.k.task("o", task.ID)
	deadline := time.Now().Add(3 * time.Second)
	for emb.Client().Exists(ctx, key).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("embedded redis never expired the task")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = s.Get(ctx, "o", task.ID)
	wantErr(t, err, ErrExpired)

	s.Close()
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEmbeddedNeedsItsPassword: another local process that finds the
// embedded Redis' port cannot read or change tasks through it; the
// password is nowhere in the log.
func TestEmbeddedNeedsItsPassword(t *testing.T) {
	var logs bytes.Buffer
	emb, err := OpenEmbedded(zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	intruder := redis.NewClient(&redis.Options{Addr: emb.Addr(), MaxRetries: -1})
	defer intruder.Close()
	if err := intruder.Keys(ctx, "*").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("KEYS without the password: %v, want NOAUTH", err)
	}
	if err := emb.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("the store's own client: %v", err)
	}
	opts := emb.Client().(*redis.Client).Options()
	if opts.Password == "" || strings.Contains(logs.String(), opts.Password) || strings.Contains(logs.String(), emb.Addr()) {
		t.Errorf("password %q, log %s: want a password, not logged, and no address in the log", opts.Password, logs.String())
	}
}
