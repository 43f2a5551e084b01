package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/taskgate/taskgate/auth"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/upstream"
)

// recordingOrigin is an upstream that answers every path with a JSON
// document and records what it got; its protected resource metadata
// names an authorization server at /tenant on its own origin.
type recordingOrigin struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
}

func newRecordingOrigin(t *testing.T) *recordingOrigin {
	o := &recordingOrigin{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.got = append(o.got, &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone()})
		o.mu.Unlock()
		base := "http://" + r.Host
		switch r.URL.Path {
		case wellKnownResource + "/mcp":
			gwtest.WriteJSON(w, map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base + "/tenant"}})
		case "/mcp":
			http.Error(w, "{}", http.StatusUnauthorized)
		default:
			gwtest.WriteJSON(w, map[string]any{"issuer": base + "/tenant", "secret": "the operator's view of " + r.URL.Path})
		}
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *recordingOrigin) paths() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, r := range o.got {
		out = append(out, r.URL.Path)
	}
	return out
}

// TestDiscoveryOnlyDefinedDocuments: the pass-through serves only the
// documents RFC 9728, RFC 8414 and OpenID Connect Discovery define, at
// the places they define: any other path ending in
// /.well-known/openid-configuration never reaches the upstream (it used
// to, with the operator's --upstream-header, its answer handed to an
// anonymous client). The appended OpenID Connect form passes for the
// issuer the upstream's metadata names. Nothing of --upstream-header
// goes with any discovery request or endpoint.
func TestDiscoveryOnlyDefinedDocuments(t *testing.T) {
	up := newRecordingOrigin(t)
	gw := httptest.NewServer(metaHandler(t, up.srv.URL+"/mcp", upstream.Options{Header: http.Header{
		"Authorization": {"Bearer operator"}, "X-Api-Key": {"k"}}}, nil))
	t.Cleanup(gw.Close)
	for _, p := range []string{"/internal/admin/.well-known/openid-configuration", "/admin/.well-known/openid-configuration",
		"/tenant/x/.well-known/openid-configuration", "/.well-known/openid-configuration2", "/.well-known/other",
		"/x/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/admin"} {
		if status, _, _ := getDoc(t, gw.URL+p); status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, status)
		}
		for _, got := range up.paths() {
			if got == p || strings.HasPrefix(got, "/internal") || strings.HasPrefix(got, "/admin") {
				t.Fatalf("%s reached the upstream as %s", p, got)
			}
		}
	}
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
		"/.well-known/oauth-authorization-server/tenant", "/.well-known/openid-configuration/tenant",
		"/tenant/.well-known/openid-configuration"} {
		if status, doc, _ := getDoc(t, gw.URL+p); status != http.StatusOK || doc["issuer"] != gw.URL+"/tenant" {
			t.Errorf("%s: %d %v", p, status, doc)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, got := range up.got {
		if got.Header.Get("X-Api-Key") != "" || got.Header.Get("Authorization") != "" {
			t.Errorf("%s reached the upstream with the operator's credentials: %v", got.URL.Path, got.Header)
		}
	}
}

// noIssuer is a token check without an issuer (introspection alone): its
// metadata names no authorization server.
type noIssuer struct{ scopes []string }

func (noIssuer) Authenticate(context.Context, http.Header) (auth.Principal, error) {
	return auth.Principal{}, auth.ErrInvalidToken
}

func (n noIssuer) Metadata() auth.Metadata { return auth.Metadata{ScopesSupported: n.scopes} }

// TestDiscoveryIntrospectionOnly: validating with introspection and no
// issuer, the gateway's metadata names the upstream's authorization
// servers (moved to the gateway's origin when on the upstream's) and its
// scopes unless the gateway requires its own; an upstream that is its
// own authorization server has its metadata and endpoints passed
// through. It used to name no authorization server at all, and 404 the
// rest.
func TestDiscoveryIntrospectionOnly(t *testing.T) {
	own := gwtest.NewOwnServer(t)
	gw := metaGateway(t, own.Srv.URL+"/mcp", func(c *Config) { c.Auth = noIssuer{} })
	for _, p := range []string{wellKnownResource + "/mcp", wellKnownResource} {
		status, doc, _ := getDoc(t, gw.URL+p)
		as, _ := doc["authorization_servers"].([]any)
		scopes, _ := doc["scopes_supported"].([]any)
		if status != 200 || doc["resource"] != gw.URL+"/mcp" || len(as) != 1 || as[0] != gw.URL || len(scopes) != 1 || scopes[0] != "tools" {
			t.Fatalf("%s: %d %v", p, status, doc)
		}
	}
	status, doc, _ := getDoc(t, gw.URL+wellKnownServer)
	if status != 200 || doc["issuer"] != gw.URL || doc["token_endpoint"] != gw.URL+"/oauth/token" {
		t.Fatalf("authorization server metadata: %d %v", status, doc)
	}
	r := gwtest.Post(t, gw.URL+"/oauth/token", "application/x-www-form-urlencoded", "grant_type=authorization_code&code=x", nil)
	r.Body.Close()
	if r.StatusCode != 200 || own.Got.Load() != "grant_type=authorization_code&code=x" {
		t.Fatalf("token: %d, the upstream got %v", r.StatusCode, own.Got.Load())
	}
	// The gateway's required scopes win over the upstream's.
	gw2 := metaGateway(t, own.Srv.URL+"/mcp", func(c *Config) { c.Auth = noIssuer{scopes: []string{"mcp:tools"}} })
	if _, doc, _ := getDoc(t, gw2.URL+wellKnownResource+"/mcp"); doc["scopes_supported"].([]any)[0] != "mcp:tools" {
		t.Fatalf("with required scopes: %v", doc)
	}
}
