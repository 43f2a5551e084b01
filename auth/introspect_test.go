package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testIntrospection is an RFC 7662 endpoint for tests: it knows some
// tokens, requires the gateway's client credentials, and may go down.
type testIntrospection struct {
	srv   *httptest.Server
	calls atomic.Int64
	down  atomic.Bool
	mu    sync.Mutex
	known map[string]map[string]any
}

func newTestIntrospection(t *testing.T) *testIntrospection {
	ti := &testIntrospection{known: map[string]map[string]any{}}
	ti.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti.calls.Add(1)
		if ti.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		// RFC 6749 §2.3.1: the id and secret are form-encoded, then Basic.
		id, secret, ok := r.BasicAuth()
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if !ok || id != "gw" || secret != "s3cr%t" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.ParseForm() != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		ti.mu.Lock()
		a, ok := ti.known[r.PostForm.Get("token")]
		ti.mu.Unlock()
		if !ok {
			a = map[string]any{"active": false}
		}
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(ti.srv.Close)
	return ti
}

func (ti *testIntrospection) add(token string, answer map[string]any) {
	ti.mu.Lock()
	ti.known[token] = answer
	ti.mu.Unlock()
}

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestGuardIntrospection(t *testing.T) {
	ti := newTestIntrospection(t)
	clk := &clock{t: time.Now()}
	g, err := New(Config{IntrospectionURL: ti.srv.URL, ClientID: "gw", ClientSecret: "s3cr%t",
		Audience: []string{testAudience}, RequiredScopes: []string{"mcp"}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp := clk.now().Add(90 * time.Second).Unix()
	ti.add("opaque-1", map[string]any{"active": true, "sub": "alice", "client_id": "app", "scope": "mcp",
		"iss": "https://as.example", "aud": testAudience, "exp": exp})
	ti.add("no-sub", map[string]any{"active": true, "client_id": "svc", "scope": "mcp"})
	ti.add("other-aud", map[string]any{"active": true, "sub": "alice", "scope": "mcp", "aud": []string{"https://other/mcp"}})
	ti.add("no-scope", map[string]any{"active": true, "sub": "alice"})
	ti.add("nobody", map[string]any{"active": true, "scope": "mcp"})
	ti.add("nobody-2", map[string]any{"active": true, "scope": "mcp", "iss": "https://as.example"})
	ti.add("expired", map[string]any{"active": true, "sub": "alice", "scope": "mcp", "exp": clk.now().Add(-time.Minute).Unix()})

	p, err := g.Authenticate(ctx, bearer("opaque-1"))
	if err != nil || p != (Principal{Issuer: "https://as.example", Subject: "alice", ClientID: "app"}) {
		t.Fatalf("%+v %v", p, err)
	}
	// Without iss, the endpoint's URL is the issuer of the principal.
	if p, err := g.Authenticate(ctx, bearer("no-sub")); err != nil || p != (Principal{Issuer: ti.srv.URL, ClientID: "svc"}) {
		t.Fatalf("%+v %v", p, err)
	}
	for tok, want := range map[string]error{"unknown": ErrInvalidToken, "other-aud": ErrInvalidToken,
		"no-scope": ErrInsufficientScope, "expired": ErrInvalidToken, "nobody": ErrInvalidToken, "nobody-2": ErrInvalidToken} {
		if _, err := g.Authenticate(ctx, bearer(tok)); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", tok, err, want)
		}
	}

	// Cached: no second call within a minute, even with the endpoint down.
	calls := ti.calls.Load()
	ti.down.Store(true)
	clk.add(50 * time.Second)
	if _, err := g.Authenticate(ctx, bearer("opaque-1")); err != nil {
		t.Fatalf("cached answer: %v", err)
	}
	if ti.calls.Load() != calls {
		t.Fatal("a cached token was introspected again")
	}
	// Past 60 s the answer is asked again: the endpoint is down, so 503.
	clk.add(15 * time.Second)
	_, err = g.Authenticate(ctx, bearer("opaque-1"))
	if !errors.Is(err, ErrUnavailable) || RetryAfter(err, 0) != introspectFailBackoff {
		t.Fatalf("down, not cached: %v", err)
	}
	// Within the backoff the endpoint is not called again.
	calls = ti.calls.Load()
	if _, err := g.Authenticate(ctx, bearer("no-sub")); !errors.Is(err, ErrUnavailable) || ti.calls.Load() != calls {
		t.Fatalf("within the backoff: %v, %d calls", err, ti.calls.Load()-calls)
	}

	// Never past exp: an answer with exp in 10 s is cached for 10 s only.
	ti.down.Store(false)
	clk.add(introspectFailBackoff)
	ti.add("short", map[string]any{"active": true, "sub": "bob", "scope": "mcp", "exp": clk.now().Add(10 * time.Second).Unix()})
	if _, err := g.Authenticate(ctx, bearer("short")); err != nil {
		t.Fatal(err)
	}
	ti.add("short", map[string]any{"active": false}) // revoked meanwhile
	clk.add(11 * time.Second)
	if _, err := g.Authenticate(ctx, bearer("short")); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("served past exp: %v", err)
	}
}

func TestIntrospectionClientAuth(t *testing.T) {
	ti := newTestIntrospection(t)
	ti.add("tok", map[string]any{"active": true, "sub": "a"})
	g, err := New(Config{IntrospectionURL: ti.srv.URL, ClientID: "gw", ClientSecret: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	// The endpoint refuses the gateway: the token cannot be checked.
	if _, err := g.Authenticate(context.Background(), bearer("tok")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
}
