package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an authorization server for tests: RFC 8414 metadata and
// a JWKS of real generated keys, which a test may rotate or take down.
type testIssuer struct {
	t      testing.TB
	srv    *httptest.Server
	url    string
	path   string // the issuer's path ("" or "/tenant")
	oidc   bool   // serve OIDC discovery rather than RFC 8414
	jwks   atomic.Int64
	down   atomic.Bool
	mu     sync.Mutex
	signer signingKey   // signs tokens
	public []signingKey // published
}

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) signingKey {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.PS256:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: alg, key: k}
}

func newTestIssuer(t testing.TB, path string, oidc bool) *testIssuer {
	ti := &testIssuer{t: t, path: path, oidc: oidc}
	k := newKey(t, "k1", jose.ES256)
	ti.signer, ti.public = k, []signingKey{k}
	ti.srv = httptest.NewServer(http.HandlerFunc(ti.serve))
	t.Cleanup(ti.srv.Close)
	ti.url = ti.srv.URL + path
	return ti
}

func (ti *testIssuer) serve(w http.ResponseWriter, r *http.Request) {
	if ti.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	meta := "/.well-known/oauth-authorization-server" + ti.path
	if ti.oidc {
		meta = ti.path + "/.well-known/openid-configuration"
	}
	switch r.URL.Path {
	case meta:
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": ti.url, "jwks_uri": ti.srv.URL + "/jwks"})
	case "/jwks":
		ti.jwks.Add(1)
		ti.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range ti.public {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		ti.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// rotate publishes a new key (before the old ones) and signs with it.
func (ti *testIssuer) rotate(k signingKey) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.signer = k
	ti.public = append([]signingKey{k}, ti.public...)
}

// claims of a token the issuer would sign for the audience "https://gw.example/mcp".
func (ti *testIssuer) claims() map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": ti.url, "sub": "alice", "aud": "https://gw.example/mcp", "client_id": "app",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "mcp:tools openid",
	}
}

func (ti *testIssuer) token(claims map[string]any) string {
	ti.mu.Lock()
	k := ti.signer
	ti.mu.Unlock()
	return sign(ti.t, k, claims)
}

func sign(t testing.TB, k signingKey, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if k.kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), k.kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// guard is a Guard for ti's tokens for "https://gw.example/mcp".
func (ti *testIssuer) guard(t *testing.T, scopes ...string) *Guard {
	t.Helper()
	g, err := New(Config{Issuer: ti.url, Audience: []string{"https://gw.example/mcp"}, RequiredScopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
