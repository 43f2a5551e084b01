package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/upstream"
)

// The well-known paths of OAuth discovery, as clients ask for them
// (identity's wellKnownResource, wellKnownServer, wellKnownOIDC).
const (
	wellKnownResource = "/.well-known/oauth-protected-resource"
	wellKnownServer   = "/.well-known/oauth-authorization-server"
	wellKnownOIDC     = "/.well-known/openid-configuration"
)

func metaGateway(t *testing.T, upURL string, mod func(*Config)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(metaHandler(t, upURL, upstream.Options{}, mod))
	t.Cleanup(srv.Close)
	return srv
}

// metaHandler is a gateway in front of upURL, reached with opts.
func metaHandler(t testing.TB, upURL string, opts upstream.Options, mod func(*Config)) *Handler {
	t.Helper()
	client, err := upstream.New(upURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Upstream: client}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func getDoc(t *testing.T, url string) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc, resp.Header
}

// TestDiscoveryOwnAuthorizationServer: in front of an upstream that is its
// own authorization server, everything the client finds names the
// gateway's origin, and the endpoints the metadata names (only those)
// pass through; the documents are cached.
func TestDiscoveryOwnAuthorizationServer(t *testing.T) {
	own := gwtest.NewOwnServer(t)
	gw := metaGateway(t, own.Srv.URL+"/mcp", nil)

	// The challenge points at the gateway's metadata; a parameter named
	// inside another's quoted value is left alone.
	resp := gwtest.Post(t, gw.URL+"/mcp", "application/json", toolsList, nil)
	resp.Body.Close()
	want := `Bearer error="invalid_token", error_description="say resource_metadata=\"x\"", resource_metadata="` + gw.URL + `/.well-known/oauth-protected-resource/mcp"`
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || got != want {
		t.Fatalf("%d %q, want %q", resp.StatusCode, got, want)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		status, doc, hdr := getDoc(t, gw.URL+path)
		if status != 200 || doc["resource"] != gw.URL+"/mcp" || hdr.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("%s: %d %v", path, status, doc)
		}
		if as := doc["authorization_servers"].([]any); len(as) != 1 || as[0] != gw.URL {
			t.Fatalf("%s: authorization_servers %v, want the gateway's origin", path, as)
		}
	}
	status, doc, _ := getDoc(t, gw.URL+"/.well-known/oauth-authorization-server")
	if status != 200 || doc["issuer"] != gw.URL || doc["token_endpoint"] != gw.URL+"/oauth/token" ||
		doc["authorization_endpoint"] != gw.URL+"/authorize" || doc["jwks_uri"] != "https://keys.example/jwks" {
		t.Fatalf("authorization server metadata: %d %v", status, doc)
	}
	if n := own.Fetches.Load(); n != 2 {
		t.Errorf("%d upstream fetches for 3 documents served from 2, want them cached", n)
	}
	// The endpoints pass through: a redirect on the upstream's origin
	// moves to the gateway's, a body arrives.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := noFollow.Get(gw.URL + "/authorize?client_id=c&state=s")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if loc := r.Header.Get("Location"); r.StatusCode != http.StatusFound || loc != gw.URL+"/login?client_id=c&state=s" {
		t.Fatalf("authorize: %d Location %q", r.StatusCode, loc)
	}
	r = gwtest.Post(t, gw.URL+"/oauth/token", "application/x-www-form-urlencoded", "grant_type=authorization_code&code=x", nil)
	r.Body.Close()
	if r.StatusCode != 200 || own.Got.Load() != "grant_type=authorization_code&code=x" {
		t.Fatalf("token: %d, the upstream got %v", r.StatusCode, own.Got.Load())
	}
	// What the metadata does not name stays the gateway's: 404.
	for _, path := range []string{"/secret", "/login", "/.well-known/oauth-protected-resource/other",
		"/.well-known/oauth-authorization-server/../../secret", "/.well-known/openid-configuration/..%2f..%2fsecret"} {
		if status, _, _ := getDoc(t, gw.URL+path); status != 404 {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
	if r := gwtest.Post(t, gw.URL+"/.well-known/oauth-authorization-server", "application/json", "{}", nil); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to metadata: %d", r.StatusCode)
	}
}

