package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/internal/authtest"
)

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

func TestGuardJWT(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	g := testGuard(t, ti, "mcp:tools")
	p, err := g.Authenticate(context.Background(), bearer(ti.Token(ti.Claims(testAudience))))
	if err != nil {
		t.Fatal(err)
	}
	if p != (Principal{Issuer: ti.URL, Subject: "alice", ClientID: "app"}) {
		t.Fatalf("principal %+v", p)
	}
	// A client-credentials token has no sub: the client is the principal.
	c := ti.Claims(testAudience)
	delete(c, "sub")
	if p, err := g.Authenticate(context.Background(), bearer(ti.Token(c))); err != nil || p.Subject != "" || p.ClientID != "app" {
		t.Fatalf("without sub: %+v %v", p, err)
	}
}

// TestGuardJWTBadInput is issue 26's list of bad tokens: each is refused
// with its precise error, and no message quotes the token.
func TestGuardJWTBadInput(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	rsaKey := authtest.NewKey(t, "r1", jose.RS256)
	ti.Rotate(rsaKey)
	ti.Rotate(authtest.NewKey(t, "k2", jose.ES256)) // signs; k1 and r1 stay published
	g := testGuard(t, ti, "mcp:tools")
	with := func(change func(map[string]any)) string {
		c := ti.Claims(testAudience)
		change(c)
		return ti.Token(c)
	}
	valid := ti.Token(ti.Claims(testAudience))
	parts := strings.Split(valid, ".")
	b64 := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	der, err := x509.MarshalPKIXPublicKey(rsaKey.Key.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := func(secret []byte) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithHeader("kid", "r1"))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.Sign([]byte(parts[1]))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := obj.CompactSerialize()
		return out
	}
	impostor := authtest.NewKey(t, "k2", jose.ES256) // same kid, another key
	for _, tc := range []struct {
		name, token string
		want        error
	}{
		{"malformed", "not-a-jwt", ErrInvalidToken},
		{"malformed three parts", "a.b.c", ErrInvalidToken},
		{"bad signature", parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2])), ErrInvalidToken},
		{"signed by another key with a known kid", authtest.Sign(t, impostor, ti.Claims(testAudience)), ErrInvalidToken},
		{"alg none", b64(map[string]string{"alg": "none", "kid": "k2"}) + "." + parts[1] + ".", ErrInvalidToken},
		{"HS256 signed with the public key (PEM)", hs(pubPEM), ErrInvalidToken},
		{"HS256 signed with the public key (DER)", hs(der), ErrInvalidToken},
		{"expired", with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), ErrInvalidToken},
		{"not yet valid", with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), ErrInvalidToken},
		{"no exp", with(func(c map[string]any) { delete(c, "exp") }), ErrInvalidToken},
		{"wrong audience", with(func(c map[string]any) { c["aud"] = "https://other.example/mcp" }), ErrInvalidToken},
		{"no audience", with(func(c map[string]any) { delete(c, "aud") }), ErrInvalidToken},
		{"wrong issuer", with(func(c map[string]any) { c["iss"] = "https://evil.example" }), ErrInvalidToken},
		{"unknown kid", authtest.Sign(t, authtest.NewKey(t, "nobody", jose.ES256), ti.Claims(testAudience)), ErrInvalidToken},
		{"no kid, no key fits", authtest.Sign(t, authtest.NewKey(t, "", jose.ES256), ti.Claims(testAudience)), ErrInvalidToken},
		{"neither sub nor client_id", with(func(c map[string]any) { delete(c, "sub"); delete(c, "client_id"); delete(c, "azp") }), ErrInvalidToken},
		{"missing scope", with(func(c map[string]any) { c["scope"] = "openid" }), ErrInsufficientScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.Authenticate(context.Background(), bearer(tc.token))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if len(tc.token) > 8 && strings.Contains(err.Error(), tc.token) {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
	var se *ScopeError
	if _, err := g.Authenticate(context.Background(), bearer(with(func(c map[string]any) { c["scope"] = "openid" }))); !errors.As(err, &se) || se.Missing[0] != "mcp:tools" {
		t.Fatalf("scope error %v", err)
	}
	// The leeway: a token that expired a moment ago still passes.
	if _, err := g.Authenticate(context.Background(), bearer(with(func(c map[string]any) { c["exp"] = time.Now().Add(-5 * time.Second).Unix() }))); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	// scp, as an array, grants scopes too.
	if _, err := g.Authenticate(context.Background(), bearer(with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp:tools"} }))); err != nil {
		t.Fatalf("scp: %v", err)
	}
}

// TestGuardKeyRotation: a token signed with a key the issuer published
// after the gateway fetched its keys (a new kid) verifies, with one more
// fetch; made-up kids cannot make it fetch more than the bucket allows.
func TestGuardKeyRotation(t *testing.T) {
	ti := authtest.NewIssuer(t, "/tenant", true) // OIDC discovery, an issuer with a path
	g := testGuard(t, ti)
	if _, err := g.Authenticate(context.Background(), bearer(ti.Token(ti.Claims(testAudience)))); err != nil {
		t.Fatal(err)
	}
	if n := ti.JWKS.Load(); n != 1 {
		t.Fatalf("%d key fetches, want 1", n)
	}
	ti.Rotate(authtest.NewKey(t, "k2", jose.RS256))
	if _, err := g.Authenticate(context.Background(), bearer(ti.Token(ti.Claims(testAudience)))); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if n := ti.JWKS.Load(); n != 2 {
		t.Fatalf("%d key fetches, want 2", n)
	}
	for i := range 20 {
		c := ti.Claims(testAudience)
		c["jti"] = i
		_, err := g.Authenticate(context.Background(), bearer(authtest.Sign(t, authtest.NewKey(t, "made-up", jose.ES256), c)))
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	if n := ti.JWKS.Load(); n > 2+keyRefreshBurst {
		t.Fatalf("%d key fetches for 20 made-up kids, want at most %d", n, 2+keyRefreshBurst)
	}
}

// TestGuardIssuerDown: without keys, a token gets ErrUnavailable with a
// Retry-After, never a pass; with keys cached, known kids still verify.
func TestGuardIssuerDown(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	ti.Down.Store(true)
	g := testGuard(t, ti)
	tok := ti.Token(ti.Claims(testAudience))
	_, err := g.Authenticate(context.Background(), bearer(tok))
	if !errors.Is(err, ErrUnavailable) || RetryAfter(err, 0) <= 0 {
		t.Fatalf("issuer down: %v (retry after %v)", err, RetryAfter(err, 0))
	}
	// Within the backoff, no new attempt: the same answer at once.
	if _, err := g.Authenticate(context.Background(), bearer(tok)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issuer down, again: %v", err)
	}

	ti2 := authtest.NewIssuer(t, "", false)
	g2 := testGuard(t, ti2)
	if _, err := g2.Authenticate(context.Background(), bearer(ti2.Token(ti2.Claims(testAudience)))); err != nil {
		t.Fatal(err)
	}
	ti2.Down.Store(true)
	c := ti2.Claims(testAudience)
	c["sub"] = "bob" // another token: not in the cache, but its key is
	if p, err := g2.Authenticate(context.Background(), bearer(ti2.Token(c))); err != nil || p.Subject != "bob" {
		t.Fatalf("cached keys with the issuer down: %+v %v", p, err)
	}
	// A new kid cannot be checked: 503, not 401 and not a pass.
	if _, err := g2.Authenticate(context.Background(), bearer(authtest.Sign(t, authtest.NewKey(t, "k9", jose.ES256), ti2.Claims(testAudience)))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("new kid with the issuer down: %v", err)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	g, err := New(Config{Issuer: ti.URL + "/other", Audience: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	// The metadata at the RFC 8414 location of .../other is not there;
	// nothing else names that issuer.
	if _, err := g.Authenticate(context.Background(), bearer(ti.Token(ti.Claims(testAudience)))); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
	if _, err := New(Config{Issuer: "ftp://x", Audience: []string{"x"}}); err == nil {
		t.Fatal("an ftp issuer was accepted")
	}
	if _, err := New(Config{Issuer: ti.URL}); err == nil {
		t.Fatal("JWTs without an audience were accepted")
	}
}

// TestGuardStaleKeys: keys older than keyMaxAge are fetched again on
// use; with the issuer down then, the old keys go on verifying.
func TestGuardStaleKeys(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	clk := &clock{t: time.Now()}
	g, err := New(Config{Issuer: ti.URL, Audience: []string{testAudience}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	token := func(sub string) string {
		c := ti.Claims(testAudience)
		c["sub"], c["exp"] = sub, clk.now().Add(5*time.Hour).Unix()
		return ti.Token(c)
	}
	for i, step := range []struct {
		advance time.Duration
		down    bool
		fetches int64
	}{{0, false, 1}, {30 * time.Minute, false, 1}, {31 * time.Minute, false, 2}, {keyMaxAge + time.Minute, true, 2}} {
		clk.add(step.advance)
		ti.Down.Store(step.down)
		if _, err := g.Authenticate(context.Background(), bearer(token(fmt.Sprint("user", i)))); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if n := ti.JWKS.Load(); n != step.fetches {
			t.Fatalf("step %d: %d key fetches, want %d", i, n, step.fetches)
		}
	}
}

// TestGuardClientLeavesDuringFetch: the client whose token started the
// key fetch leaving does not end the fetch the others wait for, nor make
// the issuer look down.
func TestGuardClientLeavesDuringFetch(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	ti.Gate = make(chan struct{})
	g := testGuard(t, ti)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := g.Authenticate(ctx, bearer(ti.Token(ti.Claims(testAudience))))
		first <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ti.JWKS.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the key set was never asked for")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(ti.Gate)
	if err := <-first; err != nil {
		t.Fatalf("the fetch ended with its client: %v", err)
	}
	c := ti.Claims(testAudience)
	c["sub"] = "bob"
	if _, err := g.Authenticate(context.Background(), bearer(ti.Token(c))); err != nil {
		t.Fatalf("after the client left: %v", err)
	}
}

// TestGuardKnownKidOtherAlg: a token naming a known kid with another
// algorithm is refused at once, without fetching the keys again.
func TestGuardKnownKidOtherAlg(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	g := testGuard(t, ti)
	if _, err := g.Authenticate(context.Background(), bearer(ti.Token(ti.Claims(testAudience)))); err != nil {
		t.Fatal(err)
	}
	other := authtest.NewKey(t, "k1", jose.RS256) // k1 is the issuer's ES256 key
	for range 10 {
		if _, err := g.Authenticate(context.Background(), bearer(authtest.Sign(t, other, ti.Claims(testAudience)))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("got %v", err)
		}
	}
	if n := ti.JWKS.Load(); n != 1 {
		t.Fatalf("%d key fetches, want 1", n)
	}
}

// TestMadeUpKidsDoNotBlockRotation: one client's flood of made-up kids
// uses up its own address's refreshes only. Right after it, the issuer
// rotates its key, and another client's token signed with the new key
// still verifies (the old shared bucket refused it for 30 s as "fetched
// again too often"); the flood made at most keyRefreshBurst fetches.
func TestMadeUpKidsDoNotBlockRotation(t *testing.T) {
	ti := authtest.NewIssuer(t, "", false)
	g := testGuard(t, ti)
	mallory := WithClientAddr(context.Background(), "198.51.100.7")
	alice := WithClientAddr(context.Background(), "203.0.113.9")
	if _, err := g.Authenticate(alice, bearer(ti.Token(ti.Claims(testAudience)))); err != nil {
		t.Fatal(err)
	}
	before := ti.JWKS.Load()
	for i := range 12 {
		c := ti.Claims(testAudience)
		c["jti"] = i
		if _, err := g.Authenticate(mallory, bearer(authtest.Sign(t, authtest.NewKey(t, fmt.Sprint("made-up-", i), jose.ES256), c))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	if n := ti.JWKS.Load() - before; n > keyRefreshBurst {
		t.Fatalf("%d key fetches for 12 made-up kids, want at most %d", n, keyRefreshBurst)
	}
	ti.Rotate(authtest.NewKey(t, "k2", jose.RS256))
	if _, err := g.Authenticate(alice, bearer(ti.Token(ti.Claims(testAudience)))); err != nil {
		t.Fatalf("alice's token with the rotated key after mallory's flood: %v", err)
	}
}
