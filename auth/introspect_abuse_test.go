package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/internal/authtest"
)

// rawIntrospection is an introspection endpoint that answers "good" as
// active and every other token as answer says (status and body), as the
// authorization servers met in the wild do. It counts the calls per
// token.
type rawIntrospection struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  map[string]int
	status int
	body   string
	hold   chan struct{} // when set, an unknown token's answer waits for it
}

func newRawIntrospection(t *testing.T, status int, body string) *rawIntrospection {
	ri := &rawIntrospection{calls: map[string]int{}, status: status, body: body}
	ri.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.PostFormValue("token")
		ri.mu.Lock()
		ri.calls[tok]++
		status, body, hold := ri.status, ri.body, ri.hold
		ri.mu.Unlock()
		if tok == "good" {
			fmt.Fprint(w, `{"active":true,"client_id":"app","scope":"mcp"}`)
			return
		}
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(ri.srv.Close)
	return ri
}

func (ri *rawIntrospection) count(tok string) int {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	return ri.calls[tok]
}

func rawGuard(t *testing.T, ri *rawIntrospection, mod func(*Config)) *Guard {
	t.Helper()
	cfg := Config{IntrospectionURL: ri.srv.URL}
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestIntrospectionInactiveWhateverStatus: an answer with active:false is
// an inactive token whatever its HTTP status (the TypeScript SDK's demo
// server answers 401 {"active":false,...}): 401 invalid_token for that
// client, and a valid token right after still passes. It used to be read
// as the server being down: 503, and valid tokens refused for 2 s.
func TestIntrospectionInactiveWhateverStatus(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden} {
		ri := newRawIntrospection(t, status, `{"active":false,"error":"Unauthorized","error_description":"Invalid token"}`)
		g := rawGuard(t, ri, nil)
		if _, err := g.Check(context.Background(), "forged"); !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("HTTP %d active:false: %v, want ErrInvalidToken", status, err)
		}
		if _, err := g.Check(context.Background(), "good"); err != nil {
			t.Fatalf("HTTP %d active:false, then a valid token: %v", status, err)
		}
	}
}

// TestIntrospectionRefusalNotDown: a 4xx without "active" (or a 200 that
// is no introspection answer) is the gateway's request refused: 503 for
// that request, and the server is not marked down for other tokens.
func TestIntrospectionRefusalNotDown(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{{400, `{"error":"invalid_request"}`}, {401, `{"error":"invalid_client"}`}, {404, `not found`},
		{200, `<html>login</html>`}, {200, `{"sub":"x"}`}, {401, `{"active":true,"sub":"x"}`}} {
		ri := newRawIntrospection(t, tc.status, tc.body)
		g := rawGuard(t, ri, nil)
		_, err := g.Check(context.Background(), "odd")
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%d %s: %v, want ErrUnavailable", tc.status, tc.body, err)
		}
		if _, err := g.Check(context.Background(), "good"); err != nil {
			t.Fatalf("%d %s, then a valid token: %v", tc.status, tc.body, err)
		}
		// Not remembered: the same token is asked again.
		_, _ = g.Check(context.Background(), "odd")
		if n := ri.count("odd"); n != 2 {
			t.Fatalf("%d %s: %d calls for two checks", tc.status, tc.body, n)
		}
	}
}

// TestIntrospectionDown: a 5xx or a timeout is the server down: tokens
// not cached get 503 without another call for introspectFailBackoff,
// while a cached one still passes.
func TestIntrospectionDown(t *testing.T) {
	for _, name := range []string{"500", "timeout"} {
		ri := newRawIntrospection(t, http.StatusInternalServerError, `{"error":"server_error"}`)
		clk := &clock{t: time.Now()}
		g := rawGuard(t, ri, func(c *Config) {
			c.Now = clk.now
			c.HTTPClient = &http.Client{Timeout: 50 * time.Millisecond}
		})
		if _, err := g.Check(context.Background(), "good"); err != nil {
			t.Fatal(err)
		}
		if name == "timeout" {
			ri.hold = make(chan struct{})
			t.Cleanup(func() { close(ri.hold) })
		}
		if _, err := g.Check(context.Background(), "a"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := g.Check(context.Background(), "b"); !errors.Is(err, ErrUnavailable) || ri.count("b") != 0 {
			t.Fatalf("%s: within the backoff: %v, %d calls", name, err, ri.count("b"))
		}
		if _, err := g.Check(context.Background(), "good"); err != nil {
			t.Fatalf("%s: a cached token while down: %v", name, err)
		}
		clk.add(introspectFailBackoff)
		_, _ = g.Check(context.Background(), "b")
		if ri.count("b") != 1 {
			t.Fatalf("%s: after the backoff the server is not asked again", name)
		}
	}
}

// TestIntrospectionFloodOneBadToken: a flood of one bad token, in a row
// and at once, costs the server one call (the refusal is remembered by
// the token's digest, and concurrent checks share the call); a valid
// token passes right after.
func TestIntrospectionFloodOneBadToken(t *testing.T) {
	ri := newRawIntrospection(t, http.StatusUnauthorized, `{"active":false}`)
	ri.hold = make(chan struct{})
	g := rawGuard(t, ri, nil)
	var wg sync.WaitGroup
	var invalid atomic.Int64
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Check(context.Background(), "bad"); errors.Is(err, ErrInvalidToken) {
				invalid.Add(1)
			}
		}()
	}
	for ri.count("bad") == 0 { // the first call reached the server; the others wait for it
		time.Sleep(time.Millisecond)
	}
	close(ri.hold)
	wg.Wait()
	for range 200 {
		if _, err := g.Check(context.Background(), "bad"); !errors.Is(err, ErrInvalidToken) {
			t.Fatal(err)
		}
	}
	if n := ri.count("bad"); n != 1 || invalid.Load() != 50 {
		t.Fatalf("%d calls for 250 checks of one token; %d of 50 concurrent got invalid_token", n, invalid.Load())
	}
	if _, err := g.Check(context.Background(), "good"); err != nil {
		t.Fatalf("a valid token after the flood: %v", err)
	}
	// Remembered for inactiveTTL only, by digest.
	in := g.v.(*introspector)
	if _, ok := in.inactive.entries[digestOf("bad")]; !ok || len(in.inactive.entries) != 1 {
		t.Fatalf("the refusal is not kept by its digest: %d entries", len(in.inactive.entries))
	}
	if _, ok := in.inactive.get(digestOf("bad"), time.Now().Add(inactiveTTL)); ok {
		t.Fatal("a refusal served past inactiveTTL")
	}
}