// TestDiscoveryDefaultEndpoints: an upstream without authorization server
// metadata has the 2025-03-26 default endpoints on its origin; they pass
// through, nothing else does.
func TestDiscoveryDefaultEndpoints(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/authorize", "/token", "/register", "/other":
			got.Add(1)
			w.Write([]byte(r.URL.Path))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(up.Close)
	gw := metaGateway(t, up.URL+"/mcp", nil)
	for _, path := range []string{"/authorize", "/token", "/register"} {
		resp := gwtest.Post(t, gw.URL+path, "application/x-www-form-urlencoded", "x=1", nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != path {
			t.Errorf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	if status, _, _ := getDoc(t, gw.URL+"/other"); status != 404 || got.Load() != 3 {
		t.Errorf("/other: %d, the upstream got %d requests, want 3", status, got.Load())
	}
}

// TestDiscoveryBehindProxy: behind a trusted proxy the challenge of the
// MCP endpoint, and the metadata, name the origin the proxy says the
// client reached, though the front door drops the forwarding headers
// before the request goes upstream.
func TestDiscoveryBehindProxy(t *testing.T) {
	own := gwtest.NewOwnServer(t)
	gw := metaGateway(t, own.Srv.URL+"/mcp", func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	fwd := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"mcp.example.com"}}
	resp := gwtest.Post(t, gw.URL+"/mcp", "application/json", toolsList, fwd)
	resp.Body.Close()
	want := `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(got, want) {
		t.Fatalf("%d %q, want %s", resp.StatusCode, got, want)
	}
	req, _ := http.NewRequest("GET", gw.URL+"/.well-known/oauth-protected-resource/mcp", nil)
	req.Header = fwd
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(r.Body).Decode(&doc)
	if doc["resource"] != "https://mcp.example.com/mcp" || doc["authorization_servers"].([]any)[0] != "https://mcp.example.com" {
		t.Fatalf("metadata behind the proxy: %v", doc)
	}
}

// TestDiscoveryWithValidation: with its own validation the gateway is the
// resource server: its metadata names the issuer and scopes, nothing of
// the upstream's passes through.
func TestDiscoveryWithValidation(t *testing.T) {
	own := gwtest.NewOwnServer(t)
	gw := metaGateway(t, own.Srv.URL+"/mcp", func(c *Config) {
		c.Auth = fixedMeta{}
		c.PublicURL = "https://mcp.example.com/mcp"
	})
	status, doc, _ := getDoc(t, gw.URL+"/.well-known/oauth-protected-resource/mcp")
	if status != 200 || doc["resource"] != "https://mcp.example.com/mcp" || doc["authorization_servers"].([]any)[0] != "https://issuer.example" ||
		doc["scopes_supported"].([]any)[0] != "mcp:tools" {
		t.Fatalf("%d %v", status, doc)
	}
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/oauth/token"} {
		if status, _, _ := getDoc(t, gw.URL+path); status != 404 {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
	if n := own.Fetches.Load(); n != 0 {
		t.Errorf("%d upstream fetches", n)
	}
}

// fixedMeta is an Authenticator whose metadata is fixed and that accepts
// nobody (the discovery tests send no MCP request through it).
type fixedMeta struct{}

func (fixedMeta) Authenticate(context.Context, http.Header) (auth.Principal, error) {
	return auth.Principal{}, auth.ErrInvalidToken
}

func (fixedMeta) Metadata() auth.Metadata {
	return auth.Metadata{AuthorizationServers: []string{"https://issuer.example"}, ScopesSupported: []string{"mcp:tools"}}
}
