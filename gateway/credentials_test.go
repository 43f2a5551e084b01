package gateway

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestCredentialsSealed: a principal's token crosses replicas through the
// store, sealed: another principal's record copied under its key does not
// open (the older token is used instead), and no log line quotes a token.
func TestCredentialsSealed(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := taskstore.New(rdb, taskstore.Options{})
	var logs bytes.Buffer
	a := newCredentials(store, zerolog.New(&logs))
	b := newCredentials(store, zerolog.New(&logs))
	alice, bob := auth.Principal{Issuer: "https://i", Subject: "alice"}, auth.Principal{Issuer: "https://i", Subject: "bob"}
	seen := func(c *credentials, p auth.Principal, token string) {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Authorization", token)
		c.note(r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}
	seen(a, alice, "Bearer alice-1")
	bound := a.bind(&upstream.Session{Header: map[string][]string{"Authorization": {"Bearer alice-1"}}})
	if bound.Authorization == nil {
		t.Fatal("a session with a token this replica saw is not bound")
	}
	if other := a.bind(&upstream.Session{Header: map[string][]string{"Authorization": {"Bearer unknown"}}}); other.Authorization != nil {
		t.Fatal("a session with an unknown token is bound")
	}
	seen(b, alice, "Bearer alice-2")
	seen(b, bob, "Bearer bob-1")
	a.byPrincipal[alice.Key()].seen = a.byPrincipal[alice.Key()].seen.Add(-2 * credLocal) // not seen here lately
	ctx := context.Background()
	if got := bound.Authorization(ctx); got != "Bearer alice-2" {
		t.Fatalf("freshest = %q, want the token B saw", got)
	}
	// Bob's sealed token under alice's key: it does not open for her.
	blob, err := store.Credential(ctx, bob.Key())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("bob-1")) {
		t.Fatal("the store holds the token in clear")
	}
	if err := store.PutCredential(ctx, alice.Key(), blob, credKeep); err != nil {
		t.Fatal(err)
	}
	a.byPrincipal[alice.Key()].checked = a.byPrincipal[alice.Key()].checked.Add(-2 * credLocal)
	if got := bound.Authorization(ctx); got != "Bearer alice-2" {
		t.Fatalf("with bob's record under alice's key: %q, want alice's last known", got)
	}
	for _, tok := range []string{"alice-1", "alice-2", "bob-1"} {
		if bytes.Contains(logs.Bytes(), []byte(tok)) {
			t.Fatalf("a log line quotes %s:\n%s", tok, logs.String())
		}
	}
	if !bytes.Contains(logs.Bytes(), []byte("cannot read the newest token")) {
		t.Fatalf("the record that does not open is not logged:\n%s", logs.String())
	}
}