// TestInactiveCacheBound: the cache of refusals keeps at most
// inactiveEntries, expired ones going first.
func TestInactiveCacheBound(t *testing.T) {
	c := newInactiveCache()
	now := time.Now()
	c.put(digestOf("old"), ErrInvalidToken, now.Add(-inactiveTTL))
	for i := range 2 * inactiveEntries {
		c.put(digestOf(fmt.Sprint(i)), ErrInvalidToken, now)
		if len(c.entries) > inactiveEntries {
			t.Fatalf("after %d puts: %d entries", i, len(c.entries))
		}
	}
	if _, ok := c.entries[digestOf("old")]; ok {
		t.Fatal("an expired refusal outlived live ones")
	}
	if _, ok := c.get(digestOf(fmt.Sprint(2*inactiveEntries-1)), now); !ok {
		t.Fatal("the newest refusal is not kept")
	}
}

// TestIntrospectionPerAddressLimit: one address sending made-up tokens
// gets ErrRateLimited past its burst, with the time its next call is
// allowed; another address is not affected, nor is a token already
// cached; an IPv6 client's whole /64 is one address.
func TestIntrospectionPerAddressLimit(t *testing.T) {
	ri := newRawIntrospection(t, http.StatusOK, `{"active":false}`)
	clk := &clock{t: time.Now()}
	g := rawGuard(t, ri, func(c *Config) { c.Now = clk.now; c.IntrospectionRate = 2 })
	burst := 2 * introspectBurstSeconds
	if _, err := g.Check(context.Background(), "good"); err != nil { // no address: not limited
		t.Fatal(err)
	}
	for _, addrs := range [][2]string{{"192.0.2.1", "192.0.2.2"}, {"2001:db8::1", "2001:db8:0:1::1"}} {
		mallory := WithClientAddr(context.Background(), addrs[0])
		for i := range burst {
			if _, err := g.Check(mallory, fmt.Sprint(addrs[0], i)); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("token %d of the burst: %v", i, err)
			}
		}
		_, err := g.Check(mallory, "one-too-many")
		var rl *RateLimitError
		if !errors.As(err, &rl) || !errors.Is(err, ErrRateLimited) || RetryAfter(err, 0) != 500*time.Millisecond || ri.count("one-too-many") != 0 {
			t.Fatalf("past the burst: %v", err)
		}
		if _, err := g.Check(mallory, "good"); err != nil {
			t.Fatalf("a cached token of the limited address: %v", err)
		}
		if _, err := g.Check(WithClientAddr(context.Background(), addrs[1]), "fresh"); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("another address: %v", err)
		}
		clk.add(time.Second)
		if _, err := g.Check(mallory, "later"); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a second later: %v", err)
		}
	}
	// The same /64: one bucket.
	if limitKey(WithClientAddr(context.Background(), "2001:db8::1")) != limitKey(WithClientAddr(context.Background(), "2001:db8::ffff:1")) {
		t.Fatal("two addresses of one /64 have two buckets")
	}
}

// TestAddrLimiterBound: the limiter remembers at most limitAddrs
// addresses.
func TestAddrLimiterBound(t *testing.T) {
	l := newAddrLimiter(1)
	now := time.Now()
	for i := range 3 * limitAddrs {
		l.take(fmt.Sprint("10.0.", i/256, ".", i%256), now)
		if len(l.buckets) > limitAddrs {
			t.Fatalf("after %d addresses: %d buckets", i, len(l.buckets))
		}
	}
}

// TestJWTForgedTokensDoNotDisturb: forged JWTs (garbage, alg none, made-up
// kids, a wrong signature on the issuer's kid) are each invalid_token,
// never "unavailable", and a valid token checked after them all passes.
func TestJWTForgedTokensDoNotDisturb(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	g := testGuard(t, ti)
	if _, err := g.Check(context.Background(), ti.Token(ti.Claims(testAudience))); err != nil {
		t.Fatal(err)
	}
	stranger := authtest.NewKey(t, "k1", jose.ES256) // the issuer's kid, another key
	forged := []string{"garbage", "a.b.c", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."}
	for i := range 50 {
		forged = append(forged, authtest.Sign(t, authtest.NewKey(t, fmt.Sprint("made-up-", i), jose.ES256), ti.Claims(testAudience)))
	}
	forged = append(forged, authtest.Sign(t, stranger, ti.Claims(testAudience)))
	for _, tok := range forged {
		if _, err := g.Check(context.Background(), tok); !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("forged token: %v", err)
		}
	}
	c := ti.Claims(testAudience)
	c["sub"] = "bob" // a token not cached
	if _, err := g.Check(context.Background(), ti.Token(c)); err != nil {
		t.Fatalf("a valid token after the forged ones: %v", err)
	}
	if n := ti.JWKS.Load(); n > 1+keyRefreshBurst {
		t.Fatalf("%d key set fetches", n)
	}
}
