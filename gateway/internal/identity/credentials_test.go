package identity

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	a := NewCredentials(store, zerolog.New(&logs))
	b := NewCredentials(store, zerolog.New(&logs))
	alice, bob := auth.Principal{Issuer: "https://i", Subject: "alice", ClientID: "app"}, auth.Principal{Issuer: "https://i", Subject: "bob", ClientID: "app"}
	seen := func(c *Credentials, p auth.Principal, token string) {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Authorization", token)
		c.Note(r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}
	seen(a, alice, "Bearer alice-1")
	bound := a.Bind(&upstream.Session{Header: map[string][]string{"Authorization": {"Bearer alice-1"}}})
	if bound.Authorization == nil {
		t.Fatal("a session with a token this replica saw is not bound")
	}
	if other := a.Bind(&upstream.Session{Header: map[string][]string{"Authorization": {"Bearer unknown"}}}); other.Authorization != nil {
		t.Fatal("a session with an unknown token is bound")
	}
	seen(b, alice, "Bearer alice-2")
	seen(b, bob, "Bearer bob-1")
	a.byPrincipal[alice.ClientKey()].seen = a.byPrincipal[alice.ClientKey()].seen.Add(-2 * credLocal) // not seen here lately
	ctx := context.Background()
	if got := bound.Authorization(ctx); got != "" {
		t.Fatalf("the call's first request sends %q, want its own token", got)
	}
	if got := bound.Authorization(ctx); got != "Bearer alice-2" {
		t.Fatalf("freshest = %q, want the token B saw", got)
	}
	// Bob's sealed token under alice's key: it does not open for her.
	blob, err := store.Credential(ctx, bob.ClientKey())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("bob-1")) {
		t.Fatal("the store holds the token in clear")
	}
	if err := store.PutCredential(ctx, alice.ClientKey(), blob, credKeep); err != nil {
		t.Fatal(err)
	}
	a.byPrincipal[alice.ClientKey()].checked = a.byPrincipal[alice.ClientKey()].checked.Add(-2 * credLocal)
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

// testCreds is two replicas' credentials on one miniredis, on a test
// clock, and seen(c, p, token) notes a request of p with token on c.
func testCreds(t *testing.T) (mr *miniredis.Miniredis, a, b *Credentials, clock *time.Time, seen func(*Credentials, auth.Principal, string)) {
	mr = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := taskstore.New(rdb, taskstore.Options{})
	now := time.Now()
	clock = &now
	a, b = NewCredentials(store, zerolog.Nop()), NewCredentials(store, zerolog.Nop())
	a.Now, b.Now = func() time.Time { return *clock }, func() time.Time { return *clock }
	seen = func(c *Credentials, p auth.Principal, token string) {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Authorization", token)
		c.Note(r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}
	return mr, a, b, clock, seen
}

// TestCredentialsPerClient: a task started by one application of a user
// runs with that application's tokens only, never with the newer token
// of the user's other application (on this replica or through the store),
// and its first request carries its own token.
func TestCredentialsPerClient(t *testing.T) {
	_, a, b, clock, seen := testCreds(t)
	appX := auth.Principal{Issuer: "https://i", Subject: "alice", ClientID: "full-scope"}
	appY := auth.Principal{Issuer: "https://i", Subject: "alice", ClientID: "read-only"}
	seen(a, appY, "Bearer y-1")
	bound := a.Bind(&upstream.Session{Header: http.Header{"Authorization": {"Bearer y-1"}}})
	seen(a, appX, "Bearer x-1") // X polls while Y's call starts
	ctx := context.Background()
	if got := bound.Authorization(ctx); got != "" {
		t.Fatalf("first request: %q, want the call's own token", got)
	}
	if got := bound.Authorization(ctx); got != "Bearer y-1" {
		t.Fatalf("later request, X seen here: %q, want Y's token", got)
	}
	seen(b, appX, "Bearer x-2")
	*clock = clock.Add(2 * credLocal) // not seen here lately: the store is asked
	if got := bound.Authorization(ctx); got != "Bearer y-1" {
		t.Fatalf("later request, X seen on another replica: %q, want Y's token", got)
	}
	seen(b, appY, "Bearer y-2")
	*clock = clock.Add(2 * credLocal)
	if got := bound.Authorization(ctx); got != "Bearer y-2" {
		t.Fatalf("after Y refreshed on another replica: %q, want Y's newest", got)
	}
}

// TestCredentialsBounded: a client that keeps refreshing its token leaves
// one entry, not one per token; and after the store failed to take the
// newest token, this replica keeps it rather than the store's older one.
func TestCredentialsBounded(t *testing.T) {
	mr, a, _, clock, seen := testCreds(t)
	p := auth.Principal{Issuer: "https://i", Subject: "alice", ClientID: "app"}
	for i := range 50 {
		seen(a, p, fmt.Sprintf("Bearer t-%d", i))
		*clock = clock.Add(time.Second)
	}
	if len(a.byToken) != credPrevious+1 || len(a.byPrincipal) != 1 {
		t.Fatalf("after 50 refreshes: %d token digests, %d entries; want %d and 1", len(a.byToken), len(a.byPrincipal), credPrevious+1)
	}
	// A call retried with a recent older token is still bound to the
	// freshest one, from its first request on.
	retried := a.Bind(&upstream.Session{Header: http.Header{"Authorization": {"Bearer t-45"}}})
	if got := retried.Authorization(context.Background()); got != "Bearer t-49" {
		t.Fatalf("a call retried with an older token: %q, want the freshest", got)
	}
	bound := a.Bind(&upstream.Session{Header: http.Header{"Authorization": {"Bearer t-49"}}})
	mr.SetError("LOADING the store is down")
	seen(a, p, "Bearer t-50") // not stored
	mr.SetError("")
	*clock = clock.Add(2 * credLocal)
	if got := bound.Authorization(context.Background()); got != "Bearer t-50" {
		t.Fatalf("after a failed store write: %q, want this replica's newer token", got)
	}
}

// TestCredentialsKeyOf: the rerun of a durable task finds the principal's
// client by the call's token (gateway/durable.go), only for a token seen with a
// validated principal.
func TestCredentialsKeyOf(t *testing.T) {
	_, a, b, clock, seen := testCreds(t)
	app := auth.Principal{Issuer: "https://i", Subject: "alice", ClientID: "reports"}
	seen(a, app, "Bearer t-1")
	key := a.KeyOf("Bearer t-1")
	if key == "" || a.KeyOf("Bearer unknown") != "" {
		t.Fatalf("keyOf: %q", key)
	}
	seen(b, app, "Bearer t-2") // refreshed on another replica
	*clock = clock.Add(2 * credLocal)
	if got := a.Freshest(context.Background(), key); got != "Bearer t-2" {
		t.Errorf("freshest = %q", got)
	}
}
