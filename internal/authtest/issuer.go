// Package authtest is an OAuth authorization server for tests: RFC 8414
// (or OpenID Connect) metadata and a JSON Web Key Set of real generated
// keys, which a test signs access tokens with, rotates, or takes down.
package authtest

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

// Issuer is a running test authorization server.
type Issuer struct {
	URL  string // the issuer identifier
	Srv  *httptest.Server
	JWKS atomic.Int64 // key set fetches so far
	Down atomic.Bool  // when set, every request gets 503
	// Gate, when set before the first request, holds each key set
	// request (counted in JWKS first) until it is closed.
	Gate chan struct{}
	t    testing.TB
	path string
	oidc bool
	mu   sync.Mutex
	sign Key   // signs tokens
	keys []Key // published
}

// Key is a signing key with its kid and algorithm.
type Key struct {
	KID string
	Alg jose.SignatureAlgorithm
	Key crypto.Signer
}

// NewKey generates a key for alg (RSA 2048 for RS*/PS*, else P-256).
func NewKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) Key {
	t.Helper()
	var k crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: alg, Key: k}
}

// NewIssuer starts an issuer at path ("" or "/tenant") that signs with an
// ES256 key "k1" and serves RFC 8414 metadata, or OpenID Connect
// discovery when oidc is set. It stops with the test.
func NewIssuer(t testing.TB, path string, oidc bool) *Issuer {
	i := &Issuer{t: t, path: path, oidc: oidc}
	k := NewKey(t, "k1", jose.ES256)
	i.sign, i.keys = k, []Key{k}
	i.Srv = httptest.NewServer(http.HandlerFunc(i.serve))
	t.Cleanup(i.Srv.Close)
	i.URL = i.Srv.URL + path
	return i
}

func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if i.Down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	meta := "/.well-known/oauth-authorization-server" + i.path
	if i.oidc {
		meta = i.path + "/.well-known/openid-configuration"
	}
	switch r.URL.Path {
	case meta:
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": i.URL, "jwks_uri": i.Srv.URL + "/jwks"})
	case "/jwks":
		i.JWKS.Add(1)
		if i.Gate != nil {
			<-i.Gate
		}
		i.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range i.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Key.Public(), KeyID: k.KID, Algorithm: string(k.Alg), Use: "sig"})
		}
		i.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// Rotate publishes k (first) and signs with it from now on; the older
// keys stay published.
func (i *Issuer) Rotate(k Key) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.sign = k
	i.keys = append([]Key{k}, i.keys...)
}

// Claims are those of an hour-long access token of user "alice" through
// client "app" for audience, with scopes "mcp:tools openid".
func (i *Issuer) Claims(audience string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.URL, "sub": "alice", "aud": audience, "client_id": "app",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "mcp:tools openid",
	}
}

// Token signs claims with the issuer's current key.
func (i *Issuer) Token(claims map[string]any) string {
	i.mu.Lock()
	k := i.sign
	i.mu.Unlock()
	return Sign(i.t, k, claims)
}

// Sign makes a JWT access token (typ at+jwt, RFC 9068 §2.1) of claims
// signed with k (with its kid, when it has one).
func Sign(t testing.TB, k Key, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if k.KID != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), k.KID)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: k.Key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
